/**
 * The benchmark: the shim against a direct connection to the same upstream, side by side in one
 * interleaved run (see bench/README.md).
 *
 *   node bench/run.ts [--duration 8] [--rounds 3] [--connections 32] [--transfer-mib 200]
 *                     [--first-byte-samples 15] [--out bench/results] [--smoke]
 *
 * The shim is measured as it ships: the script first builds the bundle (`node scripts/build.ts`, as
 * `npm start` does) and runs `node <the flags of npm start> dist/main.js` (bench/lib/shipped.ts).
 *
 * `--smoke` (CI): 1 s per load, one round, 16 MiB transfers, 3 first-byte samples, results written to a
 * temporary folder only.
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
import {
  benchUpstreamArgs,
  freePort,
  hasCommand,
  type Measured,
  pinSelf,
  startBenchUpstream,
  startCalibrationProxy,
  startProcess,
  startShim as startShimProcess,
} from './lib/processes.ts';
import { resultFilePath } from './lib/result-file.ts';
import { shippedNodeFlags } from './lib/shipped.ts';
import { fixed, markdownTable, median } from './lib/stats.ts';
import {
  download,
  type FirstByteResult,
  type TransferResult,
  timeFirstByte,
  upload,
} from './lib/transfer.ts';
import { EQUAL_OUTPUT_ITEMS } from './lib/upstream.ts';
import { runWrk, type WrkLoad, type WrkResult } from './lib/wrk.ts';

/**
 * The JSON patch benchmark belongs to the alias layer and is deleted with it at 1.0
 * (docs/removing-the-alias-layer.md); without it the patch figures are left out.
 */
const PATCH_BENCH = 'bench/aliases-patch-throughput.ts';
/**
 * Whether this tree still has the alias layer: its benchmarks are deleted with it. Without it, the
 * legacy POST sends `metadata` (what a migrated client sends): the upstream refuses `tags` with 400, and
 * the benchmark, run by `.ci/run` after the removal too, would stop at its first check.
 */
const ALIAS_LAYER = existsSync(PATCH_BENCH);

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
    'first-byte-samples': { type: 'string', default: '15' },
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
/** The list whose legacy (patched) throughput is compared with the shim's own pass-through of it. */
const PASS_THROUGH_LIST = 1000;
/** The list as large as {@link PASS_THROUGH_LIST} once patched: its pass-through is shown as context. */
const EQUAL_OUTPUT_LIST = EQUAL_OUTPUT_ITEMS;
const FIRST_BYTE_SAMPLES = SMOKE ? 3 : Number(args['first-byte-samples']);
const TEN_MB_ITEMS = 15_500; // ≈ 10 MB of JSON
const CONCURRENT_LIST_ITEMS = 2_100; // ≈ 1.4 MB of JSON
/** The bench upstream's gzipped list (bench/lib/upstream.ts): 54 KB for the 2,100 missions. */
const GZIP_QUERY = '&coding=gzip';
/** Issue 9 item 4: streaming and 32 concurrent patched lists each peak under idle + this. */
const PEAK_ABOVE_IDLE = 40 * 1024 * 1024;
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
  ['--first-byte-samples', FIRST_BYTE_SAMPLES],
] as const) {
  if (!Number.isFinite(value) || value <= 0 || value > (name === '--transfer-mib' ? 2 ** 34 : 3600))
    exitEarly(`${name} must be a positive number`);
}
if (!hasCommand('wrk'))
  exitEarly('wrk is not installed (Debian: apt-get install -y wrk; see bench/README.md)');

// The issue's layout: load generator and upstream share core 0, the shim has core 1 to itself.
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
  /** Targets: `ratio` to direct, absolute `cpu` (µs/req) and `p99` (ms), and ratios to other loads. */
  target?: { ratio?: number; cpu?: number; p99?: number; relative?: RelativeTarget[] };
  bodyBytes?: number;
}

interface LoadSample {
  wrk: WrkResult;
  /** CPU time per request of the proxy the load went through, in µs (`NaN` for direct loads). */
  proxyCpu: number;
}

/** A target relative to another load of the same run, compared round by round (median of the ratios). */
interface RelativeTarget {
  /** What is compared: proxy CPU per request, req/s, or wrk's p99. */
  measure: 'cpu' | 'rps' | 'p99';
  /** The id of the load it is compared with. */
  of: string;
  /** This load's figure / the other's must be ≤ `max` or ≥ `min`; neither: context, no verdict. */
  max?: number;
  min?: number;
  /** Where the target comes from, e.g. `issue 9`. */
  source: string;
}

/** The calibration proxies measured next to the shim (bench/calibration/). */
type Calibration = 'bare' | 'express';
const CALIBRATIONS: Record<Calibration, { file: string; label: string }> = {
  bare: { file: 'bench/calibration/bare-proxy.ts', label: 'bare node:http pipe' },
  express: { file: 'bench/calibration/express-hpm.ts', label: 'Express 5 + hpm 4 only' },
};

/**
 * The order in which a group's loads run in a round (reversed every other round), where it is not the
 * order of the report's rows: each shim load of issue 9's CPU targets next to Express + hpm, so that
 * what drifts on the machine between the two is one load's 8 s, not three loads' 24 s as in the
 * order direct, pass-through, legacy, bare, Express + hpm (thirty-second session: in one round the
 * shim's loads cost 278 and 294 µs per request, Express + hpm 132 µs 16 s later).
 */
const RUN_ORDER: ReadonlyMap<string, number> = new Map(
  ['get-direct', 'get-bare', 'get-current', 'get-express', 'get-legacy'].map((id, i) => [id, i]),
);

/** A group's loads in {@link RUN_ORDER} (the others after them, in their own order). */
function runOrder(members: readonly Load[]): Load[] {
  const at = (load: Load) => RUN_ORDER.get(load.id) ?? RUN_ORDER.size;
  return [...members].sort((a, b) => at(a) - at(b));
}

/** Where the 10 MB list is fetched from when timing its first byte. */
type FirstByteVia = 'direct' | 'current' | 'legacy';
/** Where a 200 MiB transfer goes: the upstream, the shim, or the bare node:http pipe. */
type TransferVia = 'direct' | 'shim' | 'bare';
const FIRST_BYTE_VIAS: readonly FirstByteVia[] = ['direct', 'current', 'legacy'];

async function main(): Promise<void> {
  pinSelf(LOAD_CPUS);
  const commands: string[] = [];

  // --- the bundle, built as `npm start` builds it, run with the flags of `npm start` and the image
  execFileSync(process.execPath, ['scripts/build.ts'], { stdio: ['ignore', 'ignore', 'inherit'] });
  commands.push('node scripts/build.ts  # = npm run build');
  const shimFlags = shippedNodeFlags();

  // --- start the upstream and the shim
  const backend = await startBenchUpstream({ cpus: LOAD_CPUS, scratch });
  processes.push(backend);
  const backendUrl = backend.url;
  commands.push(`${pin(LOAD_CPUS)}node ${benchUpstreamArgs(Number(new URL(backendUrl).port)).join(' ')}`);

  const shimArgs = [...shimFlags, 'dist/main.js'];
  const startShim = async (name: string) => {
    const started = await startShimProcess(name, shimArgs, backendUrl, { cpus: SHIM_CPUS, scratch });
    processes.push(started);
    return started;
  };
  let shim = await startShim('shim');
  commands.push(
    `UPSTREAM_URL=${backendUrl} LOG_LEVEL=info ${pin(SHIM_CPUS)}node ${shimArgs.join(' ')} > /dev/null  # = the image, npm start`,
  );

  // --- idle memory, before any request
  await sleep(SMOKE ? 1000 : 3000);
  const idleRss = shim.rss();
  const npmStartIdleRss = SMOKE ? undefined : await measureNpmStartIdle(shimFlags);
  if (npmStartIdleRss !== undefined)
    commands.push(
      `${pin(SHIM_CPUS)}node ${[...shimFlags, 'dist/main.js', '--demo'].join(' ')}  # = npm start, idle RSS only`,
    );

  // --- the calibration proxies, on the shim's core (idle while the shim is measured)
  const calibration = {} as Record<Calibration, Measured>;
  // Without flags for the CPU comparisons (each stack as its users run it); with the shim's V8 flags
  // where the bare pipe shows what Node itself holds in memory.
  const startCalibration = async (name: Calibration, label: string, nodeFlags: readonly string[] = []) => {
    const started = await startCalibrationProxy(
      label,
      CALIBRATIONS[name].file,
      backendUrl,
      { cpus: SHIM_CPUS, scratch },
      nodeFlags,
    );
    processes.push(started);
    const command = `UPSTREAM_URL=${backendUrl} ${pin(SHIM_CPUS)}node ${[...nodeFlags, CALIBRATIONS[name].file].join(' ')}`;
    if (!commands.includes(command)) commands.push(command);
    return started;
  };
  for (const name of Object.keys(CALIBRATIONS) as Calibration[])
    calibration[name] = await startCalibration(name, `calibration-${name}`);
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
      const members = runOrder(loads.filter((l) => l.group === group));
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

  // --- time to first byte of a 10 MB list: direct, passed through (1.0 client), patched (legacy),
  // interleaved, one fresh connection per request, after one unrecorded request of each
  const firstByte = { direct: [], current: [], legacy: [] } as Record<FirstByteVia, FirstByteResult[]>;
  const tenMb = `/debug/json?items=${TEN_MB_ITEMS}`;
  const firstByteOf = (via: FirstByteVia) =>
    via === 'direct'
      ? timeFirstByte(`${backendUrl}${tenMb}`, API_KEY)
      : timeFirstByte(`${shim.url}${tenMb}`, via === 'current' ? CURRENT : LEGACY);
  for (const via of FIRST_BYTE_VIAS) await firstByteOf(via);
  for (let i = 0; i < FIRST_BYTE_SAMPLES; i++)
    for (const via of i % 2 === 0 ? FIRST_BYTE_VIAS : [...FIRST_BYTE_VIAS].reverse())
      firstByte[via].push(await firstByteOf(via));
  log(
    `10 MB list, first body byte (median ms): ${FIRST_BYTE_VIAS.map((v) => `${v} ${fixed(median(firstByte[v].map((r) => r.firstByteMs)), 1)}`).join(', ')}`,
  );

  // --- 200 MiB transfers, interleaved, with the shim's peak RSS per transfer, and the bare node:http
  // pipe's (what Node itself holds while streaming). A fresh shim and pipe: the heap and the malloc
  // arenas that the request loads grew are not what streaming costs.
  await Promise.all([shim.stop(), calibration.bare.stop()]);
  shim = await startShim('shim-transfers');
  const bareTransfers = await startCalibration('bare', 'calibration-bare-transfers', shimFlags);
  await sleep(SMOKE ? 1000 : 3000);
  const transferIdleRss = shim.rss();
  const bareIdleRss = bareTransfers.rss();
  const transfers = {
    download: { direct: [], shim: [], bare: [] },
    upload: { direct: [], shim: [], bare: [] },
  } as Record<'download' | 'upload', Record<TransferVia, TransferResult[]>>;
  const transferPeak = { download: 0, upload: 0, resettable: true };
  const barePeak = { download: 0, upload: 0 };
  for (let round = 0; round < ROUNDS; round++) {
    for (const kind of ['download', 'upload'] as const) {
      const vias: TransferVia[] = round % 2 === 0 ? ['direct', 'shim', 'bare'] : ['bare', 'shim', 'direct'];
      for (const via of vias) {
        const fn = kind === 'download' ? download : upload;
        if (via === 'shim') transferPeak.resettable &&= shim.resetPeak();
        if (via === 'bare') bareTransfers.resetPeak();
        const result =
          via === 'direct'
            ? await fn(backendUrl, API_KEY, TRANSFER_BYTES)
            : via === 'shim'
              ? await fn(shim.url, CURRENT, TRANSFER_BYTES)
              : await fn(bareTransfers.url, API_KEY, TRANSFER_BYTES);
        if (via === 'shim') transferPeak[kind] = Math.max(transferPeak[kind], shim.peakRss());
        if (via === 'bare') barePeak[kind] = Math.max(barePeak[kind], bareTransfers.peakRss());
        transfers[kind][via].push(result);
        log(`round ${round + 1}/${ROUNDS} ${kind} ${via}: ${result.mibPerSecond.toFixed(0)} MiB/s`);
      }
    }
  }
  if (!transferPeak.resettable)
    notes.push('The kernel refused to reset VmHWM: transfer peaks include the load phase.');

  // --- 32 concurrent 1.4 MB lists, each on a fresh process, peak RSS above its idle: patched (legacy
  // client; the target), then the same load passed through by the shim (1.0 client) and by the bare
  // node:http pipe with the shim's V8 flags (what Node itself holds for these bytes in flight).
  await Promise.all([shim.stop(), bareTransfers.stop()]);
  const listsUrl = (base: string, query = '') => `${base}/debug/json?items=${CONCURRENT_LIST_ITEMS}${query}`;
  const measureLists = async (
    proxy: Measured,
    headers: Record<string, string>,
    label: string,
    query = '',
  ): Promise<ListsRun> => {
    await sleep(SMOKE ? 1000 : 3000);
    const idle = proxy.rss();
    proxy.resetPeak();
    const cpuBefore = proxy.cpuMicros();
    const result = await runWrk({ url: listsUrl(proxy.url, query), headers }, wrkOptions(DURATION));
    const run = {
      idle,
      peak: proxy.peakRss(),
      result,
      cpu: (proxy.cpuMicros() - cpuBefore) / result.requests,
    };
    log(
      `${CONNECTIONS} concurrent 1.4 MB lists, ${label}: ${result.rps.toFixed(0)} req/s, peak RSS ${fixed(mib(run.peak), 0)} MiB (idle ${fixed(mib(idle), 0)})`,
    );
    if (result.non2xx > 0 || result.socketErrors > 0)
      notes.push(
        `${CONNECTIONS} concurrent 1.4 MB lists, ${label}: ${result.non2xx} non-2xx responses, ${result.socketErrors} socket errors.`,
      );
    await proxy.stop();
    return run;
  };
  const concurrentLists = {
    patched: await measureLists(await startShim('shim-lists'), LEGACY, 'patched'),
    passThrough: await measureLists(await startShim('shim-lists-current'), CURRENT, 'passed through'),
    bare: await measureLists(
      await startCalibration('bare', 'calibration-bare-lists', shimFlags),
      API_KEY,
      'bare pipe',
    ),
    // Context, no target: the upstream gzips the list (54 KB); a legacy client's is decoded, patched
    // and encoded again, a 1.0 client's passes through still gzipped.
    patchedGzip: await measureLists(
      await startShim('shim-lists-gzip'),
      { ...LEGACY, 'Accept-Encoding': 'gzip' },
      'patched, gzip upstream',
      GZIP_QUERY,
    ),
    passThroughGzip: await measureLists(
      await startShim('shim-lists-gzip-current'),
      { ...CURRENT, 'Accept-Encoding': 'gzip' },
      'passed through, gzip upstream',
      GZIP_QUERY,
    ),
  };

  await Promise.all([backend.stop(), calibration.express.stop()]);

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
    npmStartIdleRss,
    shimFlags,
    loadPeakRss,
    afterLoadRss,
    firstByte,
    transfers,
    transferIdleRss,
    transferPeak,
    bareIdleRss,
    barePeak,
    concurrentLists,
    patch,
    notes,
    commands,
  });
  process.stdout.write(`${report}\n`);
  const outDir = SMOKE ? scratch : args.out;
  mkdirSync(outDir, { recursive: true });
  const date = new Date().toISOString().slice(0, 10);
  const resultFile = resultFilePath(outDir, date, existsSync);
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
      target: {
        ratio: 0.45,
        cpu: 70,
        p99: 6,
        relative: [{ measure: 'cpu', of: 'get-express', max: 1.1, source: 'issue 9' }],
      },
    },
    {
      id: 'get-legacy',
      label: 'GET mission, shim, legacy client (patched)',
      via: 'shim',
      group: 'get',
      load: { url: `${shim}${get}`, headers: LEGACY },
      target: {
        ratio: 0.4,
        p99: 6,
        relative: [{ measure: 'cpu', of: 'get-express', max: 1.25, source: 'issue 9' }],
      },
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
      label: ALIAS_LAYER
        ? 'POST /missions `tags`, shim, legacy (rewritten)'
        : 'POST /missions `metadata`, shim, legacy (no alias layer)',
      via: 'shim',
      group: 'post',
      load: ALIAS_LAYER ? post('tags', LEGACY) : { ...post('metadata', LEGACY), url: `${shim}/missions` },
      target: { ratio: 0.35, p99: 6 },
    },
  ];
  for (const items of LIST_SIZES) {
    const path = `/debug/json?items=${items}`;
    const passThrough = `list${items}-current`;
    loads.push(
      {
        id: `list${items}-direct`,
        label: `list of ${items}, direct`,
        via: 'direct',
        group: `list${items}`,
        load: { url: `${direct}${path}`, headers: API_KEY },
      },
      ...(items === PASS_THROUGH_LIST
        ? [
            {
              id: passThrough,
              label: `list of ${items}, shim, 1.0 client (pass-through)`,
              via: 'shim',
              group: `list${items}`,
              load: { url: `${shim}${path}`, headers: CURRENT },
            } satisfies Load,
          ]
        : []),
      {
        id: `list${items}-legacy`,
        label: `list of ${items}, shim, legacy (patched)`,
        via: 'shim',
        group: `list${items}`,
        load: { url: `${shim}${path}`, headers: LEGACY },
        ...(items === PASS_THROUGH_LIST
          ? {
              target: {
                relative: [
                  { measure: 'rps', of: passThrough, min: 0.5, source: 'issue 9' },
                  { measure: 'p99', of: passThrough, max: 2, source: 'issue 9' },
                  { measure: 'rps', of: `list${EQUAL_OUTPUT_LIST}-current`, source: 'context' },
                ],
              },
            }
          : {}),
      },
    );
  }
  const equalOutput = `/debug/json?items=${EQUAL_OUTPUT_LIST}`;
  loads.push(
    {
      id: `list${EQUAL_OUTPUT_LIST}-direct`,
      label: `list of ${EQUAL_OUTPUT_LIST} (the patched list of ${PASS_THROUGH_LIST}'s size), direct`,
      via: 'direct',
      group: `list${EQUAL_OUTPUT_LIST}`,
      load: { url: `${direct}${equalOutput}`, headers: API_KEY },
    },
    {
      id: `list${EQUAL_OUTPUT_LIST}-current`,
      label: `list of ${EQUAL_OUTPUT_LIST} (the patched list of ${PASS_THROUGH_LIST}'s size), shim, 1.0 client (pass-through)`,
      via: 'shim',
      group: `list${EQUAL_OUTPUT_LIST}`,
      load: { url: `${shim}${equalOutput}`, headers: CURRENT },
    },
  );
  return loads;
}

/** Creates a mission of about 1.5 KB (the issue's reference payload) with one metadata entry per type. */
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

/**
 * Idle RSS of the shim process as `npm start` runs it: `node <flags> dist/main.js --demo` without
 * `UPSTREAM_URL`, so the reference backend runs as its child process (not counted), 3 s after ready.
 * `undefined` when the reference backend is not built (`reference-backend/dist/`).
 */
async function measureNpmStartIdle(flags: readonly string[]): Promise<number | undefined> {
  if (!existsSync('reference-backend/dist/main.js')) return undefined;
  const port = await freePort();
  const admin = await freePort();
  const env: Record<string, string> = { PORT: String(port), ADMIN_PORT: String(admin), HOST: '127.0.0.1' };
  const demo = await startProcess({
    name: 'shim-npm-start',
    nodeArgs: [...flags, 'dist/main.js', '--demo'],
    env,
    cpus: SHIM_CPUS,
    readyUrl: `http://127.0.0.1:${admin}/healthz`,
    url: `http://127.0.0.1:${port}`,
    scratch,
  });
  await sleep(3000);
  const rss = demo.rss();
  await demo.stop();
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

/** One process under 32 concurrent 1.4 MB lists: RSS idle and peak (bytes), wrk's result, CPU µs/req. */
interface ListsRun {
  idle: number;
  peak: number;
  result: WrkResult;
  cpu: number;
}

interface ReportInput {
  loads: Load[];
  samples: Map<string, LoadSample[]>;
  idleRss: number;
  npmStartIdleRss: number | undefined;
  shimFlags: string[];
  loadPeakRss: number;
  afterLoadRss: number;
  firstByte: Record<FirstByteVia, FirstByteResult[]>;
  transfers: Record<'download' | 'upload', Record<TransferVia, TransferResult[]>>;
  transferIdleRss: number;
  transferPeak: { download: number; upload: number };
  bareIdleRss: number;
  barePeak: { download: number; upload: number };
  concurrentLists: Record<'patched' | 'passThrough' | 'bare' | 'patchedGzip' | 'passThroughGzip', ListsRun>;
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
  const figure = (s: LoadSample, measure: RelativeTarget['measure']) =>
    measure === 'cpu' ? s.proxyCpu : measure === 'rps' ? s.wrk.rps : s.wrk.p99;
  const measureName = { cpu: 'proxy CPU/req', rps: 'req/s', p99: 'p99' };
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
    const target = load.target;
    if (target === undefined) continue;
    for (const rel of target.relative ?? []) {
      const other = loads.find((l) => l.id === rel.of)!;
      const theirs = samples.get(rel.of)!;
      // Round by round: both loads ran a few seconds apart in the same round.
      const r = median(own.map((s, i) => figure(s, rel.measure) / figure(theirs[i]!, rel.measure)));
      const bound =
        rel.max !== undefined
          ? `≤ ${rel.max.toFixed(2)}×`
          : rel.min !== undefined
            ? `≥ ${rel.min.toFixed(2)}×`
            : 'compared with';
      targets.push([
        `${load.label}: ${measureName[rel.measure]} ${bound} ${other.label} (${rel.source})`,
        `${fixed(r, 2)}× (${fixed(median(own.map((s) => figure(s, rel.measure))), rel.measure === 'p99' ? 2 : 0)} / ${fixed(median(theirs.map((s) => figure(s, rel.measure))), rel.measure === 'p99' ? 2 : 0)})`,
        rel.max !== undefined
          ? verdict(r <= rel.max)
          : rel.min !== undefined
            ? verdict(r >= rel.min)
            : 'context',
      ]);
    }
    if (target.ratio !== undefined)
      targets.push([
        `${load.label}: ratio to direct ≥ ${target.ratio} (issue 5)`,
        fixed(ratio, 3),
        verdict(ratio >= target.ratio),
      ]);
    if (target.cpu !== undefined)
      targets.push([
        `${load.label}: shim CPU ≤ ${target.cpu} µs/req (issue 5, absolute)`,
        fixed(cpu, 0),
        verdict(cpu <= target.cpu),
      ]);
    if (target.p99 !== undefined)
      targets.push([
        `${load.label}: p99 ≤ ${target.p99} ms (issue 5)`,
        fixed(p99, 2),
        verdict(p99 <= target.p99),
      ]);
  }

  // Time to first byte of the 10 MB list.
  const fb = input.firstByte;
  const fbMedian = (via: FirstByteVia, key: keyof FirstByteResult) => median(fb[via].map((r) => r[key]));
  const firstByteRows = FIRST_BYTE_VIAS.map((via) => [
    via === 'direct'
      ? 'direct'
      : via === 'current'
        ? 'shim, 1.0 client (pass-through)'
        : 'shim, legacy client (patched)',
    fixed((fb[via][0]?.bytes ?? 0) / 1e6, 2),
    fixed(fbMedian(via, 'headMs'), 2),
    fixed(fbMedian(via, 'firstByteMs'), 2),
    fixed(fbMedian(via, 'totalMs'), 1),
  ]);
  const ttfbRatio = median(fb.legacy.map((r, i) => r.firstByteMs / fb.current[i]!.firstByteMs));
  targets.push([
    'first body byte of a 10 MB list, patched ≤ 2× pass-through (issue 9; median of per-pair ratios)',
    `${fixed(ttfbRatio, 2)}× (${fixed(fbMedian('legacy', 'firstByteMs'), 2)} / ${fixed(fbMedian('current', 'firstByteMs'), 2)} ms)`,
    verdict(ttfbRatio <= 2),
  ]);

  const transferRows: string[][] = [];
  for (const kind of ['download', 'upload'] as const) {
    const { direct, shim, bare } = input.transfers[kind];
    const ratio = median(shim.map((s, i) => s.mibPerSecond / direct[i]!.mibPerSecond));
    const bareRatio = median(bare.map((s, i) => s.mibPerSecond / direct[i]!.mibPerSecond));
    const peak = input.transferPeak[kind];
    transferRows.push([
      `${fixed(mib(TRANSFER_BYTES), 0)} MiB ${kind}`,
      fixed(median(direct.map((r) => r.mibPerSecond)), 0),
      fixed(median(shim.map((r) => r.mibPerSecond)), 0),
      fixed(ratio, 2),
      fixed(mib(peak), 0),
      `+${fixed(mib(peak - input.transferIdleRss), 0)}`,
      fixed(bareRatio, 2),
      `+${fixed(mib(input.barePeak[kind] - input.bareIdleRss), 0)}`,
    ]);
    targets.push([`${kind}: throughput ratio ≥ 0.9 (issue 5)`, fixed(ratio, 3), verdict(ratio >= 0.9)]);
    targets.push([
      `${kind}: shim peak RSS ≤ idle + 40 MiB (issue 9)`,
      `+${fixed(mib(peak - input.transferIdleRss), 0)} MiB (${fixed(mib(input.transferIdleRss), 0)} → ${fixed(mib(peak), 0)})`,
      verdict(peak - input.transferIdleRss <= PEAK_ABOVE_IDLE),
    ]);
  }
  const lists = input.concurrentLists;
  const above = (run: ListsRun) => `+${fixed(mib(run.peak - run.idle), 0)} MiB`;
  targets.push([
    `${CONNECTIONS} concurrent patched 1.4 MB lists: shim peak RSS ≤ idle + 40 MiB (issue 9)`,
    `${above(lists.patched)} (${fixed(mib(lists.patched.idle), 0)} → ${fixed(mib(lists.patched.peak), 0)}); ` +
      `the same load passed through by the shim ${above(lists.passThrough)}, by the bare pipe ${above(lists.bare)}`,
    verdict(lists.patched.peak - lists.patched.idle <= PEAK_ABOVE_IDLE),
  ]);
  const gzipRun = (run: ListsRun) =>
    `${run.result.rps.toFixed(0)} req/s, ${fixed(run.cpu, 0)} µs/req, ${above(run)}`;
  targets.push([
    `(context) ${CONNECTIONS} concurrent gzipped 1.4 MB lists: patched (decoded, patched, encoded again) against passed through`,
    `${gzipRun(lists.patchedGzip)}; passed through ${gzipRun(lists.passThroughGzip)}`,
    'no target',
  ]);
  targets.push([
    `idle RSS of the shim, \`node ${[...input.shimFlags, 'dist/main.js'].join(' ')}\``,
    `${fixed(mib(input.idleRss), 0)} MiB`,
    'see below',
  ]);
  if (input.npmStartIdleRss !== undefined)
    targets.push([
      "idle RSS of `npm start`'s shim process ≤ 90 MiB (issue 9)",
      `${fixed(mib(input.npmStartIdleRss), 0)} MiB`,
      verdict(input.npmStartIdleRss <= 90 * MIB),
    ]);
  const p = input.patch[0];
  const patchRate = median(input.patch.map((r) => r.mbPerSecond));
  if (p) {
    targets.push([
      'JSON patch ≥ 200 MB/s on a 1 MB list (issue 5)',
      `${fixed(patchRate, 0)} MB/s`,
      verdict(patchRate >= 200),
    ]);
  }
  const flags = input.shimFlags.length > 0 ? `${input.shimFlags.join(' ')} ` : '';
  const memory = [
    [
      `idle, \`node ${flags}dist/main.js\` (the image's command; \`UPSTREAM_URL\` set)`,
      fixed(mib(input.idleRss), 0),
    ],
    ...(input.npmStartIdleRss === undefined
      ? []
      : [
          [
            `idle, \`npm start\` (\`node ${flags}dist/main.js --demo\`; the reference backend is its child, not counted)`,
            fixed(mib(input.npmStartIdleRss), 0),
          ],
        ]),
    ['peak during the request loads', fixed(mib(input.loadPeakRss), 0)],
    ['after the request loads', fixed(mib(input.afterLoadRss), 0)],
    ['fresh shim before the transfers (their idle)', fixed(mib(input.transferIdleRss), 0)],
    ...(
      [
        ['patched', 'fresh shim', 'patched, legacy client'],
        ['passThrough', 'fresh shim', 'passed through, 1.0 client'],
        ['bare', "fresh bare pipe (the shim's V8 flags)", 'the same bytes'],
      ] as const
    ).map(([key, who, what]) => {
      const run = lists[key];
      return [
        `${who}, idle → peak under ${CONNECTIONS} concurrent 1.4 MB lists (${what}; ${fixed(run.result.rps, 0)} req/s, ${fixed(run.cpu, 0)} µs/req, p99 ${fixed(run.result.p99, 1)} ms)`,
        `${fixed(mib(run.idle), 0)} → ${fixed(mib(run.peak), 0)}`,
      ];
    }),
  ];
  const env = describeEnvironment();
  return [
    `Run: ${new Date().toISOString()}${SMOKE ? ' — **smoke run** (1 s loads, one round; figures not meaningful)' : ''}. ` +
      `wrk, 1 thread, ${CONNECTIONS} keep-alive connections, ${DURATION} s per load, ${ROUNDS} interleaved round(s), medians. ` +
      (PINNED
        ? 'Pinned: wrk, upstream and this script on core 0, shim (and the calibration proxies) on core 1.'
        : 'Not pinned (fewer than 2 cores or no taskset).') +
      ` Load average (1 min) at start / end: ${fixed(LOAD_AT_START, 2)} / ${fixed(loadavg()[0], 2)} on ` +
      `${cpus().length} cores (more than the cores means other work competed with the run). ` +
      `Shim: the bundle \`dist/main.js\`, \`node ${flags}dist/main.js\` (the flags of \`npm start\` and the image).`,
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
    `10 MB list (${TEN_MB_ITEMS.toLocaleString('en')} missions), one fresh connection per request, ${FIRST_BYTE_SAMPLES} interleaved samples each, medians:`,
    '',
    markdownTable(['10 MB list', 'MB', 'head ms', 'first body byte ms', 'last byte ms'], firstByteRows),
    '',
    markdownTable(
      [
        'transfer',
        'direct MiB/s',
        'shim MiB/s',
        'ratio',
        'shim peak RSS MiB',
        'shim above idle MiB',
        'bare pipe ratio',
        'bare pipe above idle MiB',
      ],
      transferRows,
    ),
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
