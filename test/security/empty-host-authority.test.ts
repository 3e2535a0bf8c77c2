/**
 * Attack: a request whose `Host` names no host (`Host:`, `Host: :80`): the empty case of host-header
 * injection.
 *
 * The hygiene gate took an empty `Host` for RFC 9110 §7.2's "no authority" and forwarded it (with no
 * `X-Forwarded-Host` of its own): the upstream's target URI became `http:///path` (links and
 * redirects built from it point nowhere, and a cache in front keyed on `Host` files it apart from
 * every real host). But the shim serves `http` and `https` only, whose URIs have a non-empty host
 * (RFC 9110 §4.2.1: a recipient MUST reject one without), and nginx answers both 400. Now so does the
 * shim, in its JSON, before anything reaches the upstream; an empty port (`Host: shim.test:`) is still
 * a host and is served.
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

describe('a Host that names no host', () => {
  it.each([
    ['an empty Host, HTTP/1.1', `GET /api/health HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n`],
    ['an empty Host, admitted', `GET /missions HTTP/1.1\r\nHost: \r\n${admitted}Connection: close\r\n\r\n`],
    ['a port alone', `GET /missions HTTP/1.1\r\nHost: :80\r\n${admitted}Connection: close\r\n\r\n`],
    ['an empty Host, HTTP/1.0', `GET /api/health HTTP/1.0\r\nHost:\r\n\r\n`],
  ])('%s gets the hygiene gate’s 400 in the shim’s JSON, and nothing goes upstream', async (_name, bytes) => {
    const since = markRequests(upstream.received);
    const raw = await sendRawUntilClose(stack.url, bytes);
    expect(statusesIn(raw)).toEqual([400]);
    expect(raw).toMatch(/\r\nservice-version: 1\.4\.0\r\n/i);
    // The raw reader keeps bytes as Latin-1: the message's "§" is decoded back from UTF-8 here.
    const body = JSON.parse(Buffer.from(raw.slice(raw.indexOf('\r\n\r\n') + 4), 'latin1').toString('utf8'));
    expect(body).toEqual({
      statusCode: 400,
      message:
        'The Host header must name a host: an "http" or "https" URI has a non-empty one (RFC 9110 §4.2.1).',
      error: 'Bad Request',
    });
    expect(since()).toEqual([]);
  });

  it('a host with an empty port, and HTTP/1.0 without Host, are still served', async () => {
    const since = markRequests(upstream.received);
    for (const bytes of [
      'GET /api/health HTTP/1.1\r\nHost: shim.test:\r\nConnection: close\r\n\r\n',
      'GET /api/health HTTP/1.0\r\n\r\n',
    ])
      expect(statusesIn(await sendRawUntilClose(stack.url, bytes))).toEqual([200]);
    expect(since().map((r) => r.target)).toEqual(['/api/health', '/api/health']);
  });
});
