import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { createExchangeState, stateOf } from '../../src/core/exchange.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createRequestLog } from '../../src/observability/request-log.ts';
import { waitFor } from '../helpers/poll.ts';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  server = undefined;
});

/** A minimal pipeline: exchange state → request log → a handler standing in for the gates and plugins. */
async function start() {
  let text = '';
  const sink = new Writable({
    write(chunk, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  });
  const logger = createLogger('info', ['req.headers["x-api-key"]'], sink);
  const app = express();
  app.use((req, res, next) => {
    const state = createExchangeState(req, performance.now());
    state.route = '/missions/:id/metadata';
    res.locals.shim = state;
    next();
  });
  const track = createRequestLog(logger);
  app.use((req, res, next) => {
    track(req, res, stateOf(res)!.startedAt);
    next();
  });
  app.use((req, res) => {
    const state = stateOf(res)!;
    if (req.headers['x-reject']) {
      state.rejection = 'credentials';
      res.status(401).end();
      return;
    }
    state.exchange.clientVersion = { version: '0.59.3' } as never;
    state.exchange.logFields.aliases = ['tags'];
    res.status(201).end('{}');
  });
  server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const lines = () =>
    text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  const pathOf = (l: Record<string, unknown>) => (l.req as { path: string }).path;
  /**
   * Sends a last request and waits for its line: the lines of the requests before it are all written
   * by then (each is written when its response finishes). Returns those, without the last one's.
   */
  const settled = async () => {
    await fetch(`${url}/settled`);
    await waitFor(() => lines().some((l) => pathOf(l) === '/settled'), { what: 'the /settled line' });
    return lines().filter((l) => pathOf(l) !== '/settled');
  };
  const settledText = async () => {
    await settled();
    return text;
  };
  return { url, lines: settled, text: settledText };
}

describe('request log', () => {
  it('writes one line per request with method, path, status, duration, client version, route and aliases', async () => {
    const { url, lines } = await start();
    await fetch(`${url}/missions/5f0c2a64-1b1e-4c2d-9a4b-0f0e9d8c7b6a/metadata?tags=secret-query`, {
      method: 'POST',
    });
    const all = await lines();
    expect(all).toHaveLength(1);
    const [line] = all;
    expect(line).toMatchObject({
      msg: 'request completed',
      req: { method: 'POST', path: '/missions/5f0c2a64-1b1e-4c2d-9a4b-0f0e9d8c7b6a/metadata' },
      res: { statusCode: 201 },
      clientVersion: '0.59.3',
      route: '/missions/:id/metadata',
      aliases: ['tags'],
    });
    expect(typeof line?.responseTime).toBe('number');
    expect(JSON.stringify(line)).not.toContain('secret-query');
  });

  it('records why the shim rejected a request, and which client it was', async () => {
    const { url, lines } = await start();
    await fetch(`${url}/user/me`, {
      headers: { 'x-reject': '1', 'user-agent': `legacy-app/2.3 ${'x'.repeat(400)}` },
    });
    await fetch(`${url}/missions`, { headers: { 'user-agent': 'legacy-app/2.3' } });
    const [refused, served] = await lines();
    expect(refused).toMatchObject({
      res: { statusCode: 401 },
      rejection: 'credentials',
      remoteAddress: '127.0.0.1',
    });
    expect(refused?.userAgent).toBe(`legacy-app/2.3 ${'x'.repeat(400)}`.slice(0, 256));
    // The client's address on every line; its User-Agent only where the shim refused it.
    expect(served).toMatchObject({ res: { statusCode: 201 }, remoteAddress: '127.0.0.1' });
    expect(served).not.toHaveProperty('userAgent');
  });

  it("writes the request's X-Request-Id and traceparent's trace id, for correlation; invalid ones not", async () => {
    const { url, lines } = await start();
    const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
    await fetch(`${url}/one`, {
      headers: { 'x-request-id': 'ingress-7f3a', traceparent: `00-${trace}-00f067aa0ba902b7-01` },
    });
    await fetch(`${url}/two`, { headers: { 'x-request-id': 'x'.repeat(200), traceparent: 'nonsense' } });
    const [one, two] = await lines();
    expect(one).toMatchObject({ req: { path: '/one' }, requestId: 'ingress-7f3a', traceId: trace });
    expect(two).toMatchObject({ req: { path: '/two' } });
    expect(two).not.toHaveProperty('requestId');
    expect(two).not.toHaveProperty('traceId');
  });

  it('never writes cookies, API keys, Authorization or Set-Cookie', async () => {
    const { url, text } = await start();
    await fetch(`${url}/user/me`, {
      headers: {
        cookie: 'authtoken=cookie-secret; refreshtoken=refresh-secret',
        'x-api-key': 'apikey-secret',
        authorization: 'Bearer bearer-secret',
      },
    });
    const written = await text();
    for (const s of ['cookie-secret', 'refresh-secret', 'apikey-secret', 'bearer-secret']) {
      expect(written).not.toContain(s);
    }
    expect(written).toContain('request completed');
  });
});
