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
