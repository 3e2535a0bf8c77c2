/**
 * Every response the shim makes itself carries `Date` (RFC 9110 §6.6.1: an origin server with a clock
 * sends it on every 2xx–4xx response): the pipeline's refusals, which Node's `ServerResponse` dates, and
 * the HTTP server's own, written raw before the pipeline sees the request (a malformed head, `CONNECT`,
 * a head too large, an upgrade) — those had none (docs/reliability.md fix 176, found by nikto's scan).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send, sendRawUntilClose } from '../helpers/http.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.close());

/** An IMF-fixdate (RFC 9110 §5.6.7), e.g. `Fri, 27 Nov 2026 13:40:00 GMT`. */
const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/** The `Date` values of a raw response head. */
function dates(raw: string): string[] {
  const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
  return head
    .split('\r\n')
    .filter((line) => /^date:/i.test(line))
    .map((line) => line.slice(line.indexOf(':') + 1).trim());
}

describe('Date on the responses the shim makes itself', () => {
  it.each([
    ['a malformed head (400)', 'GET /user/me HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n', 400],
    ['an unknown method (400)', 'FOO / HTTP/1.1\r\nHost: x\r\n\r\n', 400],
    ['CONNECT (400)', 'CONNECT upstream.example:443 HTTP/1.1\r\nHost: upstream.example:443\r\n\r\n', 400],
    ['a head too large (431)', `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
    [
      'an upgrade (501)',
      'GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
      501,
    ],
  ])('%s, written by the HTTP server: one Date', async (_what, request, status) => {
    const raw = await sendRawUntilClose(stack.url, request);
    expect(raw.startsWith(`HTTP/1.1 ${status} `)).toBe(true);
    const values = dates(raw);
    expect(values).toHaveLength(1);
    expect(values[0]).toMatch(IMF_FIXDATE);
    expect(Math.abs(Date.parse(values[0] ?? '') - Date.now())).toBeLessThan(60_000);
  });

  it('the pipeline’s refusals (426, 401) too', async () => {
    for (const headers of [{}, { 'service-client-version': '1.0.0' }]) {
      const reply = await send(stack.url, 'GET', '/user/me', headers);
      expect([426, 401]).toContain(reply.status);
      expect(reply.headers.date).toMatch(IMF_FIXDATE);
    }
  });
});
