/**
 * Throughput of the JSON patch alone (`patchJson`, the byte-faithful insertion of `tags` next to every
 * `metadata`), on one core, without HTTP: megabytes of upstream response body patched per second.
 *
 *   node bench/aliases-patch-throughput.ts [--items 1500] [--seconds 2] [--json]
 *
 * The body is the bench upstream's `/debug/json?items=N` list (1,500 missions ≈ 1.0 MB, each with
 * three metadata entries). `run.ts` runs this in its own process pinned to the shim's core.
 */
import { parseArgs } from 'node:util';
import { patchJson } from '../src/aliases/patch-json.ts';
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
  /** Mean time per patch, in µs. */
  microsPerPatch: number;
}

/**
 * Patches the same body repeatedly for `seconds` (after a 0.3 s warm-up) and reports the rate.
 * @throws {Error} when the body is not patched (the alias table lost `metadata`).
 */
export function measurePatch(items: number, seconds: number): PatchThroughput {
  const pairs = responsePairs();
  const body = Buffer.from(JSON.stringify(generateMissionList(items)), 'utf8');
  const first = patchJson(pairs, body);
  if (first.kind !== 'patched') throw new Error(`patchJson did not patch the list: ${first.kind}`);
  const run = (limitNs: number) => {
    const start = process.hrtime.bigint();
    let iterations = 0;
    let elapsed = 0;
    while (elapsed < limitNs) {
      patchJson(pairs, body);
      iterations++;
      elapsed = Number(process.hrtime.bigint() - start);
    }
    return { iterations, elapsed };
  };
  run(0.3e9);
  const { iterations, elapsed } = run(seconds * 1e9);
  return {
    items,
    bodyBytes: body.length,
    iterations,
    mbPerSecond: (body.length * iterations) / (elapsed / 1e9) / 1e6,
    microsPerPatch: elapsed / 1e3 / iterations,
  };
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      items: { type: 'string', default: '1500' },
      seconds: { type: 'string', default: '2' },
      json: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const result = measurePatch(Number(values.items), Number(values.seconds));
  if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
  else
    process.stdout.write(
      `patchJson: ${result.items} items, ${result.bodyBytes} bytes: ${result.mbPerSecond.toFixed(0)} MB/s ` +
        `(${result.microsPerPatch.toFixed(0)} µs per patch)\n`,
    );
}
