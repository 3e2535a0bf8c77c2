/**
 * Forwarding to the upstream (SPEC §4): the wiring of the single-concern modules beside it, on a
 * direct `http.request` with a keep-alive pool — no proxy library on the hot path
 * (docs/reliability.md, "The data plane: no proxy library, every buffer bounded").
 *
 *   outgoing-request.ts   headers and framing of the upstream request (smuggling defences)
 *   request-body.ts       bounded, budgeted, timed buffering of a body to rewrite or to hold whole
 *   upstream-attempt.ts   sending upstream: the attempts, timeouts, 103 hints, a failure's outcome
 *   upload.ts             the request body going upstream: its first bytes, after an early answer, discard
 *   upload-slots.ts       MAX_STREAMING_UPLOADS: bodies still arriving hold at most that many upstream connections
 *   write-watch.ts        the watchdog that cuts a write stuck for UPSTREAM_TIMEOUT_MS
 *   upstream-error.ts     502/504, the one idempotent replay, abort after the head (the decision, pure)
 *   relay-response.ts     the upstream's response to the client: hooks, head, body through or through the patches
 *   response-patch.ts     the patch plan and pumps: upstream → patch → client, or through a decoder and encoder
 *   response-writer.ts    the client's response head, Vary, bodiless responses, reason phrases
 *   head-hold.ts          how long a response head waits for its body (RESPONSE_HEAD_HOLD_MS)
 *   upstream-agent.ts     http/https pool, TLS verification, SNI
 */
import type { Agent, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { Reservation, requestBodyCeiling } from '../core/buffer-budget.ts';
import { ShimError } from '../core/errors.ts';
import { ANSWERED_BY_SERVER, type ExchangeState, stateOf } from '../core/exchange.ts';
import { expectsContinue } from '../core/expect-continue.ts';
import { hasRequestBody } from '../core/framing.ts';
import type { BufferBudget, ExchangeHooks } from '../core/types.ts';
import type { CoreMetrics } from '../observability/metrics.ts';
import { logPath } from '../observability/request-log.ts';
import { abortResponse } from './client-reset.ts';
import { HEAD_HOLD_MS } from './head-hold.ts';
import { buildUpstreamHeaders, type ForwardedHeaders, upstreamTarget } from './outgoing-request.ts';
import { startDeadline } from './own-pause.ts';
import { createResponseRelay } from './relay-response.ts';
import {
  type BodyReadOptions,
  type BodyStart,
  ClientAbortedError,
  readBodyStart,
  rewriteRequestBody,
} from './request-body.ts';
import { sendError } from './respond.ts';
import { holdUploadSlot, type UploadSlots } from './upload-slots.ts';
import { createUpstreamTransport, type UpstreamTransportOptions } from './upstream-agent.ts';
import { createUpstreamAttempt, type FinalDecision, type Forwarding } from './upstream-attempt.ts';
import { UPSTREAM_MESSAGES } from './upstream-error.ts';

/** Options of {@link createForwarder}. */
export interface ForwarderOptions {
  /** The canonical upstream, `http://` or `https://` (a path prefix is kept). */
  upstream: URL;
  /**
   * The upstream pool's TLS trust, idle and connect timeouts (`UPSTREAM_CA_FILE`,
   * `UPSTREAM_IDLE_TIMEOUT_MS`, `UPSTREAM_CONNECT_TIMEOUT_MS`; upstream-agent.ts defaults when absent).
   */
  transport?: UpstreamTransportOptions;
  /**
   * No response headers within this many ms after the request was sent → 504; a socket idle that
   * long in any phase → 504 before the head, an aborted response after it.
   */
  upstreamTimeoutMs: number;
  /**
   * A response head waits at most this many ms for its body's first byte, then goes alone
   * (`RESPONSE_HEAD_HOLD_MS`; head-hold.ts {@link HEAD_HOLD_MS} when absent).
   */
  responseHeadHoldMs?: number;
  /**
   * The client's `X-Forwarded-*` and `Forwarded`: appended to (`append`, SPEC §4; the configuration's
   * default) or replaced by this hop's (`FORWARDED_HEADERS`; outgoing-request.ts {@link ForwardedHeaders}).
   */
  forwardedHeaders: ForwardedHeaders;
  /**
   * The configured admission headers' names, lower-cased (`API_KEY_HEADER`, `CLIENT_VERSION_HEADER`): a
   * client header spelling one of them, or another header the shim owns, with `_` for `-` is not
   * forwarded (outgoing-request.ts `isUnderscoreSpelling`).
   */
  admissionHeaders?: ReadonlySet<string>;
  /** Largest request body buffered for a rewrite, in bytes (413 above). */
  maxRewriteBody: number;
  /**
   * A request body of a declared length is read up to this many bytes before the upstream is contacted
   * (`REQUEST_BUFFER_BYTES`; 0: every body streams from its first byte): a client that sends it slowly
   * holds no upstream connection. A body up to it goes whole; the rest of a larger one streams after
   * what was read. A chunked body streams from its first byte.
   */
  requestBufferBytes?: number;
  /** A request body held for a rewrite, or up to `requestBufferBytes`, must have arrived this many ms after the head (408). */
  bodyTimeoutMs: number;
  /** Process-wide bound on buffered bytes (`MAX_BUFFERED_BYTES`; 503 beyond). */
  budget: BufferBudget;
  /**
   * Process-wide bound on request bodies streaming to the upstream at once (`MAX_STREAMING_UPLOADS`;
   * 503 beyond): each holds an upstream connection until the client has sent it (upload-slots.ts).
   */
  uploadSlots: UploadSlots;
  /**
   * The client-version request header (`CLIENT_VERSION_HEADER`), merged into `Vary` (RFC 9110 §12.5.5)
   * on the upstream responses that depend on it: those to a request whose version the gate read
   * (`exchange.clientVersion`: the outdated-client `Warning` depends on it), and with `varyAll` every
   * one. Unset: `Vary` untouched.
   */
  varyHeader?: string;
  /** Name `varyHeader` on every upstream response, public paths included (a plugin's `variesByClientVersion`). */
  varyAll?: boolean;
  metrics: CoreMetrics;
  logger: Logger;
  /**
   * Headers to add to every response of an exchange (upstream's or shim-made), computed when the
   * response starts; `upstream` is the upstream's response, `undefined` for shim-made responses (read
   * its headers with `headerValue`, raw-headers.ts: a pass-through never builds `upstream.headers`).
   */
  responseHeaders(state: ExchangeState, upstream: IncomingMessage | undefined): string[];
}

/** The forwarder: an Express handler plus its upstream connection pool. */
export interface Forwarder {
  readonly handler: RequestHandler;
  /** Keep-alive pool of upstream connections (SPEC §4: reused); destroyed on shutdown. */
  readonly agent: Agent;
}

/** The 503's message for a streamed body beyond `MAX_STREAMING_UPLOADS` (SPEC §7: what is wrong, what to do). */
const STREAMING_UPLOADS_FULL =
  'Too many request bodies are streaming to the upstream at once (MAX_STREAMING_UPLOADS); retry shortly, or send a body of at most REQUEST_BUFFER_BYTES with its Content-Length.';

/** The 503's message for a request that found every upstream connection in use (SPEC §7). */
const POOL_FULL =
  'Every connection of this proxy to the upstream is in use (UPSTREAM_MAX_CONNECTIONS); retry shortly.';

/** The 408's message for a streamed body that stopped arriving (SPEC §7: what is wrong, what to do). */
const UPLOAD_STALLED =
  'The request body stopped arriving for UPSTREAM_TIMEOUT_MS before it was complete; send the whole body promptly.';

/**
 * Creates the forwarder (SPEC §4): the Express handler that ends the pipeline, after the gates and the
 * plugins' `onRequest`. Per request it applies the plugins' query rewrites, buffers and rewrites a body
 * a hook asks for (at most `maxRewriteBody` bytes, within `bodyTimeoutMs` of arrival, against
 * `budget`; a `ShimError` — 413, 408, 503, 400, 415 — goes to `next`), reads every other body of a declared
 * length up to `requestBufferBytes` the same way (408, 503) and streams the rest after it (a chunked
 * body from its first byte) while one of `uploadSlots` is free (503 otherwise), sends the request on
 * the keep-alive pool, replays it once on a pooled connection that the upstream had
 * closed (idempotent methods), answers 502/504 itself while the client has received nothing and
 * aborts the client's response after that, and relays the response as it comes or through the
 * plugins' patches.
 * @param options The upstream and its limits ({@link ForwarderOptions}); read once, here.
 * @returns The handler and the upstream connection pool (destroyed on shutdown).
 * @throws {Error} when `options.upstream` is neither `http:` nor `https:` (upstream-agent.ts).
 * @example
 * const { handler, agent } = createForwarder({
 *   upstream: new URL('http://127.0.0.1:3000'),
 *   upstreamTimeoutMs: 60_000,
 *   forwardedHeaders: 'append',
 *   maxRewriteBody: 1024 * 1024,
 *   bodyTimeoutMs: 30_000,
 *   budget: createBufferBudget(64 * 1024 * 1024),
 *   uploadSlots: createUploadSlots(512),
 *   metrics,
 *   logger,
 *   responseHeaders: () => [],
 * });
 * app.use(handler); // after the middleware that stores the exchange state (app.ts)
 */
export function createForwarder(options: ForwarderOptions): Forwarder {
  const {
    upstreamTimeoutMs,
    responseHeadHoldMs = HEAD_HOLD_MS,
    forwardedHeaders,
    admissionHeaders,
    maxRewriteBody,
    requestBufferBytes = 0,
    bodyTimeoutMs,
    budget,
    uploadSlots,
    varyHeader,
    varyAll = false,
    metrics,
    logger,
  } = options;
  const transport = createUpstreamTransport(options.upstream, options.transport);
  const { agent } = transport;
  const pathPrefix = options.upstream.pathname;
  const upstreamHost = options.upstream.host;

  /**
   * Counts and logs an upstream failure; answers with the decision's 502/504 (`respond`, while nothing
   * was sent), aborts the client's response (`abort`), or lets a whole response go on (`finish`).
   */
  const upstreamFailed = (
    { res, state }: Forwarding,
    err: NodeJS.ErrnoException,
    decision: FinalDecision,
  ) => {
    metrics.upstreamErrors.inc({ kind: decision.kind });
    state.exchange.logFields.upstreamError = err.code ?? err.message;
    if (res.writableFinished) {
      // The exchange's line was written when its response finished, before this failure: an upload
      // the upstream answered early and then stopped reading (upload.ts keepUploadGoing).
      // A line of its own, so that every count has a line (docs/reliability.md fix 110).
      logger.warn(
        {
          req: { method: res.req.method, path: logPath(state.exchange.path) },
          res: { statusCode: res.statusCode },
          upstreamError: err.code ?? err.message,
          kind: decision.kind,
        },
        'upstream request failed after its response was sent',
      );
    }
    // A whole response goes on to the client (counted all the same).
    if (decision.action === 'finish') return;
    if (decision.action === 'abort' || res.headersSent) {
      abortResponse(res);
      return;
    }
    state.rejection = decision.reason;
    // A request body still arriving (streamed to the upstream that failed) will not be forwarded: the
    // connection closes after the answer, and what the client still sends is read and dropped
    // meanwhile (runtime.ts, staged close). Kept alive, the paused body stalled the connection.
    const unread = !res.req.complete;
    sendError(
      res,
      decision.status,
      UPSTREAM_MESSAGES[decision.kind],
      options.responseHeaders(state, undefined),
      unread,
    );
    if (unread) res.req.resume();
  };

  /**
   * A streamed request body that stopped arriving for `upstreamTimeoutMs` (upstream-attempt.ts): 408,
   * counted as a `body_timeout` rejection, the connection closed after it (the rest of the body is
   * read and dropped meanwhile, runtime.ts).
   */
  const uploadStalled = ({ req, res, state }: Forwarding) => {
    state.rejection = 'body_timeout';
    state.exchange.logFields.refusal = UPLOAD_STALLED;
    metrics.rejections.inc({ reason: 'body_timeout' });
    logger.warn({ path: logPath(state.exchange.path), rejection: 'body_timeout' }, UPLOAD_STALLED);
    sendError(res, 408, UPLOAD_STALLED, options.responseHeaders(state, undefined), true);
    req.resume();
  };

  /**
   * A request that waited `UPSTREAM_CONNECT_TIMEOUT_MS` for a connection of the full pool
   * (upstream-attempt.ts): 503 with `Retry-After`, counted as a `pool_full` rejection; never sent
   * upstream. A body still arriving is read and dropped, and the connection closed after the answer.
   */
  const poolFull = ({ req, res, state }: Forwarding) => {
    state.rejection = 'pool_full';
    state.exchange.logFields.refusal = POOL_FULL;
    metrics.rejections.inc({ reason: 'pool_full' });
    logger.warn({ path: logPath(state.exchange.path), rejection: 'pool_full' }, POOL_FULL);
    const unread = !req.complete;
    // The shim's own headers for the rejection carry its `Retry-After` (app.ts, REJECTION_RETRY_AFTER).
    sendError(res, 503, POOL_FULL, options.responseHeaders(state, undefined), unread);
    if (unread) req.resume();
  };

  /** The upstream's head arrived: stream it through to the client, or through the patches. */
  const relayResponse = createResponseRelay({
    responseHeadHoldMs,
    budget,
    varyHeader,
    varyAll,
    metrics,
    logger,
    responseHeaders: options.responseHeaders,
  });

  /** Sends an exchange upstream and sees it through its attempts (upstream-attempt.ts). */
  const forward = createUpstreamAttempt({
    transport,
    upstreamTimeoutMs,
    logger,
    relayResponse,
    upstreamFailed,
    uploadStalled,
    poolFull,
  });

  /**
   * A body that streams upstream holds its upstream connection until its last byte arrives: at most
   * MAX_STREAMING_UPLOADS of them at once, so that clients trickling chunked bodies (or the rest of
   * large ones) cannot take the whole pool (upload-slots.ts; docs/reliability.md fix 122;
   * test/security/slow-body-upstream-pool.test.ts › chunked R.U.D.Y.).
   * Sets `f.giveUploadSlotBack`, which the attempt calls when its upstream request closes.
   * @returns The 503 to answer with when no slot is free, else `undefined` (a slot held, or none needed).
   */
  const uploadSlotRefusal = (f: Forwarding): ShimError | undefined => {
    if (f.body !== 'stream') return undefined;
    const giveBack = holdUploadSlot(uploadSlots, f.req);
    if (giveBack === undefined) return new ShimError('streaming_uploads', STREAMING_UPLOADS_FULL);
    f.giveUploadSlotBack = giveBack;
    return undefined;
  };

  /** Builds the upstream request's head and forwards the exchange. */
  const dispatch = (f: Forwarding): void => {
    const { req, state, body } = f;
    const { headers, invalidForwarded, underscored } = buildUpstreamHeaders(
      {
        method: req.method ?? 'GET',
        headers: req.headers,
        remoteAddress: req.socket.remoteAddress,
        encrypted: (req.socket as Socket & { encrypted?: boolean }).encrypted === true,
      },
      {
        forwardedHeaders,
        rewrittenLength: Buffer.isBuffer(body) ? body.length : undefined,
        patchable: state.rangesRefused,
        upstreamHost,
        ...(admissionHeaders !== undefined && { admissionHeaders }),
      },
    );
    // A forged X-Forwarded-Host or -Proto: dropped, and said in the request's log line.
    if (invalidForwarded !== undefined) state.exchange.logFields.invalidForwarded = invalidForwarded;
    // Other spellings (`_` for `-`) of headers the shim owns, not forwarded: said in the log line (names only).
    if (underscored !== undefined) state.exchange.logFields.underscoredHeaders = underscored;
    forward(f, upstreamTarget(pathPrefix, f.url), headers);
  };

  /**
   * Reads the request body with `read` (budgeted, timed: `BODY_TIMEOUT_MS` from the head), then
   * forwards it: whole with its length, or, when `read` stopped at `REQUEST_BUFFER_BYTES`, what it read
   * followed by the rest as it comes; rejects with the read's ShimError (408, 413, 415, 503, 400), or
   * `streaming_uploads` (503) when the rest would stream and no upload slot is free.
   */
  const readThenDispatch = async (
    f: Forwarding,
    read: (options: BodyReadOptions) => Promise<Buffer | BodyStart>,
  ): Promise<void> => {
    const { req, res, state } = f;
    const held = new Reservation(budget, requestBodyCeiling(budget));
    f.reservation = held;
    res.once('close', () => held.release());
    const controller = new AbortController();
    // A body the client sent while the shim was stopped or blocked is read before the deadline acts,
    // and the time the shim lost after it is given back (own-pause.ts; docs/reliability.md fix 99).
    const timer = startDeadline(
      () => controller.abort(),
      Math.max(0, bodyTimeoutMs - (performance.now() - state.startedAt)),
    );
    // The HTTP server answered the request itself (a malformed chunk): the read ends as for a client
    // gone, not at the deadline with a 408 of its own (fix 156).
    const answered = () => controller.abort(new ClientAbortedError());
    res.once(ANSWERED_BY_SERVER, answered);
    let bodyRead: Buffer | BodyStart;
    try {
      bodyRead = await read({
        reservation: held,
        signal: controller.signal,
        // After the checks that need no byte of the body (coding, declared length, budget).
        beforeRead: () => continueIfExpected(req, res),
      });
    } finally {
      timer.clear();
      res.off(ANSWERED_BY_SERVER, answered);
    }
    if (Buffer.isBuffer(bodyRead)) f.body = bodyRead;
    else if (bodyRead.complete) f.body = bodyRead.bytes;
    else f.bodyStart = bodyRead.bytes;
    const refusal = uploadSlotRefusal(f);
    if (refusal !== undefined) throw refusal;
    dispatch(f);
  };

  /**
   * `Expect: 100-continue`: the request passed the gates, so the client may send its body now (RFC 9110
   * §10.1.1; server.ts leaves the `100 Continue` to this point instead of sending it before any check).
   */
  const continueIfExpected = (req: IncomingMessage, res: ServerResponse): void => {
    if (expectsContinue(req.headers.expect, req.httpVersion)) res.writeContinue();
  };

  // Synchronous unless a body must be rewritten: a pass-through costs no promise and no microtask.
  const handler: RequestHandler = (req, res, next) => {
    const state = stateOf(res);
    if (state === undefined) {
      next(new Error('the forwarder runs after the middleware that stores the exchange state (app.ts)'));
      return;
    }
    const { exchange } = state;
    let url = req.url ?? '/';
    const body: 'stream' | undefined = hasRequestBody(req.headers) ? 'stream' : undefined;
    if (state.hooks.length > 0) {
      let query = exchange.rawQuery;
      let rewrites: ExchangeHooks[] | undefined;
      for (const hooks of state.hooks) {
        if (hooks.rewriteQuery && query !== '') query = hooks.rewriteQuery(query);
        // A hook that may patch the body needs the full 200: no ranges for this client.
        if (hooks.onResponse) state.rangesRefused = true;
        if (hooks.body) {
          rewrites ??= [];
          rewrites.push(hooks);
        }
      }
      if (query !== exchange.rawQuery) url = query === '' ? exchange.path : `${exchange.path}?${query}`;
      if (rewrites !== undefined && body === 'stream') {
        const rewritten = (o: BodyReadOptions) => rewriteRequestBody(req, rewrites, maxRewriteBody, o);
        readThenDispatch({ req, res, state, url, body, reservation: undefined }, rewritten).catch(next);
        return;
      }
    }
    if (body === 'stream' && requestBufferBytes > 0 && req.headers['content-length'] !== undefined) {
      // A body of a declared length is read up to REQUEST_BUFFER_BYTES before the upstream is contacted,
      // as nginx buffers request bodies: a client that trickles it (slowhttptest -B, R.U.D.Y.), whatever
      // length it declares, holds no upstream connection, and gets 408 after BODY_TIMEOUT_MS
      // (test/security/slow-body-upstream-pool.test.ts); one up to the limit goes whole. A chunked body
      // streams from its first byte: a stream of unknown length, which a client may send as it goes
      // (SPEC §4: bodies streamed both ways).
      const first = (o: BodyReadOptions) => readBodyStart(req, requestBufferBytes, o);
      readThenDispatch({ req, res, state, url, body, reservation: undefined }, first).catch(next);
      return;
    }
    const f: Forwarding = { req, res, state, url, body, reservation: undefined };
    // Before any `100 Continue`: a body refused for want of a slot is not asked for.
    const refusal = uploadSlotRefusal(f);
    if (refusal !== undefined) {
      next(refusal);
      return;
    }
    continueIfExpected(req, res);
    dispatch(f);
  };

  return { handler, agent };
}
