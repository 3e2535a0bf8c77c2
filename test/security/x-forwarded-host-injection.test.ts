/**
 * Attack: X-Forwarded-Host injection (host-header injection through the forwarding headers;
 * password-reset poisoning).
 *
 * The service is NestJS on Express. With `trust proxy` set for the shim's address, Express takes
 * `req.hostname` from the FIRST value of `X-Forwarded-Host` and `req.protocol` from the first value of
 * `X-Forwarded-Proto`. SPEC §4 has the shim append its own values, which is right behind an ingress
 * that overwrites them; but a client that talks to the shim directly (a front door) chooses the first
 * value: `X-Forwarded-Host: evil.test` makes the service mail reset links to `https://evil.test/…`,
 * and `X-Forwarded-Host: evil.test/reset?to=x` smuggles a path and query into every link built from
 * `req.hostname` — what the hygiene gate's `Host` check (`checkHost`, 400) exists to stop.
 *
 * Defences (src/proxy/outgoing-request.ts, docs/operations.md "Forwarded headers"):
 * - `FORWARDED_HEADERS=replace` (front door): the client's `X-Forwarded-For`, `-Proto`, `-Host` and
 *   `Forwarded` are dropped; the upstream reads the client's (checked) `Host`, the real scheme and
 *   address.
 * - Every mode: a client `X-Forwarded-Host` that is not a host and optional port (or an
 *   `X-Forwarded-Proto` that is not a URI scheme) is dropped, never passed on as the first value.
 *
 * The upstream is a real Express 5 application with `app.set('trust proxy', 'loopback')`, reporting
 * what it reads.
 */
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

/** What the Express upstream read from a request. */
interface Seen {
  hostname: string | undefined;
  protocol: string;
  ip: string | undefined;
  forwardedHost: string | undefined;
  forwarded: string | undefined;
}

let upstream: http.Server;
let upstreamUrl: string;
beforeAll(async () => {
  const app = express();
  app.set('trust proxy', 'loopback');
  app.get('/whoami', (req, res) => {
    const seen: Seen = {
      hostname: req.hostname,
      protocol: req.protocol,
      ip: req.ip,
      forwardedHost: req.get('x-forwarded-host'),
      forwarded: req.get('forwarded'),
    };
    res.json(seen);
  });
  upstream = http.createServer(app).listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
});
afterAll(async () => {
  upstream.closeAllConnections();
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
});

/** The attacker's request: a valid `Host`, forged forwarding headers. */
const attack = (forged: Record<string, string>) => ({
  ...CURRENT,
  host: 'api.example.com',
  ...forged,
});

async function whoami(stack: Stack, headers: Record<string, string>): Promise<Seen> {
  const reply = await send(stack.url, 'GET', '/whoami', headers);
  expect(reply.status).toBe(200);
  return reply.json<Seen>();
}

describe('FORWARDED_HEADERS=replace (a front door clients reach directly)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ UPSTREAM_URL: upstreamUrl, FORWARDED_HEADERS: 'replace' });
  });
  afterAll(() => stack.close());

  it('the client cannot choose req.hostname, req.protocol or req.ip', async () => {
    const seen = await whoami(
      stack,
      attack({
        'x-forwarded-host': 'evil.test',
        'x-forwarded-proto': 'https',
        'x-forwarded-for': '6.6.6.6',
        forwarded: 'for=6.6.6.6;host=evil.test;proto=https',
      }),
    );
    expect(seen).toEqual({
      hostname: 'api.example.com',
      protocol: 'http',
      ip: '127.0.0.1',
      forwardedHost: 'api.example.com',
    });
  });

  it('a path smuggled in X-Forwarded-Host does not reach req.hostname', async () => {
    const seen = await whoami(stack, attack({ 'x-forwarded-host': 'evil.test/reset?to=x' }));
    expect(seen.hostname).toBe('api.example.com');
  });

  it('a Host with a comma is refused 400: this hop would give X-Forwarded-Host two hosts', async () => {
    // Behind a front proxy whose host check matched a prefix, Express reads the first element and
    // Rails or Symfony the last (docs/reliability.md fix 125).
    const reply = await send(stack.url, 'GET', '/whoami', attack({ host: 'api.example.com,evil.test' }));
    expect(reply.status).toBe(400);
    expect(reply.json<{ message: string }>().message).toMatch(/without a comma/);
  });
});

describe('FORWARDED_HEADERS=append (default: behind a proxy that sets the headers)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ UPSTREAM_URL: upstreamUrl });
  });
  afterAll(() => stack.close());

  it.each(['evil.test/reset?to=x', 'a@evil.test', 'evil.test#', 'edge.test, evil.test/reset'])(
    'an X-Forwarded-Host that is not host[:port] (%j) is dropped: req.hostname is the Host',
    async (forged) => {
      const seen = await whoami(stack, attack({ 'x-forwarded-host': forged }));
      expect(seen.hostname).toBe('api.example.com');
      expect(seen.forwardedHost).toBe('api.example.com');
      const line = stack.logs().findLast((l) => l.msg === 'request completed');
      expect(line?.invalidForwarded).toEqual(['x-forwarded-host']);
    },
  );

  it('an X-Forwarded-Proto that is not a scheme is dropped: req.protocol is the real one', async () => {
    const seen = await whoami(stack, attack({ 'x-forwarded-proto': 'https://evil.test/#' }));
    expect(seen.protocol).toBe('http');
  });

  it('a well-formed X-Forwarded-Host still comes first: only a proxy in front that overwrites it makes append safe', async () => {
    // The reason for FORWARDED_HEADERS=replace on a shim that clients reach directly.
    const seen = await whoami(
      stack,
      attack({ 'x-forwarded-host': 'evil.test', 'x-forwarded-proto': 'https', forwarded: 'host=evil.test' }),
    );
    expect(seen).toMatchObject({
      hostname: 'evil.test',
      protocol: 'https',
      forwardedHost: 'evil.test, api.example.com',
      forwarded: 'host=evil.test',
    });
  });
});
