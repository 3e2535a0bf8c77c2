/**
 * Cache-poisoned denial of service (CPDoS; Nguyen, Lo Iacono, Federrath, CCS 2019, cpdos.org): an
 * attacker sends a request that a shared cache in front keys like a good one (same method, target and
 * `Vary`-named headers) but that the origin side refuses — a header too large for it (HTTP Header
 * Oversize), a control character in a header (HTTP Meta Character), a method override header (HTTP
 * Method Override) — and the cache stores the error page in place of the resource for everyone.
 *
 * Every response the shim makes itself — 400, 401, 417, 426, 431, 501, 502, 504 here; 413, 415, 503
 * and 408 come from the same `errorHead` — says `Cache-Control: no-store`, so a cache stores none of
 * them (RFC 9111 §5.2.2.5) and the good request after it reaches the shim. Method override headers are
 * none of the shim's business: it acts on the request line's method, and forwards the header as any
 * other (whether the upstream honours it is the upstream's choice; docs/operations.md, "Shared caches in
 * front", has what the operator strips at the cache). The cache is a model of RFC 9111's storage rule
 * (test/helpers/shared-cache.ts); Varnish 7.1, Squid 5.7 and nginx 1.22 were run by hand
 * (docs/reliability.md, "Shared caches in front").
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { send, sendRawUntilClose } from '../helpers/http.ts';
import { type CacheableUpstream, startCacheableUpstream, storable } from '../helpers/shared-cache.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const GOOD = { 'service-client-version': '1.0.0', 'x-api-key': 'test-key' };

let stack: Stack | undefined;
let upstream: CacheableUpstream | undefined;
let silent: Server | undefined;
afterEach(async () => {
  await stack?.close();
  await upstream?.close();
  silent?.closeAllConnections();
  await new Promise<void>((done) => (silent ? silent.close(() => done()) : done()));
  stack = undefined;
  upstream = undefined;
  silent = undefined;
});

async function start(env: Record<string, string> = {}): Promise<Stack> {
  upstream = await startCacheableUpstream();
  stack = await startStack({ UPSTREAM_URL: upstream.url, ...env });
  return stack;
}

/** Status and headers (lower-cased names) of the first response in raw text. */
function parseHead(raw: string): { status: number; headers: IncomingHttpHeaders } {
  const [statusLine = '', ...lines] = raw.slice(0, raw.indexOf('\r\n\r\n')).split('\r\n');
  const headers: IncomingHttpHeaders = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers };
}

const rawGet = (url: string, fields: string[]): Promise<string> =>
  sendRawUntilClose(
    url,
    ['GET /missions HTTP/1.1', `Host: ${new URL(url).host}`, ...fields, '', ''].join('\r\n'),
  );

describe('CPDoS: a refusal keyed like a good request is never stored', () => {
  it.each<[string, Record<string, string>, number]>([
    ['HTTP Header Oversize: one 20 KB header', { ...GOOD, 'x-oversize': 'a'.repeat(20_000) }, 431],
    [
      'HTTP Header Oversize: 2,100 small headers',
      Object.fromEntries([
        ...Object.entries(GOOD),
        ...Array.from({ length: 2_100 }, (_, i) => [`x-h${i}`, 'v']),
      ]),
      431,
    ],
    ['no Service-Client-Version', { 'x-api-key': 'test-key' }, 426],
    ['a malformed Service-Client-Version', { ...GOOD, 'service-client-version': 'v1.0' }, 426],
    ['Connection naming Service-Client-Version', { ...GOOD, connection: 'Service-Client-Version' }, 426],
    ['no credentials', { 'service-client-version': '1.0.0' }, 401],
    ['an unknown expectation', { ...GOOD, expect: 'nonsense' }, 417],
  ])('%s → %d, no-store; the good request after it is served', async (_attack, headers, status) => {
    const { url } = await start();
    const bad = await send(url, 'GET', '/missions', headers);
    expect(bad.status).toBe(status);
    expect(bad.headers['cache-control']).toBe('no-store');
    expect(storable(bad)).toBe(false);
    const good = await send(url, 'GET', '/missions', GOOD);
    expect(good.status).toBe(200);
    expect(storable(good)).toBe(true);
  });

  it.each([
    [
      'HTTP Meta Character: \\x01 in a header value',
      ['Service-Client-Version: 1.0.0', 'x-api-key: k', 'X-Meta: a\x01b'],
      400,
    ],
    [
      'HTTP Meta Character: a bare CR in a header',
      ['Service-Client-Version: 1.0.0', 'x-api-key: k', 'X-Meta: a\rb'],
      400,
    ],
    [
      'an upgrade (WebSocket)',
      ['Service-Client-Version: 1.0.0', 'x-api-key: k', 'Upgrade: websocket', 'Connection: Upgrade'],
      501,
    ],
  ])('%s → %d from the HTTP server, no-store', async (_attack, fields, status) => {
    const { url } = await start();
    const bad = parseHead(await rawGet(url, fields));
    expect(bad.status).toBe(status);
    expect(bad.headers['cache-control']).toBe('no-store');
    expect(storable(bad)).toBe(false);
    expect((await send(url, 'GET', '/missions', GOOD)).status).toBe(200);
  });

  it('a path hygiene refuses (dot segment) → 400, no-store', async () => {
    const { url } = await start();
    const bad = await send(url, 'GET', '/missions/%2e%2e/missions', GOOD);
    expect(bad.status).toBe(400);
    expect(storable(bad)).toBe(false);
  });

  it('an upstream that is down (502) or silent (504): no-store', async () => {
    silent = createServer(() => {});
    await new Promise<void>((done) => silent?.listen(0, '127.0.0.1', () => done()));
    const silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    stack = await startStack({ UPSTREAM_URL: silentUrl, UPSTREAM_TIMEOUT_MS: '200' });
    const timedOut = await send(stack.url, 'GET', '/missions', GOOD);
    expect(timedOut.status).toBe(504);
    expect(storable(timedOut)).toBe(false);
    await stack.close();
    const down = createServer();
    await new Promise<void>((done) => down.listen(0, '127.0.0.1', () => done()));
    const downUrl = `http://127.0.0.1:${(down.address() as AddressInfo).port}`;
    await new Promise<void>((done) => down.close(() => done()));
    stack = await startStack({ UPSTREAM_URL: downUrl });
    const refused = await send(stack.url, 'GET', '/missions', GOOD);
    expect(refused.status).toBe(502);
    expect(storable(refused)).toBe(false);
  });

  it.each(['X-HTTP-Method-Override', 'X-Method-Override', 'X-HTTP-Method'])(
    'HTTP Method Override: %s is forwarded as any header; the shim acts on the GET',
    async (name) => {
      const { url } = await start();
      const reply = await send(url, 'GET', '/missions', { ...GOOD, [name]: 'DELETE' });
      expect(reply.status).toBe(200);
      const seen = upstream?.requests.at(-1);
      expect(seen?.method).toBe('GET');
      expect(seen?.headers[name.toLowerCase()]).toBe('DELETE');
    },
  );
});
