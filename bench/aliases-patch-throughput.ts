/**
 * Throughput of the streaming JSON patch alone (`createJsonPatch`, the byte-faithful insertion of `tags`
 * for every `metadata`), fed the body in 16 KiB chunks as the core does, on one core, without HTTP:
 * megabytes of upstream response body patched per second.
 *
 *   node bench/aliases-patch-throughput.ts [--items 1500] [--seconds 2] [--chunk 16384] [--json]
 *
 * The body is the bench upstream's `/debug/json?items=N` list (1,500 missions ≈ 1.0 MB, each with
 * three metadata entries). `run.ts` runs this in its own process pinned to the shim's core.
 */
import { parseArgs } from 'node:util';
import { createJsonPatch, DEFAULT_MAX_VALUE_BYTES } from '../src/aliases/patch-json.ts';
import { responsePairs } from '../src/aliases/table.ts';
import { generateMissionList } from './lib/upstream.ts';

/** What {@link measurePatch} measured. */
export interface PatchThroughput {
  items: number;
  bodyBytes: number;
  /** Patches completed. */
  iterations: number;
  /** 10^6 bytes of upstream body per second. */
  mbPerSecond: number;
  /** 10^6 bytes per second of this process's CPU time (user + system): steadier on a shared machine. */
  mbPerCpuSecond: number;
  /** Mean time per patch, in µs. */
  microsPerPatch: number;
  /** Bytes per written chunk. */
  chunkBytes: number;
}

/**
 * Patches the same body repeatedly for `seconds` (after a 0.3 s warm-up), written in chunks of
 * `chunkBytes` (slices of one buffer, as a socket would hand them), and reports the rate. What each
 * write returns is only counted, then recycled at once, as the core does once the socket wrote it.
 * @throws {Error} when the body is not patched (the alias table lost `metadata`).
 */
export function measurePatch(items: number, seconds: number, chunkBytes = 16 * 1024): PatchThroughput {
  const pairs = responsePairs();
  const body = Buffer.from(JSON.stringify(generateMissionList(items)), 'utf8');
  const chunks: Buffer[] = [];
  for (let at = 0; at < body.length; at += chunkBytes) chunks.push(body.subarray(at, at + chunkBytes));
  let emitted = 0;
  const patchOnce = () => {
    const patch = createJsonPatch(pairs, { maxValueBytes: DEFAULT_MAX_VALUE_BYTES });
    for (const chunk of chunks) {
      const out = patch.write(chunk);
      emitted += out.length;
      patch.recycle?.(out);
    }
    emitted += patch.end().length;
    return patch.outcome;
  };
  const first = patchOnce();
  if (first.kind !== 'patched' || emitted <= body.length)
    throw new Error(`the streaming patch did not patch the list: ${first.kind}`);
  const cpuSeconds = () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1e6;
  };
  const run = (limitNs: number) => {
    const cpuStart = cpuSeconds();
    const start = process.hrtime.bigint();
    let iterations = 0;
    let elapsed = 0;
    while (elapsed < limitNs) {
      patchOnce();
      iterations++;
      elapsed = Number(process.hrtime.bigint() - start);
    }
    return { iterations, elapsed, cpu: cpuSeconds() - cpuStart };
  };
  run(0.3e9);
  const { iterations, elapsed, cpu } = run(seconds * 1e9);
  return {
    items,
    bodyBytes: body.length,
    iterations,
    mbPerSecond: (body.length * iterations) / (elapsed / 1e9) / 1e6,
    mbPerCpuSecond: (body.length * iterations) / cpu / 1e6,
    microsPerPatch: elapsed / 1e3 / iterations,
    chunkBytes,
  };
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      items: { type: 'string', default: '1500' },
      seconds: { type: 'string', default: '2' },
      chunk: { type: 'string', default: '16384' },
      json: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const result = measurePatch(Number(values.items), Number(values.seconds), Number(values.chunk));
  if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
  else
    process.stdout.write(
      `createJsonPatch: ${result.items} items, ${result.bodyBytes} bytes in ${result.chunkBytes}-byte chunks: ` +
        `${result.mbPerSecond.toFixed(0)} MB/s, ${result.mbPerCpuSecond.toFixed(0)} MB per CPU second ` +
        `(${result.microsPerPatch.toFixed(0)} µs per patch)\n`,
    );
}
