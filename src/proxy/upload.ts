/**
 * The request body on its way upstream, beside an attempt (upstream-attempt.ts): the first bytes read
 * before the upstream was contacted (`REQUEST_BUFFER_BYTES`), an upload kept going and bounded after
 * an early answer, the budget of a rewritten body released once it has left, and the bounded discard
 * of a body the upstream no longer takes.
 */
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Reservation } from '../core/buffer-budget.ts';
import { releaseChunk } from './body-pump.ts';
import { retireConnection } from './upstream-agent.ts';
import type { Forwarding } from './upstream-attempt.ts';
import { SHIM_TIMEOUT_CODE, upstreamError } from './upstream-error.ts';
import { watchStuckWrites } from './write-watch.ts';

/**
 * Keeps an upload going, and bounded, once the upstream's response has come (an early answer:
 * a 404, 401 or 413, or a 2xx, to a body not all sent yet; RFC 9112 §9.5 lets the upstream go on
 * reading). Node's `ClientRequest` stops listening to its socket's `'drain'` when the response is
 * complete (`socketOnData` removes `ondrain`), and takes its idle timer's delegate off the socket when
 * the response ends (`responseOnEnd`), while it keeps the connection until the body is sent
 * (`requestOnFinish`); and the upload's write watchdog stops at the head. So the first write that met
 * backpressure after the response waited for a `'drain'` that never came: the client's body unread, its
 * connection and the upstream's held with no timer, until the upstream closed (a Node upstream's
 * keep-alive timeout, 5 s) or the server's `requestTimeout` (600 s), or for ever for an upstream that
 * keeps the connection (docs/reliability.md fix 105). Now the socket's `'drain'` reaches the request
 * (as Node's `ondrain` does, and server.ts `relayDrain` for the client side), and after the response's
 * end a write stuck for `timeoutMs` (the watchdog of fix 85) destroys the upstream request, counted as
 * its timeout (the client's whole response goes on; the rest of its body is read and dropped, at most
 * {@link DISCARD_LIMIT_MS}, fix 78), as does the client's connection closing with its body incomplete
 * (Node's server tells the request nothing once its response has finished). A rewritten body, sent
 * whole with `end(body)`, is bounded the same way: an upstream that answered early and stopped reading
 * (or vanished) left up to `MAX_REWRITE_BODY` in the socket's queue (counted in the buffer budget
 * until it leaves: {@link releaseWhenSent}), and the upstream connection held, with no timer
 * (docs/reliability.md fix 106). The upstream connection is retired (upstream-agent.ts
 * `retireConnection`): an upstream that answers before it has the whole body may close or reset the
 * connection once it stops reading, without saying so (fix 169).
 * @param req The client's request, its body streamed or rewritten upstream.
 * @param upstreamReq The upstream request, its response head just received.
 * @param upstreamRes That response.
 * @param timeoutMs `UPSTREAM_TIMEOUT_MS`, in ms.
 * @throws Nothing: it only adds listeners and, at the response's end, a watchdog timer.
 */
export function keepUploadGoing(
  req: IncomingMessage,
  upstreamReq: ClientRequest,
  upstreamRes: IncomingMessage,
  timeoutMs: number,
): void {
  const socket = upstreamReq.socket;
  if (socket === null || upstreamReq.writableFinished || upstreamReq.destroyed) return;
  // After Node's own `ondrain` (added before), which clears the flag while it still listens.
  const relayDrain = () => {
    if (upstreamReq.writableNeedDrain && socket.writableLength === 0) upstreamReq.emit('drain');
  };
  socket.on('drain', relayDrain);
  const client = req.socket;
  const onClientClose = () => {
    if (!req.complete) upstreamReq.destroy();
  };
  let stopWatch: (() => void) | undefined;
  // Answered before the body was all sent: the connection is not reused (fix 169).
  retireConnection(socket);
  const bound = () => {
    if (upstreamReq.writableFinished || upstreamReq.destroyed) return;
    // The socket may have drained between the response's completion and its end.
    relayDrain();
    stopWatch = watchStuckWrites(
      socket,
      timeoutMs,
      () => !upstreamReq.writableFinished && !upstreamReq.destroyed,
      () =>
        upstreamReq.destroy(
          upstreamError('upstream stopped reading the request body after its response', SHIM_TIMEOUT_CODE),
        ),
    );
    client.once('close', onClientClose);
  };
  upstreamRes.once('end', bound);
  const done = () => {
    socket.off('drain', relayDrain);
    upstreamRes.off('end', bound);
    stopWatch?.();
    client.off('close', onClientClose);
  };
  upstreamReq.once('finish', done);
  upstreamReq.once('close', done);
}

/**
 * Writes the first bytes of a streamed body, which the shim read before it contacted the upstream
 * (`REQUEST_BUFFER_BYTES`), then lets the rest flow from the paused request into the pump already set
 * up (body-pump.ts `pumpBody`): at once, or at the upstream request's `drain` when the bytes filled its
 * buffer. Their reservation is released once they are written to the upstream's socket (or the write
 * failed): the rest of the body is streamed, never held.
 * @param f The exchange, with `bodyStart` and its `reservation`.
 * @param upstreamReq The upstream request, its head not yet sent (the bytes go out with it).
 * @throws Nothing: a failed write reaches the write's callback (the reservation is released).
 */
export function sendBodyStart(f: Forwarding, upstreamReq: ClientRequest): void {
  const { req, reservation } = f;
  const start = f.bodyStart as Buffer;
  f.bodyStart = undefined;
  const flowing = upstreamReq.write(start, (err) => {
    if (!err) releaseChunk(start);
    reservation?.release();
  });
  if (flowing) req.resume();
  else upstreamReq.once('drain', () => req.resume());
}

/**
 * Releases a rewritten body's reservation once the upstream's head arrived (the body is never sent
 * again): at once when the body has all been written (`writableFinished`) or its request was destroyed,
 * else when its request finishes writing it or closes. An upstream that answers before the body was all
 * sent (a 401, 404 or 413 at its head) leaves the rest queued in the shim's socket, and the exchange's
 * response, whose close also releases, may end long before (fixes 105, 106): released at the head, up
 * to `MAX_REWRITE_BODY` per exchange sat in memory outside `MAX_BUFFERED_BYTES` for as long as the
 * upstream took to read it, and the budget admitted more (docs/reliability.md fix 111). The bytes move
 * to a reservation of the upstream request's own ({@link Reservation.transfer}); `'close'` comes in
 * every case (destroyed, or its socket freed or closed).
 * @param reservation The exchange's reservation.
 * @param upstreamReq The upstream request whose response head has just arrived.
 * @throws Nothing.
 */
export function releaseWhenSent(reservation: Reservation, upstreamReq: ClientRequest): void {
  if (upstreamReq.writableFinished || upstreamReq.destroyed) {
    reservation.release();
    return;
  }
  const queued = reservation.transfer();
  const release = () => queued.release();
  upstreamReq.once('finish', release);
  upstreamReq.once('close', release);
}

/**
 * Longest the rest of an upload is read and dropped once its upstream request closed and the client
 * has its response (ms); then the connection closes in stages (runtime.ts: at most `LINGER_MS` more
 * while the client keeps sending, `LINGER_IDLE_MS` while draining). As nginx bounds a body it discards
 * after a response
 * (`ngx_http_discarded_request_body_handler`, with its `lingering_timeout` of 5 s).
 */
export const DISCARD_LIMIT_MS = 5_000;

/**
 * Bounds the read-and-drop of an upload whose upstream request closed before the body ended (the
 * upstream answered early and closed, or reset; body-pump.ts `pumpBody` reads the rest and drops it):
 * {@link DISCARD_LIMIT_MS} after the client's response finished, a body still arriving closes the
 * connection in stages (the socket's `destroySoon`, which runtime.ts makes a FIN and a linger). Without
 * it a client that kept sending was read at its own pace until `requestTimeout` (600 s), on a response
 * that said `keep-alive` (docs/reliability.md fix 78). RFC 9112 §9.3: a server may close a persistent
 * connection at any time.
 * @param req The client's request, its body streamed upstream.
 * @param res Its response.
 * @throws Nothing.
 */
export function boundDiscard(req: IncomingMessage, res: ServerResponse): void {
  if (req.complete) return;
  const start = () => {
    const socket = req.socket as IncomingMessage['socket'] & { destroySoon?: () => void };
    if (req.complete || socket.destroyed) return;
    const timer = setTimeout(() => {
      if (req.complete) return;
      if (socket.destroySoon) socket.destroySoon();
      else socket.destroy();
    }, DISCARD_LIMIT_MS);
    timer.unref();
    const stop = () => clearTimeout(timer);
    req.once('end', stop);
    socket.once('close', stop);
  };
  if (res.writableFinished) start();
  else res.once('finish', start);
}
