/**
 * Where one load's extra CPU per request goes, against another load, symbol by symbol, native code
 * included: Linux `perf record` samples the shim under each load in turn, and the two are compared per
 * request (bench/lib/perf-report.ts). Made for issue 9's list: what a legacy client's patched 1,000-item
 * list costs beyond the pass-through of a list as large as its output (the default loads), which a V8
 * CPU profile (`bench/profile.ts`) cannot split (V8's built-ins, Node's Buffer bindings, memmove and
 * the kernel appear there as "(program)" or inside their JavaScript caller).
 *
 *   node bench/perf-diff.ts [--rounds 2] [--duration 6] [--hz 999] [--top 30] [--main dist/main.js]
 *     [--a '0.59.0 /debug/json?items=1000'] [--b '1.0.0 /debug/json?items=1745'] [--category NAME]
 *
 * Each load is a client version and a path of the bench upstream (bench/lib/upstream.ts). Setup as in
 * `run.ts`: the upstream, wrk and this script on core 0, the shim on core 1 (built first, as `npm
 * start` builds it, and run with its flags plus `--perf-basic-prof`, which names V8's compiled code for
 * perf in `/tmp/perf-<pid>.map`, removed at the end). Each round warms a load up for 2 s, then records
 * the shim for `--duration` seconds while wrk loads it, the two loads alternating; µs per request =
 * samples / hz / requests, every thread of the process counted (the other threads apart: V8 compiling
 * what the loads made hot, concurrent marking). Prints the categories (bench/lib/perf-report.ts
 * `costCategory`), then the symbols (of `--category` alone, if given) with the largest differences. The
 * sampling itself costs CPU: compare the two loads with each other, not with `run.ts`'s figures.
 *
 * Needs `perf` and the right to sample another process of the same user
 * (`/proc/sys/kernel/perf_event_paranoid` ≤ 2, or root).
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import {
  addSamples,
  type CostRow,
  costCategories,
  costCategory,
  costDifference,
  type LoadSamples,
  type PerfSamples,
  parsePerfReport,
} from './lib/perf-report.ts';
import { hasCommand, type Measured, pinSelf, startBenchUpstream, startShim } from './lib/processes.ts';
import { shippedNodeFlags } from './lib/shipped.ts';
import { runWrk, type WrkLoad } from './lib/wrk.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '2' },
    duration: { type: 'string', default: '6' },
    hz: { type: 'string', default: '999' },
    top: { type: 'string', default: '30' },
    main: { type: 'string', default: 'dist/main.js' },
    a: { type: 'string', default: '0.59.0 /debug/json?items=1000' },
    b: { type: 'string', default: '1.0.0 /debug/json?items=1745' },
    category: { type: 'string' },
  },
  strict: true,
});
const ROUNDS = Number(args.rounds);
const DURATION = Number(args.duration);
const HZ = Number(args.hz);
const PINNED = availableParallelism() >= 2 && hasCommand('taskset');
const LOAD_CPUS = PINNED ? '0' : undefined;
const SHIM_CPUS = PINNED ? '1' : undefined;
const scratch = mkdtempSync(join(tmpdir(), 'compat-shim-perf-'));
const processes: Measured[] = [];

/** A load given as `<client version> <path>`. */
function parseLoad(spec: string, shim: string): WrkLoad {
  const [version, path] = spec.trim().split(/\s+/);
  if (version === undefined || path === undefined || !path.startsWith('/'))
    throw new Error(`a load is '<client version> <path>', e.g. '0.59.0 /debug/json?items=1000': ${spec}`);
  return { url: `${shim}${path}`, headers: { 'x-api-key': 'bench', 'Service-Client-Version': version } };
}

/** Samples the shim (`pid`) while wrk runs `load`; resolves with the report and the requests served. */
async function record(
  pid: number,
  load: WrkLoad,
  file: string,
): Promise<{ samples: PerfSamples; requests: number }> {
  const perf = spawn('perf', ['record', '-F', String(HZ), '-p', String(pid), '-o', file, '-q'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  perf.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  // perf stops on SIGINT, writes its file and ends as killed by that signal.
  const exited = new Promise<boolean>((resolve) =>
    perf.once('exit', (code, signal) => resolve(code === 0 || signal === 'SIGINT')),
  );
  const result = await runWrk(load, { duration: DURATION, connections: 32, cpus: LOAD_CPUS, scratch });
  perf.kill('SIGINT');
  if (!(await exited)) throw new Error(`perf record failed: ${stderr.trim()}`);
  const report = execFileSync(
    'perf',
    [
      'report',
      '-i',
      file,
      '--no-children',
      '--sort',
      'comm,sym',
      '--stdio',
      '-g',
      'none',
      '-F',
      'sample,comm,sym',
    ],
    { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'ignore'] },
  );
  return { samples: parsePerfReport(report), requests: result.requests };
}

function table(title: string, rows: readonly CostRow[], a: string, b: string): string {
  const lines = [
    `\n${title} (µs of shim CPU per request)`,
    `${'a'.padStart(9)} ${'b'.padStart(9)} ${'a − b'.padStart(9)}  `,
  ];
  for (const row of rows)
    lines.push(
      `${row.a.toFixed(1).padStart(9)} ${row.b.toFixed(1).padStart(9)} ${row.difference.toFixed(1).padStart(9)}  ${row.name}`,
    );
  return `${lines.join('\n')}\n  (a: ${a}; b: ${b})\n`;
}

async function main(): Promise<void> {
  if (!hasCommand('perf')) throw new Error('perf is not installed (linux-perf / linux-tools)');
  pinSelf(LOAD_CPUS);
  execFileSync(process.execPath, ['scripts/build.ts'], { stdio: ['ignore', 'ignore', 'inherit'] });
  const upstream = await startBenchUpstream({ cpus: LOAD_CPUS, scratch });
  processes.push(upstream);
  // --perf-basic-prof also starts V8's log (isolate-*.log in the working folder): kept in the scratch folder.
  const v8Log = ['--perf-basic-prof', '--no-logfile-per-isolate', `--logfile=${join(scratch, 'v8.log')}`];
  const shim = await startShim('shim', [...shippedNodeFlags(), ...v8Log, args.main], upstream.url, {
    cpus: SHIM_CPUS,
    scratch,
  });
  processes.push(shim);
  const loads = { a: parseLoad(args.a, shim.url), b: parseLoad(args.b, shim.url) };
  const taken: Record<'a' | 'b', { samples: PerfSamples[]; requests: number }> = {
    a: { samples: [], requests: 0 },
    b: { samples: [], requests: 0 },
  };
  for (let round = 0; round < ROUNDS; round++) {
    for (const key of (round % 2 === 0 ? ['a', 'b'] : ['b', 'a']) as ('a' | 'b')[]) {
      await runWrk(loads[key], { duration: 2, connections: 32, cpus: LOAD_CPUS, scratch });
      const { samples, requests } = await record(shim.pid, loads[key], join(scratch, `${key}-${round}.data`));
      taken[key].samples.push(samples);
      taken[key].requests += requests;
      process.stderr.write(
        `round ${round + 1}/${ROUNDS} ${key}: ${requests} requests, ${samples.total} samples\n`,
      );
    }
  }
  const a: LoadSamples = { samples: addSamples(taken.a.samples), requests: taken.a.requests, hz: HZ };
  const b: LoadSamples = { samples: addSamples(taken.b.samples), requests: taken.b.requests, hz: HZ };
  const shimRoot = `${pathToFileURL(process.cwd()).href}/`;
  process.stdout.write(table('By category', costCategories(a, b, shimRoot), args.a, args.b));
  const rows = costDifference(a, b).filter(
    (row) => args.category === undefined || costCategory(row.name, shimRoot) === args.category,
  );
  const top = Number(args.top);
  process.stdout.write(table(`Symbols, the ${top} largest differences`, rows.slice(0, top), args.a, args.b));
  process.stdout.write(table('… and the 5 most negative', rows.slice(-5), args.a, args.b));
}

async function cleanup(): Promise<void> {
  for (const p of processes.reverse()) await p.stop();
  // V8's --perf-basic-prof map of the shim.
  for (const p of processes) rmSync(`/tmp/perf-${p.pid}.map`, { force: true });
  rmSync(scratch, { recursive: true, force: true });
}

main().then(cleanup, async (err: unknown) => {
  await cleanup();
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
