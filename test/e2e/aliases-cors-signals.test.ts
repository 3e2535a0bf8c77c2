/**
 * A browser legacy client (the service's web frontend, service document part 1) on another origin
 * reads the deprecation signals (SPEC §5): a response header outside the CORS safelist reaches a page's
 * script only when `Access-Control-Expose-Headers` names it (Fetch standard, CORS protocol). The
 * upstream owns the CORS policy; where it admitted the origin (`Access-Control-Allow-Origin`), the shim
 * adds the names of its own headers (`Warning`, `Deprecation`, `Sunset`, `Link`) to what is exposed.
 * Where it did not, the shim adds nothing: no CORS policy of its own.
 *
 * The upstream is a real Express 5 app setting its CORS headers by hand, as the `cors` middleware does.
 *
 * Goes with the alias layer (`src/aliases/`): deleted with it (docs/removing-the-alias-layer.md).
 */
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const APP_ORIGIN = 'https://app.example';
const WEATHER = 'a0000000-0000-4000-8000-000000000003';

let upstream: http.Server;
let stack: Stack;

beforeAll(async () => {
  const app = express();
  app.use((req, res, next) => {
    if (req.headers.origin === APP_ORIGIN) {
      res.set('Access-Control-Allow-Origin', APP_ORIGIN);
      res.set('Access-Control-Allow-Credentials', 'true');
      res.set('Access-Control-Expose-Headers', 'X-Request-Id');
    }
    res.vary('Origin');
    res.set('Service-Version', '0.60.0');
    next();
  });
  app.get('/files', (_req, res) => {
    res.json({ data: [{ uuid: 'f1', metadata: [{ value: 1 }] }], count: 1 });
  });
  upstream = http.createServer(app).listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  const { port } = upstream.address() as AddressInfo;
  stack = await startStack({
    UPSTREAM_URL: `http://127.0.0.1:${port}`,
    ALIAS_DEPRECATED_AT: '2026-01-01T00:00:00Z',
    ALIAS_SUNSET_AT: '2027-01-01T00:00:00Z',
    ALIAS_DOCS_URL: 'https://docs.example/metadata',
  });
});

afterAll(async () => {
  await stack?.close();
  upstream?.close();
});

/** `Access-Control-Expose-Headers` as a browser reads it: every field line, split and trimmed. */
const exposed = (headers: http.IncomingHttpHeaders): string[] =>
  String(headers['access-control-expose-headers'] ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');

describe('a legacy browser client on an origin the upstream admits', () => {
  it('may read Warning, Deprecation, Sunset and Link: the shim adds them to the upstream’s exposed names', async () => {
    const reply = await send(stack.url, 'GET', `/files?tags=${WEATHER}`, { ...LEGACY, origin: APP_ORIGIN });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.headers['access-control-allow-origin']).toBe(APP_ORIGIN);
    expect(reply.headers.warning).toMatch(/tags is deprecated/);
    expect(reply.headers.deprecation).toBe('@1767225600');
    expect(reply.headers.sunset).toBe('Fri, 01 Jan 2027 00:00:00 GMT');
    expect(reply.headers.link).toContain('rel="deprecation"');
    expect(exposed(reply.headers).sort()).toEqual([
      'Deprecation',
      'Link',
      'Sunset',
      'Warning',
      'X-Request-Id',
    ]);
    expect(reply.json<{ data: Array<{ tags: unknown }> }>().data[0]?.tags).toEqual([{ value: 1 }]);
  });
});

describe('a client the upstream gives no CORS response', () => {
  it('gets the same signals and no Access-Control-Expose-Headers: the shim has no CORS policy of its own', async () => {
    for (const origin of [undefined, 'https://evil.example']) {
      const headers = origin === undefined ? { ...LEGACY } : { ...LEGACY, origin };
      const reply = await send(stack.url, 'GET', `/files?tags=${WEATHER}`, headers);
      expect(reply.status, reply.text).toBe(200);
      expect(reply.headers.warning).toMatch(/tags is deprecated/);
      expect(reply.headers['access-control-allow-origin']).toBeUndefined();
      expect(reply.headers['access-control-expose-headers']).toBeUndefined();
    }
  });
});
