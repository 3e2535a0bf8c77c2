/**
 * Attack (or accident): cookie-value confusion between the shim and the upstream (issue 10).
 *
 * cookie-parser's defaults give cookie values meaning that RFC 6265 does not: a value starting with
 * `j:` is parsed as JSON (and replaced by the parsed object, or left as text when the JSON is
 * invalid), one starting with `s:` is treated as a signed cookie. The shim's credential gate read
 * cookies that way, so `authtoken=j:{…}` — a legitimate opaque token that happens to start with `j:`
 * — was "not a non-empty string" and the request got 401, while the upstream, which reads the value as
 * the text it is, would have admitted it. The gate checks presence and form only (SPEC §3 step 5): it
 * must read values exactly as RFC 6265 §4.2.1 defines them and forward the `Cookie` header untouched.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/stack.ts';

const VERSION = { 'service-client-version': '0.59.0' };

describe('cookie values with cookie-parser meanings (j:, s:) are plain values', () => {
  let stack: Stack;
  let upstream: http.Server;
  const cookies: string[] = [];

  beforeAll(async () => {
    upstream = http.createServer((req, res) => {
      cookies.push(req.headers.cookie ?? '');
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { port } = upstream.address() as { port: number };
    stack = await startStack({ UPSTREAM_URL: `http://127.0.0.1:${port}` });
  });
  afterAll(async () => {
    await stack.close();
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
  });

  it.each([
    ['a JSON-looking token (j:)', 'authtoken=j:{"sub":"u1","exp":1}; refreshtoken=r1'],
    ['an invalid JSON-looking token (j:)', 'authtoken=j:{; refreshtoken=r1'],
    ['a JSON array token (j:)', 'authtoken=j:[]; refreshtoken=j:null'],
    ['a signed-looking token (s:)', 'authtoken=s:abc.def; refreshtoken=s:'],
    ['a percent-encoded token', 'authtoken=%6A%3A%7B%7D; refreshtoken=r1'],
  ])('admits %s and forwards the Cookie header byte for byte', async (_name, cookie) => {
    const res = await fetch(`${stack.url}/user/me`, { headers: { ...VERSION, cookie } });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(cookies.at(-1)).toBe(cookie);
  });

  it('still refuses an empty or missing credential cookie', async () => {
    for (const cookie of [
      'authtoken=; refreshtoken=j:{}',
      'authtoken=""; refreshtoken=r',
      'refreshtoken=s:x',
    ]) {
      const before = cookies.length;
      const res = await fetch(`${stack.url}/user/me`, { headers: { ...VERSION, cookie } });
      expect(res.status, cookie).toBe(401);
      await res.arrayBuffer();
      expect(cookies.length, 'nothing forwarded').toBe(before);
    }
  });
});
