/**
 * Per-request state shared by the gates, the seams, the forwarder and the request log.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RejectionReason } from './errors.ts';
import type { Exchange, ExchangeHooks } from './types.ts';

/** What the core keeps for one request (on `res.locals.shim`). */
export interface ExchangeState {
  readonly exchange: Exchange;
  /**
   * When the request arrived: `performance.now()` (monotonic, ms since the process's time origin,
   * fractional), as the first middleware read it.
   */
  readonly startedAt: number;
  /** Bounded route class for metrics and the log line; set when the response finishes. */
  route: string;
  /**
   * The path's route shape (`routeShape` in observability/metrics.ts), computed once when first needed
   * (upstream duration, then the request metrics); `undefined` until then.
   */
  shape: string | undefined;
  /** Set by the preflight and public-path gates: skip the version and credential gates. */
  unchecked: 'preflight' | 'public' | undefined;
  /** Hooks the plugins returned for this request. */
  hooks: ExchangeHooks[];
  /**
   * Some hook of the exchange has `onResponse` (it may patch the body): the client's `Range` and
   * `If-Range` are not forwarded, and its responses say `Accept-Ranges: none` (SPEC §6; RFC 9110
   * §14.2: the full 200 is patched); its validators go upstream as outgoing-request.ts `patchable` makes
   * them. Decided by the forwarder before the request goes upstream.
   */
  rangesRefused: boolean;
  /** Why the shim answered itself, when it did. */
  rejection: RejectionReason | undefined;
  /** Set when the upstream timer fired, so the resulting error maps to 504. */
  upstreamTimedOut: boolean;
  /** `performance.now()` when the request was handed to the upstream, in ms. */
  upstreamStartedAt: number;
}

/**
 * Creates the exchange state for a request: splits the raw target into path and query (neither
 * decoded), no hooks, no rejection, nothing learned yet.
 * @param req The incoming request (`req.url` in origin-form, hygiene-checked or not: a target without
 *   `?` is all path).
 * @param startedAt `performance.now()` at arrival, in ms (monotonic clock; see
 *   {@link ExchangeState.startedAt}); durations are measured from it with the same clock.
 * @returns A fresh state; `route` is `unknown` until the response finishes.
 * @throws Nothing.
 * @example
 * createExchangeState(req, performance.now()).exchange.path // '/missions' for `GET /missions?skip=1`
 */
export function createExchangeState(req: IncomingMessage, startedAt: number): ExchangeState {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const exchange: Exchange = {
    method: req.method ?? 'GET',
    path: q === -1 ? url : url.slice(0, q),
    rawQuery: q === -1 ? '' : url.slice(q + 1),
    headers: req.headers,
    clientVersion: undefined,
    responseHeaders: [],
    logFields: {},
  };
  return {
    exchange,
    startedAt,
    route: 'unknown',
    shape: undefined,
    unchecked: undefined,
    hooks: [],
    rangesRefused: false,
    rejection: undefined,
    upstreamTimedOut: false,
    upstreamStartedAt: 0,
  };
}

/**
 * One admission step (SPEC §3): reads the request, records what it learned on the exchange state, or
 * throws a `ShimError` that the pipeline's error handler answers. Synchronous; the composition root
 * (app.ts) runs the gates in order inside one Express layer.
 */
export type Gate = (req: IncomingMessage, state: ExchangeState) => void;

/**
 * The state of a request, as the first middleware stored it (app.ts, on `res.locals.shim`).
 * @param res The response of the exchange.
 * @returns The state, or `undefined` for a response that middleware has not seen (an error raised
 *   before it, a response outside the pipeline): callers check.
 * @throws Nothing.
 */
export function stateOf(res: ServerResponse): ExchangeState | undefined {
  return (res as ServerResponse & { locals?: { shim?: ExchangeState } }).locals?.shim;
}

/**
 * The event a response emits when the HTTP server has answered its request itself (a parser error in
 * the request's body: the server's own 400 went to the client, src/proxy/server.ts `writeRaw`). What
 * handles the exchange treats it as a client gone: the upstream request goes, the body read ends, a held
 * head is not sent, and no error of its own replaces that answer in the log or the metrics
 * (docs/reliability.md fix 156).
 */
export const ANSWERED_BY_SERVER = 'shim:answered-by-server';

/** The responses the HTTP server answered itself (see {@link ANSWERED_BY_SERVER}). */
const answeredByServer = new WeakSet<object>();

/**
 * Records that the HTTP server answered `res`'s request itself with `statusCode` (for the request's
 * log line), and tells the exchange ({@link ANSWERED_BY_SERVER}).
 * @param res The response of the request being handled, not yet started.
 * @param statusCode The status of the server's answer, e.g. 400.
 * @throws Nothing (but what a listener throws).
 */
export function markAnsweredByServer(res: ServerResponse, statusCode: number): void {
  answeredByServer.add(res);
  res.statusCode = statusCode;
  res.emit(ANSWERED_BY_SERVER);
}

/**
 * Whether the HTTP server answered `res`'s request itself ({@link markAnsweredByServer}): nothing may
 * be written to `res` any more.
 * @param res A response of the pipeline (any other object: `false`).
 * @returns `true` once marked.
 * @throws Nothing.
 */
export function isAnsweredByServer(res: object): boolean {
  return answeredByServer.has(res);
}
