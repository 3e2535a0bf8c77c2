/**
 * The identifiers that tie a request's log line to the same request elsewhere: the `X-Request-Id` an
 * ingress or client set (nginx's `$request_id`, Envoy's `x-request-id`, a client's own) and the trace id
 * of a W3C `traceparent` (Trace Context §3.2). Both are read, checked and logged, never added or
 * changed: the shim forwards every end-to-end header unchanged (SPEC §4), so the upstream logs the same
 * values.
 */

/** A request id worth logging: 1–128 visible ASCII characters (no space, so no two joined field lines). */
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * `traceparent` (W3C Trace Context §3.2.2): `version-traceid-parentid-flags`, lower-case hex, then the
 * end, or for a version above 00 more fields after a `-` (§3.2.4). Anything else after the flags (a
 * second field line, joined with `, ` by Node) makes it invalid. Groups: version, trace id, parent id,
 * what follows the flags.
 */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-|$)/;

/** All zeros: an invalid trace or parent id (§3.2.2.3, §3.2.2.4). */
const ZEROS = /^0+$/;

/**
 * The request id to log from an `X-Request-Id` field.
 * @param value `req.headers['x-request-id']` (Node joins repeated field lines with `, `).
 * @returns The value when it is 1–128 visible ASCII characters; `undefined` when absent, repeated,
 *   empty, too long or holding other bytes (not logged: a log line is not the place for a client's 16 KiB).
 * @throws Nothing.
 * @example
 * requestIdOf('b7ad6b7169203331') // → 'b7ad6b7169203331'
 * requestIdOf('a, b') // → undefined (two field lines)
 */
export function requestIdOf(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' && REQUEST_ID.test(value) ? value : undefined;
}

/**
 * The trace id of a `traceparent` field (W3C Trace Context §3.2.2.3).
 * @param value `req.headers.traceparent`.
 * @returns The 32 lower-case hex digits of its trace id; `undefined` when the field is absent, repeated
 *   or invalid (version `ff`, version 00 with more fields, an all-zero trace or parent id, upper-case
 *   hex, wrong lengths), as a tracer would ignore it (§3.2.2).
 * @throws Nothing.
 * @example
 * traceIdOf('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') // → '4bf92f3577b34da6a3ce929d0e0e4736'
 */
export function traceIdOf(value: string | string[] | undefined): string | undefined {
  if (typeof value !== 'string') return undefined;
  const match = TRACEPARENT.exec(value);
  if (match === null) return undefined;
  const [, version, traceId = '', parentId = '', more] = match;
  if (version === 'ff' || (version === '00' && more === '-')) return undefined;
  return ZEROS.test(traceId) || ZEROS.test(parentId) ? undefined : traceId;
}
