/**
 * The admin listener's plugin-route seam (`ProxyPlugin.adminRoutes` → `createAdminServer({ routes })`):
 * exact method and path, `HEAD` for a `GET` route, 405 with `Allow` for another method, the built-in
 * routes untouched, a throwing handler → 500. Knows no plugin.
 */
import { once } from 'node:events';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import type { AdminRoute } from '../../src/core/types.ts';
import { createAdminServer } from '../../src/observability/admin.ts';
import { send } from '../helpers/http.ts';

let server: http.Server | undefined;
afterEach(() => server?.close());

async function start(routes: AdminRoute[]): Promise<string> {
  server = createAdminServer({
    registry: new Registry(),
    upstreamReachable: async () => true,
    draining: () => false,
    routes,
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const ok =
  (text: string): AdminRoute['handle'] =>
  (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(text);
  };

describe('plugin admin routes', () => {
  it('are served on their exact method and path, query ignored', async () => {
    const url = await start([
      { method: 'GET', path: '/plugin/report', handle: ok('report') },
      { method: 'DELETE', path: '/plugin/report', handle: ok('reset') },
    ]);
    expect((await send(url, 'GET', '/plugin/report?limit=1')).text).toBe('report');
    expect((await send(url, 'DELETE', '/plugin/report')).text).toBe('reset');
    expect((await send(url, 'HEAD', '/plugin/report')).status).toBe(200);
    const post = await send(url, 'POST', '/plugin/report');
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET, DELETE');
    expect((await send(url, 'GET', '/plugin/report/x')).status).toBe(404);
    expect((await send(url, 'GET', '/healthz')).status).toBe(200);
    expect((await send(url, 'DELETE', '/healthz')).status).toBe(405);
  });

  it('turn a throwing handler into a 500', async () => {
    const url = await start([
      {
        method: 'GET',
        path: '/boom',
        handle: () => {
          throw new Error('boom');
        },
      },
    ]);
    expect((await send(url, 'GET', '/boom')).status).toBe(500);
  });
});
