/**
 * The order of checks (SPEC §3) when a request fails several at once: the clause-by-clause audit
 * (docs/spec-conformance.md) found each step tested alone, with the other steps passing, but not
 * their order. Hygiene (step 1) comes before the preflight and public-path exemptions (steps 2–3),
 * the version (step 4) before the credentials (step 5). The shim in front of the reference backend,
 * raw requests on real sockets.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendRawUntilClose } from '../helpers/http.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ MIN_CLIENT_VERSION: '0.40.0' });
});
afterAll(() => stack.close());

/** Sends one raw request with `Connection: close`; returns its status and JSON body. */
async function exchange(head: string, body = ''): Promise<{ status: number; json: Record<string, unknown> }> {
  const raw = await sendRawUntilClose(
    stack.url,
    `${head}Host: shim.test\r\nConnection: close\r\n\r\n${body}`,
  );
  const status = Number(raw.slice(9, 12));
  return { status, json: JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) };
}

describe('a request that fails several checks gets the first one’s status (SPEC §3)', () => {
  it.each([
    ['hygiene and version and credentials', 'GET /user/%2e%2e/user/me HTTP/1.1\r\n', 400],
    ['hygiene on a public path', 'GET /api/health/%2e%2e/user/me HTTP/1.1\r\n', 400],
    [
      'hygiene on a CORS preflight',
      'OPTIONS /a/%2e%2e/user/me HTTP/1.1\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: GET\r\n',
      400,
    ],
    [
      'Content-Length with Transfer-Encoding, without version',
      'POST /missions HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n',
      400,
    ],
    ['an upgrade without version', 'GET /user/me HTTP/1.1\r\nUpgrade: websocket\r\n', 501],
    [
      'a version below MIN_CLIENT_VERSION, without credentials',
      'GET /user/me HTTP/1.1\r\nService-Client-Version: 0.39.0\r\n',
      426,
    ],
    [
      'a malformed version, without credentials',
      'GET /user/me HTTP/1.1\r\nService-Client-Version: v0.59.0\r\n',
      426,
    ],
  ])('%s → %i, in the shim’s JSON shape (SPEC §7)', async (_name, head, status) => {
    const reply = await exchange(head);
    expect(reply.status).toBe(status);
    expect(reply.json).toEqual({
      statusCode: status,
      message: expect.any(String),
      error: http.STATUS_CODES[status],
    });
  });
});
