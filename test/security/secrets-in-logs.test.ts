/**
 * Attack: credential harvesting from logs (CWE-532, OWASP Logging Cheat Sheet).
 *
 * Logs travel further than the traffic: to log shippers, SIEMs, support tickets. A proxy that logs a
 * request or response object, an error carrying the raw request (`clientError`'s `rawPacket`), or a
 * header map on an error path hands every reader the callers' session cookies and API keys. The shim
 * must never write a cookie, an API key (the configured header), an `Authorization` or
 * `Proxy-Authorization` value, or an upstream `Set-Cookie` value — at any log level (here `trace`), on
 * any path: admitted, rejected by each gate, refused by the HTTP parser, upstream refused, reset,
 * invalid, timed out, client aborts. The alias layer's paths (a rewritten body and query, a body over
 * the rewrite limit, a malformed body to rewrite, a patched route's invalid JSON, an upload to a
 * rewritten route cut off): `aliases-secrets-in-logs.test.ts`.
 *
 * Every request below carries unique marker secrets (`test/helpers/secrets.ts`); after all of them, no
 * log line may contain any marker, in plain text, percent-encoded, base64 or hex.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDebugStack } from '../helpers/debug-upstream.ts';
import { send, sendRawUntilClose } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import type { RawUpstream } from '../helpers/raw-upstream.ts';
import {
  abortMidUpload,
  faultyUpstream,
  LEAKY_FIELDS,
  LEGACY,
  leakedSecrets,
  loggedStatuses,
  RAW_SECRET_HEADERS,
  SECRET_HEADERS,
  SECRETS,
  TRACE_ENV,
} from '../helpers/secrets.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

let reference: Stack;
let diagnostics: Stack;
let faulty: Stack;
let refused: Stack;
let upstream: RawUpstream;

beforeAll(async () => {
  reference = await startStack(TRACE_ENV);
  diagnostics = await startDebugStack(TRACE_ENV);
  upstream = await faultyUpstream();
  faulty = await startStack({ ...TRACE_ENV, UPSTREAM_URL: upstream.url, UPSTREAM_TIMEOUT_MS: '200' });
  refused = await startStack({ ...TRACE_ENV, UPSTREAM_URL: 'http://127.0.0.1:9' });
});
afterAll(async () => {
  await reference.close();
  await diagnostics.close();
  await faulty.close();
  await refused.close();
  await upstream.close();
});

/** A current client that hangs up at the first bytes of a 50 MB download. */
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

describe('no credential in any log line', () => {
  it('across admitted, rejected, refused, faulted and aborted requests at LOG_LEVEL=trace', async () => {
    const q = `?access_token=${SECRETS.query}`;
    // Admitted (legacy client), streamed (current client, the aborted download below).
    await send(reference.url, 'GET', `/missions${q}`, { ...LEGACY, ...SECRET_HEADERS });
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
    await sendRawUntilClose(
      reference.url,
      `GET /api/health/%2e%2e/user/me HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${RAW_SECRET_HEADERS}\r\n`,
    ); // 400
    await send(reference.url, 'GET', '/user/me', {
      ...LEGACY,
      ...SECRET_HEADERS,
      upgrade: 'websocket',
      connection: 'upgrade',
    }).catch(() => {}); // 501
    // Credentials in the target itself: an absolute-form target's userinfo and a fragment (both
    // refused 400, and logged), a path parameter (forwarded; the reference backend answers 404).
    await sendRawUntilClose(
      reference.url,
      `GET http://alice:${SECRETS.userinfo}@x/user/me HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    );
    await sendRawUntilClose(
      reference.url,
      `GET /user/me#api_key=${SECRETS.fragment} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    );
    await send(reference.url, 'GET', `/missions;jsessionid=${SECRETS.pathParameter}`, {
      ...LEGACY,
      ...SECRET_HEADERS,
    });
    // Refused by the HTTP parser (clientError carries the raw packet).
    await sendRawUntilClose(
      reference.url,
      `GET /user/me HTTP/1.1\r\nHost: x\r\n${RAW_SECRET_HEADERS}Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n`,
    );
    await sendRawUntilClose(
      reference.url,
      `GET /user/me HTTP/1.1\r\nHost: x\r\n${RAW_SECRET_HEADERS}X-Bad: a\x00b\r\n\r\n`,
    );
    await sendRawUntilClose(
      reference.url,
      `GET /user/me HTTP/1.1\r\nHost: x\r\n${RAW_SECRET_HEADERS}X-Pad: ${'p'.repeat(20_000)}\r\n\r\n`,
    ); // 431
    await sendRawUntilClose(
      reference.url,
      `CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n${RAW_SECRET_HEADERS}\r\n`,
    );
    // Upstream faults.
    await send(refused.url, 'GET', `/user/me${q}`, { ...LEGACY, ...SECRET_HEADERS });
    for (const path of ['/reset', '/invalid', '/stall', '/projects/1']) {
      await send(faulty.url, 'GET', `${path}${q}`, { ...LEGACY, ...SECRET_HEADERS });
    }
    await send(faulty.url, 'GET', `/midbody${q}`, { ...LEGACY, ...SECRET_HEADERS }).catch(() => {});
    // Client aborts, streamed.
    await abortMidDownload(diagnostics.url);
    await abortMidUpload(diagnostics.url, '/debug/sink', 'application/octet-stream');
    // The aborted exchanges are logged when the shim notices the client went away.
    await waitFor(() => (diagnostics.rawLogs().match(/"aborted":true/g)?.length ?? 0) >= 2, {
      what: 'the aborts to be logged',
    });

    const text = reference.rawLogs() + diagnostics.rawLogs() + faulty.rawLogs() + refused.rawLogs();
    // The scenarios above did run, and were logged.
    const statuses = loggedStatuses(reference, diagnostics, faulty, refused);
    for (const status of [200, 400, 401, 426, 431, 501, 502, 504])
      expect(statuses, String(status)).toContain(status);
    expect(text).toMatch(/"aborted":true/);
    expect(leakedSecrets(text), 'markers in the logs').toEqual([]);
    expect(text).not.toMatch(LEAKY_FIELDS);
  });
});
