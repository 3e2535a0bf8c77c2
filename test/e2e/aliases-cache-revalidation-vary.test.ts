/**
 * Revalidation through a shared cache in front of the shim (RFC 9111 §4.3.4): a cache that revalidates
 * a stored response sends the stored `ETag` in `If-None-Match` with the request that found it stale,
 * and replaces each stored header field with the one the 304 carries (§3.2). An Express service with
 * `compression` sends `Vary: Accept-Encoding` on its 200 and none on its 304 (the 304 has no
 * `Content-Type`, which compression's filter needs). The shim added its `Vary: Service-Client-Version`
 * to that 304 too, so the cache's stored `Vary: Accept-Encoding, Service-Client-Version` became
 * `Vary: Service-Client-Version`: the stored gzip body then matched every request of that client
 * version, and went to clients that do not accept gzip.
 *
 * Found with Varnish 7.1 (`http_gzip_support=off`) in front of the shim (2026-11-26): docs/reliability.md
 * fix 56. Here the cache is a model of what RFC 9111 has it do (test/helpers/shared-cache.ts), over real
 * sockets to the shim and a small Express-like upstream.
 */
import http, { type OutgoingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { entityTags } from '../../src/core/validators.ts';
import { send } from '../helpers/http.ts';
import {
  type CacheableUpstream,
  servable,
  startCacheableUpstream,
  updatedBy304,
  varyMembers,
} from '../helpers/shared-cache.ts';
import { CURRENT, LEGACY, type Stack, startStack } from '../helpers/stack.ts';

let stack: Stack | undefined;
let upstream: CacheableUpstream | undefined;
afterEach(async () => {
  await stack?.close();
  await upstream?.close();
  stack = undefined;
  upstream = undefined;
});

async function start(varyOn304 = false): Promise<Stack> {
  upstream = await startCacheableUpstream({ varyOn304 });
  stack = await startStack({ UPSTREAM_URL: upstream.url, SERVICE_VERSION: '0.60.0' });
  return stack;
}

describe('a cache revalidating a stored response through the shim (RFC 9111 §4.3.4)', () => {
  it.each([
    ['a legacy client (patched: weak tag)', LEGACY],
    ['a current client (passed through)', CURRENT],
  ])(
    '%s: the stored Vary keeps Accept-Encoding after the 304, so gzip goes only to gzip clients',
    async (_who, client) => {
      const { url } = await start();
      const fetchedWith: OutgoingHttpHeaders = { ...client, 'accept-encoding': 'gzip' };
      const first = await send(url, 'GET', '/missions', fetchedWith);
      expect(first.status).toBe(200);
      expect(first.headers['content-encoding']).toBe('gzip');
      expect(varyMembers(first.headers)).toEqual(['accept-encoding', 'service-client-version']);
      let stored = { status: first.status, headers: first.headers };

      // Stale: the cache asks with the stored validator and the same request headers.
      const notModified = await send(url, 'GET', '/missions', {
        ...fetchedWith,
        'if-none-match': String(first.headers.etag),
      });
      expect(notModified.status).toBe(304);
      // The patched variant's tag goes upstream as the upstream's, unmarked and strong (src/core/validators.ts).
      const sent = String(first.headers.etag);
      expect(upstream?.requests.at(-1)?.headers['if-none-match']).toBe(
        sent.endsWith('+patched"') ? sent.replace(/^W\//, '').replace(/\+patched"$/, '"') : sent,
      );
      stored = updatedBy304(stored, notModified);

      expect(varyMembers(stored.headers)).toEqual(['accept-encoding', 'service-client-version']);
      // A client of the same version that does not accept gzip is not served the stored gzip body …
      expect(servable(stored, fetchedWith, { ...client })).toBe(false);
      // … the same client again is, and a client of the other version is not.
      expect(servable(stored, fetchedWith, fetchedWith)).toBe(true);
      const other = client === LEGACY ? CURRENT : LEGACY;
      expect(servable(stored, fetchedWith, { ...other, 'accept-encoding': 'gzip' })).toBe(false);
      // The 304 carries the validator the 200 carried (SPEC §6).
      expect(notModified.headers.etag).toBe(first.headers.etag);
    },
  );

  // Apache Traffic Server 9.2 revalidates with the stored tag's `W/` dropped, and its stored date too:
  // weakly the same tag (RFC 9110 §8.8.3.2). The shim dropped it, and with it the date (fix 159), so every
  // stale legacy copy was fetched and patched again in full.
  it('a legacy copy revalidated with the strong spelling of its tag (as Traffic Server sends it) gets its 304', async () => {
    const { url } = await start();
    const first = await send(url, 'GET', '/missions', LEGACY);
    const tag = String(first.headers.etag);
    expect(tag).toMatch(/^W\/".*\+patched"$/);
    const notModified = await send(url, 'GET', '/missions', {
      ...LEGACY,
      'if-none-match': tag.slice(2),
      'if-modified-since': new Date().toUTCString(),
    });
    expect(notModified.status).toBe(304);
    expect(notModified.headers.etag).toBe(tag);
    expect(upstream?.requests.at(-1)?.headers['if-none-match']).toBe(
      tag.slice(2).replace(/\+patched"$/, '"'),
    );
  });

  // RFC 9110 §13.1.2 wants weak comparison, but lighttpd 1.4's mod_deflate compares strongly, against the
  // first tag only, and many hand-written handlers compare the whole field as a string: given `W/"x"`, a
  // legacy client's revalidation never got its 304 from them (fix 161). The upstream's strong tag goes
  // unmarked and strong.
  it.each<[string, (field: string | undefined, etag: string) => boolean]>([
    ['strongly, first tag only (lighttpd mod_deflate)', (field, etag) => entityTags(field)[0] === etag],
    ['the whole field as a string', (field, etag) => field === etag],
  ])('a legacy copy revalidated through an upstream that compares %s gets its 304', async (_how, matches) => {
    const strict = http.createServer((req, res) => {
      const etag = '"1391839005-gzip"';
      if (matches(req.headers['if-none-match'], etag)) res.writeHead(304, { ETag: etag }).end();
      else res.writeHead(200, { 'Content-Type': 'application/json', ETag: etag }).end('{"metadata":{"a":1}}');
    });
    await new Promise<void>((resolve) => strict.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = strict.address() as AddressInfo;
      stack = await startStack({ UPSTREAM_URL: `http://127.0.0.1:${port}` }); // closed by afterEach
      const { url } = stack;
      const first = await send(url, 'GET', '/missions/m1', LEGACY);
      expect(first.text).toBe('{"metadata":{"a":1},"tags":{"a":1}}');
      const tag = String(first.headers.etag);
      expect(tag).toBe('W/"1391839005-gzip+patched"');
      for (const sent of [tag, tag.slice(2)]) {
        const again = await send(url, 'GET', '/missions/m1', { ...LEGACY, 'if-none-match': sent });
        expect(again.status).toBe(304);
        expect(again.headers.etag).toBe(tag);
      }
    } finally {
      strict.closeAllConnections();
      await new Promise((resolve) => strict.close(resolve));
    }
  });

  it('an upstream 304 that names its Vary gets the client-version header merged in, as its 200', async () => {
    const { url } = await start(true);
    const first = await send(url, 'GET', '/missions', { ...LEGACY, 'accept-encoding': 'gzip' });
    const notModified = await send(url, 'GET', '/missions', {
      ...LEGACY,
      'accept-encoding': 'gzip',
      'if-none-match': String(first.headers.etag),
    });
    expect(notModified.status).toBe(304);
    expect(notModified.headers.vary).toBe(first.headers.vary);
    expect(notModified.headers.vary).toBe('Accept-Encoding, Service-Client-Version');
  });
});
