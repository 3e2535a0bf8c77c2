/**
 * Reliability: an upstream keep-alive connection closed by the upstream just as the shim reuses it
 * (SPEC §4: upstream connections are reused; the shim never fails a request for its own pooling).
 *
 * The race: the upstream closes an idle pooled connection (its keep-alive timeout, a restart, a load
 * balancer's idle cut) at the moment the shim writes the next request on it. The request fails before
 * any response byte with ECONNRESET / "socket hang up", and the upstream has not processed it. For an
 * idempotent request whose body the shim still has (none, a body held whole: `REQUEST_BUFFER_BYTES`,
 * or a buffered rewrite), the shim retries
 * once on a fresh connection (RFC 9110 §9.2.2; Node's `req.reusedSocket` idiom). A non-idempotent
 * request, or one whose body was already streamed away, is not retried: 502. The buffered body of a
 * rewrite, replayed: `aliases-reliability-keepalive-reuse.test.ts`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { UPSTREAM_IDLE_TIMEOUT_MS } from '../../src/proxy/upstream-agent.ts';
import { send } from '../helpers/http.ts';
import {
  closeAll,
  closeLater,
  oneShotUpstream,
  requestsByConnection,
  sendOnPooledConnection,
  stackOn,
} from '../helpers/one-shot-upstream.ts';
import { waitFor } from '../helpers/poll.ts';
import { startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT } from '../helpers/stack.ts';

afterEach(closeAll);

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

  it('POST is not retried (it may have been processed): 502, and the next request works', async () => {
    const upstream = await oneShotUpstream();
    const stack = await stackOn(upstream);
    const reply = await sendOnPooledConnection(
      stack,
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
    const stack = await stackOn(upstream, { REQUEST_BUFFER_BYTES: '0' });
    const reply = await sendOnPooledConnection(
      stack,
      'PUT',
      '/debug/sink',
      { ...CURRENT, 'content-type': 'text/plain' },
      'abc',
    );
    expect(reply.status).toBe(502);
  });

  it('a small PUT body, held whole (REQUEST_BUFFER_BYTES), is retried once on a new connection', async () => {
    const upstream = await oneShotUpstream();
    const stack = await stackOn(upstream);
    const reply = await sendOnPooledConnection(
      stack,
      'PUT',
      '/debug/sink',
      { ...CURRENT, 'content-type': 'text/plain' },
      'abc',
    );
    expect(reply.status).toBe(200);
    const sent = requestsByConnection(upstream).filter((r) => r.target === '/debug/sink');
    expect(sent).toHaveLength(2);
    expect(sent.map((r) => r.body)).toEqual(['abc', 'abc']);
  });

  it('the retry takes a new connection, never another pooled one the upstream closed too', async () => {
    // An upstream that closes each connection right after its response, without `Connection: close`
    // (Python's http.server with `close_connection`), seen by the shim only once it reuses one: two
    // such connections in the pool. The two warming requests are held until both connections are
    // open, so the shim pools two; a second request on a connection is dropped unanswered.
    const held: Array<() => void> = [];
    const upstream = await startRawUpstream((socket, received) => {
      const s = socket as { answered?: boolean; dead?: boolean };
      const heads = received.split('\r\n\r\n').length - 1;
      if (heads === 0 || s.dead) return;
      if (s.answered || heads > 1) {
        s.dead = true;
        socket.destroy();
        return;
      }
      s.answered = true;
      const target = received.split(' ')[1];
      held.push(() =>
        socket.write(
          `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${JSON.stringify(target).length}\r\n\r\n${JSON.stringify(target)}`,
        ),
      );
      if (!target?.startsWith('/warm/') || held.length === 2) for (const answer of held.splice(0)) answer();
    });
    closeLater(upstream);
    const stack = await stackOn(upstream);
    const warm = await Promise.all([
      send(stack.url, 'GET', '/warm/a', CURRENT),
      send(stack.url, 'GET', '/warm/b', CURRENT),
    ]);
    expect(warm.map((r) => r.status)).toEqual([200, 200]);
    const reply = await send(stack.url, 'GET', '/missions/1', CURRENT);
    expect(reply.status).toBe(200);
    expect(reply.json()).toBe('/missions/1');
    const seen = requestsByConnection(upstream).filter((r) => r.target === '/missions/1');
    // Once on a stale pooled connection, then once on a connection of its own (fresh: its first request).
    expect(seen).toHaveLength(2);
    const retry = seen[1] as { connection: number };
    expect(requestsByConnection(upstream).filter((r) => r.connection === retry.connection)).toHaveLength(1);
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
    closeLater(upstream);
    const stack = await stackOn(upstream);
    const reply = await sendOnPooledConnection(stack, 'GET', '/missions', CURRENT);
    expect(reply.status).toBe(502);
    expect(upstream.connections()).toBe(2);
  });
});

describe('keep-alive race with a POST: idle connections closed before the upstream closes them', () => {
  /** An upstream that answers every request with `extra` headers and never closes a connection. */
  async function neverClosing(extra: string) {
    const ended: number[] = [];
    const upstream = await startRawUpstream((socket, received, index) => {
      const answered = (socket as { answered?: number }).answered ?? 0;
      if (received.split('\r\n\r\n').length - 1 <= answered) return;
      (socket as { answered?: number }).answered = answered + 1;
      if (answered === 0) socket.once('end', () => ended.push(index)); // the shim closed it
      socket.write(
        `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n${extra}\r\n{}`,
      );
    });
    closeLater(upstream);
    return { upstream, ended };
  }

  it('honours the upstream’s Keep-Alive: timeout hint (closes 1 s before it)', async () => {
    const { upstream, ended } = await neverClosing('Keep-Alive: timeout=2\r\n');
    const stack = await stackOn(upstream);
    expect((await send(stack.url, 'POST', '/debug/sink', CURRENT, 'x')).status).toBe(200);
    const answeredAt = performance.now();
    await waitFor(() => ended.length === 1, { timeoutMs: 10_000, what: 'the shim closing the connection' });
    // Closed by the shim after about 1 s (2 s − 1 s), not after UPSTREAM_IDLE_TIMEOUT_MS (4 s).
    expect(performance.now() - answeredAt).toBeLessThan(UPSTREAM_IDLE_TIMEOUT_MS - 500);
    expect(ended).toEqual([0]);
    // The next POST goes on a fresh connection.
    expect((await send(stack.url, 'POST', '/debug/sink', CURRENT, 'y')).status).toBe(200);
    expect(upstream.connections()).toBe(2);
  });

  it('closes an idle connection after UPSTREAM_IDLE_TIMEOUT_MS without a hint', async () => {
    const { upstream, ended } = await neverClosing('');
    const stack = await stackOn(upstream);
    expect((await send(stack.url, 'POST', '/debug/sink', CURRENT, 'x')).status).toBe(200);
    await waitFor(() => ended.length === 1, {
      timeoutMs: UPSTREAM_IDLE_TIMEOUT_MS + 10_000,
      what: 'the shim closing the connection',
    });
    expect(ended).toEqual([0]);
  });

  it('closes it after a configured UPSTREAM_IDLE_TIMEOUT_MS (an upstream that closes sooner without a hint)', async () => {
    const { upstream, ended } = await neverClosing('');
    const stack = await stackOn(upstream, { UPSTREAM_IDLE_TIMEOUT_MS: '300' });
    expect((await send(stack.url, 'POST', '/debug/sink', CURRENT, 'x')).status).toBe(200);
    const answeredAt = performance.now();
    await waitFor(() => ended.length === 1, { timeoutMs: 10_000, what: 'the shim closing the connection' });
    // Closed after about 300 ms, well before the default 4 s.
    expect(performance.now() - answeredAt).toBeLessThan(UPSTREAM_IDLE_TIMEOUT_MS - 500);
    expect(ended).toEqual([0]);
  });

  it('keeps a connection in use: back-to-back requests share it', async () => {
    const { upstream } = await neverClosing('Keep-Alive: timeout=5\r\n');
    const stack = await stackOn(upstream);
    for (let i = 0; i < 20; i++)
      expect((await send(stack.url, 'GET', `/m?i=${i}`, CURRENT)).status).toBe(200);
    expect(upstream.connections()).toBe(1);
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
    closeLater(upstream);
    const stack = await stackOn(upstream);
    const statuses = new Map<number, number>();
    for (let i = 0; i < 300; i++) {
      const reply = await send(stack.url, 'GET', `/missions?i=${i}`, CURRENT);
      statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
    }
    expect(Object.fromEntries(statuses)).toEqual({ 200: 300 });
  });
});
