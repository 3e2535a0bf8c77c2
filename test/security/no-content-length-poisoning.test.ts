/**
 * Attack: a 204 (No Content) that claims a length (raw probes of upstream response heads, 2026-11-26;
 * fix 117).
 *
 * 1. Towards the client: a 204 with `Content-Length: 5` went on as sent. RFC 9110 §8.6: a server MUST
 *    NOT send `Content-Length` in a 1xx or 204; a client, or a cache or proxy in front, that believed
 *    it would take the first bytes of the next response on the connection for this one's body (the
 *    next response "queued" one place late). nginx drops the field; so does the shim now
 *    (src/proxy/response-writer.ts `responseHead`; `earlyHints` for a 103).
 * 2. Towards the upstream pool: a server that announces a body with a 204 may write it, as gunicorn
 *    20.1 does for a WSGI application that returns one (it writes a HEAD's body too: fix 67,
 *    head-response-body-poisoning.test.ts). Node's client reads no body for a 204, so bytes that arrive
 *    after the connection went back to the pool and was reused are read as the next request's response —
 *    another client's — and a body that is itself an HTTP response answers that client. Such a 204's
 *    connection is now not reused (src/proxy/upstream-attempt.ts), as a HEAD's is not; a 204 without a
 *    length, or `Content-Length: 0`, keeps its connection.
 *
 * The upstream is a raw TCP server that writes the 204's body when the next request arrives on the same
 * connection (the order a late write produces), so the test needs no Python and no race.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { send, sendRawUntilClose } from '../helpers/http.ts';
import { frameRequests } from '../helpers/http1-frames.ts';
import { FORGED, startLateBodyUpstream, targetEcho } from '../helpers/late-body-upstream.ts';
import type { RawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

/**
 * An upstream that answers a DELETE with a 204 carrying `lengthField` and owes `FORGED` when the field
 * announces a body; every other request its own target as JSON, keep-alive.
 */
async function lateNoContentBodyUpstream(lengthField: string) {
  const announces = lengthField !== '' && !lengthField.includes(': 0');
  const upstream = await startLateBodyUpstream((request) =>
    request.method === 'DELETE'
      ? {
          now: `HTTP/1.1 204 No Content\r\n${lengthField}X-Trace: t\r\n\r\n`,
          ...(announces && { late: FORGED }),
        }
      : { now: targetEcho(request.target) },
  );
  upstreams.push(upstream);
  return upstream;
}

describe('a 204 that claims a length', () => {
  it('reaches the client without Content-Length, and the next response on its connection is whole', async () => {
    const upstream = await lateNoContentBodyUpstream(`Content-Length: ${FORGED.length}\r\n`);
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    const auth = 'x-api-key: test-key\r\nService-Client-Version: 1.0.0\r\n';
    const bytes = await sendRawUntilClose(
      stack.url,
      `DELETE /missions/1 HTTP/1.1\r\nHost: shim.test\r\n${auth}\r\n` +
        `GET /missions HTTP/1.1\r\nHost: shim.test\r\n${auth}Connection: close\r\n\r\n`,
    );
    const [noContent, next] = bytes.split(/(?=HTTP\/1\.1 )/);
    expect(noContent).toMatch(/^HTTP\/1\.1 204 /);
    expect(noContent).toContain('X-Trace: t\r\n');
    expect(noContent!.toLowerCase()).not.toContain('content-length');
    expect(noContent!.endsWith('\r\n\r\n')).toBe(true);
    expect(next).toMatch(/^HTTP\/1\.1 200 /);
    expect(next!.endsWith(`\r\n\r\n${JSON.stringify({ target: '/missions' })}`)).toBe(true);
  });

  it('the clients after it get their own responses, never the body the upstream wrote late', async () => {
    const upstream = await lateNoContentBodyUpstream(`Content-Length: ${FORGED.length}\r\n`);
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    expect((await send(stack.url, 'DELETE', '/missions/1', CURRENT)).status).toBe(204);
    for (let i = 0; i < 3; i++) {
      const reply = await send(stack.url, 'GET', `/mine${i}`, i % 2 === 0 ? CURRENT : LEGACY);
      expect(reply.status).toBe(200);
      expect(reply.json()).toEqual({ target: `/mine${i}` });
    }
    // The 204 went alone on its connection; the GETs after it share another.
    const byConnection = upstream.received.map((bytes) =>
      frameRequests(bytes).requests.map((r) => `${r.method} ${r.target}`),
    );
    expect(byConnection).toEqual([['DELETE /missions/1'], ['GET /mine0', 'GET /mine1', 'GET /mine2']]);
  });

  it('a 204 without a length, or with Content-Length: 0, keeps its connection', async () => {
    for (const field of ['', 'Content-Length: 0\r\n']) {
      const upstream = await lateNoContentBodyUpstream(field);
      const stack = await startStack({ UPSTREAM_URL: upstream.url });
      stacks.push(stack);
      const gone = await send(stack.url, 'DELETE', '/missions/1', CURRENT);
      expect(gone.status).toBe(204);
      expect(gone.headers['content-length']).toBeUndefined();
      expect((await send(stack.url, 'GET', '/next', CURRENT)).json()).toEqual({ target: '/next' });
      expect(upstream.connections()).toBe(1);
    }
  });

  it('a legacy client’s 204 has none either (its patched head never had one)', async () => {
    const upstream = await lateNoContentBodyUpstream(
      'Content-Type: application/json\r\nContent-Length: 5\r\n',
    );
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    const reply = await send(stack.url, 'DELETE', '/missions/1', LEGACY);
    expect(reply.status).toBe(204);
    expect(reply.headers['content-length']).toBeUndefined();
  });
});
