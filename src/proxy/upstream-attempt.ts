/**
 * One exchange's attempts at the upstream (SPEC §4): sends the request on the keep-alive pool, times it
 * (`UPSTREAM_TIMEOUT_MS`; a wait for a connection of a full pool: `UPSTREAM_CONNECT_TIMEOUT_MS`, then
 * `poolFull`), passes an upstream's 103 on, decides each failure with upstream-error.ts
 * (replay once, answer, abort, or let a whole response finish) and hands the response head, or the
 * failure, back to the forwarder. The sockets, timers and listeners of an attempt; the decisions are
 * upstream-error.ts's, pure.
 */
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { Reservation } from '../core/buffer-budget.ts';
import { ANSWERED_BY_SERVER, type ExchangeState } from '../core/exchange.ts';
import { headerValue, isHttp10OrOlder } from '../core/raw-headers.ts';
import { logPath } from '../observability/request-log.ts';
import { pumpBody } from './body-pump.ts';
import { abortResponse, resetStalledClient } from './client-reset.ts';
import { afterPendingIo, type Deadline, startDeadline } from './own-pause.ts';
import { earlyHints } from './response-writer.ts';
import { boundDiscard, keepUploadGoing, releaseWhenSent, sendBodyStart } from './upload.ts';
import {
  dropQueuedRequest,
  isEstablished,
  isQueuedRequest,
  onNewConnection,
  rearmIdleTimer,
  type UpstreamTransport,
  writeProgress,
} from './upstream-agent.ts';
import {
  decideUpstreamFailure,
  IDEMPOTENT_METHODS,
  INVALID_STATUS_CODE,
  idleCause,
  NO_RESPONSE_CODE,
  relayableTransferCoding,
  SHIM_TIMEOUT_CODE,
  SWITCHED_PROTOCOLS_CODE,
  TRANSFER_CODING_CODE,
  type UpstreamDecision,
  upstreamError,
} from './upstream-error.ts';
import { watchStuckWrites } from './write-watch.ts';

/**
 * One exchange on its way upstream: made by the forwarder's handler (one small object per request),
 * completed by the body rewrite, read by every step after it.
 */
export interface Forwarding {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly state: ExchangeState;
  /** The origin-form target after the plugins' query rewrites, e.g. `/missions?skip=1`. */
  readonly url: string;
  /** What goes upstream as the body: nothing, the client's stream, or the rewritten bytes. */
  body: Buffer | 'stream' | undefined;
  /**
   * For a streamed body, its first bytes, already read from the client (`REQUEST_BUFFER_BYTES`,
   * request-body.ts `readBodyStart`): written upstream before the rest, which waits paused in the
   * request. Held in `reservation` until written to the upstream's socket.
   */
  bodyStart?: Buffer;
  /**
   * Gives back the upload slot a streamed body holds (upload-slots.ts, `MAX_STREAMING_UPLOADS`): called
   * when the upstream request closes, its connection then held no more for the body.
   */
  giveUploadSlotBack?: () => void;
  /**
   * The budget held for the body bytes the shim read before forwarding (forward.ts `readThenDispatch`):
   * a whole body (one to rewrite, or one of a declared length up to `REQUEST_BUFFER_BYTES`), or the
   * first `REQUEST_BUFFER_BYTES` of a longer one
   * ({@link Forwarding.bodyStart}, released by upload.ts `sendBodyStart` once written upstream).
   * Whatever is still held is released once the upstream's head arrived and the body has left the shim
   * (written to the kernel, or its upstream request closed), or when the exchange ends first.
   * `undefined` when no body was read ahead.
   */
  reservation: Reservation | undefined;
}

/** A failure decided for good: answered, aborted, or let finish; never replayed. */
export type FinalDecision = Exclude<UpstreamDecision, { action: 'replay' }>;

/** What {@link createUpstreamAttempt} needs: the pool, the timeout, and the forwarder's two outcomes. */
export interface UpstreamAttemptOptions {
  /** The pool and request function for the upstream (upstream-agent.ts). */
  readonly transport: UpstreamTransport;
  /**
   * No response head within this many ms after the request was sent, or a socket idle that long in
   * any phase: a `timeout` failure.
   */
  readonly upstreamTimeoutMs: number;
  readonly logger: Logger;
  /**
   * The upstream's response head arrived (not a 101): relay it to the client. `fail` reports a later
   * failure of the same attempt (the body cut short, a body that does not decode); `abandon` a failure
   * of the shim's own handling (a head `writeHead` refuses, a patch that throws): logged, the exchange
   * cut, and the attempt latched, so that the upstream response it destroys is no upstream failure.
   */
  readonly relayResponse: (
    f: Forwarding,
    upstreamRes: IncomingMessage,
    fail: (err: NodeJS.ErrnoException) => void,
    abandon: (err: unknown) => void,
  ) => void;
  /**
   * An attempt failed and is not replayed: count and log it, then answer 502/504 (`respond`), abort
   * the client's response (`abort`), or nothing more (`finish`: the response was whole and goes on).
   * After a `respond` or `abort` the attempt destroys the upstream request and response.
   */
  readonly upstreamFailed: (f: Forwarding, err: NodeJS.ErrnoException, decision: FinalDecision) => void;
  /**
   * The client stopped sending a streamed body for `upstreamTimeoutMs` while the upstream took all it
   * was sent and waits for the rest: answer 408 (RFC 9110 §15.5.9), no upstream failure. The attempt
   * has destroyed the upstream request.
   */
  readonly uploadStalled: (f: Forwarding) => void;
  /**
   * A request waited the transport's `connectTimeoutMs` (`UPSTREAM_CONNECT_TIMEOUT_MS`, as HAProxy's
   * `timeout queue` defaults to its `timeout connect`) for a connection of the pool and got none (long-lived responses,
   * slow clients or a slow upstream hold them all): answer 503 with `Retry-After` (RFC 9110 §15.6.4),
   * no upstream failure. The attempt has taken the request out of the pool's queue: it was never sent.
   * Absent: such a request waits as long as `upstreamTimeoutMs`, then 504.
   */
  readonly poolFull?: (f: Forwarding) => void;
}

/**
 * Creates the function that sends one exchange upstream and sees it through its attempts: at most
 * two (a replay of an idempotent request whose body the shim holds, on a pooled connection that the
 * upstream closed as it was reused; RFC 9110 §9.2.2). The client going away destroys the upstream
 * request; nothing is sent when it went away before.
 * @param options The pool, the timeout and the forwarder's outcomes ({@link UpstreamAttemptOptions}).
 * @returns `(f, path, headers)`: `path` the upstream request target, `headers` its head, flat
 *   (outgoing-request.ts `buildUpstreamHeaders`). Throws nothing: a fault in relaying a response fails
 *   that exchange (both sides destroyed) and is logged.
 */
export function createUpstreamAttempt(
  options: UpstreamAttemptOptions,
): (f: Forwarding, path: string, headers: string[]) => void {
  const { transport, upstreamTimeoutMs, logger, relayResponse, upstreamFailed, uploadStalled, poolFull } =
    options;
  const { agent, target } = transport;
  return (f, path, headers) => {
    const { req, res, state, body } = f;
    // The client may have gone while the gates ran or the body was read: its 'close' has passed.
    if (res.destroyed || req.socket.destroyed) {
      f.reservation?.release();
      return;
    }
    // Idempotent, and the shim holds the whole body (or there is none): can be sent again.
    const replayable = IDEMPOTENT_METHODS.has(req.method ?? '') && body !== 'stream';
    let attempt = 0;
    let clientGone = false;
    let current: ClientRequest | undefined;
    /** The client will take no response of this exchange: the upstream request goes. */
    const gone = () => {
      clientGone = true;
      if (current === undefined) return;
      current.destroy();
      // Still waiting for a pooled connection: out of the pool's queue now, or it stayed there (and in
      // shim_upstream_requests_waiting) until a connection was freed (docs/reliability.md fix 143).
      if (current.socket === null) dropQueuedRequest(agent, current);
    };
    // `on`, not `once`, for events a request or response emits once: no wrapper per listener.
    res.on('close', () => {
      if (!res.writableFinished) gone();
    });
    // The HTTP server answered this request itself (a malformed chunk in its body): nothing the
    // upstream sends or fails may replace that answer or be counted as the upstream's (fix 156).
    res.on(ANSWERED_BY_SERVER, gone);

    const send = () => {
      let headReceived = false;
      let upstreamResponse: IncomingMessage | undefined;
      let failed = false;
      let headerTimer: Deadline | undefined;
      const options = {
        ...target,
        agent,
        method: req.method,
        path,
        headers,
        setHost: false,
        // The socket's timeout while it connects (Node's agent gives a new connection the request's
        // `timeout`, else its own): without it, the pool's idle timeout (UPSTREAM_IDLE_TIMEOUT_MS, 4 s
        // by default) cut a connection still being established with a 504, whatever UPSTREAM_TIMEOUT_MS
        // said.
        timeout: upstreamTimeoutMs,
      };
      // The replay goes on a new connection: the pool's other idle ones may be closed by the upstream
      // as well (fix 58), and there is no second replay.
      const upstreamReq =
        attempt === 0 ? transport.request(options) : onNewConnection(agent, () => transport.request(options));
      current = upstreamReq;
      // A streamed body's upload slot is for the upstream connection it holds: given back when the
      // request closes (its response ended and its body sent, or its connection gone), if the body's
      // end or the client's close has not given it back before.
      if (f.giveUploadSlotBack !== undefined) upstreamReq.once('close', f.giveUploadSlotBack);
      // Every field of the upstream's head is read: Node's client keeps the first 1,000 by default and
      // drops the rest without a word (a `Vary`, `Cache-Control: private` or `Set-Cookie` after them
      // was lost to the client). The head stays bounded by the parser's size limit (Node's
      // `--max-http-header-size`), beyond which it fails as a malformed response: 502 (fix 121).
      upstreamReq.maxHeadersCount = 0;
      // A HEAD's upstream connection is never reused (`Connection: close`, outgoing-request.ts; and
      // Node closes the socket after the response whatever the upstream answers): an upstream that sends a body after a HEAD
      // response, as gunicorn 20.1 does for any WSGI application that returns one (RFC 9110 §9.3.2
      // forbids it), would have that body read as the response to the next request sent on the
      // connection — another client's — when it arrives after the connection went back to the pool;
      // a body that is itself an HTTP response (an uploaded file) answers that client instead
      // (response queue poisoning; test/security/head-response-body-poisoning.test.ts).
      if (req.method === 'HEAD') upstreamReq.shouldKeepAlive = false;
      state.upstreamStartedAt = performance.now();

      /** A deadline of this attempt fired: whose stall it is decides the answer (upstream-error.ts `idleCause`). */
      const onTimeout = () => {
        const cause = idleCause({
          headReceived,
          clientBackedUp: res.writableNeedDrain,
          streamedBody: body === 'stream',
          uploadComplete: req.complete,
          established: isEstablished(upstreamReq.socket),
          upstreamBackedUp: upstreamReq.writableNeedDrain,
        });
        if (cause === 'upstream') {
          timeOut();
          return;
        }
        // A client's stall: cut all the same (a slow reader, or an upload that stopped, holds an upstream
        // connection), but no upstream failure, so not counted in shim_upstream_errors_total, whose
        // alert would send the on-call to a healthy upstream.
        headerTimer?.clear();
        failed = true;
        state.exchange.logFields.clientStalled = true;
        upstreamReq.destroy();
        if (cause === 'client_stalled') resetStalledClient(res);
        else uploadStalled(f);
      };
      /** The shim's own timeout, the upstream's fault: 504 before its head, an abort after it. */
      const timeOut = () => {
        state.upstreamTimedOut = true;
        const err = upstreamError('upstream timed out', SHIM_TIMEOUT_CODE);
        upstreamReq.destroy(err);
        // Still waiting for a pooled connection: Node reports a destroyed request's error only once
        // the pool hands it a socket, which may be never while slow clients hold them all; and it
        // keeps the request queued until then (upstream-agent.ts dropQueuedRequest).
        if (upstreamReq.socket === null) {
          // Said in the request's log line: the pool was full, not the upstream slow
          // (shim_upstream_requests_waiting counts such requests while they wait).
          state.exchange.logFields.waitedForConnection = true;
          dropQueuedRequest(agent, upstreamReq);
          fail(err);
        }
      };
      /**
       * Node's idle timer of the upstream socket fired. It may have fired for a shim that was stopped or
       * blocked while both peers went on (docs/reliability.md fix 99): the sockets are read first, and an
       * exchange that moved meanwhile ({@link idleProgress}) is no timeout — the timer is armed again
       * ({@link rearmIdleTimer}: its 'timeout' listener runs once, and so does Node's delegation).
       */
      const onIdle = () =>
        afterPendingIo(
          () => idleProgress(req.socket, upstreamReq.socket),
          (moved) => {
            if (failed || clientGone || upstreamReq.destroyed) return;
            if (moved) rearmIdleTimer(upstreamReq, upstreamTimeoutMs, onIdle);
            else onTimeout();
          },
        );
      // Every connection of the pool in use: the request waits for one, at most the connect timeout (fix 142).
      if (poolFull !== undefined && isQueuedRequest(agent, upstreamReq)) {
        const queued = startDeadline(() => {
          if (failed || clientGone || upstreamReq.socket !== null) return;
          if (!dropQueuedRequest(agent, upstreamReq)) return;
          failed = true;
          headerTimer?.clear();
          state.exchange.logFields.waitedForConnection = true;
          // Out of the queue, it never gets a socket: destroyed, it emits nothing more.
          upstreamReq.destroy();
          poolFull(f);
        }, transport.connectTimeoutMs);
        upstreamReq.once('socket', () => queued.clear());
      }
      // Idle socket in any phase (upload, waiting, download) …
      upstreamReq.setTimeout(upstreamTimeoutMs, onIdle);
      // … and no response headers within the timeout, counted from now: a request that waits for a
      // pooled connection (every one of the pool's sockets busy, e.g. held by slow clients) has no
      // socket for the idle timer yet, and is not sent until it gets one
      // (test/security/slow-clients.test.ts › slow bodies holding every pooled upstream connection).
      headerTimer = startDeadline(onTimeout, upstreamTimeoutMs);
      if (body === 'stream') {
        // A streamed body's upload is bounded by the idle timer once it has a socket; the head's
        // timer starts again when the body has been sent.
        upstreamReq.once('socket', (socket) => {
          headerTimer?.clear();
          // A write stuck in the socket (the upstream vanished, or stopped reading) is cut after
          // UPSTREAM_TIMEOUT_MS, not after Node's idle timer, which gives it twice that (fix 85).
          const stop = watchStuckWrites(socket, upstreamTimeoutMs, () => !failed && !headReceived, timeOut);
          upstreamReq.once('finish', stop);
          upstreamReq.once('close', stop);
        });
        upstreamReq.on('finish', () => {
          if (!state.upstreamTimedOut && !headReceived)
            headerTimer = startDeadline(onTimeout, upstreamTimeoutMs);
        });
      }

      /**
       * A failure of this attempt, before or after the upstream's head. `responseComplete`: the upstream
       * connection failed after its response had been read whole (not a failure of the body's decoding).
       */
      const fail = (err: NodeJS.ErrnoException, responseComplete = false) => {
        if (failed || clientGone) return;
        headerTimer?.clear();
        const decision = decideUpstreamFailure({
          error: err,
          timedOut: state.upstreamTimedOut,
          headReceived,
          clientStarted: res.headersSent,
          responseComplete,
          reusedSocket: upstreamReq.reusedSocket,
          replayable,
          replayed: attempt > 0,
        });
        // Latched, so that this attempt fails once; not for `finish` (see below).
        if (decision.action !== 'finish') failed = true;
        if (decision.action === 'replay') {
          // A pooled connection the upstream closed just as it was reused (RFC 9110 §9.2.2).
          logger.debug(
            { path: logPath(state.exchange.path), code: err.code },
            'retrying on another upstream connection',
          );
          attempt++;
          send();
          return;
        }
        upstreamFailed(f, err, decision);
        // The response is whole and goes on to the client; Node drops the upstream connection. Not
        // latched: its body may still fail to decode, and that failure must reach the client.
        if (decision.action === 'finish') return;
        // Nothing of the upstream's response may follow the shim's 502/504 (or the abort), and nothing
        // more of the client's body goes to it: destroyed, the request no longer holds the body's pump
        // waiting for a `drain` that would never come.
        upstreamResponse?.destroy();
        upstreamReq.destroy();
      };
      upstreamReq.on('error', (err: NodeJS.ErrnoException) => fail(err, upstreamResponse?.complete === true));
      // Closed with neither a response nor an error — a 101 with `Connection: upgrade`, which Node's
      // client, with no 'upgrade' listener, ends by destroying the socket: the client must not wait for
      // a response that cannot come (SPEC §4: the shim never hangs a client).
      upstreamReq.on('close', () => {
        headerTimer?.clear();
        if (!headReceived)
          fail(upstreamError('upstream request closed without a response', NO_RESPONSE_CODE));
      });

      // A 103 the upstream sends of its own accord goes on (RFC 9110 §15.2: a proxy MUST forward such
      // 1xx), never to an HTTP/1.0 (or 0.9) client. Not a 100 (the shim answered the client's Expect itself, and
      // sends no Expect upstream) nor a 102 (deprecated; Node's server can send none of its own fields).
      upstreamReq.on('information', (info) => {
        if (info.statusCode !== 103 || res.headersSent || clientGone || isHttp10OrOlder(req.httpVersion))
          return;
        const hints = earlyHints(info.rawHeaders);
        if (hints === undefined) return;
        try {
          res.writeEarlyHints(hints);
        } catch (err) {
          // Node checks `Link` against a narrower grammar than RFC 8288 (a quoted `title="a b"`
          // throws ERR_INVALID_ARG_VALUE): such a hint is dropped, never the process.
          logger.debug({ err, path: logPath(state.exchange.path) }, 'early hints not forwarded');
        }
      });

      upstreamReq.on('response', (upstreamRes: IncomingMessage) => {
        if (upstreamRes.statusCode === 101) {
          // A 101 without `Connection: upgrade` comes as a response: invalid (upstream-error.ts); `fail`
          // destroys its connection, never pooled (the upstream may speak another protocol on it).
          fail(upstreamError('upstream switched protocols (101)', SWITCHED_PROTOCOLS_CODE));
          return;
        }
        if ((upstreamRes.statusCode ?? 0) < 100) {
          // `HTTP/1.1 099 X`: no status (RFC 9110 §15), and Node's writeHead throws on it — for a patched
          // response inside the pump's 'data' listener, where nothing caught it and the process ended.
          fail(upstreamError(`upstream sent status ${upstreamRes.statusCode}`, INVALID_STATUS_CODE));
          return;
        }
        // Read from the raw list: a pass-through never builds `upstreamRes.headers` (raw-headers.ts).
        const transferEncoding = headerValue(upstreamRes, 'transfer-encoding') as string | undefined;
        if (!relayableTransferCoding(transferEncoding, req.method, upstreamRes.statusCode ?? 0)) {
          // `gzip`, `chunked, gzip`: bytes the client could not decode, its head naming no coding.
          fail(upstreamError(`upstream sent Transfer-Encoding: ${transferEncoding}`, TRANSFER_CODING_CODE));
          return;
        }
        // A 204 that announces a length announces a body it must not have (RFC 9110 §8.6), which a
        // server such as gunicorn 20.1 writes after the head anyway: as after a HEAD, its connection is
        // not reused, so that those bytes are never read as another client's response (fix 117).
        if (announcesContent(upstreamRes)) upstreamReq.shouldKeepAlive = false;
        headReceived = true;
        upstreamResponse = upstreamRes;
        headerTimer?.clear();
        if (f.reservation) releaseWhenSent(f.reservation, upstreamReq);
        upstreamRes.on('error', (err: NodeJS.ErrnoException) => fail(err));
        upstreamRes.on('close', () => {
          if (!upstreamRes.complete) fail(upstreamError('upstream response cut short', 'ECONNRESET'));
        });
        // The upstream sent its response whole: its socket goes back to the pool (the response's
        // `end`), or the upstream closes it (the request's `close`, which a response the client is slow
        // to take can precede), and with it goes the idle timer that cut a client that stopped reading
        // (fix 62). A tail the client's socket cannot send (the client vanished, or stopped reading: a
        // slow-read attack) would otherwise hold the connection and its buffers until the kernel gives
        // up (15 min), or for ever while a live client keeps its window shut (fix 86). Looked at once
        // the code running now is done, with its nextTick callbacks (a microtask): a response whose
        // last bytes the kernel took at once has finished by then (Node writes them, and emits
        // `finish`, from nextTick callbacks), and needs no watch, nor its interval (head-hold.ts
        // `holdHead` says what the two timers cost).
        let watching = false;
        const lookAtTail = () => {
          if (watching || res.writableFinished || res.destroyed) return;
          watching = true;
          const stop = watchStuckWrites(
            req.socket,
            upstreamTimeoutMs,
            () => !res.writableFinished && !res.destroyed,
            () => {
              state.exchange.logFields.clientStalled = true;
              resetStalledClient(res);
            },
          );
          res.on('finish', stop);
          res.on('close', stop);
        };
        const watchTail = () => queueMicrotask(lookAtTail);
        upstreamRes.on('end', watchTail);
        upstreamReq.on('close', watchTail);
        // A rewritten body too: `end(body)` queues all of it, and an upstream that answers early and
        // stops reading leaves it in the socket's queue (fix 106).
        if (body !== undefined) keepUploadGoing(req, upstreamReq, upstreamRes, upstreamTimeoutMs);
        // A fault in one exchange's handling fails that exchange, never the process; latched first, so
        // that the response it destroys is not counted as the upstream's failure (`fail` ignores it).
        const abandon = (err: unknown) => {
          failed = true;
          logger.error({ err, path: logPath(state.exchange.path) }, 'handling the upstream response failed');
          upstreamRes.destroy();
          abortResponse(res);
        };
        try {
          relayResponse(f, upstreamRes, fail, abandon);
        } catch (err) {
          abandon(err);
        }
      });

      if (body === undefined) upstreamReq.end();
      else if (body === 'stream') {
        pumpBody(req, upstreamReq);
        if (f.bodyStart !== undefined) sendBodyStart(f, upstreamReq);
        // The head goes at once, not with the body's first byte (Node's ClientRequest holds it until
        // then): an upstream's header timeout (Go's ReadHeaderTimeout, nginx's client_header_timeout)
        // closed a connection that had sent nothing while a chunked body was late (fix 154).
        else upstreamReq.flushHeaders();
        upstreamReq.on('close', () => boundDiscard(req, res));
      } else upstreamReq.end(body);
    };
    send();
  };
}

/**
 * The progress of an exchange as the upstream idle timer sees it ({@link afterPendingIo}), as one number
 * that changes when the exchange moves: the bytes the upstream socket has read and sent, and the bytes
 * the client's socket has sent (the client taking the response). Not the bytes the client's socket has
 * read: an upload that moves reaches the upstream socket within the same turn, and one that does not is
 * no progress of the upstream (the upstream connection still being made, fix 76; a client's bytes
 * behind a stalled download): a client trickling bytes kept the idle timer from ever acting
 * (docs/reliability.md fix 103).
 * @param client The client's socket.
 * @param upstream The upstream request's socket (`null` while it waits for one).
 * @returns A sum to compare between two samples; its value means nothing.
 */
function idleProgress(client: Duplex, upstream: Duplex | null): number {
  const taken = writeProgress(client).sent;
  if (upstream === null) return taken;
  return (
    taken + ((upstream as Duplex & { bytesRead?: number }).bytesRead ?? 0) + writeProgress(upstream).sent
  );
}

/**
 * Whether a 204 announces content with a `Content-Length` above 0 (RFC 9110 §8.6: a server MUST NOT
 * send one in a 204; Node's parser reads no body for a 204 whatever it says).
 * @param upstreamRes The upstream's response head.
 * @returns True for a 204 whose `Content-Length` is not absent or `0`.
 */
function announcesContent(upstreamRes: IncomingMessage): boolean {
  if (upstreamRes.statusCode !== 204) return false;
  const length = headerValue(upstreamRes, 'content-length');
  return length !== undefined && length !== '0';
}
