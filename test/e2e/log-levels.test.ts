/**
 * Log levels as docs/operations.md "Logs" promises them: a client's own mistake, which any client can
 * repeat at will, is logged at `info` (pino level 30), whether the pipeline refused it (426, 401, 400,
 * 417, 501) or the HTTP server did before the pipeline (a parser error or a `CONNECT`: 400; a
 * head too large: 431; an upgrade with `Connection: upgrade`: 501). `warn` and `error` stay for what an
 * operator must look at; a flood of malformed requests from a scanner must not raise them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send, sendRawUntilClose } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.close());

const INFO = 30;

/** Log lines written after `from` lines, once `count` of them carry a `rejection`. */
async function rejectionLines(from: number, count: number) {
  return waitFor(() => {
    const lines = stack
      .logs()
      .slice(from)
      .filter((line) => line.rejection !== undefined);
    return lines.length >= count ? lines : undefined;
  });
}

describe('log levels of refused client requests', () => {
  it.each([
    ['a malformed request', 'GET /user/me HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n', 'malformed'],
    ['an unknown method token', 'FROBNICATE /user/me HTTP/1.1\r\nHost: x\r\n\r\n', 'malformed'],
    ['CONNECT', 'CONNECT upstream.example:443 HTTP/1.1\r\nHost: upstream.example:443\r\n\r\n', 'malformed'],
    [
      'an oversized head',
      `GET /user/me HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      'header_size',
    ],
    [
      'a WebSocket upgrade',
      'GET /user/me HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
      'upgrade',
    ],
  ])('%s, refused by the HTTP server, is logged at info', async (_what, request, reason) => {
    const from = stack.logs().length;
    await sendRawUntilClose(stack.url, request);
    const [line] = await rejectionLines(from, 1);
    expect(line).toMatchObject({ msg: 'request refused by the HTTP server', rejection: reason, level: INFO });
  });

  it('the pipeline refusals of client mistakes are at info too', async () => {
    const from = stack.logs().length;
    await send(stack.url, 'GET', '/user/me', {});
    await send(stack.url, 'GET', '/user/me', { 'service-client-version': '1.0.0' });
    await send(stack.url, 'GET', '/a/%2e%2e/b', CURRENT);
    await send(stack.url, 'GET', '/user/me', { ...CURRENT, expect: 'fancy' });
    await send(stack.url, 'GET', '/user/me', { ...CURRENT, upgrade: 'h2c' });
    const lines = await rejectionLines(from, 5);
    expect(lines.map((line) => line.rejection).sort()).toEqual(
      ['credentials', 'expectation', 'hygiene', 'upgrade', 'version'].sort(),
    );
    for (const line of lines) expect(line.level, String(line.rejection)).toBe(INFO);
  });
});
