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

/**
 * Aborts a response that has started and cannot complete (its upstream failed or fell silent
 * mid-body, or its handling failed), with a TCP reset as {@link resetStalledClient} does: a close (FIN)
 * is the end of a close-delimited body (RFC 9112 §6.3, §8: the framing of every response to an HTTP/1.0
 * client whose length is not known beforehand, a patched one among them), so the client read the cut
 * body as whole; and proxies in front that re-frame the body (Caddy 2.6, h2o 2.2) ended their own
 * chunked or HTTP/2 stream cleanly on it, where a reset reaches their client as an error. A response
 * already ended (all of it queued) is closed, not reset: a reset would discard its tail.
 *
 * @param res The client's response (headers sent, or about to be given up).
 * @throws Nothing: a socket that cannot be reset is destroyed instead.
 */
export function abortResponse(res: ServerResponse): void {
  if (res.writableEnded) res.destroy();
  else resetStalledClient(res);
}
