/**
 * The composition root: hygiene → gates → plugins (the alias layer, one line) → proxy.
 * The only module that knows which plugins exist.
 */
import type { IncomingMessage, RequestListener } from 'node:http';
import { performance } from 'node:perf_hooks';
import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import { aliasPlugin } from './aliases/index.ts';
import type { Config, PluginDefinition } from './config.ts';
import { createBufferBudget } from './core/buffer-budget.ts';
import {
  REJECTION_RETRY_AFTER,
  type RejectionReason,
  type ServerRejection,
  ShimError,
} from './core/errors.ts';
import {
  createExchangeState,
  type ExchangeState,
  type Gate,
  isAnsweredByServer,
  stateOf,
} from './core/exchange.ts';
import { headerValue } from './core/raw-headers.ts';
import type { AdminRoute, PluginContext, ProxyPlugin } from './core/types.ts';
import { clientVersionGate, outdatedClientWarning } from './gates/client-version.ts';
import { type CredentialRules, credentialGate, credentialIdentity } from './gates/credentials.ts';
import { hygieneGate } from './gates/hygiene.ts';
import { publicPathGate } from './gates/public-paths.ts';
import { requestIdOf } from './observability/correlation.ts';
import {
  type CoreMetrics,
  methodLabel,
  registerBufferBudgetGauges,
  registerUploadSlotGauges,
  registerUpstreamPoolGauges,
  routeShape,
} from './observability/metrics.ts';
import { createRequestLog, logPath } from './observability/request-log.ts';
import { createForwarder, type Forwarder } from './proxy/forward.ts';
import { ClientAbortedError, hasLargeUnreadBody } from './proxy/request-body.ts';
import { ownCorsHeaders, sendError } from './proxy/respond.ts';
import { ServiceVersion } from './proxy/service-version.ts';
import { createUploadSlots } from './proxy/upload-slots.ts';
import type { UpstreamTransportOptions } from './proxy/upstream-agent.ts';

/**
 * The registered plugins, in order: each brings its configuration schema (handed to `loadConfig`) and
 * its factory. The one line per plugin; the alias layer's is removed at 1.0 (docs/removing-the-alias-layer.md).
 */
export const PLUGINS: readonly PluginDefinition[] = [
  aliasPlugin, // the alias layer: remove at 1.0 (docs/removing-the-alias-layer.md)
];

/** Rejections after which the request body is left unread. */
const STOPPED_READING: ReadonlySet<RejectionReason> = new Set([
  'buffer_budget',
  'body_timeout',
  'streaming_uploads',
]);

/** What {@link createShim} needs besides the configuration. */
export interface ShimDependencies {
  logger: Logger;
  metrics: CoreMetrics;
  /** The upstream to forward to (configured, or the embedded reference backend's address). */
  upstream: URL;
  /** Tests of the core's seams only: plugins instead of the alias layer. */
  plugins?: (context: PluginContext) => ProxyPlugin[];
  /**
   * The plugins' clock, ms since the epoch (`PluginContext.now`; default `Date.now`): tests drive
   * time-dependent plugin behaviour (e.g. a brownout window) with a fake one.
   */
  now?: () => number;
}

/** The assembled front door. */
export interface Shim {
  /** The request handler for the front-door server: the Express app (see {@link createShim}). */
  readonly app: RequestListener;
  /** The upstream connection pool (closed on shutdown). */
  readonly forwarder: Forwarder;
  /** The service version, configured or learned from the upstream. */
  readonly serviceVersion: ServiceVersion;
  /** For `createFrontServer`: counts and logs requests the HTTP server refuses before the pipeline. */
  readonly onServerRejection: (reason: ServerRejection, status: number) => void;
  /**
   * For `createFrontServer`: the headers of the responses the HTTP server writes itself, flat — the
   * service version header once the version is known (SPEC §7), else none.
   */
  readonly ownHeaders: () => readonly string[];
  /** The plugins' admin routes, for `createAdminServer`. */
  readonly adminRoutes: readonly AdminRoute[];
}

/**
 * The upstream pool's options from the configuration: the forwarder's pool and the readiness probes'
 * (runtime.ts) are made alike, so that a probe meets the upstream as the traffic does.
 * @param config The validated configuration.
 * @returns `UPSTREAM_CA_FILE`'s certificates, `UPSTREAM_IDLE_TIMEOUT_MS`, `UPSTREAM_CONNECT_TIMEOUT_MS`
 *   (both ms).
 * @throws Nothing.
 */
export function upstreamTransportOptions(config: Config): UpstreamTransportOptions {
  return {
    ...(config.upstreamCa !== undefined && { caPem: config.upstreamCa }),
    idleTimeoutMs: config.upstreamIdleTimeoutMs,
    connectTimeoutMs: config.upstreamConnectTimeoutMs,
    maxConnections: config.upstreamMaxConnections,
  };
}

/**
 * Builds the shim's request pipeline (SPEC §3 order of checks).
 * @param config The validated configuration, loaded with {@link PLUGINS} (`loadConfig(env, PLUGINS)`).
 * @param deps Logger, metrics and upstream address (and, in tests, plugins or a clock).
 * @returns The front door: its request handler, the forwarder (its upstream pool), the service
 *   version, the HTTP server's rejection hook and own headers, and the plugins' admin routes.
 * @throws {Error} when a plugin of {@link PLUGINS} has no settings in `config` (loaded without it).
 * @throws {Error} from prom-client when `deps.metrics.registry` already holds one of the gauges or
 *   plugin metrics registered here (one shim per registry); from `createForwarder` when `deps.upstream`
 *   is neither `http:` nor `https:`.
 */
export function createShim(config: Config, deps: ShimDependencies): Shim {
  const { logger, metrics } = deps;
  const budget = createBufferBudget(config.maxBufferedBytes);
  registerBufferBudgetGauges(metrics.registry, budget);
  const uploadSlots = createUploadSlots(config.maxStreamingUploads);
  registerUploadSlotGauges(metrics.registry, uploadSlots);
  const context: PluginContext = {
    logger,
    registry: metrics.registry,
    budget,
    credentials: { apiKeyHeader: config.apiKeyHeader },
    ...(deps.now !== undefined && { now: deps.now }),
  };
  const plugins: ProxyPlugin[] =
    deps.plugins?.(context) ??
    PLUGINS.map((definition) => {
      if (!(definition.name in config.plugins)) {
        throw new Error(`plugin ${definition.name} is not configured: load the configuration with PLUGINS`);
      }
      return definition.create(config.plugins[definition.name], context);
    });
  // Responses depend on the client's version: a plugin's may (then every response names it in Vary, RFC
  // 9110 §12.5.5), and the outdated-client Warning does on every admitted request (forward.ts varyHeader).
  const varyAll = plugins.some((p) => p.variesByClientVersion);
  const varyHeader = varyAll ? config.clientVersionHeader : undefined;

  const serviceVersion = new ServiceVersion(config.serviceVersion);
  const serviceVersionHeader = config.serviceVersionHeader.toLowerCase();
  const corsOrigins = new Set(config.corsAllowedOrigins);
  /**
   * The challenge of the shim's own 401 (RFC 9110 §11.6.1, §15.5.2: a 401 MUST carry at least one).
   * The service's credentials, an API key header or session cookies (SPEC §3 step 5), have no registered
   * scheme; the challenge names what a client can send. Browsers, curl, Python requests, Node fetch and
   * Go net/http ignore a scheme they do not know (no prompt, no retry: the same 401). One exception:
   * Python urllib with a Basic or Digest handler installed raises `ValueError` ("does not support the
   * following scheme: 'ApiKey'") instead of `HTTPError` 401, as for any other scheme (CPython issue
   * 84542, docs/reliability.md "Review of fixes 93–98").
   */
  const credentialsChallenge = `ApiKey header="${config.apiKeyHeader}"`;
  /** The headers of every response the shim makes itself: the service version once known (SPEC §7). */
  const ownHeaders = (): string[] =>
    serviceVersion.text === undefined ? [] : [config.serviceVersionHeader, serviceVersion.text];
  const responseHeaders = (state: ExchangeState, upstream: IncomingMessage | undefined) => {
    let out: string[];
    if (upstream) {
      out = [];
      serviceVersion.observe(headerValue(upstream, serviceVersionHeader));
    } else {
      out = ownHeaders();
      if (varyHeader !== undefined) out.push('Vary', varyHeader);
    }
    for (const [name, value] of state.exchange.responseHeaders) out.push(name, value);
    const outdated = outdatedClientWarning(state.exchange.clientVersion, serviceVersion.parsed);
    if (outdated) out.push('Warning', outdated);
    if (!upstream) {
      // A response of the shim's own: when to retry a refusal that has a time, and CORS last (it
      // exposes the names of everything before it).
      const retryAfter = state.rejection === undefined ? undefined : REJECTION_RETRY_AFTER[state.rejection];
      if (retryAfter !== undefined) out.push('Retry-After', String(retryAfter));
      if (state.rejection === 'credentials') out.push('WWW-Authenticate', credentialsChallenge);
      if (corsOrigins.size > 0) out.push(...ownCorsHeaders(corsOrigins, state.exchange.headers.origin, out));
    }
    return out;
  };

  const forwarder = createForwarder({
    upstream: deps.upstream,
    transport: upstreamTransportOptions(config),
    upstreamTimeoutMs: config.upstreamTimeoutMs,
    responseHeadHoldMs: config.responseHeadHoldMs,
    forwardedHeaders: config.forwardedHeaders,
    // The headers a request is admitted on: forwarded, and their spellings with `_` for `-` are not.
    admissionHeaders: new Set([config.apiKeyHeader, config.clientVersionHeader.toLowerCase()]),
    maxRewriteBody: config.maxRewriteBody,
    requestBufferBytes: config.requestBufferBytes,
    bodyTimeoutMs: config.bodyTimeoutMs,
    budget,
    uploadSlots,
    varyHeader: config.clientVersionHeader,
    varyAll,
    metrics,
    logger,
    responseHeaders,
  });

  registerUpstreamPoolGauges(metrics.registry, forwarder.agent, config.upstreamMaxConnections);

  const { admit, onError } = createAdmission(config, {
    logger,
    metrics,
    plugins,
    responseHeaders,
    ownHeaders,
  });

  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.use(admit);
  app.use(forwarder.handler);
  app.use(onError);
  // Express's router runs no layer at all for a request target it reads no path from (`parseurl`
  // gives none for `http://`, `https://`, `http:`, which Node's parser accepts, e.g. `GET http://`
  // sent HTTP/0.9-style): it handed the request to its final handler, whose HTML 404 ("Cannot GET
  // null") went out without the hygiene gate's 400, the shim's JSON error shape, its headers, log
  // line or metrics. The shim's layers run for such a request in the same order instead; the hygiene
  // gate refuses it (origin-form only).
  /** Answers what a layer threw or passed on, as the Express chain's own error handler does. */
  const fail = (req: express.Request, res: express.Response, e: unknown) => {
    try {
      onError(e, req, res, () => {});
    } catch {
      res.destroy();
    }
  };
  /** Express's final callback: reached only by a request its router ran no layer for (or an error). */
  const unrouted = (req: express.Request, res: express.Response, err?: unknown) => {
    if (err) return fail(req, res, err);
    const failed = (e: unknown) => fail(req, res, e);
    try {
      admit(req, res, (e?: unknown) => (e === undefined ? forwarder.handler(req, res, failed) : failed(e)));
    } catch (e) {
      failed(e);
    }
  };
  const handle: RequestListener = (incoming, response) => {
    const req = incoming as express.Request;
    const res = response as express.Response;
    app(req, res, (err?: unknown) => unrouted(req, res, err));
  };
  // At info, like the pipeline's own refusals of a client's mistake (hygiene 400, 426, 401, 501): any
  // client or scanner can send malformed heads at will, and must not raise warn/error (nginx logs
  // "client sent invalid request" at info too). docs/operations.md "Logs".
  const onServerRejection = (reason: ServerRejection, status: number) => {
    metrics.rejections.inc({ reason });
    logger.info({ rejection: reason, res: { statusCode: status } }, 'request refused by the HTTP server');
  };
  const adminRoutes = plugins.flatMap((plugin) => plugin.adminRoutes ?? []);
  return { app: handle, forwarder, serviceVersion, onServerRejection, ownHeaders, adminRoutes };
}

/** What {@link createAdmission} needs from the composition root. */
interface AdmissionParts {
  readonly logger: Logger;
  readonly metrics: CoreMetrics;
  /** The plugins, in order: each sees every admitted request. */
  readonly plugins: readonly ProxyPlugin[];
  /** The headers of a response the shim makes itself for an exchange (app.ts `responseHeaders`). */
  readonly responseHeaders: (state: ExchangeState, upstream: undefined) => string[];
  /** The headers of a shim-made response without an exchange state (the service version). */
  readonly ownHeaders: () => string[];
}

/**
 * The pipeline's first and last Express layers (SPEC §3, §7, §8).
 * - `admit`: creates the exchange state, arranges the request's metrics and log line at its end, runs
 *   the gates in order (hygiene, preflights and public paths, client version, credentials) and
 *   collects the plugins' hooks; a gate's `ShimError` goes to `onError`.
 * - `onError`: answers a `ShimError` (a gate's, or the forwarder's: 408, 413, 415, 503, …) with the
 *   shim's JSON error and counts it in `shim_rejections_total`; destroys the response of a client that
 *   went away; answers anything else with a logged 500.
 * @param config The validated configuration (gate rules).
 * @param parts Logger, metrics, plugins and the shim's own response headers.
 */
function createAdmission(
  config: Config,
  parts: AdmissionParts,
): { admit: RequestHandler; onError: ErrorRequestHandler } {
  const { logger, metrics, plugins, responseHeaders, ownHeaders } = parts;
  const credentialRules: CredentialRules = { cookies: config.authCookies, apiKeyHeader: config.apiKeyHeader };
  /** SPEC §3, in order: hygiene, preflights and public paths, client version, credentials. */
  const gates: readonly Gate[] = [
    hygieneGate,
    publicPathGate(config.publicPaths),
    clientVersionGate({
      header: config.clientVersionHeader.toLowerCase(),
      headerDisplayName: config.clientVersionHeader,
      minimum: config.minClientVersion,
    }),
    credentialGate(credentialRules),
  ];
  const trackRequest = createRequestLog(logger);

  /**
   * The exchange state, its metrics and log line at the end, the gates and the plugins' hooks, in one
   * Express layer: every layer costs the router a dispatch per request. A gate's ShimError goes to
   * {@link onError}, as it would from a layer of its own.
   */
  const admit: RequestHandler = (req, res, next) => {
    const state = createExchangeState(req, performance.now());
    res.locals.shim = state;
    trackRequest(
      req,
      res,
      state.startedAt,
      () => {
        // Labelled at the end: only an upstream 2xx/3xx teaches a route class, within per-consumer bounds
        // (RouteLabels in observability/metrics.ts).
        state.shape ??= routeShape(state.exchange.path);
        state.route = metrics.routes.label(
          state.shape,
          { status: res.statusCode, rejected: state.rejection !== undefined },
          () => credentialIdentity(req, credentialRules),
        );
        const status = String(res.statusCode);
        metrics.requests.inc({ route: state.route, method: methodLabel(state.exchange.method), status });
        metrics.duration.observe({ route: state.route }, (performance.now() - state.startedAt) / 1000);
      },
      () => {
        // An abort (a stream the client or the upstream ended, a drain's cut): the route's label if it is
        // known, never learned from an exchange that did not finish; not counted in the metrics.
        state.shape ??= routeShape(state.exchange.path);
        state.route = metrics.routes.known(state.shape);
      },
    );
    for (const gate of gates) gate(req, state);
    for (const plugin of plugins) {
      const hooks = plugin.onRequest(state.exchange, req);
      if (hooks) state.hooks.push(hooks);
    }
    next();
  };

  const onError: ErrorRequestHandler = (err, req, res, _next) => {
    const state = stateOf(res);
    if (err instanceof ClientAbortedError) {
      // A client gone; or the HTTP server answered the request itself, whose socket lingers (fix 156).
      if (!isAnsweredByServer(res)) res.destroy();
      return;
    }
    // The HTTP server answered this request itself (fix 156): its refusal was counted and logged as the
    // server's; no error of the exchange's own is counted or logged beside it.
    if (err instanceof ShimError && isAnsweredByServer(res)) return;
    // A ShimError comes from a gate or the forwarder, after `admit` stored the state.
    if (err instanceof ShimError && state !== undefined) {
      metrics.rejections.inc({ reason: err.reason });
      // A refusal decided after the connection closed (a coded body whose decode ended after the
      // client's FIN or reset, or a drain's cut: too large, not JSON): the exchange's line was written at
      // the close (aborted, no rejection) and nothing can be sent. Counted, with a line of its own, so
      // that every count has a line (as fix 110 does for an upstream failure after the response;
      // docs/reliability.md fix 172).
      if (res.destroyed && !res.headersSent) {
        const requestId = requestIdOf(req.headers['x-request-id']);
        logger.warn(
          {
            req: { method: req.method, path: logPath(state.exchange.path) },
            ...(requestId !== undefined && { requestId }),
            rejection: err.reason,
            refusal: err.message,
          },
          'request refused after its connection closed',
        );
        return;
      }
      state.rejection = err.reason;
      // What the client was told (its messages never hold a credential): for the operator, why.
      state.exchange.logFields.refusal = err.message;
      const headers = responseHeaders(state, undefined);
      // A body the shim stopped reading (budget, timeout) will not be drained, and a head the hygiene
      // gate refused (its target, framing or HTTP version) may not be where the client thinks it is:
      // close the connection (as nginx closes after a 400), so that nothing pipelined after it is
      // handled (RFC 9112 §9.6).
      const unread =
        err.reason === 'hygiene' ||
        err.reason === 'http_version' ||
        hasLargeUnreadBody(req) ||
        (!req.complete && STOPPED_READING.has(err.reason));
      if (STOPPED_READING.has(err.reason)) {
        logger.warn({ path: logPath(state.exchange.path), rejection: err.reason }, err.message);
      }
      sendError(res, err.statusCode, err.message, headers, unread);
      // What the client still sends of a body the shim stopped reading is read and dropped while the
      // connection closes in stages (runtime.ts): a paused request would stop the reading, and the
      // client, its writes blocked, would be reset without reading the refusal.
      if (unread) req.resume();
      return;
    }
    logger.error(
      { err, path: state && logPath(state.exchange.path) },
      'unexpected error in the request pipeline',
    );
    // The shim's own headers all the same (SPEC §7; CORS for a listed origin), unless building them is
    // what failed.
    let headers: readonly string[] = [];
    try {
      headers = state === undefined ? ownHeaders() : responseHeaders(state, undefined);
    } catch {
      // The bare 500.
    }
    sendError(res, 500, 'The proxy failed unexpectedly; the error was logged.', headers, true);
  };

  return { admit, onError };
}
