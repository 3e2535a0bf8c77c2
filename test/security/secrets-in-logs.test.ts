/**
 * Attack: credential harvesting from logs (CWE-532, OWASP Logging Cheat Sheet).
 *
 * Logs travel further than the traffic: to log shippers, SIEMs, support tickets. A proxy that logs a
 * request or response object, an error carrying the raw request (`clientError`'s `rawPacket`), or a
 * header map on an error path hands every reader the callers' session cookies and API keys. The shim
 * must never write a cookie, an API key (the configured header), an `Authorization` or
 * `Proxy-Authorization` value, or an upstream `Set-Cookie` value — at any log level (here `trace`), on
 * any path: admitted, rejected by each gate, refused by the HTTP parser, upstream refused, reset,
 * invalid, timed out, a patched response that is not JSON, client aborts.
 *
 * Every request below carries unique marker secrets; after all of them, no log line may contain any
 * marker, in plain text, percent-encoded, base64 or hex.
 */
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send, sendRaw } from '../helpers/http.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const SECRETS = {
  authtoken: 'authtoken-5ec4e7-aaaa',
  refreshtoken: 'refreshtoken-5ec4e7-bbbb',
  apiKey: 'apikey-5ec4e7-cccc',
  customKey: 'servicetoken-5ec4e7-dddd',
  authorization: 'bearer-5ec4e7-eeee',
  proxyAuthorization: 'proxyauth-5ec4e7-ffff',
  setCookie: 'session-5ec4e7-0000',
  query: 'querytoken-5ec4e7-1111',
};

const COOKIE = `authtoken=${SECRETS.authtoken}; refreshtoken=${SECRETS.refreshtoken}`;
const SECRET_HEADERS = {
  cookie: COOKIE,
  'x-api-key': SECRETS.apiKey,
  'x-service-token': SECRETS.customKey,
  authorization: `Bearer ${SECRETS.authorization}`,
  'proxy-authorization': `Basic ${SECRETS.proxyAuthorization}`,
};
const RAW_SECRET_HEADERS =
  `Cookie: ${COOKIE}\r\nX-Api-Key: ${SECRETS.apiKey}\r\nX-Service-Token: ${SECRETS.customKey}\r\n` +
  `Authorization: Bearer ${SECRETS.authorization}\r\nProxy-Authorization: Basic ${SECRETS.proxyAuthorization}\r\n`;
const LEGACY = { 'service-client-version': '0.59.0' };

/** A raw upstream that misbehaves according to the request path. */
function faultyUpstream(): Promise<RawUpstream> {
  return startRawUpstream((socket, received) => {
    if (!received.includes('\r\n\r\n')) return;
    const path = /^[A-Z]+ (\S+)/.exec(received)?.[1] ?? '';
    const setCookie = `Set-Cookie: session=${SECRETS.setCookie}; HttpOnly\r\n`;
    if (path.startsWith('/reset')) socket.resetAndDestroy();
    else if (path.startsWith('/invalid')) socket.end(`HTTP/1.1 TWO HUNDRED\r\n${setCookie}\r\n`);
    else if (path.startsWith('/stall')) return;
    else if (path.startsWith('/midbody')) {
      socket.write(
        `HTTP/1.1 200 OK\r\n${setCookie}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"metadata":`,
      );
      setTimeout(() => socket.resetAndDestroy(), 20);
    } else if (path.startsWith('/missions')) {
      const body = '{"data":[{"metadata":[1,2]},'; // invalid JSON on a patched route
      socket.end(
        `HTTP/1.1 200 OK\r\n${setCookie}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
    } else {
      const body = '{"metadata":{"a":1}}';
      socket.end(
        `HTTP/1.1 200 OK\r\n${setCookie}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
    }
  });
}

let reference: Stack;
let faulty: Stack;
let refused: Stack;
let upstream: RawUpstream;

beforeAll(async () => {
  const env = { LOG_LEVEL: 'trace', API_KEY_HEADER: 'x-service-token', MAX_REWRITE_BODY: '1kb' };
  reference = await startStack(env);
  upstream = await faultyUpstream();
  faulty = await startStack({ ...env, UPSTREAM_URL: upstream.url, UPSTREAM_TIMEOUT_MS: '200' });
  refused = await startStack({ ...env, UPSTREAM_URL: 'http://127.0.0.1:9' });
});
afterAll(async () => {
  await reference.close();
  await faulty.close();
  await refused.close();
  await upstream.close();
});

/** Every form a marker could take in a JSON log line. */
function forms(secret: string): string[] {
  return [
    secret,
    encodeURIComponent(secret),
    Buffer.from(secret).toString('base64').slice(0, 16),
    Buffer.from(secret).toString('hex'),
  ];
}

function abortMidDownload(url: string): Promise<void> {
  return new Promise((resolve) => {
    const req = http.get(`${url}/debug/bytes?n=50000000`, {
      headers: { ...SECRET_HEADERS, 'service-client-version': '1.0.0' },
      agent: false,
    });
    req.on('response', (res) => res.once('data', () => req.destroy()));
    req.on('error', () => {});
    req.on('close', () => resolve());
  });
}

function abortMidUpload(url: string, path: string, type: string): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1', () => {
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 0.59.0\r\n${RAW_SECRET_HEADERS}` +
          `Content-Type: ${type}\r\nContent-Length: 100000\r\n\r\n${'{"tags":['.padEnd(500, '1,')}`,
      );
      setTimeout(() => socket.destroy(), 50);
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve());
  });
}

describe('no credential in any log line', () => {
  it('across admitted, rejected, refused, faulted and aborted requests at LOG_LEVEL=trace', async () => {
    const q = `?access_token=${SECRETS.query}`;
    // Admitted, patched and rewritten (legacy client), streamed (current client).
    await send(reference.url, 'GET', `/missions${q}`, { ...LEGACY, ...SECRET_HEADERS });
    await send(
      reference.url,
      'POST',
      '/missions',
      { ...LEGACY, ...SECRET_HEADERS, 'content-type': 'application/json' },
      '{"name":"m","tags":[]}',
    );
    await send(reference.url, 'GET', `/files?tags=${SECRETS.query}`, { ...LEGACY, ...SECRET_HEADERS });
    // Each gate's rejection.
    await send(reference.url, 'GET', `/user/me${q}`, { ...SECRET_HEADERS, 'service-client-version': 'v1' }); // 426
    await send(reference.url, 'GET', '/user/me', {
      ...LEGACY,
      cookie: `authtoken=${SECRETS.authtoken}`,
      authorization: `Bearer ${SECRETS.authorization}`,
    }); // 401
    await send(reference.url, 'GET', '/user/me', {
      ...LEGACY,
      'x-service-token': SECRETS.customKey,
      'X-Service-Token': SECRETS.customKey,
    }); // 401: two keys
    await sendRaw(
      reference.url,
      `GET /api/health/%2e%2e/user/me HTTP/1.1\r\nHost: x\r\n${RAW_SECRET_HEADERS}\r\n`,
    ); // 400
    await send(
      reference.url,
      'POST',
      '/missions',
      { ...LEGACY, ...SECRET_HEADERS, 'content-type': 'application/json' },
      `{"tags":"${'x'.repeat(2048)}"}`,
    ); // 413
    await send(
      reference.url,
      'POST',
      '/missions',
      { ...LEGACY, ...SECRET_HEADERS, 'content-type': 'application/json' },
      `{"tags":${SECRETS.query}}`,
    ); // 400 malformed
    await send(reference.url, 'GET', '/user/me', {
      ...LEGACY,
      ...SECRET_HEADERS,
      upgrade: 'websocket',
      connection: 'upgrade',
    }).catch(() => {}); // 501
    // Refused by the HTTP parser (clientError carries the raw packet).
    await sendRaw(
      reference.url,
      `GET /user/me HTTP/1.1\r\nHost: x\r\n${RAW_SECRET_HEADERS}Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n`,
    );
    await sendRaw(
      reference.url,
      `GET /user/me HTTP/1.1\r\nHost: x\r\n${RAW_SECRET_HEADERS}X-Bad: a\x00b\r\n\r\n`,
    );
    await sendRaw(
      reference.url,
      `GET /user/me HTTP/1.1\r\nHost: x\r\n${RAW_SECRET_HEADERS}X-Pad: ${'p'.repeat(20_000)}\r\n\r\n`,
    ); // 431
    await sendRaw(
      reference.url,
      `CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n${RAW_SECRET_HEADERS}\r\n`,
    );
    // Upstream faults.
    await send(refused.url, 'GET', `/user/me${q}`, { ...LEGACY, ...SECRET_HEADERS });
    for (const path of ['/reset', '/invalid', '/stall', '/missions', '/projects/1']) {
      await send(faulty.url, 'GET', `${path}${q}`, { ...LEGACY, ...SECRET_HEADERS });
    }
    await send(faulty.url, 'GET', `/midbody${q}`, { ...LEGACY, ...SECRET_HEADERS }).catch(() => {});
    // Client aborts, streamed and buffered.
    await abortMidDownload(reference.url);
    await abortMidUpload(reference.url, '/debug/sink', 'application/octet-stream');
    await abortMidUpload(reference.url, '/missions', 'application/json');
    await new Promise((r) => setTimeout(r, 200));

    const text = reference.rawLogs() + faulty.rawLogs() + refused.rawLogs();
    // The scenarios above did run, and were logged.
    const statuses = new Set(
      [...reference.logs(), ...faulty.logs(), ...refused.logs()].map(
        (l) => (l.res as { statusCode?: number } | undefined)?.statusCode,
      ),
    );
    for (const status of [200, 400, 401, 413, 426, 431, 501, 502, 504])
      expect(statuses, String(status)).toContain(status);
    expect(text).toMatch(/response forwarded unpatched|patchSkipped/);
    expect(text).toMatch(/"aborted":true/);
    for (const [name, secret] of Object.entries(SECRETS)) {
      for (const form of forms(secret))
        expect(text.includes(form), `${name} (${form}) in the logs`).toBe(false);
    }
    expect(text).not.toMatch(/rawPacket|rawHeaders|"cookie"|"authorization"|"set-cookie"/i);
  });
});
