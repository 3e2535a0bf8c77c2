/**
 * Attack: admission bypass through `Connection` (hop-by-hop header abuse, RFC 9110 §7.6.1; found by
 * mutation fuzzing of raw HTTP/1.1 traffic, which spliced `Connection: Service-Client-Version` into a
 * request).
 *
 * A proxy drops every header the client's `Connection` names, and the shim's forwarder does. Its gates
 * read the same headers before that, though: a request with `Service-Client-Version`, credentials
 * (`x-api-key` or the auth cookies) and `Connection: Service-Client-Version, x-api-key` was admitted
 * by the gates and reached the upstream with neither, as if the shim had let an unchecked request
 * through; and an `OPTIONS` with `Connection: origin` counted as a CORS preflight (unchecked) and
 * reached the upstream without its `Origin`. The gates now read what they admit on as it will be
 * forwarded: a header `Connection` names counts as not sent (426, 401, or a request that is no
 * preflight and goes through the gates).
 *
 * Every case is sent as raw bytes; the upstream is a raw TCP server that records every request, and
 * none it received may lack the version header or a credential (or be a preflight without `Origin`
 * and `Access-Control-Request-Method`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendRawUntilClose, statusesIn } from '../helpers/http.ts';
import { answerEachRequest, type FramedRequest, markRequests } from '../helpers/http1-frames.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

let upstream: RawUpstream;
let stack: Stack;
beforeAll(async () => {
  upstream = await startRawUpstream(answerEachRequest());
  stack = await startStack({ UPSTREAM_URL: upstream.url });
});
afterAll(async () => {
  await stack.close();
  await upstream.close();
});

/** Whether an upstream request carries what admitted it. */
function carriesAdmission(r: FramedRequest): boolean {
  const header = (name: string) => r.headers.find(([n]) => n === name)?.[1];
  if (r.method === 'OPTIONS')
    return header('origin') !== undefined && header('access-control-request-method') !== undefined;
  const cookie = header('cookie') ?? '';
  const credential =
    (header('x-api-key') ?? '').trim() !== '' ||
    (/authtoken=\w/.test(cookie) && /refreshtoken=\w/.test(cookie));
  return header('service-client-version') !== undefined && credential;
}

async function probe(head: string): Promise<{ statuses: number[]; forwarded: FramedRequest[] }> {
  const since = markRequests(upstream.received);
  const raw = await sendRawUntilClose(stack.url, `${head}Host: shim.test\r\nConnection: close\r\n\r\n`);
  const forwarded = since();
  for (const r of forwarded)
    expect(carriesAdmission(r), `${head} reached the upstream as ${JSON.stringify(r.headers)}`).toBe(true);
  return { statuses: statusesIn(raw), forwarded };
}

describe('a Connection header naming what the gates admit on', () => {
  const version = 'Service-Client-Version: 0.59.0\r\n';
  const key = 'x-api-key: test-key\r\n';
  const cookies = 'Cookie: authtoken=a; refreshtoken=r\r\n';
  it.each([
    [
      'the version header',
      `GET /missions HTTP/1.1\r\n${version}${key}Connection: Service-Client-Version\r\n`,
      426,
    ],
    [
      'the version header, upper case, among others',
      `GET /missions HTTP/1.1\r\n${version}${key}Connection: keep-alive, SERVICE-CLIENT-VERSION\r\n`,
      426,
    ],
    ['the API key', `GET /missions HTTP/1.1\r\n${version}${key}Connection: x-api-key\r\n`, 401],
    ['the cookies', `GET /missions HTTP/1.1\r\n${version}${cookies}Connection: cookie\r\n`, 401],
    [
      'both',
      `GET /user/me HTTP/1.1\r\n${version}${key}Connection: Service-Client-Version, x-api-key\r\n`,
      426,
    ],
    [
      'the API key, with cookies still there',
      `GET /missions HTTP/1.1\r\n${version}${key}${cookies}Connection: x-api-key\r\n`,
      200,
    ],
  ])('%s: refused as if not sent, never forwarded without it', async (_name, head, status) => {
    const { statuses, forwarded } = await probe(head);
    expect(statuses).toEqual([status]);
    expect(forwarded.length).toBe(status === 200 ? 1 : 0);
  });

  it.each([
    ['Origin', 'origin'],
    ['Access-Control-Request-Method', 'access-control-request-method'],
  ])(
    'an OPTIONS whose Connection names %s is no preflight: it goes through the gates',
    async (_name, named) => {
      const preflight = `OPTIONS /missions HTTP/1.1\r\nOrigin: https://app.test\r\nAccess-Control-Request-Method: POST\r\nConnection: ${named}\r\n`;
      const { statuses, forwarded } = await probe(preflight);
      expect(statuses).toEqual([426]);
      expect(forwarded).toEqual([]);
    },
  );

  it('a Connection naming other headers changes nothing', async () => {
    const { statuses, forwarded } = await probe(
      `GET /missions HTTP/1.1\r\n${version}${key}Connection: x-trace, keep-alive\r\nX-Trace: 1\r\n`,
    );
    expect(statuses).toEqual([200]);
    expect(forwarded.map((r) => r.headers.some(([n]) => n === 'x-trace'))).toEqual([false]);
  });
});
