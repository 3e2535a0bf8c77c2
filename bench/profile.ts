/**
 * Profiles the shim's hot path with `node --cpu-prof` under a wrk load and prints the top costs.
 *
 *   node bench/profile.ts [--load current|legacy|post|list1000|list1000-pass|list1745-pass] [--duration 10] [--keep DIR]
 *                         [--no-profile] [--main src/main.ts] [--node-flags '--max-semi-space-size=4']
 *
 * Starts the bench upstream (bench/lib/upstream.ts) and the shim (pinned as in `run.ts`), creates the
 * 1.5 KB bench mission, warms up for 2 s, loads for `--duration` seconds, stops the shim with SIGTERM (its clean
 * exit writes the profile) and summarizes it. `--keep DIR` keeps the `.cpuprofile` (open it in Chrome
 * DevTools › Performance, or speedscope) instead of deleting it. `--no-profile` only measures the shim's
 * CPU time per request (no profiler overhead); `--main` runs another entry point (e.g. an experimental
 * copy of the tree whose `node_modules` links to this one).
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type CostLine, type CpuProfile, summarize } from './lib/cpu-profile.ts';
import { hasCommand, type Measured, pinSelf, startBenchUpstream, startShim } from './lib/processes.ts';
import { runWrk, type WrkLoad } from './lib/wrk.ts';

const { values: args } = parseArgs({
  options: {
    load: { type: 'string', default: 'current' },
    duration: { type: 'string', default: '10' },
    keep: { type: 'string' },
    profile: { type: 'boolean', default: true },
    main: { type: 'string', default: 'src/main.ts' },
    'node-flags': { type: 'string', default: '' },
  },
  allowNegative: true,
  strict: true,
});

const LOADS = ['current', 'legacy', 'post', 'list1000', 'list1000-pass', 'list1745-pass'] as const;
type LoadName = (typeof LOADS)[number];
if (!LOADS.includes(args.load as LoadName)) {
  process.stderr.write(`--load must be one of ${LOADS.join(', ')}\n`);
  process.exit(1);
}
const PINNED = availableParallelism() >= 2 && hasCommand('taskset');
const LOAD_CPUS = PINNED ? '0' : undefined;
const SHIM_CPUS = PINNED ? '1' : undefined;
const API_KEY = { 'x-api-key': 'bench' };
const OPEN_PROJECT = 'b0000000-0000-4000-8000-000000000002';
const LOCATION_TYPE = 'a0000000-0000-4000-8000-000000000001';

const scratch = mkdtempSync(join(tmpdir(), 'compat-shim-profile-'));
const profileDir = join(scratch, 'profile');
const processes: Measured[] = [];

async function main(): Promise<void> {
  pinSelf(LOAD_CPUS);
  const upstream = await startBenchUpstream({ cpus: LOAD_CPUS, scratch });
  processes.push(upstream);
  const backendUrl = upstream.url;
  const shim = await startShim(
    'shim',
    [
      ...args['node-flags'].split(' ').filter((flag) => flag !== ''),
      ...(args.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []),
      args.main,
    ],
    backendUrl,
    { cpus: SHIM_CPUS, scratch },
  );
  processes.push(shim);

  const created = await fetch(`${backendUrl}/missions`, {
    method: 'POST',
    headers: { ...API_KEY, 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'bench-mission',
      projectUUID: OPEN_PROJECT,
      metadata: { [LOCATION_TYPE]: 'bench-value-'.repeat(12) },
    }),
  });
  const { uuid } = (await created.json()) as { uuid: string };
  const load = loadFor(args.load as LoadName, shim.url, uuid);
  const options = { connections: 32, cpus: LOAD_CPUS, scratch };
  await runWrk(load, { ...options, duration: 2 });
  const cpuBefore = shim.cpuMicros();
  const result = await runWrk(load, { ...options, duration: Number(args.duration) });
  const cpuPerRequest = (shim.cpuMicros() - cpuBefore) / result.requests;
  const rss = shim.peakRss();
  await shim.stop();
  process.stdout.write(
    `load: ${args.load}, ${result.requests} requests in ${result.seconds.toFixed(1)} s (${result.rps.toFixed(0)} req/s, ` +
      `p99 ${result.p99.toFixed(2)} ms, ${result.non2xx} non-2xx), shim CPU ${cpuPerRequest.toFixed(1)} µs/req` +
      `${args.profile ? ' (with the profiler)' : ''}, shim peak RSS ${(rss / 1048576).toFixed(0)} MiB\n`,
  );
  if (!args.profile) return;

  const file = readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile'));
  if (file === undefined) throw new Error(`no profile written:\n${shim.stderr()}`);
  const profile = JSON.parse(readFileSync(join(profileDir, file), 'utf8')) as CpuProfile;
  if (args.keep !== undefined)
    cpSync(join(profileDir, file), join(args.keep, `shim-${args.load}.cpuprofile`));
  const summary = summarize(profile, 15);
  const print = (title: string, lines: CostLine[]) => {
    process.stdout.write(`\n${title}\n`);
    for (const l of lines)
      process.stdout.write(
        `${(l.share * 100).toFixed(1).padStart(6)}%  ${l.ms.toFixed(0).padStart(7)} ms  ${l.name}\n`,
      );
  };
  process.stdout.write(
    `busy CPU in the profile: ${summary.busyMs.toFixed(0)} ms (includes start-up and the 2 s warm-up)\n`,
  );
  print('Top functions by self time:', summary.functions);
  print('Modules by self time:', summary.modulesSelf);
  print('Modules by inclusive time (on the stack):', summary.modulesInclusive);
}

function loadFor(name: LoadName, shim: string, uuid: string): WrkLoad {
  switch (name) {
    case 'current':
      return { url: `${shim}/missions/${uuid}`, headers: { ...API_KEY, 'Service-Client-Version': '1.0.0' } };
    case 'legacy':
      return { url: `${shim}/missions/${uuid}`, headers: { ...API_KEY, 'Service-Client-Version': '0.59.0' } };
    case 'list1000':
      return {
        url: `${shim}/debug/json?items=1000`,
        headers: { ...API_KEY, 'Service-Client-Version': '0.59.0' },
      };
    case 'list1000-pass':
      return {
        url: `${shim}/debug/json?items=1000`,
        headers: { ...API_KEY, 'Service-Client-Version': '1.0.0' },
      };
    case 'list1745-pass':
      // The pass-through of a list as large as the patched list of 1,000's output (as in run.ts).
      return {
        url: `${shim}/debug/json?items=1745`,
        headers: { ...API_KEY, 'Service-Client-Version': '1.0.0' },
      };
    case 'post':
      return {
        url: `${shim}/missions`,
        method: 'POST',
        headers: { ...API_KEY, 'Service-Client-Version': '0.59.0', 'Content-Type': 'application/json' },
        body: JSON.stringify({
          name: 'bench-post',
          projectUUID: OPEN_PROJECT,
          tags: { [LOCATION_TYPE]: 'Zurich' },
        }),
      };
  }
}

main()
  .catch((err: unknown) => {
    process.stderr.write(`profile: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  })
  .finally(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    rmSync(scratch, { recursive: true, force: true });
  });
