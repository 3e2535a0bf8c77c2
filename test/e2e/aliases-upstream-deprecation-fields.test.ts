/**
 * An upstream that deprecates a resource of its own (RFC 9745, RFC 8594) while a legacy client uses an
 * alias on it. `Deprecation` and `Sunset` hold one value each; the layer appended its configured values
 * as second field lines, and a recipient combines the lines (`@1700000000, @1767225600`), a value that
 * parses as neither field, so it must ignore both (RFC 9651 §4.2): the upstream's signal and the
 * layer's were lost. Now the upstream's fields stay alone; the alias's deprecation is still told by its
 * `Warning` and `Link`. Found by a probe of the alias layer (2026-11-26): docs/reliability.md fix 129.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

/** The values of every field line named `name` in a raw head (flat `[name, value, …]`), in order. */
function fieldLines(raw: string[], name: string): string[] {
  const out: string[] = [];
  for (let k = 0; k + 1 < raw.length; k += 2) if (raw[k]!.toLowerCase() === name) out.push(raw[k + 1]!);
  return out;
}

let upstream: Server;
let stack: Stack;
beforeAll(async () => {
  upstream = createServer((req, res) => {
    req.resume();
    const own = req.url?.startsWith('/files') === true;
    res.writeHead(200, {
      'content-type': 'application/json',
      ...(own && { deprecation: '@1700000000', sunset: 'Sat, 01 Jan 2028 00:00:00 GMT' }),
    });
    res.end('{"data":[],"count":0}');
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  stack = await startStack({
    UPSTREAM_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    ALIAS_DEPRECATED_AT: '2026-01-01T00:00:00Z',
    ALIAS_SUNSET_AT: '2027-01-01T00:00:00Z',
    ALIAS_DOCS_URL: 'https://docs.test/tags',
  });
});
afterAll(async () => {
  await stack.close();
  upstream.closeAllConnections();
  await new Promise((resolve) => upstream.close(resolve));
});

describe("the upstream's own Deprecation and Sunset", () => {
  it('stay alone, one field line each; the alias is still told by Warning and Link', async () => {
    const reply = await send(stack.url, 'GET', '/files?tags=x', LEGACY);
    expect(reply.status).toBe(200);
    expect(fieldLines(reply.rawHeaders, 'deprecation')).toEqual(['@1700000000']);
    expect(fieldLines(reply.rawHeaders, 'sunset')).toEqual(['Sat, 01 Jan 2028 00:00:00 GMT']);
    expect(reply.headers.warning).toMatch(/^299 - "tags is deprecated; use /);
    expect(reply.headers.link).toContain('<https://docs.test/tags>; rel="deprecation"');
  });

  it("the layer's go where the upstream sent none", async () => {
    const reply = await send(
      stack.url,
      'POST',
      '/missions',
      { ...LEGACY, 'content-type': 'application/json' },
      '{"tags":{}}',
    );
    expect(fieldLines(reply.rawHeaders, 'deprecation')).toEqual([`@${Date.UTC(2026, 0, 1) / 1000}`]);
    expect(fieldLines(reply.rawHeaders, 'sunset')).toEqual(['Fri, 01 Jan 2027 00:00:00 GMT']);
  });
});
