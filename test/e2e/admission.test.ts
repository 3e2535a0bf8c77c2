/**
 * Admission end to end (SPEC §3): the shim in front of the reference backend, real sockets. A rejected
 * request never reaches the upstream (the reference backend would answer differently).
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDebugStack } from '../helpers/debug-upstream.ts';
import { send, sendRawUntilClose } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ MIN_CLIENT_VERSION: '0.40.0', SERVICE_VERSION_HEADER: 'Service-Version' });
});
afterAll(() => stack.close());

const cookie = 'authtoken=a; refreshtoken=r';

describe("a refusal's log line says why, in the words the client got", () => {
  it.each([
    ['no version', { 'x-api-key': 'k' }, 426, /^Send the header Service-Client-Version/],
    [
      'below MIN_CLIENT_VERSION',
      { 'service-client-version': '0.39.9', 'x-api-key': 'k' },
      426,
      /^Client version 0\.39\.9 is no longer supported/,
    ],
    [
      'a malformed version',
      { 'service-client-version': 'v0.59.0', 'x-api-key': 'k' },
      426,
      /must be your client's semantic version/,
    ],
    ['no credential', { 'service-client-version': '0.59.0' }, 401, /^Authenticate with the cookies/],
  ])('%s', async (_what, headers, status, message) => {
    const marker = `admission-log-${Math.random().toString(36).slice(2)}`;
    const reply = await send(stack.url, 'GET', '/user/me', { ...headers, 'user-agent': marker });
    expect(reply.status).toBe(status);
    const line = await waitFor(() =>
      stack.logs().find((l) => l.msg === 'request completed' && l.userAgent === marker),
    );
    expect(line.refusal).toMatch(message);
    expect(line.refusal).toBe(reply.json<{ message: string }>().message);
    expect(line.remoteAddress).toBe('127.0.0.1');
  });
});

describe('admission matrix', () => {
  it.each([
    ['no version, no credentials', {}, 426],
    ['no version, API key', { 'x-api-key': 'k' }, 426],
    ['empty version', { 'service-client-version': '', 'x-api-key': 'k' }, 426],
    ['v-prefixed version', { 'service-client-version': 'v0.59.0', 'x-api-key': 'k' }, 426],
    ['two-part version', { 'service-client-version': '0.59', 'x-api-key': 'k' }, 426],
    ['below MIN_CLIENT_VERSION', { 'service-client-version': '0.39.9', 'x-api-key': 'k' }, 426],
    ['version, no credentials', { 'service-client-version': '0.59.0' }, 401],
    ['version, empty API key', { 'service-client-version': '0.59.0', 'x-api-key': '' }, 401],
    ['version, only one cookie', { 'service-client-version': '0.59.0', cookie: 'authtoken=a' }, 401],
    [
      'version, empty cookie',
      { 'service-client-version': '0.59.0', cookie: 'authtoken=; refreshtoken=r' },
      401,
    ],
    ['version, API key', { 'service-client-version': '0.59.0', 'x-api-key': 'k' }, 200],
    ['version, cookies', { 'service-client-version': '0.59.0', cookie }, 200],
    ['header name in other case', { 'SERVICE-CLIENT-VERSION': '0.59.0', cookie }, 200],
    ['prerelease version', { 'service-client-version': '1.0.0-rc.1', cookie }, 200],
    ['python dev version', { 'service-client-version': '0.59.0.dev20260101', cookie }, 200],
    // SPEC §3 step 4, at the edges (docs/spec-conformance.md).
    ['build metadata', { 'service-client-version': '0.59.0+build.7', cookie }, 200],
    ['four-part version', { 'service-client-version': '0.59.0.1', cookie }, 426],
    ['leading zero', { 'service-client-version': '0.059.0', cookie }, 426],
    ['prerelease of MIN_CLIENT_VERSION', { 'service-client-version': '0.40.0-rc.1', cookie }, 426],
    ['python dev release of MIN_CLIENT_VERSION', { 'service-client-version': '0.40.0.dev1', cookie }, 426],
    ['MIN_CLIENT_VERSION itself', { 'service-client-version': '0.40.0', cookie }, 200],
    ['two versions', { 'service-client-version': ['0.59.0', '0.59.0'], cookie }, 426],
  ])('%s → %i', async (_name, headers, status) => {
    const reply = await send(stack.url, 'GET', '/user/me', headers);
    expect(reply.status).toBe(status);
    if (status !== 200) {
      const body = reply.json();
      expect(body).toMatchObject({
        statusCode: status,
        error: expect.any(String),
        message: expect.any(String),
      });
      expect(reply.headers['content-type']).toBe('application/json; charset=utf-8');
    } else {
      expect(reply.json()).toHaveProperty('uuid');
    }
  });

  it('answers a legacy probe of GET /user/me without credentials with 401 and the service version', async () => {
    // No upstream response needed first: the runtime probed the version before listening.
    const reply = await send(stack.url, 'GET', '/user/me', { 'service-client-version': '0.59.0' });
    expect(reply.status).toBe(401);
    // RFC 9110 §15.5.2: a 401 carries a challenge (no registered scheme for an API key or cookies).
    expect(reply.headers['www-authenticate']).toBe('ApiKey header="x-api-key"');
    expect(reply.headers['service-version']).toBe('0.60.0');
    expect(reply.headers.warning).toBe('299 - "client 0.59.0 is older than service 0.60.0; please upgrade"');
  });

  it.each([
    ['a malformed request', 'GET /user/me HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n', 400],
    ['an oversized head', `GET /user/me HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
    [
      'a WebSocket upgrade',
      'GET /user/me HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
      501,
    ],
    ['CONNECT', 'CONNECT upstream.example:443 HTTP/1.1\r\nHost: upstream.example:443\r\n\r\n', 400],
  ])(
    '%s, refused by the HTTP server itself, carries the service version too (SPEC §7)',
    async (_what, request, status) => {
      const reply = await sendRawUntilClose(stack.url, request);
      const head = reply.slice(0, reply.indexOf('\r\n\r\n'));
      expect(head.split('\r\n')[0]).toBe(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}`);
      expect(head).toContain('\r\nService-Version: 0.60.0\r\n');
      expect(head).toContain('\r\nCache-Control: no-store\r\n');
      expect(head).toContain('\r\nContent-Type: application/json; charset=utf-8\r\n');
      expect(JSON.parse(reply.slice(head.length + 4))).toMatchObject({ statusCode: status });
    },
  );

  it('counts rejections by reason', async () => {
    await send(stack.url, 'GET', '/user/me', {});
    await send(stack.url, 'GET', '/user/me', { 'service-client-version': '0.59.0' });
    const text = await stack.metrics.registry.metrics();
    expect(text).toMatch(/shim_rejections_total\{reason="version"\} [1-9]/);
    expect(text).toMatch(/shim_rejections_total\{reason="credentials"\} [1-9]/);
  });
});

describe('public paths and preflight', () => {
  it('forwards /api/health without version or credentials', async () => {
    const reply = await send(stack.url, 'GET', '/api/health');
    expect(reply.status).toBe(200);
    expect(reply.json()).toEqual({ status: 'ok' });
  });

  it('accepts one trailing slash on a public path', async () => {
    const reply = await send(stack.url, 'GET', '/api/health/');
    expect(reply.status).toBe(200);
  });

  it('does not treat a longer or differently cased path as public', async () => {
    expect((await send(stack.url, 'GET', '/api/healthz')).status).toBe(426);
    expect((await send(stack.url, 'GET', '/API/health')).status).toBe(426);
    expect((await send(stack.url, 'GET', '/api/health//')).status).toBe(426);
  });

  it('forwards a CORS preflight unchecked', async () => {
    const reply = await send(stack.url, 'OPTIONS', '/missions', {
      origin: 'https://app.example',
      'access-control-request-method': 'POST',
    });
    // The reference backend (NestJS, CORS not enabled) has no OPTIONS route, so its own 404 (not the
    // shim's 426) proves the preflight passed the shim's gates.
    expect(reply.status).toBe(404);
    expect(reply.json()).toEqual({
      statusCode: 404,
      message: 'Cannot OPTIONS /missions',
      error: 'Not Found',
    });
  });

  it('does not treat an OPTIONS without Access-Control-Request-Method as a preflight', async () => {
    const reply = await send(stack.url, 'OPTIONS', '/missions', { origin: 'https://app.example' });
    expect(reply.status).toBe(426);
  });
});

describe('forwarded request shape', () => {
  let echoStack: Stack;
  beforeAll(async () => {
    echoStack = await startDebugStack({ MIN_CLIENT_VERSION: '0.40.0' });
  });
  afterAll(() => echoStack.close());

  it('keeps the trailing slash, the raw query and the client Host', async () => {
    const reply = await send(echoStack.url, 'GET', '/debug/echo/missions/?b=2&a=%20x+y&a=1', {
      ...LEGACY,
      host: 'api.example:443',
    });
    expect(reply.status).toBe(200);
    const echo = reply.json<{ url: string; headers: Record<string, string> }>();
    expect(echo.url).toBe('/debug/echo/missions/?b=2&a=%20x+y&a=1');
    expect(echo.headers.host).toBe('api.example:443');
  });
});

describe('CORS_ALLOWED_ORIGINS: a browser client can read the shim’s own refusals', () => {
  const APP = 'https://app.example';
  let corsStack: Stack;
  beforeAll(async () => {
    corsStack = await startStack({
      MIN_CLIENT_VERSION: '0.40.0',
      CORS_ALLOWED_ORIGINS: `${APP},http://localhost:5173`,
    });
  });
  afterAll(() => corsStack.close());

  it.each([
    ['401 without credentials', { 'service-client-version': '0.59.0' }, 401],
    ['426 without a version', {}, 426],
  ])(
    '%s, for a listed origin: allowed with credentials, its signals exposed, Vary: Origin',
    async (_what, headers, status) => {
      const reply = await send(corsStack.url, 'GET', '/user/me', { ...headers, origin: APP });
      expect(reply.status).toBe(status);
      expect(reply.headers['access-control-allow-origin']).toBe(APP);
      expect(reply.headers['access-control-allow-credentials']).toBe('true');
      expect(String(reply.headers['access-control-expose-headers']).split(', ')).toContain('Service-Version');
      expect(String(reply.headers.vary).split(', ')).toContain('Origin');
    },
  );

  it('the 401 of a legacy client exposes its Warning too', async () => {
    const legacy = await send(corsStack.url, 'GET', '/user/me', {
      'service-client-version': '0.59.0',
      origin: APP,
    });
    expect(legacy.status).toBe(401);
    expect(legacy.headers.warning).toContain('older than service');
    expect(String(legacy.headers['access-control-expose-headers']).split(', ')).toEqual([
      'Service-Version',
      'Warning',
      'WWW-Authenticate',
    ]);
  });

  it('an origin not listed, none, or a listed one sent twice: no CORS headers, Vary: Origin all the same', async () => {
    for (const origin of ['https://evil.example', undefined, [APP, APP]]) {
      const reply = await send(corsStack.url, 'GET', '/user/me', {
        'service-client-version': '0.59.0',
        // Node sends an array as one field line each (the type says string; the runtime takes both).
        ...(origin === undefined ? {} : { origin: origin as string }),
      });
      expect(reply.status).toBe(401);
      expect(reply.headers['access-control-allow-origin']).toBeUndefined();
      expect(reply.headers['access-control-allow-credentials']).toBeUndefined();
      expect(reply.headers['access-control-expose-headers']).toBeUndefined();
      expect(String(reply.headers.vary).split(', ')).toContain('Origin');
    }
  });

  it('leaves the upstream’s responses alone: the upstream owns the CORS policy', async () => {
    const reply = await send(corsStack.url, 'GET', '/user/me', { ...LEGACY, origin: APP });
    expect(reply.status).toBe(200);
    expect(reply.headers['access-control-allow-origin']).toBeUndefined();
  });
});
