/**
 * Reliability under load: 1,000 concurrent keep-alive client connections through a shim process, in
 * front of an upstream that holds every response 300 ms, so that all 1,000 exchanges are in flight at
 * once (the upstream counts them): three rounds on the same 1,000 client connections.
 *
 * No error responses, every body the one for its own request, every client connection reused across
 * rounds, and the shim's peak RSS recorded. The same load by legacy clients on patched and rewritten
 * routes: `aliases-reliability-concurrency.test.ts`.
 */
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CONNECTIONS,
  cleanup,
  keepAliveAgent,
  ROUNDS,
  round,
  runCleanup,
  startShim,
} from '../helpers/load.ts';

afterAll(runCleanup);

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
});
