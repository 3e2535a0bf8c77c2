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
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { frameRequests } from '../helpers/http1-frames.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

const FORGED_BODY = '{"forged":true}';
/** The stored file: a complete HTTP response of the attacker's. */
const FILE = `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${FORGED_BODY.length}\r\n\r\n${FORGED_BODY}`;

const json = (target: string) => {
  const body = JSON.stringify({ target });
  return `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
};

/**
 * An upstream that answers every request by its target (`/files/…`: the stored file), keep-alive, and
 * writes a HEAD's body late: just before its answer to the next request on the same connection.
 */
async function lateHeadBodyUpstream() {
  const answered = new WeakMap<net.Socket, number>();
  const owed = new WeakMap<net.Socket, string>();
  const upstream = await startRawUpstream((socket, received) => {
    const { requests } = frameRequests(received);
    for (let i = answered.get(socket) ?? 0; i < requests.length; i++) {
      const request = requests[i];
      if (request === undefined) continue;
      const late = owed.get(socket);
      if (late !== undefined) {
        socket.write(late);
        owed.delete(socket);
      }
      if (request.target.startsWith('/files/')) {
        socket.write(
          `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${FILE.length}\r\n\r\n${request.method === 'HEAD' ? '' : FILE}`,
        );
        if (request.method === 'HEAD') owed.set(socket, FILE);
      } else {
        socket.write(json(request.target));
      }
    }
    answered.set(socket, requests.length);
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
    expect(head.headers['content-length']).toBe(String(FILE.length));
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
    expect(file.text).toBe(FILE);
    expect((await send(stack.url, 'GET', '/next', CURRENT)).json()).toEqual({ target: '/next' });
    expect(upstream.connections()).toBe(1);
  });
});
