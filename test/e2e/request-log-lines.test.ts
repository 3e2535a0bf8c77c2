/**
 * The request line's level, counter and abort marker (the request log writes its line itself, without
 * pino-http; see src/observability/request-log.ts).
 */
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

async function start() {
  let text = '';
  const sink = new Writable({
    write(chunk, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  });
  const app = express();
  app.use((req, res, next) => {
    res.locals.shim = createExchangeState(req, performance.now());
    next();
  });
  const track = createRequestLog(createLogger('info', [], sink));
  app.use((req, res, next) => {
    track(req, res, stateOf(res)!.startedAt);
    next();
  });
  app.get('/fail', (_req, res) => {
    res.status(502).end();
  });
  app.get('/upgrade', (_req, res) => {
    stateOf(res)!.rejection = 'upgrade';
    res.status(501).end();
  });
  app.get('/ok', (_req, res) => {
    res.status(200).end('ok');
  });
  // Resolved when /hang's request has reached its handler (the client may abort from then on).
  let hangReached: () => void = () => undefined;
  const hung = new Promise<void>((resolve) => {
    hangReached = resolve;
  });
  app.get('/hang', () => {
    hangReached(); // never answers: the client gives up
  });
  server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const lines = () =>
    text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { url, lines, hung };
}

const until = (check: () => boolean, what: string) => waitFor(check, { what });

describe('request log lines', () => {
  it('logs a 5xx at level error with the same message, once', async () => {
    const { url, lines } = await start();
    await fetch(`${url}/fail`);
    // A second request's line comes after everything the first one logged: the first logged once.
    await fetch(`${url}/ok`);
    await until(() => lines().some((l) => (l.req as { path: string }).path === '/ok'), 'the /ok line');
    expect(lines().map((l) => (l.req as { path: string }).path)).toEqual(['/fail', '/ok']);
    expect(lines()[0]).toMatchObject({ level: 50, msg: 'request completed', res: { statusCode: 502 } });
    expect(lines()[0]).not.toHaveProperty('aborted');
  });

  it('logs the shim’s 501 to a protocol upgrade at level info: any client can repeat it', async () => {
    const { url, lines } = await start();
    await fetch(`${url}/upgrade`);
    await until(() => lines().length === 1, 'the /upgrade line');
    expect(lines()[0]).toMatchObject({ level: 30, rejection: 'upgrade', res: { statusCode: 501 } });
  });

  it('numbers requests per process and logs success at level info', async () => {
    const { url, lines } = await start();
    await fetch(`${url}/ok`);
    await fetch(`${url}/ok?secret=1`);
    await until(() => lines().length >= 2, 'two lines');
    expect(lines().map((l) => [l.reqId, l.level, (l.req as { path: string }).path])).toEqual([
      [1, 30, '/ok'],
      [2, 30, '/ok'],
    ]);
  });

  it('marks a request whose connection closed before the response ended', async () => {
    const { url, lines, hung } = await start();
    const controller = new AbortController();
    const pending = fetch(`${url}/hang`, { signal: controller.signal }).catch(() => undefined);
    await hung;
    controller.abort();
    await pending;
    await until(() => lines().length > 0, 'the /hang line');
    expect(lines()).toHaveLength(1);
    expect(lines()[0]).toMatchObject({ msg: 'request completed', aborted: true, req: { path: '/hang' } });
  });
});
