/**
 * Forwarding to the upstream (SPEC §4): the wiring of the single-concern modules beside it, on a
 * direct `http.request` with a keep-alive pool — no proxy library on the hot path
 * (docs/reliability.md, "The data plane: no proxy library, every buffer bounded").
 *
 *   outgoing-request.ts   headers and framing of the upstream request (smuggling defences)
 *   request-body.ts       bounded, budgeted, timed buffering of a body to rewrite
 *   upstream-error.ts     502/504, the one idempotent replay, abort after the head
 *   response-patch.ts     the patch pumps: upstream → patch → client, or through a decoder and encoder
 *   response-writer.ts    the client's response head, Vary
 *   upstream-agent.ts     http/https pool, TLS verification, SNI
 */
import type { Agent, ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { type CoreMetrics, routeShape, type UpstreamErrorKind } from '../observability/metrics.ts';
import { pumpBody } from './body-pump.ts';
import { Reservation } from './buffer-budget.ts';
import { createDecoder, createEncoder, supportedCoding } from './content-coding.ts';
import { type ExchangeState, stateOf } from './exchange.ts';
import { expectsContinue } from './expect-continue.ts';
import {
  buildUpstreamHeaders,
  type ForwardedHeaders,
  hasRequestBody,
  upstreamTarget,
} from './outgoing-request.ts';
import { rewriteRequestBody } from './request-body.ts';
import { sendError } from './respond.ts';
import { chainPatches, pumpCodedPatch, pumpPatch } from './response-patch.ts';
import { earlyHints, headerValue, responseHead } from './response-writer.ts';
import type { BufferBudget, ExchangeHooks, PatchOutcome, ResponsePatch } from './types.ts';
import { createUpstreamTransport } from './upstream-agent.ts';
import {
  decideUpstreamFailure,
  IDEMPOTENT_METHODS,
  NO_RESPONSE_CODE,
  SWITCHED_PROTOCOLS_CODE,
  UPSTREAM_MESSAGES,
} from './upstream-error.ts';

export { hasLargeUnreadBody } from './request-body.ts';
export { upstreamErrorKind } from './upstream-error.ts';

/** Options of {@link createForwarder}. */
export interface ForwarderOptions {
  /** The canonical upstream, `http://` or `https://` (a path prefix is kept). */
  upstream: URL;
  /** PEM certificates trusted for an `https:` upstream besides Node's roots (`UPSTREAM_CA_FILE`). */
  upstreamCa?: string;
  /**
   * No response headers within this many ms after the request was sent → 504; a socket idle that
   * long in any phase → 504 before the head, an aborted response after it.
   */
  upstreamTimeoutMs: number;
  /**
   * The client's `X-Forwarded-*` and `Forwarded`: appended to (SPEC §4, default) or replaced by this
   * hop's (`FORWARDED_HEADERS`; outgoing-request.ts {@link ForwardedHeaders}).
   */
  forwardedHeaders?: ForwardedHeaders;
  /** Largest request body buffered for a rewrite, in bytes (413 above). */
  maxRewriteBody: number;
  /** A request body held for a rewrite must have arrived this many ms after the head (408). */
  bodyTimeoutMs: number;
  /** Process-wide bound on buffered bytes (`MAX_BUFFERED_BYTES`; 503 beyond). */
  budget: BufferBudget;
  /** When set, merged into `Vary` on every upstream response (a plugin's `variesByClientVersion`). */
  varyHeader?: string;
  metrics: CoreMetrics;
  logger: Logger;
  /**
   * Headers to add to every response of an exchange (upstream's or shim-made), computed when the
   * response starts; `upstream` is the upstream's response, `undefined` for shim-made responses (read
   * its headers with `headerValue`, response-writer.ts: a pass-through never builds `upstream.headers`).
   */
  responseHeaders(state: ExchangeState, upstream: IncomingMessage | undefined): string[];
}

/** The forwarder: an Express handler plus its upstream connection pool. */
export interface Forwarder {
  readonly handler: RequestHandler;
  /** Keep-alive pool of upstream connections (SPEC §4: reused); destroyed on shutdown. */
  readonly agent: Agent;
}

/** Responses without a body, whatever their headers say (RFC 9110 §6.4.1, §15.3.5, §15.4.5). */
const BODILESS_STATUS = new Set([204, 205, 304]);

const noop = (): void => {};

/** Error code the shim gives its own upstream timeout. */
const TIMEOUT_CODE = 'ESHIMTIMEDOUT';

/** An error of the shim's own about the upstream exchange, with a code `upstreamErrorKind` classifies. */
const upstreamError = (message: string, code: string): NodeJS.ErrnoException =>
  Object.assign(new Error(message), { code });

/**
 * Creates the forwarder.
 * @example
 * const { handler } = createForwarder({ upstream: new URL('http://127.0.0.1:3000'), … });
 * app.use(handler);
 */
export function createForwarder(options: ForwarderOptions): Forwarder {
  const { upstreamTimeoutMs, maxRewriteBody, bodyTimeoutMs, budget, varyHeader, metrics, logger } = options;
  const forwardedHeaders = options.forwardedHeaders ?? 'append';
  const transport = createUpstreamTransport(options.upstream, options.upstreamCa);
  const { agent, target } = transport;
  const pathPrefix = options.upstream.pathname;
  const upstreamHost = options.upstream.host;

  const skip = (state: ExchangeState, reason: string) => {
    metrics.patchesSkipped.inc({ reason });
    state.exchange.logFields.patchSkipped = reason;
    logger.warn({ path: state.exchange.path, reason }, 'response forwarded unpatched');
  };

  /** One exchange, from the (possibly rewritten) request to the end of the response. */
  const forward = (
    req: IncomingMessage,
    res: ServerResponse,
    state: ExchangeState,
    path: string,
    headers: string[],
    body: Buffer | 'stream' | undefined,
    replayable: boolean,
    release: () => void,
  ): void => {
    // The client may have gone while the gates ran or the body was read: its 'close' has passed.
    if (res.destroyed || req.socket.destroyed) {
      release();
      return;
    }
    let attempt = 0;
    let clientGone = false;
    let current: ClientRequest | undefined;
    // `on`, not `once`, for events a request or response emits once: no wrapper per listener.
    res.on('close', () => {
      if (res.writableFinished) return;
      clientGone = true;
      current?.destroy();
    });

    const send = () => {
      let headReceived = false;
      let upstreamResponse: IncomingMessage | undefined;
      let failed = false;
      let headerTimer: NodeJS.Timeout | undefined;
      const upstreamReq = transport.request({
        ...target,
        agent,
        method: req.method,
        path,
        headers,
        setHost: false,
      });
      current = upstreamReq;
      state.upstreamStartedAt = performance.now();

      const onTimeout = () => {
        state.upstreamTimedOut = true;
        const err = Object.assign(new Error('upstream timed out'), { code: TIMEOUT_CODE });
        upstreamReq.destroy(err);
        // Still waiting for a pooled connection: Node reports a destroyed request's error only once
        // the pool hands it a socket, which may be never while slow clients hold them all.
        if (upstreamReq.socket === null) fail(err);
      };
      // Idle socket in any phase (upload, waiting, download) …
      upstreamReq.setTimeout(upstreamTimeoutMs, onTimeout);
      // … and no response headers within the timeout, counted from now: a request that waits for a
      // pooled connection (every one of the pool's sockets busy, e.g. held by slow clients) has no
      // socket for the idle timer yet, and is not sent until it gets one
      // (test/security/slow-clients.test.ts › slow bodies holding every pooled upstream connection).
      headerTimer = setTimeout(onTimeout, upstreamTimeoutMs);
      if (body === 'stream') {
        // A streamed body's upload is bounded by the idle timer once it has a socket; the head's
        // timer starts again when the body has been sent.
        upstreamReq.once('socket', () => clearTimeout(headerTimer));
        upstreamReq.on('finish', () => {
          if (!state.upstreamTimedOut && !headReceived)
            headerTimer = setTimeout(onTimeout, upstreamTimeoutMs);
        });
      }

      /**
       * A failure of this attempt, before or after the upstream's head. `responseComplete`: the upstream
       * connection failed after its response had been read whole (not a failure of the body's decoding).
       */
      const fail = (err: NodeJS.ErrnoException, responseComplete = false) => {
        if (failed || clientGone) return;
        clearTimeout(headerTimer);
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
            { path: state.exchange.path, code: err.code },
            'retrying on another upstream connection',
          );
          attempt++;
          send();
          return;
        }
        if (decision.action === 'finish') {
          // The response is whole and goes on to the client; Node drops the upstream connection. Not
          // latched: its body may still fail to decode, and that failure must reach the client.
          metrics.upstreamErrors.inc({ kind: decision.kind });
          state.exchange.logFields.upstreamError = err.code ?? err.message;
          return;
        }
        upstreamFailed(res, state, err, decision.kind, decision.action === 'respond');
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
        clearTimeout(headerTimer);
        if (!headReceived)
          fail(upstreamError('upstream request closed without a response', NO_RESPONSE_CODE));
      });

      // A 103 the upstream sends of its own accord goes on (RFC 9110 §15.2: a proxy MUST forward such
      // 1xx), never to an HTTP/1.0 client. Not a 100 (the shim answered the client's Expect itself, and
      // sends no Expect upstream) nor a 102 (deprecated; Node's server can send none of its own fields).
      upstreamReq.on('information', (info) => {
        if (info.statusCode !== 103 || res.headersSent || clientGone || req.httpVersion === '1.0') return;
        const hints = earlyHints(info.rawHeaders);
        if (hints === undefined) return;
        try {
          res.writeEarlyHints(hints);
        } catch (err) {
          // Node checks `Link` against a narrower grammar than RFC 8288 (a quoted `title="a b"`
          // throws ERR_INVALID_ARG_VALUE): such a hint is dropped, never the process.
          logger.debug({ err, path: state.exchange.path }, 'early hints not forwarded');
        }
      });

      upstreamReq.on('response', (upstreamRes: IncomingMessage) => {
        if (upstreamRes.statusCode === 101) {
          // A 101 without `Connection: upgrade` comes as a response: invalid (upstream-error.ts); `fail`
          // destroys its connection, never pooled (the upstream may speak another protocol on it).
          fail(upstreamError('upstream switched protocols (101)', SWITCHED_PROTOCOLS_CODE));
          return;
        }
        headReceived = true;
        upstreamResponse = upstreamRes;
        clearTimeout(headerTimer);
        release();
        upstreamRes.on('error', (err: NodeJS.ErrnoException) => fail(err));
        upstreamRes.on('close', () => {
          if (!upstreamRes.complete)
            fail(Object.assign(new Error('upstream response cut short'), { code: 'ECONNRESET' }));
        });
        try {
          respond(req, res, state, upstreamRes, fail);
        } catch (err) {
          // A fault in one exchange's handling fails that exchange, never the process.
          logger.error({ err, path: state.exchange.path }, 'handling the upstream response failed');
          upstreamRes.destroy();
          res.destroy();
        }
      });

      if (body === undefined) upstreamReq.end();
      else if (body === 'stream') pumpBody(req, upstreamReq);
      else upstreamReq.end(body);
    };
    send();
  };

  /** Counts and logs an upstream failure; answers 502/504 (`respond`) or aborts the client's response. */
  const upstreamFailed = (
    res: ServerResponse,
    state: ExchangeState,
    err: NodeJS.ErrnoException,
    kind: UpstreamErrorKind,
    respond: boolean,
  ) => {
    metrics.upstreamErrors.inc({ kind });
    state.exchange.logFields.upstreamError = err.code ?? err.message;
    if (!respond || res.headersSent) {
      res.destroy();
      return;
    }
    const reason = `upstream_${kind}` as const;
    state.rejection = reason;
    // A request body still arriving (streamed to the upstream that failed) will not be forwarded: the
    // connection closes after the answer, and what the client still sends is read and dropped
    // meanwhile (runtime.ts, staged close). Kept alive, the paused body stalled the connection.
    const unread = !res.req.complete;
    sendError(
      res,
      kind === 'timeout' ? 504 : 502,
      UPSTREAM_MESSAGES[kind],
      options.responseHeaders(state, undefined),
      unread,
    );
    if (unread) res.req.resume();
  };

  /** The upstream's head arrived: stream it through, or through the patches. */
  const respond = (
    req: IncomingMessage,
    res: ServerResponse,
    state: ExchangeState,
    upstreamRes: IncomingMessage,
    fail: (err: NodeJS.ErrnoException) => void,
  ) => {
    const status = upstreamRes.statusCode ?? 502;
    state.shape ??= routeShape(state.exchange.path);
    metrics.upstreamDuration.observe(
      { route: state.shape },
      (performance.now() - state.upstreamStartedAt) / 1000,
    );
    let patches: ResponsePatch[] | undefined;
    // Range was not forwarded while a hook has onResponse (handler): no ranges for this client.
    let rangesRefused = false;
    for (const hooks of state.hooks) {
      hooks.onStatus?.(status);
      if (hooks.onResponse) rangesRefused = true;
      const patch = hooks.onResponse?.(status, upstreamRes.headers);
      if (patch) {
        patches ??= [];
        patches.push(patch);
      }
    }
    // After onResponse: plugins may append response headers there.
    const extra = options.responseHeaders(state, upstreamRes);
    // Only what this response uses: the ETag is weakened for a patch, Vary merged when configured.
    const upstreamHead = {
      rawHeaders: upstreamRes.rawHeaders,
      etag: patches === undefined ? undefined : (headerValue(upstreamRes, 'etag') as string | undefined),
      vary: varyHeader === undefined ? undefined : (headerValue(upstreamRes, 'vary') as string | undefined),
    };
    const message = upstreamRes.statusMessage;

    if (patches === undefined) {
      res.writeHead(status, message, responseHead(upstreamHead, extra, false, varyHeader, rangesRefused));
      pumpBody(upstreamRes, res);
      return;
    }
    const patch = chainPatches(patches);
    if (req.method === 'HEAD' || BODILESS_STATUS.has(status)) {
      // The headers the patched GET would carry (no length, weak validator), no body.
      patch.destroy();
      res.writeHead(status, message, responseHead(upstreamHead, extra, true, varyHeader, rangesRefused));
      res.end();
      upstreamRes.resume();
      return;
    }
    const coding = supportedCoding(upstreamRes.headers['content-encoding']);
    const writeHead = () =>
      res.writeHead(status, message, responseHead(upstreamHead, extra, true, varyHeader, rangesRefused));
    if (status === 206 || coding === undefined) {
      // A partial body cannot be patched as a whole document; a coding the shim cannot undo neither.
      patch.destroy();
      if (coding === undefined) skip(state, 'unsupported_encoding');
      res.writeHead(status, message, responseHead(upstreamHead, extra, false, varyHeader, rangesRefused));
      pumpBody(upstreamRes, res);
      return;
    }
    const onEnd = (outcome: PatchOutcome) => {
      if (outcome.kind === 'skipped') skip(state, outcome.reason);
    };
    if (coding === 'identity') {
      // The common case: no coding to undo (response-patch.ts pumpPatch).
      pumpPatch(upstreamRes, res, patch, writeHead, onEnd, fail);
      return;
    }
    // A content coding: decoded, patched and encoded again as the bytes come (pumpCodedPatch).
    const codec = { decoder: createDecoder(coding)!, encoder: createEncoder(coding)! };
    pumpCodedPatch(upstreamRes, res, codec, patch, writeHead, onEnd, fail);
  };

  /** Builds the upstream request's head and forwards the exchange. */
  const dispatch = (
    req: IncomingMessage,
    res: ServerResponse,
    state: ExchangeState,
    url: string,
    body: Buffer | 'stream' | undefined,
    dropRange: boolean,
    reservation: Reservation | undefined,
  ): void => {
    const { headers, invalidForwarded } = buildUpstreamHeaders(
      {
        method: req.method ?? 'GET',
        headers: req.headers,
        remoteAddress: req.socket.remoteAddress,
        encrypted: (req.socket as Socket & { encrypted?: boolean }).encrypted === true,
      },
      {
        forwardedHeaders,
        rewrittenLength: Buffer.isBuffer(body) ? body.length : undefined,
        dropRange,
        upstreamHost,
      },
    );
    // A forged X-Forwarded-Host or -Proto: dropped, and said in the request's log line.
    if (invalidForwarded !== undefined) state.exchange.logFields.invalidForwarded = invalidForwarded;
    const replayable = IDEMPOTENT_METHODS.has(req.method ?? '') && body !== 'stream';
    const release = reservation === undefined ? noop : () => reservation.release();
    forward(req, res, state, upstreamTarget(pathPrefix, url), headers, body, replayable, release);
  };

  /** Buffers and rewrites the request body (budgeted, timed), then forwards; rejects with its ShimError. */
  const rewriteThenDispatch = async (
    req: IncomingMessage,
    res: ServerResponse,
    state: ExchangeState,
    url: string,
    rewrites: ExchangeHooks[],
    dropRange: boolean,
  ): Promise<void> => {
    const held = new Reservation(budget);
    res.once('close', () => held.release());
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(),
      Math.max(0, bodyTimeoutMs - (performance.now() - state.startedAt)),
    );
    let body: Buffer;
    try {
      body = await rewriteRequestBody(req, rewrites, maxRewriteBody, {
        reservation: held,
        signal: controller.signal,
        // After the checks that need no byte of the body (coding, declared length, budget).
        beforeRead: () => continueIfExpected(req, res),
      });
    } finally {
      clearTimeout(timer);
    }
    state.forwardBody = body;
    dispatch(req, res, state, url, body, dropRange, held);
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
    const { exchange } = state;
    let url = req.url ?? '/';
    const body: 'stream' | undefined = hasRequestBody(req.headers) ? 'stream' : undefined;
    let dropRange = false;
    if (state.hooks.length > 0) {
      let query = exchange.rawQuery;
      let rewrites: ExchangeHooks[] | undefined;
      for (const hooks of state.hooks) {
        if (hooks.rewriteQuery && query !== '') query = hooks.rewriteQuery(query);
        if (hooks.onResponse) dropRange = true;
        if (hooks.body) {
          rewrites ??= [];
          rewrites.push(hooks);
        }
      }
      if (query !== exchange.rawQuery) url = query === '' ? exchange.path : `${exchange.path}?${query}`;
      if (rewrites !== undefined && body === 'stream') {
        rewriteThenDispatch(req, res, state, url, rewrites, dropRange).catch(next);
        return;
      }
    }
    continueIfExpected(req, res);
    dispatch(req, res, state, url, body, dropRange, undefined);
  };

  return { handler, agent };
}
