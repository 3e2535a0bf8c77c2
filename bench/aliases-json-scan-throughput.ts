/**
 * Throughput of the streaming JSON scanner alone (`JsonStreamScanner.write` with no-op handlers, the
 * response patch's largest single cost), on three shapes of body, and optionally side by side with
 * another version of `src/aliases/json-scan.ts` (an A/B comparison, interleaved in one process):
 *
 *   node bench/aliases-json-scan-throughput.ts [--rounds 6] [--ms 300] [--chunk 65536] [--unaligned]
 *                                      [--baseline /tmp/old/json-scan.ts]
 *
 * The baseline is a copy of `json-scan.ts` beside a copy of the `json-scan-wasm.ts` it imports, e.g.
 * `mkdir /tmp/old && for f in json-scan.ts json-scan-wasm.ts; do git show main:src/aliases/$f > /tmp/old/$f;
 * done` and `--baseline /tmp/old/json-scan.ts` (before the WebAssembly scanner, `json-scan.ts` alone).
 * Bodies:
 * - `list`: the bench upstream's `/debug/json` list of 1,500 missions (≈ 1.0 MB: short ASCII strings);
 * - `text`: an array of objects with long strings of mixed scripts (non-ASCII UTF-8, some escapes);
 * - `numbers`: a pretty-printed (2-space) array of objects of numbers, much whitespace.
 *
 * Each round scans every body once per version for `--ms` of CPU time, alternating the order from
 * round to round (after a 100 ms warm-up each); the figure is MB (10^6 bytes) of body per CPU second (user + system, this process),
 * the median over rounds, and the ratio new/old per round (median). With `--unaligned` every chunk
 * is a slice that starts one byte into a larger buffer (socket slices start anywhere).
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as current from '../src/aliases/json-scan.ts';
import { responsePairs } from '../src/aliases/table.ts';
import { median } from './lib/stats.ts';
import { generateMissionList } from './lib/upstream.ts';

/** What the scanner module must export for a measurement (the current file and older versions). */
type ScanModule = Pick<typeof current, 'JsonStreamScanner' | 'KeyNames'>;

/** The three bodies, deterministic. */
export function bodies(): Record<string, Buffer> {
  const words = [
    'Mission',
    'über',
    'café',
    'Привет',
    '東京',
    '日本語のテキスト',
    '🚀',
    'naïve',
    'tab\there',
    'q"uote',
  ];
  const text = [];
  for (let k = 0; k < 4000; k++) {
    const parts = [];
    for (let w = 0; w < 12; w++) parts.push(words[(k * 7 + w * 3) % words.length]);
    text.push({ id: k, title: parts.join(' '), note: `${parts.slice(0, 4).join('-')} #${k}` });
  }
  const numbers = [];
  for (let k = 0; k < 6000; k++)
    numbers.push({ x: k * 0.125, y: -k * 3, z: [k % 7, k / 3, 1e-7 * k], ok: k % 2 === 0, none: null });
  return {
    list: Buffer.from(JSON.stringify(generateMissionList(1500))),
    text: Buffer.from(JSON.stringify(text)),
    numbers: Buffer.from(JSON.stringify(numbers, null, 2)),
  };
}

/** Cuts `body` into `chunkBytes` pieces; with `unaligned`, each piece starts 1 byte into its own buffer. */
export function chunksOf(body: Buffer, chunkBytes: number, unaligned: boolean): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0; at < body.length; at += chunkBytes) {
    const piece = body.subarray(at, at + chunkBytes);
    if (!unaligned) chunks.push(piece);
    else {
      const holder = Buffer.alloc(piece.length + 1);
      piece.copy(holder, 1);
      chunks.push(holder.subarray(1));
    }
  }
  return chunks;
}

/** Scans `chunks` repeatedly for `ms` of CPU time; MB of body per CPU second. */
function rate(module: ScanModule, chunks: readonly Buffer[], bytes: number, ms: number): number {
  const pairs = responsePairs();
  const names = new module.KeyNames(pairs.flatMap((p) => [p.canonical, p.alias]));
  const handler = { onMember: () => true, onValue: () => true, onObjectEnd: () => true };
  const cpu = () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1e3;
  };
  const start = cpu();
  let scans = 0;
  let elapsed = 0;
  while (elapsed < ms) {
    const scanner = new module.JsonStreamScanner(names, 512);
    for (const chunk of chunks) if (scanner.write(chunk, handler) !== 0) throw new Error('not scanned');
    if (scanner.end() !== 0) throw new Error('invalid body');
    scans++;
    elapsed = cpu() - start;
  }
  return (bytes * scans) / (elapsed / 1e3) / 1e6;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '6' },
      ms: { type: 'string', default: '300' },
      chunk: { type: 'string', default: '65536' },
      unaligned: { type: 'boolean', default: false },
      baseline: { type: 'string' },
    },
    strict: true,
  });
  const versions: [string, ScanModule][] = [['current', current]];
  if (values.baseline)
    versions.unshift(['baseline', (await import(pathToFileURL(values.baseline).href)) as ScanModule]);
  const rounds = Number(values.rounds);
  for (const [shape, body] of Object.entries(bodies())) {
    const chunks = chunksOf(body, Number(values.chunk), values.unaligned);
    const rates = versions.map(() => [] as number[]);
    const ratios: number[] = [];
    for (const [, module] of versions) rate(module, chunks, body.length, 100); // warm-up (JIT)
    for (let round = 0; round < rounds; round++) {
      const order = versions.map((_, k) => k);
      if (round % 2 === 1) order.reverse();
      const got: number[] = [];
      for (const k of order) got[k] = rate(versions[k]![1], chunks, body.length, Number(values.ms));
      for (const [k, r] of got.entries()) rates[k]!.push(r);
      if (got.length === 2) ratios.push(got[1]! / got[0]!);
    }
    const figures = versions.map(([name], k) => `${name} ${median(rates[k]!).toFixed(0)} MB/s`).join(', ');
    const ratio = ratios.length > 0 ? `; current/baseline ${median(ratios).toFixed(2)}x` : '';
    process.stdout.write(
      `${shape} (${body.length} bytes, ${values.chunk}-byte chunks): ${figures}${ratio}\n`,
    );
  }
}
