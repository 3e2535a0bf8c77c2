/**
 * Route labels no client can exhaust (issue 10 item 5): 10,000 distinct garbage paths sent with one
 * API key — which the shim admits, as it admits any non-empty key — must leave the real routes
 * labelled in `/metrics`, whether the upstream answers the garbage with 400 (a validating backend) or
 * with 200 (a catch-all, e.g. a single-page app's index): here it answers half of them each way. The rules (RouteLabels in
 * src/observability/metrics.ts, docs/operations.md "Route labels"): only an upstream 2xx/3xx teaches a
 * class, one consumer introduces at most 50, at most 200 in all.
 */
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ROUTE_LABEL_LIMITS } from '../../src/observability/metrics.ts';
import { pipelinedGets } from '../helpers/http.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const GARBAGE = 10_000;
const REAL = ['/user/me', '/missions', '/missions/5f0c2a64-1b1e-4c2d-9a4b-0f0e9d8c7b6a', '/projects'];
const REAL_LABELS = ['/user/me', '/missions', '/missions/:id', '/projects'];

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/**
 * An upstream that knows {@link REAL} and answers every other path with 400 when it ends in `e` (an
 * even one of {@link garbagePaths}), else 200. Raw TCP rather than `node:http` (the shim sends it only GETs without a body): the
 * test's CPU goes to the shim, not to a second HTTP server in the same process.
 */
async function startUpstream(): Promise<string> {
  const known = new Set(REAL);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let buffered = '';
    socket.on('error', () => {});
    socket.on('data', (data: Buffer) => {
      buffered += data.toString('latin1');
      let out = '';
      for (let end = buffered.indexOf('\r\n\r\n'); end >= 0; end = buffered.indexOf('\r\n\r\n')) {
        const target = buffered.slice(0, buffered.indexOf('\r\n')).split(' ')[1] ?? '/';
        buffered = buffered.slice(end + 4);
        const path = target.split('?', 1)[0] as string;
        const ok = known.has(path) || path === '/api/health' || !path.endsWith('e');
        out += `HTTP/1.1 ${ok ? '200 OK' : '400 Bad Request'}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`;
      }
      if (out) socket.write(out);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((r) => server.close(r));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * GETs every path through the shim with `key`, pipelined on 32 keep-alive connections (10,000 requests
 * one `http.get` at a time took seconds of client work alone); returns how many got each status.
 */
async function getAll(stack: Stack, paths: readonly string[], key: string): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  const each = await pipelinedGets(stack.url, paths, { 'service-client-version': '1.2.0', 'x-api-key': key });
  for (const status of each) statuses.set(status, (statuses.get(status) ?? 0) + 1);
  return statuses;
}

/** Route label values of `shim_requests_total` as scraped from the runtime's admin listener. */
async function scrapedRoutes(stack: Stack): Promise<Set<string>> {
  const text = await (await fetch(`${stack.adminUrl}/metrics`)).text();
  return new Set([...text.matchAll(/^shim_requests_total\{route="([^"]*)"/gm)].map((m) => m[1] as string));
}

/** `n` in letters only (base 26, `a`–`z`): a segment with a digit is an identifier, one class for all. */
const letters = (n: number): string =>
  [...n.toString(26)].map((d) => 'abcdefghijklmnopqrstuvwxyz'[Number.parseInt(d, 26)]).join('');

/** Distinct three-segment paths without a digit, each its own class; odd ones end in `o`, even in `e`. */
const garbagePaths = Array.from(
  { length: GARBAGE },
  (_, i) => `/scan-${letters(i)}x/${letters(i * 7919)}y/z${letters(i)}${i % 2 === 0 ? 'e' : 'o'}`,
);

describe('route labels against 10,000 garbage paths from one key', () => {
  it('leave the real routes labelled, whether the upstream answers them 400 or 200', async () => {
    // LOG_LEVEL warn: 10,000 request log lines are not what this test is about.
    const stack = await startStack({ UPSTREAM_URL: await startUpstream(), LOG_LEVEL: 'warn' });
    closers.push(() => stack.close());

    // Half the real routes are learned before the scan, half after it.
    expect(await getAll(stack, REAL.slice(0, 2), 'app-key')).toEqual(new Map([[200, 2]]));
    const scan = await getAll(stack, garbagePaths, 'scanner-key');
    expect(scan).toEqual(
      new Map([
        [400, GARBAGE / 2],
        [200, GARBAGE / 2],
      ]),
    );
    expect(await getAll(stack, REAL.slice(2), 'app-key')).toEqual(new Map([[200, 2]]));

    const routes = await scrapedRoutes(stack);
    for (const label of REAL_LABELS) expect(routes, label).toContain(label);
    expect(routes).toContain('other');
    const scannerLabels = [...routes].filter((r) => r.startsWith('/scan-'));
    // A 400 teaches nothing; a 200 teaches at most the scanner's own budget.
    expect(scannerLabels.length).toBe(ROUTE_LABEL_LIMITS.maxPerConsumer);
    for (const label of scannerLabels) expect(label.at(-1), label).toBe('o');
    expect(routes.size).toBeLessThanOrEqual(REAL_LABELS.length + ROUTE_LABEL_LIMITS.maxPerConsumer + 1);
  });
});
