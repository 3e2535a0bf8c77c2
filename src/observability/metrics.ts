/**
 * The core's Prometheus metrics (SPEC §8), one set per runtime. Every label is bounded: route labels
 * come from the instance's {@link RouteLabels}, never from raw paths.
 */
import { createHash } from 'node:crypto';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { RejectionReason, UpstreamErrorKind } from '../core/errors.ts';
import type { BufferBudget, UnpatchedReason } from '../core/types.ts';

/** The core metric set, registered on one registry. */
export interface CoreMetrics {
  readonly registry: Registry;
  /** `shim_requests_total{route,method,status}`. */
  readonly requests: Counter<'route' | 'method' | 'status'>;
  /** `shim_request_duration_seconds{route}`: from request to response end, as seen by the shim. */
  readonly duration: Histogram<'route'>;
  /**
   * `shim_upstream_duration_seconds{route}`: from forwarding to upstream response headers, in seconds.
   * The `route` passed in may be a raw shape: it is mapped to a learned label or `other` (the headers
   * arrive before the exchange's outcome, so this never learns).
   */
  readonly upstreamDuration: { observe(labels: { route: string }, seconds: number): void };
  /** The route labels learned by this instance. */
  readonly routes: RouteLabels;
  /** `shim_upstream_errors_total{kind}`. */
  readonly upstreamErrors: Counter<'kind'>;
  /** `shim_rejections_total{reason}`: responses the shim made itself. */
  readonly rejections: Counter<'reason'>;
  /** `shim_response_patches_skipped_total{reason}`. */
  readonly patchesSkipped: Counter<'reason'>;
}

/**
 * Every value of the bounded enum labels, each key once (the `Record` makes the compiler check that
 * none is missing): `shim_upstream_errors_total{kind}`, `shim_rejections_total{reason}` (the upstream
 * failures are counted by kind, not there) and `shim_response_patches_skipped_total{reason}`.
 */
const UPSTREAM_ERROR_KINDS: Readonly<Record<UpstreamErrorKind, true>> = {
  refused: true,
  reset: true,
  timeout: true,
  invalid: true,
};
const REJECTION_REASONS: Readonly<Record<Exclude<RejectionReason, `upstream_${string}`>, true>> = {
  http_version: true,
  hygiene: true,
  expectation: true,
  upgrade: true,
  malformed: true,
  header_size: true,
  request_timeout: true,
  version: true,
  credentials: true,
  size: true,
  body: true,
  encoding: true,
  buffer_budget: true,
  body_timeout: true,
  streaming_uploads: true,
  pool_full: true,
};
const UNPATCHED_REASONS: Readonly<Record<UnpatchedReason, true>> = {
  invalid_json: true,
  too_deep: true,
  value_too_large: true,
  budget_exhausted: true,
  scanner_failed: true,
  unsupported_encoding: true,
};

/**
 * Creates the series of every label value at 0, so that they exist from the first scrape. Prometheus'
 * `rate()` and `increase()` need two samples of a series: a series that first appears with the value
 * 1 (or 5, after a burst) hides that first increase, so an alert on "upstream errors rising" missed the
 * first errors of every new process (prometheus.io/docs/practices/instrumentation, "Avoid missing
 * metrics"). Only for labels whose values are all known in advance.
 * @param counter A counter with one label.
 * @param label Its name.
 * @param values Every value the label takes.
 * @throws Nothing of its own (prom-client's, for a label the counter does not have).
 * @example startAtZero(upstreamErrors, 'kind', ['refused', 'reset']) // two series at 0
 */
export function startAtZero<L extends string>(counter: Counter<L>, label: L, values: Iterable<string>): void {
  for (const value of values) counter.inc({ [label]: value } as Record<L, string>, 0);
}

/**
 * Registers a gauge of one value, read at scrape time (prom-client's `collect`): nothing is counted on
 * the request path.
 * @param registry The registry to register it on.
 * @param name The metric's name (`shim_…`).
 * @param help Its `# HELP` line.
 * @param read Gives the value now.
 * @throws {Error} from prom-client when the registry already holds a metric of that name.
 */
function scrapedGauge(registry: Registry, name: string, help: string, read: () => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

/**
 * Registers the gauges of the process-wide buffer budget (`MAX_BUFFERED_BYTES`, issue 9 item 2):
 * `shim_buffered_bytes`, the bytes reserved now (request bodies held for a rewrite or up to `REQUEST_BUFFER_BYTES`,
 * values response patches hold, output buffers kept for reuse), and `shim_buffered_bytes_limit`, the
 * limit; both read at scrape time. The headroom, before `shim_rejections_total{reason="buffer_budget"}`
 * or `shim_response_patches_skipped_total{reason="budget_exhausted"}` start counting.
 * @param registry The registry to register them on (once per budget).
 * @param budget The budget the shim reserves from.
 * @throws {Error} from prom-client when the registry already holds a metric of either name.
 */
export function registerBufferBudgetGauges(
  registry: Registry,
  budget: Readonly<Pick<BufferBudget, 'used' | 'limit'>>,
): void {
  scrapedGauge(
    registry,
    'shim_buffered_bytes',
    'Bytes reserved from MAX_BUFFERED_BYTES now: request bodies held for a rewrite or up to REQUEST_BUFFER_BYTES before they are forwarded, values response patches hold, output buffers kept for reuse.',
    () => budget.used,
  );
  scrapedGauge(
    registry,
    'shim_buffered_bytes_limit',
    'MAX_BUFFERED_BYTES: the most bytes the shim holds for request bodies and patches at once.',
    () => budget.limit,
  );
}

/**
 * Registers the gauges of the bound on streamed request bodies (`MAX_STREAMING_UPLOADS`,
 * src/proxy/upload-slots.ts): `shim_streaming_uploads`, the request bodies streaming to the upstream
 * now, each holding an upstream connection until its last byte arrives, and
 * `shim_streaming_uploads_limit`, the bound; both read at scrape time. At the bound, further streamed
 * bodies get 503 (`shim_rejections_total{reason="streaming_uploads"}`).
 * @param registry The registry to register them on (once per set of slots).
 * @param slots The slots the forwarder takes from.
 * @throws {Error} from prom-client when the registry already holds a metric of either name.
 */
export function registerUploadSlotGauges(
  registry: Registry,
  slots: { readonly inUse: number; readonly limit: number },
): void {
  scrapedGauge(
    registry,
    'shim_streaming_uploads',
    'Request bodies streaming to the upstream now (chunked, or the rest of one above REQUEST_BUFFER_BYTES), each holding an upstream connection until its last byte arrives.',
    () => slots.inUse,
  );
  scrapedGauge(
    registry,
    'shim_streaming_uploads_limit',
    'MAX_STREAMING_UPLOADS: the most request bodies streaming to the upstream at once.',
    () => slots.limit,
  );
}

/** The lists of an `http.Agent` by origin (`agent.sockets`, `freeSockets`, `requests`: Node's documented API). */
type AgentLists = NodeJS.ReadOnlyDict<readonly unknown[]>;

/** The upstream pool as its gauges read it. */
export interface UpstreamPoolView {
  readonly sockets: AgentLists;
  readonly freeSockets: AgentLists;
  readonly requests: AgentLists;
}

/** Sums the lengths of an agent's per-origin lists. */
function totalOf(lists: AgentLists): number {
  let total = 0;
  for (const name in lists) total += lists[name]?.length ?? 0;
  return total;
}

/**
 * Registers the gauges of the upstream connection pool (upstream-agent.ts), read at scrape time:
 * `shim_upstream_connections{state}` (`active`: carrying a request; `idle`: kept for the next one),
 * `shim_upstream_connections_limit` (the pool's most connections at once) and
 * `shim_upstream_requests_waiting` (requests waiting for a connection because the pool is at its
 * limit; each gets 503 `pool_full` after `UPSTREAM_CONNECT_TIMEOUT_MS` if none frees up). Active
 * connections near the limit, or any request waiting, is the saturation Envoy reports as
 * `upstream_cx_active` and `upstream_rq_pending_active`: long-lived responses, a slow upstream, slow
 * readers, or streamed uploads (`shim_streaming_uploads`, bounded by `MAX_STREAMING_UPLOADS`).
 * @param registry The registry to register them on (once per pool).
 * @param pool The pool (`forwarder.agent`), read only.
 * @param limit Its `maxSockets` (`UPSTREAM_MAX_CONNECTIONS`).
 * @throws {Error} from prom-client when the registry already holds a metric of one of these names.
 */
export function registerUpstreamPoolGauges(registry: Registry, pool: UpstreamPoolView, limit: number): void {
  new Gauge({
    name: 'shim_upstream_connections',
    help: 'Connections of the upstream pool now: active (carrying a request) or idle (kept for the next).',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      this.set({ state: 'active' }, totalOf(pool.sockets));
      this.set({ state: 'idle' }, totalOf(pool.freeSockets));
    },
  });
  scrapedGauge(
    registry,
    'shim_upstream_connections_limit',
    'The most connections the upstream pool opens at once; further requests wait for one.',
    () => limit,
  );
  scrapedGauge(
    registry,
    'shim_upstream_requests_waiting',
    'Requests waiting for an upstream connection because the pool is at its limit.',
    () => totalOf(pool.requests),
  );
}

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Creates the registry and the core metrics.
 * @param withProcessMetrics Also collect prom-client's default process metrics (off in unit tests).
 * @returns A new registry with the core counters and histograms (durations in seconds), the
 *   `upstreamErrors`/`rejections`/`patchesSkipped` series started at 0, and fresh {@link RouteLabels}.
 * @throws Nothing: each call registers on a registry of its own.
 */
export function createMetrics(withProcessMetrics = true): CoreMetrics {
  const registry = new Registry();
  if (withProcessMetrics) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const routes = new RouteLabels();
  const upstreamDuration = new Histogram({
    name: 'shim_upstream_duration_seconds',
    help: 'Time from forwarding a request to the upstream response headers, in seconds.',
    labelNames: ['route'] as const,
    buckets: BUCKETS,
    registers,
  });
  const upstreamErrors = new Counter({
    name: 'shim_upstream_errors_total',
    help: 'Upstream failures by kind (refused, reset, timeout, invalid).',
    labelNames: ['kind'] as const,
    registers,
  });
  const rejections = new Counter({
    name: 'shim_rejections_total',
    help: 'Responses the shim made itself, by reason.',
    labelNames: ['reason'] as const,
    registers,
  });
  const patchesSkipped = new Counter({
    name: 'shim_response_patches_skipped_total',
    help: 'Responses a patcher asked for but that were forwarded unpatched, by reason.',
    labelNames: ['reason'] as const,
    registers,
  });
  startAtZero(upstreamErrors, 'kind', Object.keys(UPSTREAM_ERROR_KINDS));
  startAtZero(rejections, 'reason', Object.keys(REJECTION_REASONS));
  startAtZero(patchesSkipped, 'reason', Object.keys(UNPATCHED_REASONS));
  return {
    registry,
    routes,
    upstreamErrors,
    rejections,
    patchesSkipped,
    upstreamDuration: {
      observe: (labels, seconds) => upstreamDuration.observe({ route: routes.known(labels.route) }, seconds),
    },
    requests: new Counter({
      name: 'shim_requests_total',
      help: 'Requests handled, by route class, method and status.',
      labelNames: ['route', 'method', 'status'] as const,
      registers,
    }),
    duration: new Histogram({
      name: 'shim_request_duration_seconds',
      help: 'Time from request to the end of the response, in seconds.',
      labelNames: ['route'] as const,
      buckets: BUCKETS,
      registers,
    }),
  };
}

/** Methods used as label values; anything else is counted as `OTHER`. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Bounded method label.
 * @param method The request method as Node parsed it.
 * @returns The method when it is one of `GET HEAD POST PUT PATCH DELETE OPTIONS`, else `OTHER`.
 * @throws Nothing.
 */
export function methodLabel(method: string): string {
  return METHODS.has(method) ? method : 'OTHER';
}

/**
 * A segment that identifies one resource rather than a route: one with a digit in it (a UUID, a
 * number, a ULID, a KSUID, `m-0002`, `msn_01H…`: the service document does not show the format of its
 * `:uuid` values, part 2), as Datadog's agent quantizes URL paths (`remove_paths_with_digits`), but for
 * an API version (`v2`, `v1.1`, `v1beta1`); or one over 32 characters (an opaque token without a digit).
 * A route word with a digit (`oauth2`) becomes `:id` too: a coarser class, never an unbounded one.
 */
const ID_SEGMENT = /^(?!v\d+(?:\.\d+)*(?:(?:alpha|beta)\d*)?$)[^/]*\d|^[^/]{33,}$/i;

/**
 * The route shape of a raw path: lower-cased, at most three segments, each without its parameters
 * (`;name=value`), identifier segments replaced by `:id`, no trailing slash, e.g.
 * `/missions/5f0c…/metadata` → `/missions/:id/metadata`, `/missions;jsessionid=8F3A` → `/missions`. Pure. A shape is
 * not a bounded label by itself (a client chooses its first segments): {@link RouteLabels} decides
 * which shapes become labels.
 * @param path Raw path without query.
 * @returns The shape, e.g. `/missions/:id/metadata`; `/` when no segment is left.
 * @throws Nothing.
 */
export function routeShape(path: string): string {
  // The segments after the first three slashes' starts, as `path.split('/').slice(1, 4)` would give
  // them, read in place: no array, no lower-casing of the whole path (once per request, bench/profile.ts).
  let out = '';
  let slash = path.indexOf('/');
  let semicolon = path.indexOf(';');
  for (let n = 0; n < 3 && slash !== -1; n++) {
    const next = path.indexOf('/', slash + 1);
    let end = next === -1 ? path.length : next;
    // Without its parameters (`;jsessionid=…`, RFC 3986 §3.3): a session id is no route.
    if (semicolon !== -1 && semicolon < end) {
      if (semicolon > slash) end = semicolon;
      else {
        semicolon = path.indexOf(';', slash + 1);
        if (semicolon !== -1 && semicolon < end) end = semicolon;
      }
    }
    const segment = path.slice(slash + 1, end).toLowerCase();
    if (segment !== '') out += `/${ID_SEGMENT.test(segment) ? ':id' : segment}`;
    slash = next;
  }
  return out === '' ? '/' : out;
}

/** Bounds of the route labels (docs/operations.md, "Route labels"). */
export const ROUTE_LABEL_LIMITS = Object.freeze({
  /** Distinct route classes labelled per runtime; later shapes are `other`. */
  maxClasses: 200,
  /**
   * Classes one consumer (one API key, one cookie credential, or all unauthenticated requests
   * together) may introduce. A real API has a few dozen three-segment classes; one credential that
   * introduces more is almost certainly walking garbage paths that the upstream answers with a 2xx.
   */
  maxPerConsumer: 50,
});

/** How a finished exchange ended, for {@link mayLearnRoute}. */
export interface RouteOutcome {
  /** The response status sent to the client. */
  status: number;
  /** Whether the shim answered itself (a gate's rejection, an upstream failure): no upstream verdict. */
  rejected: boolean;
}

/**
 * Whether an exchange is evidence that its route exists: only a 2xx or 3xx the upstream sent itself.
 * A 4xx is not (the upstream rejected the path, the query, the body or the credentials: anyone can
 * produce one, e.g. a 400 for `/missions/<garbage>`), nor a 5xx, nor anything the shim answered.
 * @param outcome The status sent and whether the shim answered itself.
 * @returns `true` for a 2xx or 3xx from the upstream.
 * @throws Nothing.
 */
export function mayLearnRoute(outcome: RouteOutcome): boolean {
  return !outcome.rejected && outcome.status >= 200 && outcome.status < 400;
}

/**
 * The route labels of one runtime: which route shapes earn a label of their own. A shape is learned
 * when an exchange on it ends in {@link mayLearnRoute}, while fewer than `maxClasses` are known and the
 * exchange's consumer has introduced fewer than `maxPerConsumer`; everything else is `other`. Memory is
 * bounded: at most `maxClasses` shapes and at most `maxClasses` consumers (only those that introduced
 * one), each held as a 16-character digest. Learned classes are never forgotten.
 * @example
 * const labels = new RouteLabels();
 * labels.label('/user/me', { status: 200, rejected: false }, 'key:…'); // '/user/me'
 * labels.label('/x-1', { status: 400, rejected: false }, 'key:…');     // 'other'
 */
export class RouteLabels {
  readonly #known = new Set<string>();
  readonly #introduced = new Map<string, number>();
  readonly #limits: { maxClasses: number; maxPerConsumer: number };

  /**
   * No class learned yet.
   * @param limits Most classes per runtime and per consumer (default {@link ROUTE_LABEL_LIMITS}).
   * @throws Nothing.
   */
  constructor(limits: { maxClasses: number; maxPerConsumer: number } = ROUTE_LABEL_LIMITS) {
    this.#limits = limits;
  }

  /** How many classes are labelled. */
  get size(): number {
    return this.#known.size;
  }

  /**
   * The label of a shape already learned, else `other`; never learns.
   * @param shape From {@link routeShape}.
   * @returns `shape` or `other`.
   * @throws Nothing.
   */
  known(shape: string): string {
    return this.#known.has(shape) ? shape : 'other';
  }

  /**
   * The label of a finished exchange, learning its shape when allowed (see the class comment).
   * @param shape From {@link routeShape}.
   * @param outcome Status and whether the shim answered itself.
   * @param consumer Who sent it (e.g. from `credentialIdentity` in gates/credentials.ts), `undefined` for
   *   unauthenticated requests (public paths, preflights), which share one budget. Called only for
   *   unknown shapes, so the hot path never hashes.
   * @returns `shape` when it is (or has just been) learned, else `other`.
   * @throws Whatever `consumer` throws; nothing of its own.
   */
  label(shape: string, outcome: RouteOutcome, consumer: () => string | undefined): string {
    if (this.#known.has(shape)) return shape;
    if (!mayLearnRoute(outcome) || this.#known.size >= this.#limits.maxClasses) return 'other';
    const who = digest(consumer() ?? '');
    const count = this.#introduced.get(who) ?? 0;
    if (count >= this.#limits.maxPerConsumer) return 'other';
    this.#introduced.set(who, count + 1);
    this.#known.add(shape);
    return shape;
  }
}

/** A short, fixed-size stand-in for a credential: the credential itself is never held. */
function digest(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 16);
}
