/**
 * Attack: an HTTP/1.x message that claims another HTTP version on its request line (version confusion:
 * `GET / HTTP/2.0` in text, found by raw probes of request-line versions).
 *
 * Node's parser accepts `HTTP/2.0` on a request line (for HTTP/2's connection preface, which the front
 * server refuses) and then reads the message with HTTP/1.1's framing but HTTP/1.0's connection rule.
 * The shim handled it as HTTP/1.1 and forwarded it upstream as an HTTP/1.1 request — a message no
 * HTTP/2 peer and no HTTP/1.x peer would send, passed on as something else. nginx and Apache httpd
 * answer 505 (RFC 9110 §15.6.6); so does the shim now, before any other gate, in its JSON, counted under
 * `http_version` and logged at info (the client's doing); nothing reaches the upstream and the
 * connection closes. HTTP/1.1, 1.0 and (headerless) 0.9 request lines are served as before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendRawUntilClose, statusesIn } from '../helpers/http.ts';
import { answerEachRequest, markRequests } from '../helpers/http1-frames.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

let upstream: RawUpstream;
let stack: Stack;
beforeAll(async () => {
  upstream = await startRawUpstream(answerEachRequest());
  stack = await startStack({ UPSTREAM_URL: upstream.url, SERVICE_VERSION: '1.4.0' });
});
afterAll(async () => {
  await stack.close();
  await upstream.close();
});

const admitted = 'Service-Client-Version: 0.59.0\r\nx-api-key: test-key\r\n';

/** `shim_rejections_total{reason="http_version"}` now. */
async function refusedVersions(): Promise<number> {
  const text = await stack.metrics.registry.metrics();
  return Number(/shim_rejections_total\{reason="http_version"\} (\d+)/.exec(text)?.[1] ?? Number.NaN);
}

describe('a request line that claims HTTP/2.0 on an HTTP/1.x connection', () => {
  it.each([
    ['a public path', `GET /api/health HTTP/2.0\r\nHost: shim.test\r\n\r\n`],
    ['an admitted request', `GET /missions HTTP/2.0\r\nHost: shim.test\r\n${admitted}\r\n`],
    [
      'a chunked POST with a request pipelined behind it',
      `POST /missions HTTP/2.0\r\nHost: shim.test\r\n${admitted}Content-Type: application/json\r\n` +
        `Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n` +
        'GET /api/health?smuggled HTTP/1.1\r\nHost: shim.test\r\n\r\n',
    ],
    ['keep-alive asked for', `GET /api/health HTTP/2.0\r\nHost: shim.test\r\nConnection: keep-alive\r\n\r\n`],
  ])(
    '%s gets one 505 in the shim’s JSON, the connection closes, and nothing goes upstream',
    async (_name, bytes) => {
      const since = markRequests(upstream.received);
      const before = await refusedVersions();
      const from = stack.logs().length;
      const raw = await sendRawUntilClose(stack.url, bytes);
      expect(statusesIn(raw)).toEqual([505]);
      expect(raw).toMatch(/\r\ncontent-type: application\/json/i);
      expect(raw).toMatch(/\r\nservice-version: 1\.4\.0\r\n/i);
      expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toEqual({
        statusCode: 505,
        message: 'HTTP/2.0 is not supported on an HTTP/1.x connection: send the request as HTTP/1.1.',
        error: 'HTTP Version Not Supported',
      });
      expect(since()).toEqual([]);
      expect(await refusedVersions()).toBe(before + 1);
      const line = stack
        .logs()
        .slice(from)
        .find((l) => l.msg === 'request completed');
      expect(line).toMatchObject({ rejection: 'http_version', res: { statusCode: 505 }, level: 30 });
    },
  );

  it('HTTP/1.1, HTTP/1.0 and a headerless HTTP/0.9 request line are still served', async () => {
    const since = markRequests(upstream.received);
    for (const bytes of [
      'GET /api/health HTTP/1.1\r\nHost: shim.test\r\nConnection: close\r\n\r\n',
      'GET /api/health HTTP/1.0\r\n\r\n',
      'GET /api/health\r\n\r\n',
    ])
      expect(statusesIn(await sendRawUntilClose(stack.url, bytes))).toEqual([200]);
    expect(since().map((r) => r.target)).toEqual(['/api/health', '/api/health', '/api/health']);
  });
});
