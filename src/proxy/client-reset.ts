import type { ServerResponse } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { isHttp10OrOlder } from '../core/raw-headers.ts';

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

/** Client connections that have had a response closed (finished or cut): {@link noteAnswered}. */
const answered = new WeakSet<Duplex>();

/**
 * Records that a response of `socket` has closed (server.ts, at every response's `close`): a response
 * cut later on the same connection is not reset, since the kernel may still hold the unread tail of this
 * one ({@link abortResponse}).
 * @param socket The client connection.
 * @throws Nothing.
 */
export function noteAnswered(socket: Duplex): void {
  answered.add(socket);
}

/**
 * Aborts a response that has started and cannot complete (its upstream failed or fell silent
 * mid-body, or its handling failed). With a TCP reset, as {@link resetStalledClient} does, when its
 * body is close-delimited (an HTTP/1.0 request, and a connection that ends with this response: Node's
 * `shouldKeepAlive` false) and it is the connection's first response: a close (FIN) is the end of such a
 * body (RFC 9112 §6.3, §8), so the client read the cut body as whole (fix 164). Otherwise with a
 * close, as before: a chunked or length-framed body cut by a close is incomplete to the client, and a
 * reset would discard what the kernel still holds of the connection's earlier responses, which a
 * pipelining client has not read yet (an 8 MB response before the cut one lost ~3.5 MB, and a 2 MB one
 * ~1.8 MB when the cut request was HTTP/1.0 behind an HTTP/1.1 one: reviews of fix 164). A response
 * already ended is closed, never reset.
 *
 * @param res The client's response (headers sent, or about to be given up).
 * @throws Nothing: a socket that cannot be reset is destroyed instead.
 */
export function abortResponse(res: ServerResponse): void {
  const closeDelimited = isHttp10OrOlder(res.req.httpVersion) && !res.shouldKeepAlive;
  if (closeDelimited && !res.writableEnded && !answered.has(res.req.socket)) resetStalledClient(res);
  else res.destroy();
}
