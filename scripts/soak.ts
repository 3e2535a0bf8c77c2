/**
 * Soak test (docs/reliability.md): a shim process in front of the reference backend, driven at a steady
 * request rate for a fixed time with a realistic mix of legacy and current clients, bounded in requests
 * in flight. Reports latency percentiles, every non-2xx response or connection error, and the shim's
 * resident memory over time. Not part of `npm test` (it takes minutes); run it by hand:
 *
 *   npm run soak                                   # 5 minutes at 200 requests/s
 *   SOAK_SECONDS=60 SOAK_RATE=500 npm run soak     # shorter, hotter
 *
 * Environment: SOAK_SECONDS (300), SOAK_RATE requests/s (200), SOAK_CONNECTIONS keep-alive sockets
 * (64), SOAK_MAX_IN_FLIGHT (256; a request due while that many are open is counted as skipped, not
 * queued), SOAK_WARMUP_SECONDS (30; the RSS baseline is taken at its end), SOAK_OUT (a path to write
 * the JSON summary to). Exit code 1 when any request failed or RSS grew by 10 % or more after warm-up.
 * All traffic goes to 127.0.0.1. The reference backend is the NestJS package (reference-backend/); the
 * streaming legs left with its old diagnostics routes (streaming is measured by `npm run bench`).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { SEED_IDS, startReferenceBackend } from '@compat-shim/reference-backend';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 300);
const RATE = Number(process.env.SOAK_RATE ?? 200);
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 64);
const MAX_IN_FLIGHT = Number(process.env.SOAK_MAX_IN_FLIGHT ?? 256);
const WARMUP_SECONDS = Number(process.env.SOAK_WARMUP_SECONDS ?? Math.min(30, SECONDS / 5));
const REQUEST_TIMEOUT_MS = 10_000;
const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

const LEGACY = { 'service-client-version': '0.59.0', 'x-api-key': 'soak-key' };
const CURRENT = { 'service-client-version': '1.2.0', cookie: 'authtoken=a; refreshtoken=r' };
const types = SEED_IDS.metadataTypes;

/** One kind of request in the mix. */
interface Kind {
  name: string;
  weight: number;
  method: string;
  path: (i: number) => string;
  headers: Record<string, string>;
  body?: (i: number) => Buffer;
  /** Checks the response body; returns a problem or `undefined`. */
  check?: (status: number, body: Buffer) => string | undefined;
}

const json = (text: Buffer) => JSON.parse(text.toString('utf8')) as Record<string, unknown>;

const MIX: Kind[] = [
  {
    name: 'legacy GET /missions (patched)',
    weight: 30,
    method: 'GET',
    path: () => '/missions?take=20',
    headers: LEGACY,
    check: (status, body) => {
      const list = json(body).data as Array<Record<string, unknown>>;
      if (status !== 200) return `status ${status}`;
      for (const m of list)
        if (JSON.stringify(m.tags) !== JSON.stringify(m.metadata)) return 'tags differ from metadata';
      return undefined;
    },
  },
  {
    name: 'legacy GET /files?tags= (query rewrite)',
    weight: 15,
    method: 'GET',
    path: () => `/files?tags=${types.location}&take=10`,
    headers: LEGACY,
  },
  {
    name: 'legacy POST /missions {tags} (body rewrite)',
    weight: 10,
    method: 'POST',
    path: () => '/missions',
    headers: { ...LEGACY, 'content-type': 'application/json' },
    body: (i) =>
      Buffer.from(
        JSON.stringify({
          name: `soak-${i}`,
          projectUUID: SEED_IDS.projects.open,
          tags: { [types.weather]: 'rain' },
        }),
      ),
    check: (status, body) =>
      status === 201 && 'tags' in json(body) ? undefined : `status ${status} or no tags`,
  },
  {
    name: 'current GET /missions/:uuid',
    weight: 25,
    method: 'GET',
    path: () => `/missions/${SEED_IDS.missions.alpha}`,
    headers: CURRENT,
    check: (status, body) =>
      status === 200 && !('tags' in json(body)) ? undefined : `status ${status} or tags`,
  },
  { name: 'GET /api/health (public)', weight: 10, method: 'GET', path: () => '/api/health', headers: {} },
];
const TOTAL_WEIGHT = MIX.reduce((s, k) => s + k.weight, 0);

function pick(i: number): Kind {
  // Deterministic interleaving (golden-ratio sequence), so runs are comparable.
  let x = ((i * 0.6180339887498949) % 1) * TOTAL_WEIGHT;
  for (const k of MIX) {
    if (x < k.weight) return k;
    x -= k.weight;
  }
  return MIX[0] as Kind;
}

/** Spawns the shim and resolves with its front-door port once it listens. */
function spawnShim(upstream: string): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['--expose-gc', MAIN], {
    // Production log level: one line per request, read and discarded here (part of the cost measured).
    env: {
      ...process.env,
      UPSTREAM_URL: upstream,
      PORT: '0',
      ADMIN_PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /"port":(\d+)/.exec(out);
      if (!m) return;
      child.stdout?.off('data', onData);
      child.stdout?.resume(); // keep draining the request log
      resolve({ child, port: Number(m[1]) });
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`shim exited with ${code} before listening`)));
  });
}

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0) * 1024;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

async function main(): Promise<void> {
  const backend = await startReferenceBackend({ port: 0 });
  const { child, port } = await spawnShim(backend.url);
  const pid = child.pid as number;
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS, maxFreeSockets: CONNECTIONS });

  const latencies: number[] = [];
  const failures = new Map<string, number>();
  const byKind = new Map<string, number>();
  const rssSamples: Array<{ t: number; rss: number }> = [];
  let inFlight = 0;
  let skipped = 0;
  let issued = 0;
  let completed = 0;
  const fail = (what: string) => failures.set(what, (failures.get(what) ?? 0) + 1);

  const send = (i: number) => {
    const kind = pick(i);
    const body = kind.body?.(i);
    const started = performance.now();
    inFlight++;
    let responded = false;
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: kind.method,
        path: kind.path(i),
        agent,
        timeout: REQUEST_TIMEOUT_MS,
        headers: { ...kind.headers, ...(body ? { 'content-length': body.length } : {}) },
      },
      (res) => {
        responded = true;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          inFlight--;
          completed++;
          latencies.push(performance.now() - started);
          byKind.set(kind.name, (byKind.get(kind.name) ?? 0) + 1);
          const status = res.statusCode ?? 0;
          if (status >= 400) fail(`${kind.name}: HTTP ${status}`);
          else {
            try {
              const problem = kind.check?.(status, Buffer.concat(chunks));
              if (problem) fail(`${kind.name}: ${problem}`);
            } catch (err) {
              fail(`${kind.name}: unreadable body (${(err as Error).message})`);
            }
          }
        });
        res.on('error', (err) => {
          inFlight--;
          fail(`${kind.name}: response ${(err as NodeJS.ErrnoException).code ?? err.message}`);
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('client timeout')));
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (responded) return; // counted on the response
      inFlight--;
      fail(`${kind.name}: ${err.code ?? err.message}`);
    });
    req.end(body);
  };

  const startedAt = performance.now();
  const endAt = startedAt + SECONDS * 1000;
  let baseline = 0;
  console.log(
    `soak: ${SECONDS} s at ${RATE} req/s over ${CONNECTIONS} keep-alive connections (max ${MAX_IN_FLIGHT} in flight), ` +
      `warm-up ${WARMUP_SECONDS} s; shim pid ${pid}`,
  );
  const sampler = setInterval(() => {
    const t = (performance.now() - startedAt) / 1000;
    const rss = rssOf(pid);
    rssSamples.push({ t, rss });
    if (baseline === 0 && t >= WARMUP_SECONDS) baseline = rss;
    if (Math.round(t) % 30 < 5) {
      const errors = [...failures.values()].reduce((a, b) => a + b, 0);
      console.log(
        `  t=${t.toFixed(0)} s  sent ${issued}  done ${completed}  in flight ${inFlight}  errors ${errors}  ` +
          `skipped ${skipped}  shim RSS ${(rss / 1e6).toFixed(1)} MB`,
      );
    }
  }, 5_000);

  // Open loop: requests are due at a steady rate whatever the latency; bounded by MAX_IN_FLIGHT.
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      const now = performance.now();
      if (now >= endAt) {
        clearInterval(tick);
        resolve();
        return;
      }
      const due = Math.floor(((now - startedAt) / 1000) * RATE);
      while (issued < due) {
        if (inFlight >= MAX_IN_FLIGHT) {
          skipped++;
          issued++;
          continue;
        }
        send(issued++);
      }
    }, 5);
  });
  const drainUntil = performance.now() + REQUEST_TIMEOUT_MS + 1_000;
  while (inFlight > 0 && performance.now() < drainUntil) await new Promise((r) => setTimeout(r, 50));
  clearInterval(sampler);
  const finalRss = rssOf(pid);

  agent.destroy();
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  await backend.close();

  latencies.sort((a, b) => a - b);
  const after = rssSamples.filter((s) => s.t >= WARMUP_SECONDS);
  const peak = Math.max(...rssSamples.map((s) => s.rss));
  // Least-squares slope of RSS after warm-up, in MB per minute.
  const n = after.length;
  const mt = after.reduce((a, s) => a + s.t, 0) / n;
  const mr = after.reduce((a, s) => a + s.rss, 0) / n;
  const slope =
    after.reduce((a, s) => a + (s.t - mt) * (s.rss - mr), 0) /
    Math.max(
      1e-9,
      after.reduce((a, s) => a + (s.t - mt) ** 2, 0),
    );
  const errors = [...failures.values()].reduce((a, b) => a + b, 0);
  const growth = baseline > 0 ? (finalRss - baseline) / baseline : Number.NaN;
  const summary = {
    seconds: SECONDS,
    rate: RATE,
    connections: CONNECTIONS,
    requests: completed,
    achievedRate: Number((completed / SECONDS).toFixed(1)),
    skipped,
    errors,
    failures: Object.fromEntries(failures),
    latencyMs: {
      p50: Number(percentile(latencies, 50).toFixed(2)),
      p90: Number(percentile(latencies, 90).toFixed(2)),
      p99: Number(percentile(latencies, 99).toFixed(2)),
      p999: Number(percentile(latencies, 99.9).toFixed(2)),
      max: Number((latencies.at(-1) ?? Number.NaN).toFixed(2)),
    },
    rssMB: {
      afterWarmup: Number((baseline / 1e6).toFixed(1)),
      final: Number((finalRss / 1e6).toFixed(1)),
      peak: Number((peak / 1e6).toFixed(1)),
      growthPercent: Number((growth * 100).toFixed(1)),
      slopeMBPerMinute: Number(((slope * 60) / 1e6).toFixed(2)),
    },
    mix: Object.fromEntries(byKind),
  };
  console.log(JSON.stringify(summary, null, 2));
  if (process.env.SOAK_OUT) writeFileSync(process.env.SOAK_OUT, `${JSON.stringify(summary, null, 2)}\n`);
  const ok = errors === 0 && skipped === 0 && growth < 0.1;
  console.log(ok ? 'soak: PASS' : 'soak: FAIL');
  process.exit(ok ? 0 : 1);
}

await main();
