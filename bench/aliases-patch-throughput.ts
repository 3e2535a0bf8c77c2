/**
 * Throughput of the streaming JSON patch alone (`createJsonPatch`, the byte-faithful insertion of `tags`
 * for every `metadata`), fed the body in 16 KiB chunks as the core does, on one core, without HTTP:
 * megabytes of upstream response body patched per second.
 *
 *   node bench/aliases-patch-throughput.ts [--items 1500] [--seconds 2] [--chunk 16384] [--json]
 *   node bench/aliases-patch-throughput.ts --baseline /tmp/base [--rounds 10] [--seconds 2]
 *
 * With `--baseline`, an interleaved A/B of two source trees: `/tmp/base` is another checkout (e.g.
 * `git worktree add /tmp/base main`, with `node_modules` linked), and each round runs this script of
 * both trees, one after the other in a fresh process (the order flipped every round), pinned to core 1
 * when the machine has two and `taskset` exists; it prints µs per patch of each, their medians and the
 * median of the per-round ratios new/base. Used for the twentieth session's figures (bench/RESULTS.md).
 *
 * The body is the bench upstream's `/debug/json?items=N` list (1,500 missions ≈ 1.0 MB, each with
 * three metadata entries). `run.ts` runs this in its own process pinned to the shim's core.
 */
import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createJsonPatch, DEFAULT_MAX_VALUE_BYTES } from '../src/aliases/patch-json.ts';
import { responsePairs } from '../src/aliases/table.ts';
import { hasCommand } from './lib/processes.ts';
import { median } from './lib/stats.ts';
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

/** Medians of an A/B's rounds: µs per patch of each tree and the median of the per-round ratios new/base. */
export interface PatchAbSummary {
  base: number;
  candidate: number;
  /** Median over rounds of candidate ÷ base (below 1: the candidate is faster). */
  ratio: number;
}

/**
 * Summarizes the rounds of an interleaved A/B ({@link measurePatch} in each tree).
 * @param rounds µs per patch of the baseline and the candidate, one pair per round.
 * @returns Medians; `NaN` for no rounds.
 */
export function summarizePatchAb(rounds: readonly { base: number; candidate: number }[]): PatchAbSummary {
  return {
    base: median(rounds.map((r) => r.base)),
    candidate: median(rounds.map((r) => r.candidate)),
    ratio: median(rounds.map((r) => r.candidate / r.base)),
  };
}

/**
 * Runs this script of the tree at `root` once in a fresh process and returns its µs per patch.
 * @param pinned Run it on core 1 (`taskset -c 1`).
 * @throws {Error} when the process fails or prints no result.
 */
function patchInTree(root: string, args: readonly string[], pinned: boolean): number {
  const script = join(root, 'bench', 'aliases-patch-throughput.ts');
  const argv = [...(pinned ? ['-c', '1', process.execPath] : []), script, ...args, '--json'];
  const out = execFileSync(pinned ? 'taskset' : process.execPath, argv, { encoding: 'utf8' });
  return (JSON.parse(out) as PatchThroughput).microsPerPatch;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      items: { type: 'string', default: '1500' },
      seconds: { type: 'string', default: '2' },
      chunk: { type: 'string', default: '16384' },
      json: { type: 'boolean', default: false },
      baseline: { type: 'string' },
      rounds: { type: 'string', default: '10' },
    },
    strict: true,
  });
  if (values.baseline !== undefined) {
    const args = ['--items', values.items, '--seconds', values.seconds, '--chunk', values.chunk];
    const here = join(import.meta.dirname, '..');
    const pinned = availableParallelism() >= 2 && hasCommand('taskset');
    const rounds: { base: number; candidate: number }[] = [];
    for (let r = 0; r < Number(values.rounds); r++) {
      const order = r % 2 === 0 ? (['base', 'candidate'] as const) : (['candidate', 'base'] as const);
      const round = { base: 0, candidate: 0 };
      for (const which of order)
        round[which] = patchInTree(which === 'base' ? values.baseline : here, args, pinned);
      rounds.push(round);
      process.stdout.write(
        `round ${r + 1}: base ${round.base.toFixed(0)} µs, new ${round.candidate.toFixed(0)} µs\n`,
      );
    }
    const { base, candidate, ratio } = summarizePatchAb(rounds);
    process.stdout.write(
      `median µs per patch: base ${base.toFixed(0)}, new ${candidate.toFixed(0)}; new/base per round: ${ratio.toFixed(3)}\n`,
    );
  } else {
    const result = measurePatch(Number(values.items), Number(values.seconds), Number(values.chunk));
    if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
    else
      process.stdout.write(
        `createJsonPatch: ${result.items} items, ${result.bodyBytes} bytes in ${result.chunkBytes}-byte chunks: ` +
          `${result.mbPerSecond.toFixed(0)} MB/s, ${result.mbPerCpuSecond.toFixed(0)} MB per CPU second ` +
          `(${result.microsPerPatch.toFixed(0)} µs per patch)\n`,
      );
  }
}
