/**
 * Drain with a client that pools keep-alive connections and does not read them while idle, as
 * Python's urllib3 (under `requests`) and httpcore (under `httpx`) do: such a client notices the
 * shim's FIN only when it next takes the connection from its pool (urllib3: "Resetting dropped
 * connection", then a new one), and until then never closes its side. The drain's staged close of an
 * idle connection waited for that close, so one idle CLI connection held every SIGTERM to
 * `SHUTDOWN_TIMEOUT_MS` (10 s by default, `inFlight: 0`) and logged `shutdown timeout reached:
 * closing remaining connections` (requests 2.28 through the bundle, 2026-11-26: the drain took 10.0 s
 * with nothing in flight; Go's net/http, which reads its idle connections, 0.3 s).
 *
 * Found with real clients (docs/reliability.md fix 60). Here the client is a raw socket that reads its
 * response, then stops reading (paused, half-open allowed), so Python need not be installed.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LINGER_IDLE_MS } from '../../src/runtime.ts';
import { startDebugStack } from '../helpers/debug-upstream.ts';
import { waitFor } from '../helpers/poll.ts';
import type { Stack } from '../helpers/stack.ts';

const SHUTDOWN_TIMEOUT_MS = 20_000;
const GET =
  'GET /debug/echo HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nx-api-key: k\r\n\r\n';

const stacks: Stack[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
});

/** Connects, sends one GET, reads its whole response (Content-Length framed), then returns the socket. */
async function pooledConnection(stack: Stack, { readsWhileIdle }: { readsWhileIdle: boolean }) {
  const { port } = new URL(stack.url);
  const socket = net.connect({ port: Number(port), host: '127.0.0.1', allowHalfOpen: !readsWhileIdle });
  const state = { received: '', ended: false, error: undefined as Error | undefined };
  socket.on('data', (d) => {
    state.received += d.toString('latin1');
  });
  socket.on('end', () => {
    state.ended = true;
  });
  socket.on('error', (err) => {
    state.error = err;
  });
  socket.write(GET);
  await waitFor(
    () => {
      const end = state.received.indexOf('\r\n\r\n');
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(state.received)?.[1] ?? -1);
      return end > 0 && length >= 0 && state.received.length >= end + 4 + length;
    },
    { what: 'the response' },
  );
  // Idle in the pool: urllib3 and httpcore do not read the socket until they take it again.
  if (!readsWhileIdle) socket.pause();
  return { socket, state };
}

describe('drain with a pooled connection its client does not read while idle', () => {
  it('closes it after LINGER_IDLE_MS at most, not at SHUTDOWN_TIMEOUT_MS; the client then reads a clean close', async () => {
    const stack = await startDebugStack({ SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) });
    stacks.push(stack);
    const { socket, state } = await pooledConnection(stack, { readsWhileIdle: false });

    const started = performance.now();
    await stack.runtime.drain('test');
    const drainMs = performance.now() - started;
    expect(drainMs).toBeLessThan(LINGER_IDLE_MS + 3_000);
    expect(
      stack.logs().some((l) => l.msg === 'shutdown timeout reached: closing remaining connections'),
    ).toBe(false);

    // The client takes the connection again: it finds the shim's FIN (a dropped connection, which
    // urllib3 replaces), not a reset.
    socket.resume();
    await waitFor(() => state.ended || state.error, { what: 'the end of the connection' });
    expect(state.error).toBeUndefined();
    expect(state.ended).toBe(true);
    socket.destroy();
  }, 30_000);

  it('a client that reads while idle (Go net/http, Node agents) closes its side at once: the drain ends at once', async () => {
    const stack = await startDebugStack({ SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) });
    stacks.push(stack);
    const { socket } = await pooledConnection(stack, { readsWhileIdle: true });
    const started = performance.now();
    await stack.runtime.drain('test');
    expect(performance.now() - started).toBeLessThan(5_000); // SHUTDOWN_TIMEOUT_MS is 20 s
    socket.destroy();
  });
});
