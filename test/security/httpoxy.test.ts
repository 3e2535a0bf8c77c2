/**
 * Attack: httpoxy (CVE-2016-5385, httpoxy.org). A client sends `Proxy: http://evil.test:8080`; a
 * CGI-style upstream (CGI, PHP-CGI, Go's `net/http/cgi` before 1.6.3, WSGI applications that copy their
 * environ) turns it into the environment variable `HTTP_PROXY` (RFC 3875 §4.1.18), and the HTTP library
 * the application uses for its own outbound requests (Go's `net/http`, Python's `urllib`, Guzzle, curl)
 * reads that as its proxy: the client routes the backend's calls, with their credentials, through a host
 * of its choosing. httpoxy.org's mitigation is to drop the header at the edge.
 *
 * Defence (src/proxy/outgoing-request.ts `HTTPOXY`): a client's `Proxy` header, in any case and
 * repeated, is never forwarded, on public and admitted paths alike; the request goes on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { openRaw, send } from '../helpers/http.ts';
import { answerEachRequest, markRequests } from '../helpers/http1-frames.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

async function stackOnRawUpstream() {
  const upstream = await startRawUpstream(answerEachRequest());
  upstreams.push(upstream);
  const stack = await startStack({ UPSTREAM_URL: upstream.url });
  stacks.push(stack);
  return { upstream, stack };
}

describe('httpoxy: a client Proxy header', () => {
  it('never reaches the upstream, on a public path or an admitted one, legacy or current', async () => {
    const { upstream, stack } = await stackOnRawUpstream();
    for (const [path, headers] of [
      ['/api/health', {}],
      ['/user/me', CURRENT],
      ['/files?tags=a', LEGACY],
    ] as const) {
      const since = markRequests(upstream.received);
      const reply = await send(stack.url, 'GET', path, { ...headers, Proxy: 'http://evil.test:8080' });
      expect(reply.status).toBe(200);
      const [request, ...more] = since();
      expect(more).toEqual([]);
      expect(request?.headers.filter(([name]) => name.toLowerCase() === 'proxy')).toEqual([]);
      // Everything else the client sent still goes on.
      expect(request?.headers.some(([name]) => name.toLowerCase() === 'x-forwarded-for')).toBe(true);
    }
  });

  it('in any case and repeated, is dropped; a header that only starts with "proxy" is not', async () => {
    const { upstream, stack } = await stackOnRawUpstream();
    const since = markRequests(upstream.received);
    const client = openRaw(stack.url);
    client.socket.write(
      'GET /api/health HTTP/1.1\r\nHost: shim.test\r\nPROXY: http://evil.test:8080\r\n' +
        'proxy: http://evil.test:8081\r\nProxy-Id: kept\r\n\r\n',
    );
    await waitFor(() => /^HTTP\/1\.1 200 /.test(client.text()), { what: 'the response' });
    client.socket.destroy();
    const [request] = since();
    expect(request?.headers.filter(([name]) => name.toLowerCase() === 'proxy')).toEqual([]);
    expect(request?.headers.filter(([name]) => name.toLowerCase() === 'proxy-id')).toEqual([
      ['proxy-id', 'kept'],
    ]);
  });
});
