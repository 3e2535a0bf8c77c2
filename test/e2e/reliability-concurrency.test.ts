/**
 * Reliability under load: 1,000 concurrent keep-alive client connections through a shim process.
 *
 * 1. In front of an upstream that holds every response 300 ms, so that all 1,000 exchanges are in
 *    flight at once (the upstream counts them): three rounds on the same 1,000 client connections.
 * 2. In front of the embedded reference backend, 1,000 legacy clients at once on patched and rewritten
 *    routes (GET /missions, GET /files?tags=…), three rounds.
 *
 * No error responses, every body the one for its own request, every client connection reused across
 * rounds, and the shim's peak RSS recorded.
 */
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { type ShimProcess, spawnShim } from '../helpers/spawn-shim.ts';

const CONNECTIONS = 1_000;
const ROUNDS = 3;

const cleanup: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** An upstream that answers every request after `delayMs`, counting how many it holds at once. */
async function holdingUpstream(delayMs: number) {
  let inFlight = 0;
  let peak = 0;
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    inFlight++;
    peak = Math.max(peak, inFlight);
    setTimeout(() => {
      inFlight--;
      const body = JSON.stringify({ url: req.url });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    }, delayMs);
  });
  server.listen(0, '127.0.0.1', 2048);
  await once(server, 'listening');
  cleanup.push(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, peak: () => peak };
}

interface Outcome {
  status: number;
  body: string;
  reused: boolean;
}

/** Sends `paths[i]` on connection `i` of a keep-alive agent with exactly `CONNECTIONS` sockets. */
function round(
  agent: http.Agent,
  base: string,
  paths: string[],
  headers: Record<string, string>,
): Promise<Outcome[]> {
  return Promise.all(
    paths.map(
      (path) =>
        new Promise<Outcome>((resolve) => {
          const req = http.get(`${base}${path}`, { agent, headers }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => {
              body += d;
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body, reused: req.reusedSocket }));
            res.on('error', () => resolve({ status: -1, body, reused: req.reusedSocket }));
          });
          req.on('error', (err) => resolve({ status: -1, body: String(err), reused: false }));
        }),
    ),
  );
}

function keepAliveAgent(): { agent: http.Agent; sockets: Set<Socket> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS, maxFreeSockets: CONNECTIONS });
  const sockets = new Set<Socket>();
  const createConnection = agent.createConnection.bind(agent);
  agent.createConnection = ((...args: Parameters<typeof createConnection>) => {
    const socket = createConnection(...args) as Socket;
    sockets.add(socket);
    return socket;
  }) as typeof agent.createConnection;
  cleanup.push(async () => agent.destroy());
  return { agent, sockets };
}

async function startShim(env: Record<string, string>): Promise<ShimProcess> {
  const shim = await spawnShim({ LOG_LEVEL: 'info', ...env });
  cleanup.push(() => shim.stop());
  return shim;
}

describe(`${CONNECTIONS} concurrent keep-alive connections`, () => {
  it('all in flight at once through the shim, three rounds on the same connections, no errors', async () => {
    const upstream = await holdingUpstream(300);
    const shim = await startShim({ UPSTREAM_URL: upstream.url });
    const { agent, sockets } = keepAliveAgent();
    const headers = { 'service-client-version': '1.0.0', 'x-api-key': 'k' };
    const started = performance.now();
    for (let r = 0; r < ROUNDS; r++) {
      const paths = Array.from({ length: CONNECTIONS }, (_, i) => `/missions/${r}-${i}`);
      const outcomes = await round(agent, shim.url, paths, headers);
      const failed = outcomes.filter((o) => o.status !== 200);
      expect(failed, JSON.stringify(failed.slice(0, 3))).toEqual([]);
      for (const [i, o] of outcomes.entries()) expect(JSON.parse(o.body)).toEqual({ url: paths[i] });
      if (r > 0) expect(outcomes.every((o) => o.reused)).toBe(true);
    }
    const elapsed = performance.now() - started;
    expect(sockets.size).toBe(CONNECTIONS);
    // All 1,000 were held by the upstream at the same moment, so they crossed the shim concurrently.
    expect(upstream.peak()).toBe(CONNECTIONS);
    console.info(
      `${CONNECTIONS} connections × ${ROUNDS} rounds (upstream holds 300 ms): ${(elapsed / 1000).toFixed(2)} s, ` +
        `upstream peak in flight ${upstream.peak()}, shim peak RSS ${(shim.peakRss() / 1e6).toFixed(1)} MB`,
    );
    expect(shim.peakRss()).toBeLessThan(400 * 1000 * 1000);
  });

  it('1,000 legacy clients at once on patched and rewritten routes of the reference backend', async () => {
    const shim = await startShim({}); // UPSTREAM_URL unset: the embedded reference backend
    const { agent, sockets } = keepAliveAgent();
    const headers = { 'service-client-version': '0.59.0', 'x-api-key': 'k' };
    const latencies: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const paths = Array.from({ length: CONNECTIONS }, (_, i) =>
        i % 2 === 0 ? '/missions?take=5' : `/files?tags=e1000000-0000-4000-8000-00000000000${i % 3}&take=2`,
      );
      const t = performance.now();
      const outcomes = await round(agent, shim.url, paths, headers);
      latencies.push(performance.now() - t);
      const failed = outcomes.filter((o) => o.status !== 200);
      expect(failed, JSON.stringify(failed.slice(0, 3))).toEqual([]);
      for (const [i, o] of outcomes.entries()) {
        const body = JSON.parse(o.body) as { data: Array<Record<string, unknown>> };
        expect(body).toHaveProperty('data');
        if (i % 2 === 0) for (const m of body.data) expect(m.tags).toEqual(m.metadata);
      }
    }
    expect(sockets.size).toBe(CONNECTIONS);
    console.info(
      `${CONNECTIONS} legacy clients × ${ROUNDS} rounds on the reference backend: rounds took ` +
        `${latencies.map((l) => `${(l / 1000).toFixed(2)} s`).join(', ')}, shim peak RSS ${(shim.peakRss() / 1e6).toFixed(1)} MB`,
    );
  });
});
