/**
 * Forwarding to the upstream (SPEC §4) with http-proxy-middleware, with the shim owning message
 * framing and hop-by-hop headers in both directions, and the two seams (request rewrite, response
 * patch) applied around it.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import type { Logger } from 'pino';
import { type CoreMetrics, routeClass, type UpstreamErrorKind } from '../observability/metrics.ts';
import { DecodedTooLargeError, decodeBody, encodeBody, supportedCoding } from './content-coding.ts';
import { ShimError } from './errors.ts';
import { type ExchangeState, stateOf } from './exchange.ts';
import { connectionTokens, endToEndRawHeaders, HOP_BY_HOP } from './hop-by-hop.ts';
import { countStreamedBytes, scavengingEnabled } from './memory.ts';
import { readBoundedBody } from './request-body.ts';
import { sendError } from './respond.ts';
import type { ExchangeHooks, ResponsePatch } from './types.ts';

/** Options of {@link createForwarder}. */
export interface ForwarderOptions {
  /** The canonical upstream, e.g. `http://127.0.0.1:3000` (a path prefix is kept). */
  upstream: URL;
  /** No response headers within this many ms after the request was sent, or a socket idle that long → 504 / abort. */
  upstreamTimeoutMs: number;
  /** Largest request body buffered for a rewrite, in bytes (413 above). */
  maxRewriteBody: number;
  /** Largest response body buffered for a patch, in bytes (forwarded unpatched above). */
  maxPatchBody: number;
  metrics: CoreMetrics;
  logger: Logger;
  /**
   * Headers to add to every response of an exchange (upstream's or shim-made), computed when the
   * response starts; `upstreamHeaders` is `undefined` for shim-made responses.
   */
  responseHeaders(state: ExchangeState, upstreamHeaders: http.IncomingHttpHeaders | undefined): string[];
}

/** The forwarder: an Express handler plus its upstream connection pool. */
export interface Forwarder {
  readonly handler: RequestHandler;
  /** Keep-alive pool of upstream connections (SPEC §4: reused). */
  readonly agent: http.Agent;
}

/** Statuses whose responses have no body to patch (RFC 9110 §6.4.1), and partial content. */
const NO_PATCH_STATUS = new Set([204, 205, 206, 304]);
const DROP_ON_PATCH = new Set(['content-length', 'etag']);
/** A request body larger than this is not drained when the shim rejects early; the connection closes instead. */
const DRAIN_LIMIT = 64 * 1024;

/**
 * Creates the forwarder.
 * @example
 * const { handler } = createForwarder({ upstream: new URL('http://127.0.0.1:3000'), … });
 * app.use(handler);
 */
export function createForwarder(options: ForwarderOptions): Forwarder {
  const { upstreamTimeoutMs, maxRewriteBody, maxPatchBody, metrics, logger } = options;
  const agent = new http.Agent({
    keepAlive: true,
    maxSockets: 1024,
    maxFreeSockets: 256,
    scheduling: 'lifo',
  });

  /** Per exchange: the upstream request still waiting for its response head. */
  const awaitingHead = new WeakMap<ServerResponse, http.ClientRequest>();
  /** Per exchange: how to send it once more, for an idempotent request whose body the shim holds. */
  const replays = new WeakMap<ServerResponse, () => void>();

  const onProxyReq = (proxyReq: http.ClientRequest, req: IncomingMessage, res: ServerResponse): void => {
    const state = stateOf(res);
    awaitingHead.set(res, proxyReq);
    // Hop-by-hop headers describe the client's connection, not ours (RFC 9110 §7.6.1).
    const listed = connectionTokens(req.headers.connection);
    for (const name of proxyReq.getHeaderNames()) {
      if (HOP_BY_HOP.has(name) || listed.includes(name)) proxyReq.removeHeader(name);
    }
    // Framing is ours: a body of known length keeps its Content-Length (validated by Node's parser);
    // a chunked body is re-chunked explicitly, because Node does not chunk DELETE/OPTIONS by default
    // and would otherwise write the body bytes raw after the headers (request smuggling).
    if (state.forwardBody !== undefined) {
      proxyReq.setHeader('content-length', state.forwardBody.length);
    } else if (req.headers['transfer-encoding'] !== undefined) {
      proxyReq.setHeader('transfer-encoding', 'chunked');
      if (scavengingEnabled) req.on('data', countChunk);
    } else if (req.headers['content-length'] !== undefined) {
      // Set again even when `Connection` names it: stripped as hop-by-hop, Node would write a GET,
      // DELETE or OPTIONS body unframed after the headers, and the upstream would read it as the next
      // request (test/security/request-smuggling.test.ts).
      proxyReq.setHeader('content-length', req.headers['content-length']);
      if (scavengingEnabled && Number(req.headers['content-length']) > LARGE_BODY) req.on('data', countChunk);
    }
    appendForwarded(proxyReq, req);
    // Writing flushes the head, so the rewritten body goes last; the client's stream has ended, and
    // httpxy's pipe of it only ends the upstream request.
    if (state.forwardBody !== undefined) proxyReq.write(state.forwardBody);

    state.upstreamStartedAt = performance.now();
    const timeout = () => {
      state.upstreamTimedOut = true;
      proxyReq.destroy(Object.assign(new Error('upstream timed out'), { code: 'ESHIMTIMEDOUT' }));
    };
    // Idle socket in any phase (upload, waiting, download) …
    proxyReq.setTimeout(upstreamTimeoutMs, timeout);
    // … and no response headers within the timeout once the request is fully sent.
    let headerTimer: NodeJS.Timeout | undefined;
    proxyReq.once('finish', () => {
      if (!state.upstreamTimedOut) headerTimer = setTimeout(timeout, upstreamTimeoutMs);
    });
    const clear = () => clearTimeout(headerTimer);
    proxyReq.once('response', clear);
    proxyReq.once('close', clear);
  };

  const onProxyRes = (proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse): void => {
    const state = stateOf(res);
    awaitingHead.delete(res);
    // The head arrived: no replay any more. Dropped now rather than when `res` is collected: the replay
    // closure holds the request, the response and Express's `next`, and a WeakMap entry whose value
    // references its key keeps all of them alive into the old generation (measured: +30 µs of CPU per
    // request and +120 MB of heap under load; bench/RESULTS.md).
    replays.delete(res);
    const status = proxyRes.statusCode ?? 502;
    metrics.upstreamDuration.observe(
      { route: routeClass(state.exchange.path, status !== 404) },
      (performance.now() - state.upstreamStartedAt) / 1000,
    );
    const patches: ResponsePatch[] = [];
    if (state.hooks.length > 0 && req.method !== 'HEAD' && !NO_PATCH_STATUS.has(status)) {
      for (const hooks of state.hooks) {
        const patch = hooks.onResponse?.(status, proxyRes.headers);
        if (patch) patches.push(patch);
      }
    }
    // After onResponse: plugins may append response headers there.
    const extra = options.responseHeaders(state, proxyRes.headers);
    if (patches.length === 0) {
      streamThrough(proxyRes, res, extra);
      return;
    }
    bufferAndPatch(proxyRes, res, state, patches, extra).catch((err: unknown) => {
      logger.error({ err, path: state.exchange.path }, 'response patch failed');
      res.destroy();
    });
  };

  const bufferAndPatch = async (
    proxyRes: IncomingMessage,
    res: ServerResponse,
    state: ExchangeState,
    patches: ResponsePatch[],
    extra: string[],
  ): Promise<void> => {
    const skip = (reason: string) => {
      metrics.patchesSkipped.inc({ reason });
      state.exchange.logFields.patchSkipped = reason;
      logger.warn({ path: state.exchange.path, reason }, 'response forwarded unpatched');
    };
    const coding = supportedCoding(proxyRes.headers['content-encoding']);
    if (coding === undefined) {
      skip('unsupported_encoding');
      streamThrough(proxyRes, res, extra);
      return;
    }
    if (Number(proxyRes.headers['content-length']) > maxPatchBody) {
      skip('too_large');
      streamThrough(proxyRes, res, extra);
      return;
    }
    const raw = await collectBounded(proxyRes, maxPatchBody);
    if (raw === undefined) return; // upstream or client went away; httpxy aborts the client response
    // The body and its patched copy are large buffers outside the V8 heap, owned by small young
    // objects: counted like streamed bytes, they are freed by the next minor GC instead of piling up
    // (measured on 1 MB lists at 32 connections: peak RSS 370 → 195 MB, CPU 3.3 → 2.1 ms per
    // response; bench/RESULTS.md).
    if (scavengingEnabled && Buffer.isBuffer(raw)) countStreamedBytes(2 * raw.length);
    if (!Buffer.isBuffer(raw)) {
      skip('too_large');
      res.writeHead(proxyRes.statusCode ?? 502, proxyRes.statusMessage, [
        ...endToEndRawHeaders(proxyRes.rawHeaders),
        ...extra,
      ]);
      for (const chunk of raw.head) res.write(chunk);
      proxyRes.pipe(res);
      proxyRes.resume();
      return;
    }
    let decoded: Buffer;
    try {
      decoded = await decodeBody(raw, coding, maxPatchBody);
    } catch (err) {
      skip(err instanceof DecodedTooLargeError ? 'too_large' : 'decode_error');
      return sendBuffered(proxyRes, res, raw, extra, false);
    }
    let body = decoded;
    let changed = false;
    for (const patch of patches) {
      const outcome = patch.patch(body);
      if (outcome.kind === 'patched') {
        body = outcome.body;
        changed = true;
      } else if (outcome.kind === 'skipped') {
        skip(outcome.reason);
      }
    }
    if (!changed) return sendBuffered(proxyRes, res, raw, extra, false);
    if (res.destroyed) return;
    return sendBuffered(proxyRes, res, await encodeBody(body, coding), extra, true);
  };

  const onError = (
    err: NodeJS.ErrnoException,
    _req?: IncomingMessage,
    res?: ServerResponse | Socket,
  ): void => {
    if (!res) return;
    if (!('writeHead' in res)) {
      res.destroy();
      return;
    }
    const state = stateOf(res);
    // A pooled connection the upstream closed just as it was reused: the request failed before any
    // response byte, unprocessed. Send an idempotent one whose body the shim holds once more, on
    // another connection (RFC 9110 §9.2.2; test/e2e/reliability-keepalive-reuse.test.ts).
    const replay = replays.get(res);
    replays.delete(res);
    if (
      replay &&
      awaitingHead.get(res)?.reusedSocket &&
      !state.upstreamTimedOut &&
      !res.headersSent &&
      upstreamErrorKind(err) === 'reset'
    ) {
      logger.debug({ path: state.exchange.path, code: err.code }, 'retrying on another upstream connection');
      replay();
      return;
    }
    const kind: UpstreamErrorKind = state.upstreamTimedOut ? 'timeout' : upstreamErrorKind(err);
    metrics.upstreamErrors.inc({ kind });
    state.exchange.logFields.upstreamError = err.code ?? err.message;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const reason = `upstream_${kind}` as const;
    const error = new ShimError(reason, UPSTREAM_MESSAGES[kind]);
    state.rejection = error.reason;
    sendError(res, error.statusCode, error.message, options.responseHeaders(state, undefined));
  };

  const proxy = createProxyMiddleware<Request, Response>({
    target: options.upstream.href,
    changeOrigin: false,
    xfwd: false,
    agent,
    selfHandleResponse: true,
    followRedirects: false,
    ejectPlugins: true,
    plugins: [
      (server) => {
        // A fault in one exchange's handling fails that exchange (502 or an aborted response), never
        // the process: these run in socket callbacks where a throw would be uncaught.
        server.on('proxyReq', (proxyReq, req, res) => {
          try {
            onProxyReq(proxyReq, req, res);
          } catch (err) {
            logger.error({ err }, 'preparing the upstream request failed');
            proxyReq.destroy(err as Error);
          }
        });
        server.on('proxyRes', (proxyRes, req, res) => {
          try {
            onProxyRes(proxyRes, req, res);
          } catch (err) {
            logger.error({ err }, 'handling the upstream response failed');
            proxyRes.destroy();
            res.destroy();
          }
        });
        server.on('error', onError);
      },
    ],
  });

  const handler: RequestHandler = async (req, res, next: NextFunction) => {
    const state = stateOf(res);
    const { exchange } = state;
    if (state.hooks.length > 0) {
      let query = exchange.rawQuery;
      for (const hooks of state.hooks)
        if (hooks.rewriteQuery && query !== '') query = hooks.rewriteQuery(query);
      if (query !== exchange.rawQuery) req.url = query === '' ? exchange.path : `${exchange.path}?${query}`;
      const rewrites = state.hooks.filter((h) => h.body !== undefined);
      if (rewrites.length > 0 && hasBody(req)) {
        state.forwardBody = await rewriteRequestBody(req, rewrites, maxRewriteBody);
      }
    }
    // Node has already answered `Expect: 100-continue`; forwarding it would also make httpxy skip
    // the proxyReq hook that owns framing.
    delete req.headers.expect;
    if (IDEMPOTENT.has(req.method ?? '') && (state.forwardBody !== undefined || !hasBody(req))) {
      replays.set(res, () => void proxy(req, res, next));
    }
    return proxy(req, res, next);
  };

  return { handler, agent };
}

/**
 * Buffers a request body (bounded), undoes its `Content-Encoding`, runs the body rewrites and redoes
 * the encoding when anything changed (RFC 9110 §8.4).
 * @returns The body to forward: the client's own bytes when no rewrite changed anything.
 * @throws {ShimError} `size` (413) above `limit` bytes (encoded or decoded), `encoding` (415) for a
 *   content coding the shim cannot undo, `body` (400) for a body that does not decode, and whatever
 *   the rewrites throw.
 */
async function rewriteRequestBody(
  req: IncomingMessage,
  rewrites: ExchangeHooks[],
  limit: number,
): Promise<Buffer> {
  const coding = supportedCoding(req.headers['content-encoding']);
  if (coding === undefined) {
    throw new ShimError(
      'encoding',
      'The request body uses a Content-Encoding this proxy cannot rewrite; send it as identity, gzip, deflate or br.',
    );
  }
  const raw = await readBoundedBody(req, limit);
  let body = raw;
  if (coding !== 'identity') {
    try {
      body = await decodeBody(raw, coding, limit);
    } catch (err) {
      if (err instanceof DecodedTooLargeError) {
        throw new ShimError(
          'size',
          `The decoded request body is larger than the ${limit} bytes this proxy rewrites (MAX_REWRITE_BODY).`,
        );
      }
      throw new ShimError('body', `The request body is not valid ${coding} data.`);
    }
  }
  const decoded = body;
  for (const hooks of rewrites) body = hooks.body?.rewrite(body) ?? body;
  if (body === decoded) return raw;
  return coding === 'identity' ? body : encodeBody(body, coding);
}

/** Idempotent methods (RFC 9110 §9.2.2): safe to send again when the first attempt was not processed. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/** Whether an unread request body remains that is too large to drain before responding. */
export function hasLargeUnreadBody(req: IncomingMessage): boolean {
  if (req.readableEnded) return false;
  if (req.headers['transfer-encoding'] !== undefined) return true;
  return Number(req.headers['content-length'] ?? 0) > DRAIN_LIMIT;
}

function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

const UPSTREAM_MESSAGES: Record<UpstreamErrorKind, string> = {
  refused: 'The upstream service could not be reached. Try again later.',
  reset: 'The upstream service closed the connection before responding. Try again later.',
  invalid: 'The upstream service sent an invalid HTTP response.',
  timeout: 'The upstream service did not respond in time (UPSTREAM_TIMEOUT_MS). Try again later.',
};

const REFUSED = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
]);

/**
 * Classifies an upstream error (Node `errno` codes; llhttp's `HPE_*` for invalid responses).
 * @returns A bounded kind for metrics and the status mapping (502, or 504 for timeouts).
 */
export function upstreamErrorKind(err: NodeJS.ErrnoException): UpstreamErrorKind {
  const code = err.code ?? '';
  if (REFUSED.has(code)) return 'refused';
  if (code.startsWith('HPE_') || code === 'ERR_INVALID_HTTP_RESPONSE') return 'invalid';
  if (code === 'ETIMEDOUT' || code === 'ESHIMTIMEDOUT') return 'timeout';
  return 'reset';
}

/** Appends this hop to `X-Forwarded-For`, `-Proto` and `-Host` (de-facto standard; RFC 7239 §5 in spirit). */
function appendForwarded(proxyReq: http.ClientRequest, req: IncomingMessage): void {
  const append = (name: string, value: string | undefined) => {
    if (value === undefined || value === '') return;
    const prior = req.headers[name];
    proxyReq.setHeader(name, typeof prior === 'string' && prior !== '' ? `${prior}, ${value}` : value);
  };
  append('x-forwarded-for', req.socket.remoteAddress);
  append('x-forwarded-proto', (req.socket as Socket & { encrypted?: boolean }).encrypted ? 'https' : 'http');
  append('x-forwarded-host', req.headers.host);
}

function streamThrough(proxyRes: IncomingMessage, res: ServerResponse, extra: string[]): void {
  res.writeHead(proxyRes.statusCode ?? 502, proxyRes.statusMessage, [
    ...endToEndRawHeaders(proxyRes.rawHeaders),
    ...extra,
  ]);
  const length = proxyRes.headers['content-length'];
  if (scavengingEnabled && (length === undefined || Number(length) > LARGE_BODY))
    proxyRes.on('data', countChunk);
  proxyRes.pipe(res);
}

/** Bodies above this many bytes (or of unknown length) are counted for {@link countStreamedBytes}. */
const LARGE_BODY = 1024 * 1024;

function countChunk(chunk: Buffer): void {
  countStreamedBytes(chunk.length);
}

function sendBuffered(
  proxyRes: IncomingMessage,
  res: ServerResponse,
  body: Buffer,
  extra: string[],
  patched: boolean,
): void {
  if (res.destroyed) return;
  const headers = endToEndRawHeaders(proxyRes.rawHeaders, patched ? DROP_ON_PATCH : undefined);
  if (patched) {
    headers.push('Content-Length', String(body.length));
    const etag = proxyRes.headers.etag;
    // The body changed, so a strong validator no longer holds; a weak one still means "same resource
    // state" (RFC 9110 §8.8.1).
    if (etag !== undefined) headers.push('ETag', etag.startsWith('W/') ? etag : `W/${etag}`);
  }
  res.writeHead(proxyRes.statusCode ?? 502, proxyRes.statusMessage, [...headers, ...extra]);
  res.end(body);
}

/**
 * Buffers a response body up to `limit` bytes.
 * @returns The body; `{ head }` (the chunks read so far, stream paused) when it exceeds the limit;
 * `undefined` when the stream ended abnormally.
 */
function collectBounded(
  stream: IncomingMessage,
  limit: number,
): Promise<Buffer | { head: Buffer[] } | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (value: Buffer | { head: Buffer[] } | undefined) => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('close', onClose);
      resolve(value);
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size > limit) {
        stream.pause();
        done({ head: chunks });
      }
    };
    const onEnd = () => done(Buffer.concat(chunks, size));
    const onClose = () => {
      if (!stream.complete) done(undefined);
    };
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('close', onClose);
  });
}
