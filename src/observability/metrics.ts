/**
 * The core's Prometheus metrics (SPEC §8). Every label is bounded: route classes come from
 * {@link routeClass}, never from raw paths.
 */
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

/** Kinds of upstream failure, bounded. */
export type UpstreamErrorKind = 'refused' | 'reset' | 'timeout' | 'invalid';

/** The core metric set, registered on one registry. */
export interface CoreMetrics {
  readonly registry: Registry;
  /** `shim_requests_total{route,method,status}`. */
  readonly requests: Counter<'route' | 'method' | 'status'>;
  /** `shim_request_duration_seconds{route}`: from request to response end, as seen by the shim. */
  readonly duration: Histogram<'route'>;
  /** `shim_upstream_duration_seconds{route}`: from forwarding to upstream response headers. */
  readonly upstreamDuration: Histogram<'route'>;
  /** `shim_upstream_errors_total{kind}`. */
  readonly upstreamErrors: Counter<'kind'>;
  /** `shim_rejections_total{reason}`: responses the shim made itself. */
  readonly rejections: Counter<'reason'>;
  /** `shim_response_patches_skipped_total{reason}`. */
  readonly patchesSkipped: Counter<'reason'>;
}

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Creates the registry and the core metrics.
 * @param withProcessMetrics Also collect prom-client's default process metrics (off in unit tests).
 */
export function createMetrics(withProcessMetrics = true): CoreMetrics {
  const registry = new Registry();
  if (withProcessMetrics) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
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
    upstreamDuration: new Histogram({
      name: 'shim_upstream_duration_seconds',
      help: 'Time from forwarding a request to the upstream response headers, in seconds.',
      labelNames: ['route'] as const,
      buckets: BUCKETS,
      registers,
    }),
    upstreamErrors: new Counter({
      name: 'shim_upstream_errors_total',
      help: 'Upstream failures by kind (refused, reset, timeout, invalid).',
      labelNames: ['kind'] as const,
      registers,
    }),
    rejections: new Counter({
      name: 'shim_rejections_total',
      help: 'Responses the shim made itself, by reason.',
      labelNames: ['reason'] as const,
      registers,
    }),
    patchesSkipped: new Counter({
      name: 'shim_response_patches_skipped_total',
      help: 'Responses a patcher asked for but that were forwarded unpatched, by reason.',
      labelNames: ['reason'] as const,
      registers,
    }),
  };
}

/** Methods used as label values; anything else is counted as `OTHER`. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Bounded method label. */
export function methodLabel(method: string): string {
  return METHODS.has(method) ? method : 'OTHER';
}

/** A segment that identifies one resource (UUID, number, long hex or token) rather than a route. */
const ID_SEGMENT =
  /^(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d+|[0-9a-f]{16,}|[^/]{33,})$/i;
/** At most this many distinct route classes are labelled; the rest share `other`. */
const MAX_ROUTE_CLASSES = 200;
const seenClasses = new Set<string>();

/**
 * The bounded route class of a raw path: lower-cased, at most three segments, identifier segments
 * replaced by `:id`, no trailing slash; e.g. `/missions/5f0c…/metadata` → `/missions/:id/metadata`.
 * Only routes that exist earn a label of their own: a class is learned when `learn` is true (the
 * caller passes false for shim rejections and upstream 404s, so a scanner probing random paths cannot
 * use up the labels), and after {@link MAX_ROUTE_CLASSES} learned classes new ones are `other`.
 * @param path Raw path without query.
 * @param learn Whether an unseen class may be added.
 * @returns The class, or `other` for an unseen class that may not be learned.
 */
export function routeClass(path: string, learn = true): string {
  const segments = path.toLowerCase().split('/', 5).slice(1, 4);
  let out = '';
  for (const s of segments) if (s !== '') out += `/${ID_SEGMENT.test(s) ? ':id' : s}`;
  const cls = out === '' ? '/' : out;
  if (seenClasses.has(cls)) return cls;
  if (!learn || seenClasses.size >= MAX_ROUTE_CLASSES) return 'other';
  seenClasses.add(cls);
  return cls;
}
