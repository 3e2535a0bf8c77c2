/**
 * Which V8 memory flags the shim should run with (issue 9 item 4): for each setting (by default
 * `--max-semi-space-size` none, 1, 2, 4, 8 MiB; any flags with `--flags`), in one interleaved run, a
 * fresh shim process (the bundle `dist/main.js`, as `npm start` and the image run it) measures
 *
 * - idle RSS, 3 s after start;
 * - peak RSS above idle while streaming 200 MiB down (`GET /debug/bytes`) then 200 MiB up
 *   (`POST /debug/sink`) through it, one transfer at a time;
 * - pass-through CPU per request (GET of the 1.5 KB bench mission, 1.0 client, wrk 32 connections);
 * - on a second fresh process, as `npm run bench` measures it, peak RSS above its idle while patching 32
 *   concurrent 1.4 MB lists (legacy client, wrk 32 connections): what the loads before leave resident
 *   (tens of MiB after the pass-through GETs) would otherwise hide what the flags do to the lists.
 *
 *   npm run build && node bench/semi-space.ts [--rounds 2] [--duration 5] [--flags none,1,2,4,8]
 *   node bench/semi-space.ts --flags '2,--max-semi-space-size=2+--scavenger-max-new-space-capacity-mb=4'
 *
 * A setting is `none`, a number N (`--max-semi-space-size=N`) or flags joined by `+`.
 * The setting order flips every round; medians are printed as a Markdown table (bench/RESULTS.md
 * "Memory flag").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { hasCommand, type Measured, pinSelf, startBenchUpstream, startShim } from './lib/processes.ts';
import { fixed, markdownTable, median } from './lib/stats.ts';
import { download, upload } from './lib/transfer.ts';
import { runWrk } from './lib/wrk.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '2' },
    duration: { type: 'string', default: '5' },
    flags: { type: 'string', default: 'none,1,2,4,8' },
    'transfer-mib': { type: 'string', default: '200' },
  },
  strict: true,
});
const ROUNDS = Number(args.rounds);
const DURATION = Number(args.duration);
const SETTINGS = args.flags.split(',');
const TRANSFER = Number(args['transfer-mib']) * 1024 * 1024;
const LIST_ITEMS = 2100; // ≈ 1.4 MB of JSON
const MIB = 1024 * 1024;
const PINNED = availableParallelism() >= 2 && hasCommand('taskset');
const LOAD_CPUS = PINNED ? '0' : undefined;
const SHIM_CPUS = PINNED ? '1' : undefined;
const API_KEY = { 'x-api-key': 'bench' };
const CURRENT = { ...API_KEY, 'Service-Client-Version': '1.0.0' };
const LEGACY = { ...API_KEY, 'Service-Client-Version': '0.59.0' };

const scratch = mkdtempSync(join(tmpdir(), 'compat-shim-semi-'));
const processes: Measured[] = [];

/**
 * The V8 flags of one setting: `none` → no flag; a number N → `--max-semi-space-size=N`; otherwise
 * flags joined by `+` (e.g. `--scavenger-max-new-space-capacity-mb=4+--max-semi-space-size=2`).
 */
function v8Flags(setting: string): string[] {
  if (setting === 'none') return [];
  if (/^\d+$/.test(setting)) return [`--max-semi-space-size=${setting}`];
  return setting.split('+');
}

interface Sample {
  idle: number;
  stream: number;
  cpu: number;
  lists: number;
  listCpu: number;
}

async function main(): Promise<void> {
  pinSelf(LOAD_CPUS);
  const loadAtStart = loadavg()[0]!;
  const upstream = await startBenchUpstream({ cpus: LOAD_CPUS, scratch });
  processes.push(upstream);
  const backendUrl = upstream.url;
  const created = await fetch(`${backendUrl}/missions`, {
    method: 'POST',
    headers: { ...API_KEY, 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'bench-mission',
      projectUUID: 'b0000000-0000-4000-8000-000000000002',
      metadata: { 'a0000000-0000-4000-8000-000000000001': 'bench-value-'.repeat(60) },
    }),
  });
  const { uuid } = (await created.json()) as { uuid: string };
  const samples = new Map<string, Sample[]>(SETTINGS.map((s) => [s, []]));
  const wrk = { connections: 32, cpus: LOAD_CPUS, scratch };

  /** A fresh shim with the setting's flags, idle for 3 s; returns it with its idle RSS (bytes). */
  const idleShim = async (name: string, setting: string): Promise<{ shim: Measured; idle: number }> => {
    const shim = await startShim(name, [...v8Flags(setting), 'dist/main.js'], backendUrl, {
      cpus: SHIM_CPUS,
      scratch,
    });
    processes.push(shim);
    await sleep(3000);
    return { shim, idle: shim.rss() };
  };

  for (let round = 0; round < ROUNDS; round++) {
    for (const setting of round % 2 === 0 ? SETTINGS : [...SETTINGS].reverse()) {
      const { shim, idle } = await idleShim(`shim-${setting}-${round}`, setting);
      shim.resetPeak();
      await download(shim.url, CURRENT, TRANSFER);
      await upload(shim.url, CURRENT, TRANSFER);
      const stream = shim.peakRss() - idle;
      const load = { url: `${shim.url}/missions/${uuid}`, headers: CURRENT };
      await runWrk(load, { ...wrk, duration: 1 });
      let before = shim.cpuMicros();
      const result = await runWrk(load, { ...wrk, duration: DURATION });
      const cpu = (shim.cpuMicros() - before) / result.requests;
      await shim.stop();
      const { shim: listShim, idle: listIdle } = await idleShim(`shim-${setting}-${round}-lists`, setting);
      listShim.resetPeak();
      before = listShim.cpuMicros();
      const lists = await runWrk(
        { url: `${listShim.url}/debug/json?items=${LIST_ITEMS}`, headers: LEGACY },
        { ...wrk, duration: DURATION },
      );
      const listCpu = (listShim.cpuMicros() - before) / lists.requests;
      const listPeak = listShim.peakRss() - listIdle;
      await listShim.stop();
      samples.get(setting)!.push({ idle, stream, cpu, lists: listPeak, listCpu });
      process.stderr.write(
        `round ${round + 1} ${setting}: idle ${fixed(idle / MIB, 0)} MiB, streaming +${fixed(stream / MIB, 0)} MiB, ` +
          `pass-through ${fixed(cpu, 0)} µs/req (${result.rps.toFixed(0)} req/s), ` +
          `32 × 1.4 MB lists (fresh process) +${fixed(listPeak / MIB, 0)} MiB, ${fixed(listCpu, 0)} µs/req\n`,
      );
    }
  }
  await Promise.all(processes.map((p) => p.stop()));
  rmSync(scratch, { recursive: true, force: true });

  const none = median(samples.get(SETTINGS[0]!)!.map((s) => s.cpu));
  const rows = SETTINGS.map((setting) => {
    const s = samples.get(setting)!;
    const cpu = median(s.map((x) => x.cpu));
    return [
      setting === 'none'
        ? 'no flag'
        : v8Flags(setting)
            .map((f) => `\`${f}\``)
            .join(' '),
      fixed(median(s.map((x) => x.idle)) / MIB, 0),
      `+${fixed(median(s.map((x) => x.stream)) / MIB, 0)} (${s.map((x) => fixed(x.stream / MIB, 0)).join(', ')})`,
      `${fixed(cpu, 0)} (${fixed(cpu / none, 2)}×)`,
      `+${fixed(median(s.map((x) => x.lists)) / MIB, 0)} (${s.map((x) => fixed(x.lists / MIB, 0)).join(', ')})`,
      fixed(median(s.map((x) => x.listCpu)), 0),
    ];
  });
  process.stdout.write(
    `Run ${new Date().toISOString()}, ${ROUNDS} interleaved rounds, load average ${fixed(loadAtStart, 2)} → ${fixed(loadavg()[0]!, 2)}.\n\n` +
      markdownTable(
        [
          'V8 flag',
          'idle RSS MiB',
          `streaming ${fixed(TRANSFER / MIB, 0)} MiB down + up: peak above idle MiB`,
          'pass-through CPU µs/req',
          '32 × 1.4 MB patched lists (fresh process): peak above its idle MiB',
          'patched list CPU µs/req',
        ],
        rows,
      ) +
      '\n',
  );
}

main().catch(async (err: unknown) => {
  process.stderr.write(`semi-space: ${(err as Error).stack ?? String(err)}\n`);
  for (const p of processes) process.stderr.write(`--- ${p.name}:\n${p.stderr().slice(-1500)}\n`);
  await Promise.all(processes.map((p) => p.stop()));
  process.exit(1);
});
