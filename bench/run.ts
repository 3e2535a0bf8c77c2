/**
 * The benchmark: the shim against a direct connection to the same upstream, side by side in one
 * interleaved run (see bench/README.md).
 *
 *   node bench/run.ts [--duration 8] [--rounds 3] [--connections 32] [--transfer-mib 200]
 *                     [--out bench/results] [--smoke]
 *
 * `--smoke` (CI): 1 s per load, one round, 16 MiB transfers, results written to a temporary folder only.
 * Exit code 0 when every load ran, whatever the figures (errors during a load are listed under Notes);
 * 1 when the set-up, a correctness check or a load generator failed.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { describeEnvironment } from './lib/environment.ts';
import { freePort, hasCommand, type Measured, pinSelf, startProcess } from './lib/processes.ts';
import { fixed, markdownTable, median } from './lib/stats.ts';
import { download, type TransferResult, upload } from './lib/transfer.ts';
import { runWrk, type WrkLoad, type WrkResult } from './lib/wrk.ts';

/**
 * The JSON patch benchmark belongs to the alias layer and is deleted with it at 1.0
 * (docs/removing-the-alias-layer.md); without it the patch figures are left out.
 */
const PATCH_BENCH = 'bench/aliases-patch-throughput.ts';

/** What the patch benchmark measured (its `--json` output). */
interface PatchThroughput {
  items: number;
  bodyBytes: number;
  iterations: number;
  /** 10^6 bytes of upstream body per second. */
  mbPerSecond: number;
  /** Mean time per patch, in µs. */
  microsPerPatch: number;
}

const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32' },
    'transfer-mib': { type: 'string', default: '200' },
    out: { type: 'string', default: 'bench/results' },
    smoke: { type: 'boolean', default: false },
  },
  strict: true,
});

const SMOKE = args.smoke;
/** 1-minute load average when the run started: other work on a shared machine shows here. */
const LOAD_AT_START = loadavg()[0]!;
const DURATION = SMOKE ? 1 : Number(args.duration);
const ROUNDS = SMOKE ? 1 : Number(args.rounds);
const CONNECTIONS = Number(args.connections);
const TRANSFER_BYTES = (SMOKE ? 16 : Number(args['transfer-mib'])) * 1024 * 1024;
const LIST_SIZES = [10, 100, 1000];
const PATCH_ITEMS = 1500; // ≈ 1.0 MB of JSON
const API_KEY = { 'x-api-key': 'bench' };
const CURRENT = { ...API_KEY, 'Service-Client-Version': '1.0.0' };
const LEGACY = { ...API_KEY, 'Service-Client-Version': '0.59.0' };
const OPEN_PROJECT = 'b0000000-0000-4000-8000-000000000002';
const LOCATION_TYPE = 'a0000000-0000-4000-8000-000000000001';
const TYPES = [LOCATION_TYPE, ...['2', '3', '4'].map((n) => `a0000000-0000-4000-8000-00000000000${n}`)];

for (const [name, value] of [
  ['--duration', DURATION],
  ['--rounds', ROUNDS],
  ['--connections', CONNECTIONS],
  ['--transfer-mib', TRANSFER_BYTES],
] as const) {
  if (!Number.isFinite(value) || value <= 0 || value > (name === '--transfer-mib' ? 2 ** 34 : 3600))
    exitEarly(`${name} must be a positive number`);
}
if (!hasCommand('wrk'))
  exitEarly('wrk is not installed (Debian: apt-get install -y wrk; see bench/README.md)');

// The layout: load generator and upstream share core 0, the shim has core 1 to itself.
const PINNED = availableParallelism() >= 2 && hasCommand('taskset');
const LOAD_CPUS = PINNED ? '0' : undefined;
const SHIM_CPUS = PINNED ? '1' : undefined;

const scratch = mkdtempSync(join(tmpdir(), 'compat-shim-bench-'));
const processes: Measured[] = [];
let stopping = false;
process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
process.once('SIGTERM', () => void cleanup().then(() => process.exit(143)));

/** Stops before anything was started. */
function exitEarly(message: string): never {
  process.stderr.write(`bench: ${message}\n`);
  process.exit(1);
}

/** A failure with a message for the operator (no stack); thrown so that `main` stops the children first. */
class BenchError extends Error {}

function fail(message: string): never {
  throw new BenchError(message);
}

async function cleanup(): Promise<void> {
  if (stopping) return;
  stopping = true;
  await Promise.all(processes.map((p) => p.stop()));
  rmSync(scratch, { recursive: true, force: true });
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

const MIB = 1024 * 1024;
const mib = (bytes: number) => bytes / MIB;

/** One row of the load table: a request repeated by wrk. */
interface Load {
  id: string;
  label: string;
  /** Which process the load goes to: the upstream, the shim, or a calibration proxy. */
  via: 'direct' | 'shim' | Calibration;
  load: WrkLoad;
  /** The direct load this one is compared with (same group). */
  group: string;
  target?: { ratio: number; cpu?: number; p99?: number };
  bodyBytes?: number;
}

interface LoadSample {
  wrk: WrkResult;
  /** CPU time per request of the proxy the load went through, in µs (`NaN` for direct loads). */
  proxyCpu: number;
}

/** The calibration proxies measured next to the shim (bench/calibration/). */
type Calibration = 'bare' | 'express';
const CALIBRATIONS: Record<Calibration, { file: string; label: string }> = {
  bare: { file: 'bench/calibration/bare-proxy.ts', label: 'bare node:http pipe' },
  express: { file: 'bench/calibration/express-hpm.ts', label: 'Express 5 + hpm 4 only' },
};

async function main(): Promise<void> {
  pinSelf(LOAD_CPUS);
  const commands: string[] = [];

  // --- start the upstream and the shim
  const backendPort = await freePort();
  const backendUrl = `http://127.0.0.1:${backendPort}`;
  const backendArgs = ['bench/lib/upstream.ts', '--port', String(backendPort), '--host', '127.0.0.1'];
  const backend = await startProcess({
    name: 'upstream',
    nodeArgs: backendArgs,
    cpus: LOAD_CPUS,
    readyUrl: `${backendUrl}/api/health`,
    url: backendUrl,
    scratch,
  });
  processes.push(backend);
  commands.push(`${pin(LOAD_CPUS)}node ${backendArgs.join(' ')}`);

  const shimPort = await freePort();
  const adminPort = await freePort();
  const shimEnv = {
    UPSTREAM_URL: backendUrl,
    PORT: String(shimPort),
    ADMIN_PORT: String(adminPort),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
  };
  const shimArgs = ['--expose-gc', 'src/main.ts'];
  const startShim = async (name: string) => {
    const started = await startProcess({
      name,
      nodeArgs: shimArgs,
      env: shimEnv,
      cpus: SHIM_CPUS,
      readyUrl: `http://127.0.0.1:${adminPort}/healthz`,
      url: `http://127.0.0.1:${shimPort}`,
      scratch,
    });
    processes.push(started);
    return started;
  };
  let shim = await startShim('shim');
  commands.push(
    `UPSTREAM_URL=${backendUrl} LOG_LEVEL=info ${pin(SHIM_CPUS)}node ${shimArgs.join(' ')} > /dev/null  # = npm start`,
  );

  // --- idle memory, before any request
  await sleep(SMOKE ? 1000 : 3000);
  const idleRss = shim.rss();
  const bundledIdleRss = SMOKE ? undefined : await measureBundledIdle(shimEnv);

  // --- the calibration proxies, on the shim's core (idle while the shim is measured)
  const calibration = {} as Record<Calibration, Measured>;
  for (const name of Object.keys(CALIBRATIONS) as Calibration[]) {
    const port = await freePort();
    const admin = await freePort();
    calibration[name] = await startProcess({
      name: `calibration-${name}`,
      nodeArgs: [CALIBRATIONS[name].file],
      env: { UPSTREAM_URL: backendUrl, PORT: String(port), ADMIN_PORT: String(admin) },
      cpus: SHIM_CPUS,
      readyUrl: `http://127.0.0.1:${admin}/`,
      url: `http://127.0.0.1:${port}`,
      scratch,
    });
    processes.push(calibration[name]);
  }
  const proxyOf = (load: Load): Measured | undefined =>
    load.via === 'direct' ? undefined : load.via === 'shim' ? shim : calibration[load.via];

  // --- fixtures and a correctness check of every load (an unpatched legacy row is reported, not hidden)
  const notes: string[] = [];
  const loads = defineLoads(backendUrl, shim.url, {
    bare: calibration.bare.url,
    express: calibration.express.url,
  });
  // The backend keeps the newest 100,000 missions and the POST loads create that many: a fresh bench
  // mission before every GET group keeps those loads on a mission that exists.
  const freshMission = async () => {
    const { uuid } = await createBenchMission(backendUrl);
    for (const load of loads)
      if (load.group === 'get')
        load.load.url = load.load.url.replace(/\/missions\/[^/?]*$/, `/missions/${uuid}`);
  };
  await freshMission();
  for (const load of loads) {
    const res = await fetch(load.load.url, {
      method: load.load.method ?? 'GET',
      headers: load.load.headers,
      body: load.load.body ?? null,
    });
    const text = await res.text();
    if (res.status >= 300) fail(`${load.label}: status ${res.status}: ${text.slice(0, 200)}`);
    load.bodyBytes = Buffer.byteLength(text);
    const legacy = load.load.headers['Service-Client-Version'] === LEGACY['Service-Client-Version'];
    if (legacy && !text.includes('"tags"'))
      notes.push(`${load.label}: the response has no "tags" — the alias layer is not active in this build.`);
  }

  // --- warm-up (JIT) of every shim load, not recorded
  if (!SMOKE) {
    log('warm-up …');
    for (const load of loads) {
      if (load.group === 'get') await freshMission();
      await runWrk(load.load, wrkOptions(2));
    }
  }

  // --- interleaved rounds; the order flips every round so that drift hits direct and shim alike
  const samples = new Map<string, LoadSample[]>(loads.map((l) => [l.id, []]));
  const groups = [...new Set(loads.map((l) => l.group))];
  shim.resetPeak();
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? groups : [...groups].reverse();
    for (const group of order) {
      const members = loads.filter((l) => l.group === group);
      if (group === 'get') await freshMission();
      for (const load of round % 2 === 0 ? members : [...members].reverse()) {
        const proxy = proxyOf(load);
        const cpuBefore = proxy?.cpuMicros() ?? 0;
        const result = await runWrk(load.load, wrkOptions(DURATION));
        const proxyCpu = proxy ? (proxy.cpuMicros() - cpuBefore) / result.requests : Number.NaN;
        samples.get(load.id)!.push({ wrk: result, proxyCpu });
        log(
          `round ${round + 1}/${ROUNDS} ${load.label}: ${result.rps.toFixed(0)} req/s, p99 ${fixed(result.p99, 2)} ms` +
            (proxy ? `, proxy ${proxyCpu.toFixed(0)} µs/req` : ''),
        );
        if (result.non2xx > 0 || result.socketErrors > 0)
          notes.push(
            `${load.label}, round ${round + 1}: ${result.non2xx} non-2xx responses, ${result.socketErrors} socket errors.`,
          );
      }
    }
  }
  const loadPeakRss = shim.peakRss();
  const afterLoadRss = shim.rss();

  // --- 200 MiB transfers, interleaved, with the shim's peak RSS per transfer. A fresh shim: the heap
  // and the malloc arenas that the request loads grew are not what streaming costs.
  await shim.stop();
  shim = await startShim('shim-transfers');
  await sleep(1000);
  const transfers = { download: { direct: [], shim: [] }, upload: { direct: [], shim: [] } } as Record<
    'download' | 'upload',
    Record<'direct' | 'shim', TransferResult[]>
  >;
  const transferPeak = { download: 0, upload: 0, resettable: true };
  for (let round = 0; round < ROUNDS; round++) {
    for (const kind of ['download', 'upload'] as const) {
      const vias = round % 2 === 0 ? (['direct', 'shim'] as const) : (['shim', 'direct'] as const);
      for (const via of vias) {
        const fn = kind === 'download' ? download : upload;
        if (via === 'shim') transferPeak.resettable &&= shim.resetPeak();
        const result =
          via === 'direct'
            ? await fn(backendUrl, API_KEY, TRANSFER_BYTES)
            : await fn(shim.url, CURRENT, TRANSFER_BYTES);
        if (via === 'shim') transferPeak[kind] = Math.max(transferPeak[kind], shim.peakRss());
        transfers[kind][via].push(result);
        log(`round ${round + 1}/${ROUNDS} ${kind} ${via}: ${result.mibPerSecond.toFixed(0)} MiB/s`);
      }
    }
  }
  if (!transferPeak.resettable)
    notes.push('The kernel refused to reset VmHWM: transfer peaks include the load phase.');

  await Promise.all([shim.stop(), backend.stop(), calibration.bare.stop(), calibration.express.stop()]);

  // --- the JSON patch alone, on the shim's core
  const patch = !existsSync(PATCH_BENCH)
    ? []
    : SMOKE
      ? [measurePatchIn(PATCH_ITEMS, 0.2)]
      : [1, 2, 3].map(() => measurePatchIn(PATCH_ITEMS, 2));

  // --- report
  const report = renderReport({
    loads,
    samples,
    idleRss,
    bundledIdleRss,
    loadPeakRss,
    afterLoadRss,
    transfers,
    transferPeak,
    patch,
    notes,
    commands,
  });
  process.stdout.write(`${report}\n`);
  const outDir = SMOKE ? scratch : args.out;
  mkdirSync(outDir, { recursive: true });
  const date = new Date().toISOString().slice(0, 10);
  const resultFile = join(outDir, `${date}.md`);
  writeFileSync(resultFile, `# Benchmark ${date}\n\n${report}\n`);
  if (!SMOKE) updateLatest(report, resultFile);
  log(`written: ${resultFile}${SMOKE ? ' (smoke run: temporary)' : ' and bench/RESULTS.md'}`);
  await cleanup();
  process.exit(0);
}

function pin(cpus: string | undefined): string {
  return cpus === undefined ? '' : `taskset -c ${cpus} `;
}

function wrkOptions(duration: number) {
  return { duration, connections: CONNECTIONS, cpus: LOAD_CPUS, scratch };
}

/** The loads; the GET mission URLs end in `/missions/` until {@link createBenchMission} fills them in. */
function defineLoads(direct: string, shim: string, calibration: Record<Calibration, string>): Load[] {
  const get = '/missions/';
  const post = (alias: 'tags' | 'metadata', headers: Record<string, string>): WrkLoad => ({
    url: `${alias === 'tags' ? shim : direct}/missions`,
    method: 'POST',
    headers: { ...headers, 'Content-Type': 'application/json' },
    body: JSON.stringify({
      name: 'bench-post',
      projectUUID: OPEN_PROJECT,
      [alias]: { [LOCATION_TYPE]: 'Zurich' },
    }),
  });
  const loads: Load[] = [
    {
      id: 'get-direct',
      label: 'GET mission, direct',
      via: 'direct',
      group: 'get',
      load: { url: `${direct}${get}`, headers: API_KEY },
    },
    {
      id: 'get-current',
      label: 'GET mission, shim, 1.0 client (pass-through)',
      via: 'shim',
      group: 'get',
      load: { url: `${shim}${get}`, headers: CURRENT },
      target: { ratio: 0.45, cpu: 70, p99: 6 },
    },
    {
      id: 'get-legacy',
      label: 'GET mission, shim, legacy client (patched)',
      via: 'shim',
      group: 'get',
      load: { url: `${shim}${get}`, headers: LEGACY },
      target: { ratio: 0.4, p99: 6 },
    },
    ...(Object.keys(CALIBRATIONS) as Calibration[]).map(
      (name): Load => ({
        id: `get-${name}`,
        label: `GET mission, calibration: ${CALIBRATIONS[name].label}`,
        via: name,
        group: 'get',
        load: { url: `${calibration[name]}${get}`, headers: API_KEY },
      }),
    ),
    {
      id: 'post-direct',
      label: 'POST /missions `metadata`, direct',
      via: 'direct',
      group: 'post',
      load: post('metadata', API_KEY),
    },
    {
      id: 'post-legacy',
      label: 'POST /missions `tags`, shim, legacy (rewritten)',
      via: 'shim',
      group: 'post',
      load: post('tags', LEGACY),
      target: { ratio: 0.35, p99: 6 },
    },
  ];
  for (const items of LIST_SIZES) {
    const path = `/debug/json?items=${items}`;
    loads.push(
      {
        id: `list${items}-direct`,
        label: `list of ${items}, direct`,
        via: 'direct',
        group: `list${items}`,
        load: { url: `${direct}${path}`, headers: API_KEY },
      },
      {
        id: `list${items}-legacy`,
        label: `list of ${items}, shim, legacy (patched)`,
        via: 'shim',
        group: `list${items}`,
        load: { url: `${shim}${path}`, headers: LEGACY },
      },
    );
  }
  return loads;
}

/** Creates a mission of about 1.5 KB (the reference payload) with one metadata entry per type. */
async function createBenchMission(backendUrl: string): Promise<{ uuid: string }> {
  const metadata = Object.fromEntries(
    TYPES.map((type, i) => [type, i === 3 ? 21.5 : `${'bench-value-'.repeat(16)}${i}`]),
  );
  const res = await fetch(`${backendUrl}/missions`, {
    method: 'POST',
    headers: { ...API_KEY, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench-mission', projectUUID: OPEN_PROJECT, metadata }),
  });
  const body = (await res.json()) as { uuid?: string };
  if (res.status !== 201 || typeof body.uuid !== 'string')
    fail(`creating the bench mission failed: ${res.status} ${JSON.stringify(body)}`);
  return { uuid: body.uuid };
}

/** Idle RSS of the same program bundled by esbuild (informational; skipped when esbuild is absent). */
async function measureBundledIdle(env: Record<string, string>): Promise<number | undefined> {
  const esbuild = 'node_modules/.bin/esbuild';
  if (!existsSync(esbuild)) return undefined;
  const outfile = join(scratch, 'bundle', 'main.mjs');
  execFileSync(esbuild, [
    'src/main.ts',
    '--bundle',
    '--platform=node',
    '--format=esm',
    '--target=node24',
    `--outfile=${outfile}`,
    '--log-level=warning',
    "--banner:js=import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
  ]);
  const port = await freePort();
  const admin = await freePort();
  const bundled = await startProcess({
    name: 'shim-bundled',
    nodeArgs: ['--expose-gc', outfile],
    env: { ...env, PORT: String(port), ADMIN_PORT: String(admin) },
    cpus: SHIM_CPUS,
    readyUrl: `http://127.0.0.1:${admin}/healthz`,
    url: `http://127.0.0.1:${port}`,
    scratch,
  });
  await sleep(3000);
  const rss = bundled.rss();
  await bundled.stop();
  return rss;
}

function measurePatchIn(items: number, seconds: number): PatchThroughput {
  const argv = [
    process.execPath,
    PATCH_BENCH,
    '--json',
    '--items',
    String(items),
    '--seconds',
    String(seconds),
  ];
  const command = SHIM_CPUS === undefined ? argv : ['taskset', '-c', SHIM_CPUS, ...argv];
  return JSON.parse(
    execFileSync(command[0]!, command.slice(1), { encoding: 'utf8', timeout: 60_000 }),
  ) as PatchThroughput;
}

interface ReportInput {
  loads: Load[];
  samples: Map<string, LoadSample[]>;
  idleRss: number;
  bundledIdleRss: number | undefined;
  loadPeakRss: number;
  afterLoadRss: number;
  transfers: Record<'download' | 'upload', Record<'direct' | 'shim', TransferResult[]>>;
  transferPeak: { download: number; upload: number };
  patch: PatchThroughput[];
  notes: string[];
  commands: string[];
}

function verdict(met: boolean): string {
  return met ? 'met' : '**missed**';
}

function renderReport(input: ReportInput): string {
  const { loads, samples } = input;
  const rows: string[][] = [];
  const targets: string[][] = [];
  for (const load of loads) {
    const own = samples.get(load.id)!;
    const direct = samples.get(loads.find((l) => l.group === load.group && l.via === 'direct')!.id)!;
    const ratios = own.map((s, i) => s.wrk.rps / direct[i]!.wrk.rps);
    const ratio = median(ratios);
    const cpu = median(own.map((s) => s.proxyCpu));
    const p99 = median(own.map((s) => s.wrk.p99));
    rows.push([
      load.label,
      fixed((load.bodyBytes ?? 0) / 1024, 1),
      fixed(median(own.map((s) => s.wrk.rps)), 0),
      load.via === 'direct' ? '1' : fixed(ratio, 2),
      fixed(cpu, 0),
      load.bodyBytes ? fixed(cpu / (load.bodyBytes / 1024), 2) : '–',
      fixed(median(own.map((s) => s.wrk.p50)), 2),
      fixed(p99, 2),
    ]);
    if (load.target) {
      targets.push([
        `${load.label}: ratio ≥ ${load.target.ratio}`,
        fixed(ratio, 3),
        verdict(ratio >= load.target.ratio),
      ]);
      if (load.target.cpu !== undefined)
        targets.push([
          `${load.label}: shim CPU ≤ ${load.target.cpu} µs/req`,
          fixed(cpu, 0),
          verdict(cpu <= load.target.cpu),
        ]);
      if (load.target.p99 !== undefined)
        targets.push([
          `${load.label}: p99 ≤ ${load.target.p99} ms`,
          fixed(p99, 2),
          verdict(p99 <= load.target.p99),
        ]);
    }
  }

  const transferRows: string[][] = [];
  for (const kind of ['download', 'upload'] as const) {
    const { direct, shim } = input.transfers[kind];
    const ratio = median(shim.map((s, i) => s.mibPerSecond / direct[i]!.mibPerSecond));
    const peak = input.transferPeak[kind];
    transferRows.push([
      `${fixed(mib(TRANSFER_BYTES), 0)} MiB ${kind}`,
      fixed(median(direct.map((r) => r.mibPerSecond)), 0),
      fixed(median(shim.map((r) => r.mibPerSecond)), 0),
      fixed(ratio, 2),
      fixed(mib(peak), 0),
    ]);
    targets.push([`${kind}: throughput ratio ≥ 0.9`, fixed(ratio, 3), verdict(ratio >= 0.9)]);
    targets.push([
      `${kind}: shim peak RSS ≤ 100 MB`,
      `${fixed(mib(peak), 0)} MiB`,
      verdict(peak <= 100 * MIB),
    ]);
  }
  targets.push([
    'idle RSS ≤ 60 MB',
    `${fixed(mib(input.idleRss), 0)} MiB`,
    verdict(input.idleRss <= 60 * MIB),
  ]);
  const p = input.patch[0];
  const patchRate = median(input.patch.map((r) => r.mbPerSecond));
  if (p) {
    targets.push([
      'JSON patch ≥ 200 MB/s on a 1 MB list',
      `${fixed(patchRate, 0)} MB/s`,
      verdict(patchRate >= 200),
    ]);
  }
  const memory = [
    ['idle, `npm start` (`node --expose-gc src/main.ts`)', fixed(mib(input.idleRss), 0)],
    ...(input.bundledIdleRss === undefined
      ? []
      : [
          [
            'idle, same program bundled by esbuild (not shipped; see RESULTS.md)',
            fixed(mib(input.bundledIdleRss), 0),
          ],
        ]),
    ['peak during the request loads', fixed(mib(input.loadPeakRss), 0)],
    ['after the request loads', fixed(mib(input.afterLoadRss), 0)],
  ];
  const env = describeEnvironment();
  return [
    `Run: ${new Date().toISOString()}${SMOKE ? ' — **smoke run** (1 s loads, one round; figures not meaningful)' : ''}. ` +
      `wrk, 1 thread, ${CONNECTIONS} keep-alive connections, ${DURATION} s per load, ${ROUNDS} interleaved round(s), medians. ` +
      (PINNED
        ? 'Pinned: wrk, upstream and this script on core 0, shim (and the calibration proxies) on core 1.'
        : 'Not pinned (fewer than 2 cores or no taskset).') +
      ` Load average (1 min) at start / end: ${fixed(LOAD_AT_START, 2)} / ${fixed(loadavg()[0], 2)} on ` +
      `${cpus().length} cores (more than the cores means other work competed with the run).`,
    '',
    markdownTable(
      [
        'load',
        'body KiB',
        'req/s',
        'ratio to direct',
        'proxy CPU µs/req',
        'proxy CPU µs/KiB',
        'p50 ms',
        'p99 ms',
      ],
      rows,
    ),
    '',
    markdownTable(['transfer', 'direct MiB/s', 'shim MiB/s', 'ratio', 'shim peak RSS MiB'], transferRows),
    '',
    markdownTable(['shim RSS', 'MiB'], memory),
    '',
    ...(p
      ? [
          `JSON patch alone (\`patchJson\`, ${p.items} missions, ${p.bodyBytes} bytes, one core): ` +
            `${fixed(patchRate, 0)} MB/s (${input.patch.map((r) => fixed(r.mbPerSecond, 0)).join(', ')}), ` +
            `${fixed(median(input.patch.map((r) => r.microsPerPatch)), 0)} µs per patch.`,
          '',
        ]
      : []),
    markdownTable(['target', 'measured', ''], targets),
    '',
    ...(input.notes.length > 0 ? ['Notes:', ...input.notes.map((n) => `- ${n}`), ''] : []),
    'Environment:',
    ...env.map(([k, v]) => `- ${k}: ${v}`),
    '',
    'Commands:',
    '```',
    ...input.commands,
    `${pin(LOAD_CPUS)}wrk -t1 -c${CONNECTIONS} -d${DURATION}s --timeout 5s --latency -s <load.lua> <url>`,
    ...(p ? [`${pin(SHIM_CPUS)}node ${PATCH_BENCH} --items ${p.items}`] : []),
    '```',
  ].join('\n');
}

/** Replaces the generated part of bench/RESULTS.md (between the markers), keeping the written part. */
function updateLatest(report: string, resultFile: string): void {
  const path = 'bench/RESULTS.md';
  const begin = '<!-- bench:begin (generated by npm run bench) -->';
  const end = '<!-- bench:end -->';
  const generated = `${begin}\n_Latest run, also in \`${resultFile}\`._\n\n${report}\n${end}`;
  const current = existsSync(path) ? readFileSync(path, 'utf8') : `# Benchmark results\n\n${begin}\n${end}\n`;
  const from = current.indexOf(begin);
  const to = current.indexOf(end);
  const next =
    from === -1 || to === -1
      ? `${current.trimEnd()}\n\n${generated}\n`
      : `${current.slice(0, from)}${generated}${current.slice(to + end.length)}`;
  writeFileSync(path, next);
}

main().catch(async (err: unknown) => {
  process.stderr.write(
    `bench: ${err instanceof BenchError ? err.message : ((err as Error).stack ?? String(err))}\n`,
  );
  for (const p of processes) {
    const stderr = p.stderr().trim();
    if (stderr !== '') process.stderr.write(`--- ${p.name} stderr:\n${stderr.slice(-2000)}\n`);
  }
  await cleanup();
  process.exit(1);
});
