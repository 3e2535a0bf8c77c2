/**
 * Attack: response queue poisoning through the body an upstream sends after a HEAD response.
 *
 * A response to HEAD has no body (RFC 9110 §9.3.2, RFC 9112 §6.3), and Node's client reads none. But
 * gunicorn 20.1 (Debian 12's; the sync and gthread workers) writes whatever the WSGI application
 * returns, bounded by its `Content-Length`, after the head, in a write of its own — and applications
 * that do not strip it for HEAD (a bare WSGI application; Werkzeug/Flask strips it) return the GET's
 * body. When those bytes arrive after the shim put the connection back in its pool and wrote the
 * next request on it — another client's — Node reads them as the start of that request's response. A
 * body that is itself an HTTP response (a stored file: an uploaded `.txt` whose content is
 * `HTTP/1.1 200 OK …`) answers the other client in place of its own response, and the real one goes
 * to the next request after that. Measured with gunicorn 20.1 (gthread, keep-alive 5 s) behind the
 * bundle: two clients sending HEAD for such a file, four clients sending GETs: 102 of 9,580 GETs in
 * 10 s got the attacker's response, 139 more got a 502.
 *
 * Defence (src/proxy/upstream-attempt.ts): a HEAD's upstream connection is never reused: it goes as
 * `Connection: close`, and Node closes it after the response whatever the upstream answers.
 *
 * The upstream is a raw TCP server that writes a HEAD's body when the next request arrives on the same
 * connection (the order gunicorn's late write produces), so the test needs no Python and no race.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { frameRequests } from '../helpers/http1-frames.ts';
import { FORGED, startLateBodyUpstream, targetEcho } from '../helpers/late-body-upstream.ts';
import type { RawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

/**
 * An upstream that answers every request by its target (`/files/…`: the stored file `FORGED`),
 * keep-alive, and writes a HEAD's body late: just before its answer to the next request on the same
 * connection.
 */
async function lateHeadBodyUpstream() {
  const upstream = await startLateBodyUpstream((request) => {
    if (!request.target.startsWith('/files/')) return { now: targetEcho(request.target) };
    const head = `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${FORGED.length}\r\n\r\n`;
    return request.method === 'HEAD' ? { now: head, late: FORGED } : { now: head + FORGED };
  });
  upstreams.push(upstream);
  return upstream;
}

describe('an upstream that sends a body after its response to HEAD', () => {
  it('the next client gets its own response, never the body of the HEAD', async () => {
    const upstream = await lateHeadBodyUpstream();
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);

    const head = await send(stack.url, 'HEAD', '/files/a.txt', CURRENT);
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe(String(FORGED.length));
    for (let i = 0; i < 3; i++) {
      const reply = await send(stack.url, 'GET', `/mine${i}`, CURRENT);
      expect(reply.status).toBe(200);
      expect(reply.json()).toEqual({ target: `/mine${i}` });
    }

    // The HEAD went alone on its connection, announced as the last; the GETs after it share another.
    const byConnection = upstream.received.map((bytes) =>
      frameRequests(bytes).requests.map((r) => `${r.method} ${r.target}`),
    );
    expect(byConnection).toEqual([['HEAD /files/a.txt'], ['GET /mine0', 'GET /mine1', 'GET /mine2']]);
    const [headRequest] = frameRequests(upstream.received[0] ?? '').requests;
    expect(headRequest?.headers).toContainEqual(['connection', 'close']);
  });

  it('a GET of the same file still reuses its connection', async () => {
    const upstream = await lateHeadBodyUpstream();
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    const file = await send(stack.url, 'GET', '/files/a.txt', CURRENT);
    expect(file.text).toBe(FORGED);
    expect((await send(stack.url, 'GET', '/next', CURRENT)).json()).toEqual({ target: '/next' });
    expect(upstream.connections()).toBe(1);
  });
});
