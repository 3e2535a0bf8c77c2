/**
 * Interleaved A/B of shim builds on the pass-through load (or the legacy one), next to the Express 5 +
 * http-proxy-middleware calibration proxy: CPU µs per request of each, round by round.
 *
 *   npm run build && cp dist/main.js /tmp/base.js     # on the baseline commit
 *   npm run build                                     # on the candidate
 *   node bench/ab.ts --rounds 8 --duration 5 base=/tmp/base.js new=dist/main.js [--load legacy] [--no-calib]
 *     [--path '/debug/json?items=1000']   (another target of the bench upstream instead of the mission)
 *   node bench/ab.ts s2=dist/main.js,--max-semi-space-size=2 s1=dist/main.js,--max-semi-space-size=1
 *     (the same build with other V8 flags than npm start's)
 *
 * Setup as in `run.ts` and `profile.ts`: the bench upstream, wrk and this script on core 0; every proxy
 * on core 1, started once (with the flags of `npm start`) and idle while another is loaded. Each round
 * runs every proxy for `--duration` seconds in turn, the order rotated every round; CPU time is
 * read from `/proc` (user + system, all threads) and divided by the requests wrk completed. Prints each
 * round, each proxy's median, and the medians of the per-round ratios to the first build and to the
 * calibration proxy (`hpm`): on a shared machine, ratios of loads run seconds apart move much less
 * than absolute figures.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  hasCommand,
  type Measured,
  pinSelf,
  startBenchUpstream,
  startCalibrationProxy,
  startShim,
} from './lib/processes.ts';
import { shippedNodeFlags } from './lib/shipped.ts';
import { runWrk, type WrkLoad } from './lib/wrk.ts';

const { values: args, positionals } = parseArgs({
  options: {
    rounds: { type: 'string', default: '4' },
    duration: { type: 'string', default: '5' },
    calib: { type: 'boolean', default: true },
    load: { type: 'string', default: 'current' },
    path: { type: 'string', default: '' },
  },
  allowPositionals: true,
  allowNegative: true,
});
const PINNED = availableParallelism() >= 2 && hasCommand('taskset');
const LOAD = PINNED ? '0' : undefined;
const SHIM = PINNED ? '1' : undefined;
const scratch = mkdtempSync(join(tmpdir(), 'pass-ab-'));
const procs: Measured[] = [];
async function main() {
  pinSelf(LOAD);
  const upstream = await startBenchUpstream({ cpus: LOAD, scratch });
  procs.push(upstream);
  const backendUrl = upstream.url;
  const targets: { name: string; p: Measured; cal: boolean }[] = [];
  for (const spec of positionals) {
    // name=bundle, or name=bundle,--v8-flag,… to replace the flags of `npm start` for that build.
    const at = spec.indexOf('=');
    const name = spec.slice(0, at);
    const [path, ...flags] = spec.slice(at + 1).split(',');
    const p = await startShim(
      name,
      [...(flags.length > 0 ? flags : shippedNodeFlags()), resolve(path!)],
      backendUrl,
      { cpus: SHIM, scratch },
    );
    procs.push(p);
    targets.push({ name, p, cal: false });
  }
  if (args.calib) {
    const p = await startCalibrationProxy('hpm', 'bench/calibration/express-hpm.ts', backendUrl, {
      cpus: SHIM,
      scratch,
    });
    procs.push(p);
    targets.push({ name: 'hpm', p, cal: true });
  }
  const created = await fetch(`${backendUrl}/missions`, {
    method: 'POST',
    headers: { 'x-api-key': 'bench', 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'bench-mission',
      projectUUID: 'b0000000-0000-4000-8000-000000000002',
      metadata: { 'a0000000-0000-4000-8000-000000000001': 'bench-value-'.repeat(12) },
    }),
  });
  const { uuid } = (await created.json()) as { uuid: string };
  const version = args.load === 'legacy' ? '0.59.0' : '1.0.0';
  const loadOf = (t: { p: Measured; cal: boolean }): WrkLoad => ({
    url: `${t.p.url}${args.path === '' ? `/missions/${uuid}` : args.path}`,
    headers: t.cal ? { 'x-api-key': 'bench' } : { 'x-api-key': 'bench', 'Service-Client-Version': version },
  });
  const opts = { connections: 32, cpus: LOAD, scratch };
  for (const t of targets) await runWrk(loadOf(t), { ...opts, duration: 3 });
  const results: Record<string, number[]> = {};
  for (let r = 0; r < Number(args.rounds); r++) {
    // Each proxy takes each place in the order in turn (rotated every round): a fixed place biases it
    // (with base, head and hpm reversed every other round, head was always in the middle and measured
    // 1.049x base in 8 rounds; the same two builds swapped, 1.003x).
    const shift = r % targets.length;
    const order = [...targets.slice(shift), ...targets.slice(0, shift)];
    const line: string[] = [];
    for (const t of order) {
      const before = t.p.cpuMicros();
      const res = await runWrk(loadOf(t), { ...opts, duration: Number(args.duration) });
      const cpu = (t.p.cpuMicros() - before) / res.requests;
      const seen = results[t.name] ?? [];
      seen.push(cpu);
      results[t.name] = seen;
      line.push(
        `${t.name} ${cpu.toFixed(1)}µs ${res.rps.toFixed(0)}rps${res.non2xx ? ` NON2XX=${res.non2xx}` : ''}`,
      );
    }
    process.stdout.write(`round ${r + 1}: ${line.join(' | ')}\n`);
  }
  const med = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
  };
  const names = Object.keys(results);
  for (const n of names)
    process.stdout.write(
      `${n}: median ${med(results[n]!).toFixed(1)} µs/req  [${results[n]!.map((x) => x.toFixed(1)).join(', ')}]\n`,
    );
  const first = names[0]!;
  for (const n of names.slice(1)) {
    const ratios = results[n]!.map((x, i) => x / results[first]![i]!);
    process.stdout.write(`${n}/${first}: per-round median ${med(ratios).toFixed(3)}\n`);
  }
  if (results.hpm)
    for (const n of names.filter((x) => x !== 'hpm')) {
      const ratios = results[n]!.map((x, i) => x / results.hpm![i]!);
      process.stdout.write(`${n}/hpm: per-round median ${med(ratios).toFixed(3)}\n`);
    }
}
main()
  .catch((e) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    rmSync(scratch, { recursive: true, force: true });
  });
