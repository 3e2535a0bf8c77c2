/**
 * The core's own dependence on the client version, for a shared cache in front (RFC 9110 §12.5.5,
 * RFC 9111 §4.1). The shim adds `Warning: 299 - "client 0.59.0 is older than service 0.60.0; please
 * upgrade"` to every response of an admitted client below the service version, alias layer or not;
 * yet `Vary: Service-Client-Version` came only from the alias layer. With `ALIASES=off`, and after the
 * layer is deleted at 1.0, a cache stored a 0.59.0 client's response with that warning and served it
 * to 1.0.0 clients (and a 1.0.0 client's, without it, to 0.59.0 clients).
 *
 * Found with Varnish 7.1 in front of a shim with `ALIASES=off` (2026-11-26): docs/reliability.md fix 57.
 * The cache is a model of RFC 9111 (test/helpers/shared-cache.ts) over real sockets.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import {
  type CacheableUpstream,
  servable,
  startCacheableUpstream,
  storable,
  updatedBy304,
  varyMembers,
} from '../helpers/shared-cache.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const OLD = { 'service-client-version': '0.59.0', 'x-api-key': 'test-key' };
const NEW = { 'service-client-version': '1.0.0', 'x-api-key': 'test-key' };

let stack: Stack | undefined;
let upstream: CacheableUpstream | undefined;
afterEach(async () => {
  await stack?.close();
  await upstream?.close();
  stack = undefined;
  upstream = undefined;
});

async function start(): Promise<Stack> {
  upstream = await startCacheableUpstream();
  stack = await startStack({ UPSTREAM_URL: upstream.url, SERVICE_VERSION: '0.60.0', ALIASES: 'off' });
  return stack;
}

describe('the outdated-client Warning and a shared cache, without the alias layer', () => {
  it.each([
    ['an old client first', OLD, NEW],
    ['a new client first', NEW, OLD],
  ])('%s: its stored response is never served to the other version', async (_order, first, second) => {
    const { url } = await start();
    const stored = await send(url, 'GET', '/missions', first);
    expect(stored.status).toBe(200);
    expect(storable(stored)).toBe(true);
    expect(stored.headers.warning !== undefined).toBe(first === OLD);
    expect(varyMembers(stored.headers)).toContain('service-client-version');
    expect(servable(stored, first, second)).toBe(false);
    expect(servable(stored, first, first)).toBe(true);
    // What the other version gets from the shim itself.
    const own = await send(url, 'GET', '/missions', second);
    expect(own.headers.warning !== undefined).toBe(second === OLD);
  });

  it('a 304 to a revalidation leaves the stored Vary whole', async () => {
    const { url } = await start();
    const first = await send(url, 'GET', '/missions', { ...OLD, 'accept-encoding': 'gzip' });
    const notModified = await send(url, 'GET', '/missions', {
      ...OLD,
      'accept-encoding': 'gzip',
      'if-none-match': String(first.headers.etag),
    });
    expect(notModified.status).toBe(304);
    const updated = updatedBy304({ status: first.status, headers: first.headers }, notModified);
    expect(varyMembers(updated.headers)).toEqual(['accept-encoding', 'service-client-version']);
  });

  it('a public path reads no client version: Vary as the upstream sent it', async () => {
    const { url } = await start();
    const health = await send(url, 'GET', '/api/health', OLD);
    expect(health.headers.warning).toBeUndefined();
    expect(varyMembers(health.headers)).toEqual(['accept-encoding']);
  });
});
