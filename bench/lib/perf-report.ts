/**
 * Reads what Linux `perf report` prints for a process sampled with `perf record` (cpu-clock), and
 * compares two loads per request, symbol by symbol: where one load's extra CPU goes, native code
 * included (V8's built-ins, Node's C++ bindings, libc's copies, the kernel's socket path), which a
 * V8 CPU profile (`--cpu-prof`, bench/lib/cpu-profile.ts) cannot see (it names them all "(program)",
 * "(garbage collector)" or the JavaScript function that called them). JIT-compiled JavaScript and
 * WebAssembly are named from V8's `--perf-basic-prof` map.
 */

/** Samples per symbol of one `perf report`, with the total. */
export interface PerfSamples {
  /** Samples per symbol name ({@link symbolName}). */
  bySymbol: Map<string, number>;
  /** Every sample of the report. */
  total: number;
}

/**
 * A symbol of `perf report` under one name across runs: the offset (`+0x1f`), V8's tier marker of a
 * JavaScript function (`JS:*'write` → `JS:write`: `*` optimized, `+` Maglev, `^` Sparkplug, `~`
 * interpreted) and the tier of a WebAssembly function (`wasm-function[12]-12-turbofan` →
 * `wasm-function[12]`) dropped, so that the same code compiled twice counts once. Kernel symbols get
 * `[k] ` in front.
 * @param kind `k` for a kernel symbol, `.` for user space (perf's column).
 * @param symbol The symbol as perf prints it.
 * @returns The name.
 */
export function symbolName(kind: string, symbol: string): string {
  let name = symbol
    .trim()
    .replace(/\+0x[0-9a-f]+$/, '')
    .replace(/^JS:[*+^~]?'?/, 'JS:');
  const wasm = /wasm-function\[(\d+)\]/.exec(name);
  if (wasm !== null) name = `wasm-function[${wasm[1]}]`;
  return kind === 'k' ? `[k] ${name}` : name;
}

/**
 * Names of the thread that runs JavaScript (Node names its main thread `MainThread`; `node` before it
 * does): samples of any other thread (V8's compiler and concurrent marking, libuv's pool) are named
 * apart ({@link parsePerfReport}).
 */
const MAIN_THREAD = new Set(['MainThread', 'node']);

/** Prefix of the symbols sampled on a thread other than the main one (`[thread V8Worker] name`). */
const THREAD_PREFIX = '[thread ';

/**
 * Parses `perf report --no-children --sort comm,sym --stdio -g none -F sample,comm,sym`: lines of a
 * sample count, the thread's name, the `[k]`/`[.]` column and the symbol; comment and empty lines
 * skipped. A symbol sampled outside the main thread is named `[thread <name>] <symbol>`: that CPU is the
 * process's (V8 compiling the code the loads made hot, marking concurrently), but is not spent on the
 * requests one by one, and a load served at a lower rate over the same seconds gets more of it per
 * request ({@link costCategory}).
 * @param text The report.
 * @returns Samples per symbol ({@link symbolName}) and in total.
 */
export function parsePerfReport(text: string): PerfSamples {
  const bySymbol = new Map<string, number>();
  let total = 0;
  for (const line of text.split('\n')) {
    const m = /^\s*(\d+)\s+(\S+)\s+\[(.)\]\s+(.+)$/.exec(line);
    if (m === null) continue;
    const samples = Number(m[1]);
    const thread = m[2]!;
    const symbol = symbolName(m[3]!, m[4]!);
    const name = MAIN_THREAD.has(thread) ? symbol : `${THREAD_PREFIX}${thread}] ${symbol}`;
    bySymbol.set(name, (bySymbol.get(name) ?? 0) + samples);
    total += samples;
  }
  return { bySymbol, total };
}

/**
 * Adds the samples of several reports (the rounds of one load), symbol by symbol.
 * @param reports Reports from {@link parsePerfReport}.
 * @returns Their samples per symbol and in total (empty for no report).
 */
export function addSamples(reports: readonly PerfSamples[]): PerfSamples {
  const bySymbol = new Map<string, number>();
  let total = 0;
  for (const report of reports) {
    for (const [name, samples] of report.bySymbol) bySymbol.set(name, (bySymbol.get(name) ?? 0) + samples);
    total += report.total;
  }
  return { bySymbol, total };
}

/** Where a symbol's time is counted in {@link costCategories}. */
export type CostCategory =
  | 'WebAssembly'
  | 'JavaScript of the shim'
  | 'JavaScript of Node and packages'
  | 'garbage collection'
  | 'copies (libc memmove)'
  | 'kernel'
  | 'V8 built-ins and Node native'
  | 'other threads (V8 compiler and marking, libuv pool)';

/**
 * The category of a symbol: its WebAssembly, JavaScript of the shim (a `file:` URL under `shimRoot` and
 * outside `node_modules`; with the bundle, `dist/main.js`, the libraries bundled into it count too) or
 * of Node's own modules and packages, V8's collector (scavenger, marking, sweeping), libc's
 * `memmove`/`memcpy`, the kernel, or the rest of the native code (V8's built-ins and inline caches,
 * Node's C++ bindings, llhttp, malloc), all on the main thread; or the other threads, whatever they ran.
 * @param name A name from {@link symbolName}.
 * @param shimRoot The repository's `file:` URL, ending in `/`.
 */
export function costCategory(name: string, shimRoot: string): CostCategory {
  if (name.startsWith(THREAD_PREFIX)) return 'other threads (V8 compiler and marking, libuv pool)';
  if (name.startsWith('wasm-function[')) return 'WebAssembly';
  if (name.startsWith('[k] ')) return 'kernel';
  if (name.startsWith('JS:'))
    return name.includes(shimRoot) && !name.includes('/node_modules/')
      ? 'JavaScript of the shim'
      : 'JavaScript of Node and packages';
  if (/Scaveng|Marking|Sweep|MarkCompact|Evacuat|IteratePointers|\bGC\b/.test(name))
    return 'garbage collection';
  if (/^__mem(move|cpy)/.test(name)) return 'copies (libc memmove)';
  return 'V8 built-ins and Node native';
}

/** One load's samples and the requests served while they were taken. */
export interface LoadSamples {
  samples: PerfSamples;
  requests: number;
  /** `perf record -F`: samples per second of CPU time. */
  hz: number;
}

/** µs of CPU per request of a symbol (or a category) under two loads, and their difference. */
export interface CostRow {
  name: string;
  a: number;
  b: number;
  /** `a − b`, µs per request. */
  difference: number;
}

/** µs of CPU per request that `samples` stand for under `load`. */
function perRequest(samples: number, load: LoadSamples): number {
  return load.requests > 0 ? (samples * 1e6) / load.hz / load.requests : 0;
}

/**
 * Per-request CPU of every symbol under loads `a` and `b`, largest difference (`a − b`) first, then
 * by name; symbols of only one load count 0 in the other.
 * @param a The load whose extra cost is looked for (e.g. the patched list), with its requests and rate.
 * @param b The load it is compared with (e.g. the pass-through).
 * @returns Every symbol's row, in µs of CPU per request (cut it to the top rows to print); a load that
 *   served no request counts 0.
 */
export function costDifference(a: LoadSamples, b: LoadSamples): CostRow[] {
  const names = new Set([...a.samples.bySymbol.keys(), ...b.samples.bySymbol.keys()]);
  return [...names]
    .map((name) => {
      const x = perRequest(a.samples.bySymbol.get(name) ?? 0, a);
      const y = perRequest(b.samples.bySymbol.get(name) ?? 0, b);
      return { name, a: x, b: y, difference: x - y };
    })
    .sort((p, q) => q.difference - p.difference || p.name.localeCompare(q.name));
}

/**
 * The same per category ({@link costCategory}), plus a `total` row last (every sample of each load);
 * categories in the order of their difference.
 * @param a As {@link costDifference}.
 * @param b As {@link costDifference}.
 * @param shimRoot The repository's `file:` URL ending in `/`, for {@link costCategory}.
 * @returns One row per category present, then `total`, in µs of CPU per request.
 */
export function costCategories(a: LoadSamples, b: LoadSamples, shimRoot: string): CostRow[] {
  const sums = new Map<string, { a: number; b: number }>();
  for (const row of costDifference(a, b)) {
    const category = costCategory(row.name, shimRoot);
    const sum = sums.get(category) ?? { a: 0, b: 0 };
    sum.a += row.a;
    sum.b += row.b;
    sums.set(category, sum);
  }
  const rows = [...sums].map(([name, { a: x, b: y }]) => ({ name, a: x, b: y, difference: x - y }));
  rows.sort((p, q) => q.difference - p.difference || p.name.localeCompare(q.name));
  const total = { name: 'total', a: perRequest(a.samples.total, a), b: perRequest(b.samples.total, b) };
  return [...rows, { ...total, difference: total.a - total.b }];
}
