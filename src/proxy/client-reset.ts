import type { ServerResponse } from 'node:http';
import net from 'node:net';

/**
 * Cuts the connection of a client that stopped taking its response, with a TCP reset rather than a
 * close: a close (FIN) leaves every byte already written in the kernel's send buffer, still charged to
 * the process's memory (cgroup v2 counts socket buffers against the container's limit), until the peer
 * reads it or the kernel's orphan retries give up — minutes for a peer that keeps its window shut, which
 * is what a slow-read attacker does. An abort discards the queued data and sends RST (RFC 9293 §3.10.5,
 * ABORT; nginx does the same with `reset_timedout_connection`). The response is cut short either way,
 * so the client loses nothing it could have used: a chunked body without its last chunk, or a
 * `Content-Length` not reached, is incomplete to it whatever ends the connection (RFC 9112 §8).
 * Falls back to `res.destroy()` when the socket is not a plain TCP socket or is already gone.
 *
 * @param res The response whose client stalled (docs/reliability.md fixes 62, 86, 88).
 * @throws Nothing: a socket that cannot be reset is destroyed instead.
 */
export function resetStalledClient(res: ServerResponse): void {
  const socket = res.socket;
  if (socket instanceof net.Socket && !socket.destroyed) {
    try {
      socket.resetAndDestroy();
      return;
    } catch {
      // Not a TCP handle (a pipe, a TLS socket in a test): an ordinary close below.
    }
  }
  res.destroy();
}
