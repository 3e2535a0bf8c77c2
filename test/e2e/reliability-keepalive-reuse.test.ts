/**
 * Reliability: an upstream keep-alive connection closed by the upstream just as the shim reuses it
 * (SPEC §4: upstream connections are reused; the shim never fails a request for its own pooling).
 *
 * The race: the upstream closes an idle pooled connection (its keep-alive timeout, a restart, a load
 * balancer's idle cut) at the moment the shim writes the next request on it. The request fails before
 * any response byte with ECONNRESET / "socket hang up", and the upstream has not processed it. For an
 * idempotent request whose body the shim still has (none, or a buffered rewrite), the shim retries
 * once on a fresh connection (RFC 9110 §9.2.2; Node's `req.reusedSocket` idiom). A non-idempotent
 * request, or one whose body was already streamed away, is not retried: 502.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { frameRequests } from '../helpers/http1-frames.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

/**
 * An upstream that answers the first request on each connection keep-alive (no `Keep-Alive` hint),
 * and drops the connection without answering when a second request arrives on it — what the shim sees
 * when the upstream closed the idle connection just as the request was written.
 */
async function oneShotUpstream(): Promise<RawUpstream> {
  const upstream = await startRawUpstream((socket, received) => {
    const { requests } = frameRequests(received);
    const answered = (socket as { answered?: number }).answered ?? 0;
    if (requests.length === answered) return;
    if (answered >= 1) {
      socket.destroy();
      return;
    }
    (socket as { answered?: number }).answered = 1;
    const r = requests[0];
    const body = JSON.stringify({ method: r?.method, target: r?.target, body: r?.body });
    const content = r?.method === 'HEAD' ? '' : body;
    socket.write(
      `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${content}`,
    );
  });
  upstreams.push(upstream);
  return upstream;
}

async function stackOn(upstream: RawUpstream, env: Record<string, string> = {}): Promise<Stack> {
  const stack = await startStack({ UPSTREAM_URL: upstream.url, ...env });
  stacks.push(stack);
  return stack;
}

/** Every request the upstream received, with the connection it came on. */
function requestsByConnection(upstream: RawUpstream) {
  return upstream.received.flatMap((r, connection) =>
    frameRequests(r).requests.map((q) => ({ connection, method: q.method, target: q.target, body: q.body })),
  );
}

describe('a pooled connection that the upstream closed as it was reused', () => {
  it.each(['GET', 'HEAD', 'OPTIONS', 'DELETE', 'PUT'])(
    '%s without a body is retried once on a fresh connection',
    async (method) => {
      const upstream = await oneShotUpstream();
      const stack = await stackOn(upstream);
      expect((await send(stack.url, 'GET', '/warm', CURRENT)).status).toBe(200);
      const reply = await send(stack.url, method, '/missions/1', CURRENT);
      expect(reply.status).toBe(200);
      if (method !== 'HEAD') expect(reply.json()).toMatchObject({ method, target: '/missions/1' });
      const seen = requestsByConnection(upstream).filter((r) => r.target === '/missions/1');
      // Written once on the dead connection (never answered), then once on a new one.
      expect(upstream.connections()).toBe(2);
      expect(seen.map((r) => r.connection)).toEqual([0, 1]);
      expect(await stack.metrics.registry.getSingleMetricAsString('shim_upstream_errors_total')).not.toMatch(
        /kind="reset"\} [1-9]/,
      );
    },
  );

  it('a rewritten (buffered) PUT body is replayed byte for byte', async () => {
    const upstream = await oneShotUpstream();
    const stack = await stackOn(upstream);
    await send(stack.url, 'GET', '/warm', CURRENT);
    const reply = await send(
      stack.url,
      'PUT',
      '/projects/p1/metadata-types',
      { ...LEGACY, 'content-type': 'application/json' },
      '{"tagTypeUUIDs":["a","b"]}',
    );
    expect(reply.status).toBe(200);
    expect(reply.json()).toMatchObject({ method: 'PUT', body: '{"metadataTypeUUIDs":["a","b"]}' });
  });

  it('POST is not retried (it may have been processed): 502, and the next request works', async () => {
    const upstream = await oneShotUpstream();
    const stack = await stackOn(upstream);
    await send(stack.url, 'GET', '/warm', CURRENT);
    const reply = await send(
      stack.url,
      'POST',
      '/debug/sink',
      { ...CURRENT, 'content-type': 'text/plain' },
      'x',
    );
    expect(reply.status).toBe(502);
    expect(requestsByConnection(upstream).filter((r) => r.target === '/debug/sink')).toHaveLength(1);
    expect((await send(stack.url, 'GET', '/next', CURRENT)).status).toBe(200);
  });

  it('a streamed PUT body (not kept by the shim) is not retried: 502', async () => {
    const upstream = await oneShotUpstream();
    const stack = await stackOn(upstream);
    await send(stack.url, 'GET', '/warm', CURRENT);
    const reply = await send(
      stack.url,
      'PUT',
      '/debug/sink',
      { ...CURRENT, 'content-type': 'text/plain' },
      'abc',
    );
    expect(reply.status).toBe(502);
  });

  it('a retry that fails again is not retried a second time: 502', async () => {
    // Every connection answers its first request only, and the retry's fresh connection is killed too.
    let connections = 0;
    const upstream = await startRawUpstream((socket, received) => {
      const index = (socket as { index?: number }).index ?? connections++;
      (socket as { index?: number }).index = index;
      if (!received.includes('\r\n\r\n')) return;
      if (index === 0 && !(socket as { done?: boolean }).done) {
        (socket as { done?: boolean }).done = true;
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}');
        return;
      }
      socket.destroy();
    });
    upstreams.push(upstream);
    const stack = await stackOn(upstream);
    await send(stack.url, 'GET', '/warm', CURRENT);
    const reply = await send(stack.url, 'GET', '/missions', CURRENT);
    expect(reply.status).toBe(502);
    expect(upstream.connections()).toBe(2);
  });
});

describe('the real race, 300 times', () => {
  it('an upstream that closes each connection right after answering: no request fails', async () => {
    // Closes at a random moment 0–3 ms after each response (no `Connection: close`, no hint), so the
    // shim sometimes reuses the connection before it learns of the close, sometimes after.
    const upstream = await startRawUpstream((socket, received) => {
      if ((socket as { done?: boolean }).done || !received.includes('\r\n\r\n')) return;
      (socket as { done?: boolean }).done = true;
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
      setTimeout(() => socket.destroy(), Math.random() * 3);
    });
    upstreams.push(upstream);
    const stack = await stackOn(upstream);
    const statuses = new Map<number, number>();
    for (let i = 0; i < 300; i++) {
      const reply = await send(stack.url, 'GET', `/missions?i=${i}`, CURRENT);
      statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
    }
    expect(Object.fromEntries(statuses)).toEqual({ 200: 300 });
  });
});
