import { describe, expect, it } from 'vitest';
import {
  addSamples,
  costCategories,
  costCategory,
  costDifference,
  type LoadSamples,
  parsePerfReport,
  symbolName,
} from '../../../bench/lib/perf-report.ts';

/** What `perf report --no-children --sort comm,sym --stdio -g none -F sample,comm,sym` prints (abridged). */
const REPORT = `# To display the perf.data header info, please use --header/--header-only options.
#
# Samples: 5K of event 'cpu-clock:pppH'
#
# Samples  Command     Symbol
# .......  ..........  ......
#
     1200  MainThread  [.] JS:wasm-function[12]-12-turbofan
      300  MainThread  [.] JS:*'#insert file:///work/main/dist/main.js:27:95560
      100  MainThread  [.] JS:^'#insert file:///work/main/dist/main.js:27:95560
      250  MainThread  [k] rep_movs_alternative
      150  MainThread  [.] __memmove_evex_unaligned_erms
       90  MainThread  [.] v8::internal::Scavenger::ScavengeObject<v8::internal::FullHeapObjectSlot>
       60  MainThread  [.] JS:*'emit node:events:489:44
       50  MainThread  [.] v8::internal::JSTypedArray::GetBuffer
       12  MainThread  [.] wasm-function[12]-12-liftoff
       40  V8Worker    [.] v8::internal::compiler::GraphReducer::ReduceTop
        7  V8Worker    [k] clear_page_erms
        5  node        [.] malloc

`;

describe('perf report', () => {
  it('names a symbol once whatever its tier or offset, kernel symbols apart', () => {
    expect(symbolName('.', "JS:*'#insert file:///x/main.js:27:9")).toBe('JS:#insert file:///x/main.js:27:9');
    expect(symbolName('.', "JS:~'write node:net:1:1")).toBe('JS:write node:net:1:1');
    expect(symbolName('.', 'JS: file:///x/main.js:27:5')).toBe('JS: file:///x/main.js:27:5');
    expect(symbolName('.', 'JS:wasm-function[12]-12-turbofan')).toBe('wasm-function[12]');
    expect(symbolName('.', 'wasm-function[3]-3-liftoff')).toBe('wasm-function[3]');
    expect(symbolName('.', 'memcpy+0x1f')).toBe('memcpy');
    expect(symbolName('k', 'tcp_sendmsg')).toBe('[k] tcp_sendmsg');
  });

  it('adds the samples of one symbol across its tiers and skips the comments', () => {
    const parsed = parsePerfReport(REPORT);
    expect(parsed.total).toBe(2264);
    expect(parsed.bySymbol.get('wasm-function[12]')).toBe(1212);
    expect(parsed.bySymbol.get('JS:#insert file:///work/main/dist/main.js:27:95560')).toBe(400);
    expect(parsed.bySymbol.get('[k] rep_movs_alternative')).toBe(250);
    expect(parsed.bySymbol.size).toBe(10);
    expect(parsePerfReport('# nothing\n\n').total).toBe(0);
  });

  it('names the samples of the other threads apart; the main thread is MainThread or node', () => {
    const parsed = parsePerfReport(REPORT);
    expect(parsed.bySymbol.get('[thread V8Worker] v8::internal::compiler::GraphReducer::ReduceTop')).toBe(40);
    expect(parsed.bySymbol.get('[thread V8Worker] [k] clear_page_erms')).toBe(7);
    expect(parsed.bySymbol.get('malloc')).toBe(5);
    expect(costCategory('[thread V8Worker] [k] clear_page_erms', 'file:///work/main/')).toBe(
      'other threads (V8 compiler and marking, libuv pool)',
    );
  });

  it('adds rounds', () => {
    const one = parsePerfReport(REPORT);
    const both = addSamples([one, one]);
    expect(both.total).toBe(2 * one.total);
    expect(both.bySymbol.get('wasm-function[12]')).toBe(2424);
  });

  it('puts each symbol in its category', () => {
    const of = (name: string) => costCategory(name, 'file:///work/main/');
    expect(of('wasm-function[12]')).toBe('WebAssembly');
    expect(of('[k] rep_movs_alternative')).toBe('kernel');
    expect(of('JS:#insert file:///work/main/dist/main.js:27:9')).toBe('JavaScript of the shim');
    expect(of('JS:relayResponse file:///work/main/src/proxy/forward.ts:9:1')).toBe('JavaScript of the shim');
    expect(of('JS:emit node:events:489:44')).toBe('JavaScript of Node and packages');
    expect(of('JS:get file:///work/main/node_modules/pino/lib/proto.js:1:1')).toBe(
      'JavaScript of Node and packages',
    );
    expect(of('v8::internal::Scavenger::ScavengeObject<x>')).toBe('garbage collection');
    expect(of('v8::internal::ConcurrentMarking::RunMajor')).toBe('garbage collection');
    expect(of('__memmove_evex_unaligned_erms')).toBe('copies (libc memmove)');
    expect(of('v8::internal::JSTypedArray::GetBuffer')).toBe('V8 built-ins and Node native');
  });

  it('compares two loads per request: samples / hz / requests, largest difference first', () => {
    // a: 1,000 samples at 1,000 Hz over 100 requests = 10,000 µs/request in total.
    const a: LoadSamples = {
      samples: {
        bySymbol: new Map([
          ['wasm-function[1]', 600],
          ['[k] write', 400],
        ]),
        total: 1000,
      },
      requests: 100,
      hz: 1000,
    };
    // b: 500 samples over 100 requests = 5,000 µs/request.
    const b: LoadSamples = {
      samples: {
        bySymbol: new Map([
          ['[k] write', 450],
          ['JS:x node:net:1:1', 50],
        ]),
        total: 500,
      },
      requests: 100,
      hz: 1000,
    };
    expect(costDifference(a, b)).toEqual([
      { name: 'wasm-function[1]', a: 6000, b: 0, difference: 6000 },
      { name: '[k] write', a: 4000, b: 4500, difference: -500 },
      { name: 'JS:x node:net:1:1', a: 0, b: 500, difference: -500 },
    ]);
    expect(costCategories(a, b, 'file:///work/main/')).toEqual([
      { name: 'WebAssembly', a: 6000, b: 0, difference: 6000 },
      { name: 'JavaScript of Node and packages', a: 0, b: 500, difference: -500 },
      { name: 'kernel', a: 4000, b: 4500, difference: -500 },
      { name: 'total', a: 10000, b: 5000, difference: 5000 },
    ]);
  });

  it('counts nothing per request for a load that served none', () => {
    const idle: LoadSamples = {
      samples: { bySymbol: new Map([['x', 10]]), total: 10 },
      requests: 0,
      hz: 999,
    };
    expect(costDifference(idle, idle)).toEqual([{ name: 'x', a: 0, b: 0, difference: 0 }]);
  });
});
