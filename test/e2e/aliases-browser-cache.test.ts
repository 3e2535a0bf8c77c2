/**
 * A browser's HTTP cache in front of a legacy and a current client of the same page (an app upgraded
 * in place, or an old tab beside a new one): Chromium 150 keeps one stored response per URL and, when
 * the request's `Service-Client-Version` does not match the stored response's `Vary`, revalidates it
 * with the stored tag alone (`If-None-Match`, no `If-Modified-Since`); on a 304 it serves the stored
 * body. These tests replay those requests with node:http against an upstream that compares
 * `If-None-Match` weakly (RFC 9110 §13.1.2, as Express' `fresh` does), with a strong tag and with
 * Express' default weak one. Before fix 92 the patched variant's tag (`W/"v1"`) was weakly equal to the
 * upstream's (`"v1"`), and each client was given the other's body: a current client the legacy body
 * with `tags`, a legacy client the current body without them.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const CURRENT = { 'service-client-version': '1.0.0', 'x-api-key': 'k' };
const BODY = '{"data":[{"uuid":"m1","metadata":{"a":1}}],"count":1}';

describe.each([
  ['a strong tag', '"list-1"'],
  ["Express' default weak tag", 'W/"35-Yp0Jr3NyI0fBZkR8H2hX6w"'],
])('one browser cache, both client versions, the upstream sending %s', (_name, tag) => {
  let upstream: http.Server;
  let stack: Stack;
  beforeAll(async () => {
    upstream = http.createServer((req, res) => {
      const inm = (req.headers['if-none-match'] ?? '').split(',').map((t) => t.trim().replace(/^W\//, ''));
      const head = { etag: tag, 'cache-control': 'private, no-cache', vary: 'Accept-Encoding' };
      if (inm.includes(tag.replace(/^W\//, ''))) return res.writeHead(304, head).end();
      res.writeHead(200, { ...head, 'content-type': 'application/json; charset=utf-8' }).end(BODY);
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { port } = upstream.address() as AddressInfo;
    stack = await startStack({ UPSTREAM_URL: `http://127.0.0.1:${port}` });
  });
  afterAll(async () => {
    await stack.close();
    await new Promise((resolve) => upstream.close(resolve));
  });

  it('a current client revalidating the stored legacy response gets its own body, without tags', async () => {
    const legacy = await send(stack.url, 'GET', '/missions', LEGACY);
    expect(legacy.text).toContain('"tags"');
    const stored = String(legacy.headers.etag);
    // Chromium: Vary mismatch → the stored tag alone.
    const current = await send(stack.url, 'GET', '/missions', { ...CURRENT, 'if-none-match': stored });
    expect(current.status).toBe(200);
    expect(current.text).toBe(BODY);
    expect(current.headers.etag).toBe(tag);
  });

  it('a legacy client revalidating the stored current response gets the patched body, with tags', async () => {
    const current = await send(stack.url, 'GET', '/missions', CURRENT);
    expect(current.text).toBe(BODY);
    const legacy = await send(stack.url, 'GET', '/missions', {
      ...LEGACY,
      'if-none-match': String(current.headers.etag),
    });
    expect(legacy.status).toBe(200);
    expect(legacy.text).toBe('{"data":[{"uuid":"m1","metadata":{"a":1},"tags":{"a":1}}],"count":1}');
  });

  it('each client revalidating its own stored response still gets a 304 with its own tag', async () => {
    const legacy = await send(stack.url, 'GET', '/missions', LEGACY);
    const legacyAgain = await send(stack.url, 'GET', '/missions', {
      ...LEGACY,
      'if-none-match': String(legacy.headers.etag),
    });
    expect(legacyAgain.status).toBe(304);
    expect(legacyAgain.headers.etag).toBe(legacy.headers.etag);
    const currentAgain = await send(stack.url, 'GET', '/missions', { ...CURRENT, 'if-none-match': tag });
    expect(currentAgain.status).toBe(304);
    expect(currentAgain.headers.etag).toBe(tag);
  });
});

/**
 * The same mix-up through `If-Modified-Since` (review of fix 92): a client holding a response with an
 * `ETag` and a `Last-Modified` revalidates it with both (browsers do for a stored response of the same
 * variant, curl's `-z` with an etag file, HTTP caches). Fix 92 drops a legacy client's unmarked tags,
 * so the upstream saw the date alone, evaluated it (RFC 9110 §13.1.3 lets it only when `If-None-Match`
 * is absent) and answered 304: a legacy client's copy fetched during a brownout (the upstream's body,
 * without `tags`) was kept after the brownout, and the same for another variant's copy. The upstream
 * here evaluates the preconditions in RFC 9110 §13.2.2's order (express' `fresh` does too).
 */
describe('a legacy copy without aliases, revalidated with both validators', () => {
  const LAST_MODIFIED = 'Wed, 25 Nov 2026 10:00:00 GMT';
  const TAG = '"v1"';
  let upstream: http.Server;
  let during: Stack;
  let after: Stack;
  beforeAll(async () => {
    upstream = http.createServer((req, res) => {
      const head = { etag: TAG, 'last-modified': LAST_MODIFIED, 'cache-control': 'no-cache' };
      const inm = req.headers['if-none-match'];
      const ims = req.headers['if-modified-since'];
      const notModified =
        inm !== undefined
          ? inm.split(',').some((t) => t.trim().replace(/^W\//, '') === TAG)
          : ims !== undefined && Date.parse(ims) >= Date.parse(LAST_MODIFIED);
      if (notModified) return res.writeHead(304, head).end();
      res.writeHead(200, { ...head, 'content-type': 'application/json' }).end(BODY);
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { port } = upstream.address() as AddressInfo;
    const UPSTREAM_URL = `http://127.0.0.1:${port}`;
    // A brownout for the whole test, and the same shim outside one.
    during = await startStack({
      UPSTREAM_URL,
      ALIAS_BROWNOUTS: `${new Date(Date.now() - 60_000).toISOString()}/PT1H`,
    });
    after = await startStack({ UPSTREAM_URL });
  });
  afterAll(async () => {
    await during.close();
    await after.close();
    await new Promise((resolve) => upstream.close(resolve));
  });

  it('a copy fetched during a brownout gets the aliases after it', async () => {
    const browned = await send(during.url, 'GET', '/missions', LEGACY);
    expect(browned.text).toBe(BODY);
    expect(browned.headers.etag).toBe(TAG);
    const revalidated = await send(after.url, 'GET', '/missions', {
      ...LEGACY,
      'if-none-match': TAG,
      'if-modified-since': String(browned.headers['last-modified']),
    });
    expect(revalidated.status).toBe(200);
    expect(revalidated.text).toBe('{"data":[{"uuid":"m1","metadata":{"a":1},"tags":{"a":1}}],"count":1}');
    expect(revalidated.headers.etag).toBe('W/"v1+patched"');
  });

  it('a current client’s copy revalidated by a legacy client gets the aliases', async () => {
    const current = await send(after.url, 'GET', '/missions', CURRENT);
    const legacy = await send(after.url, 'GET', '/missions', {
      ...LEGACY,
      'if-none-match': String(current.headers.etag),
      'if-modified-since': String(current.headers['last-modified']),
    });
    expect(legacy.status).toBe(200);
    expect(legacy.text).toContain('"tags"');
  });

  it('the patched copy still gets its 304, with both validators or the date alone', async () => {
    const patched = await send(after.url, 'GET', '/missions', LEGACY);
    for (const validators of [
      { 'if-none-match': String(patched.headers.etag), 'if-modified-since': LAST_MODIFIED },
      { 'if-modified-since': LAST_MODIFIED },
    ]) {
      const again = await send(after.url, 'GET', '/missions', { ...LEGACY, ...validators });
      expect(again.status).toBe(304);
      expect(again.headers.etag).toBe('W/"v1+patched"');
    }
  });
});
