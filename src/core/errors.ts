/**
 * The one table of responses the shim makes itself (SPEC §7): status, reason phrase, and the metric
 * reason under which the rejection is counted. Every shim-made response body has the shape
 * `{"statusCode": n, "message": "...", "error": "<reason phrase>"}`.
 */
import { STATUS_CODES } from 'node:http';

/**
 * Kinds of upstream failure, bounded: the `kind` label of `shim_upstream_errors_total`, and the
 * status the shim answers with (502, or 504 for `timeout`).
 */
export type UpstreamErrorKind = 'refused' | 'reset' | 'timeout' | 'invalid';

/**
 * Why the shim answered itself; bounded, the `reason` label of `shim_rejections_total`. The pipeline's
 * own (a gate's `ShimError`, an upstream failure) and those of the front server, which refuses some
 * requests before the pipeline sees them ({@link ServerRejection}).
 */
export type RejectionReason =
  | 'http_version'
  | 'hygiene'
  | 'expectation'
  | 'upgrade'
  | 'malformed'
  | 'header_size'
  | 'request_timeout'
  | 'version'
  | 'credentials'
  | 'size'
  | 'body'
  | 'encoding'
  | 'buffer_budget'
  | 'body_timeout'
  | 'streaming_uploads'
  | 'pool_full'
  | 'upstream_refused'
  | 'upstream_reset'
  | 'upstream_invalid'
  | 'upstream_timeout';

/**
 * The reasons the front server refuses a request for itself (server.ts), before the pipeline: a head
 * its parser rejects or a `CONNECT` (`malformed`), a head too large (`header_size`, RFC 6585 §5), a
 * request not received in time (`request_timeout`), an upgrade with `Connection: upgrade` (`upgrade`,
 * which the hygiene gate also answers when Node hands the request on).
 */
export type ServerRejection = Extract<
  RejectionReason,
  'malformed' | 'header_size' | 'request_timeout' | 'upgrade'
>;

/** Status code per rejection reason (SPEC §3, §4, §5). */
export const REJECTION_STATUS: Readonly<Record<RejectionReason, number>> = Object.freeze({
  http_version: 505,
  hygiene: 400,
  expectation: 417,
  upgrade: 501,
  malformed: 400,
  header_size: 431,
  request_timeout: 408,
  version: 426,
  credentials: 401,
  size: 413,
  body: 400,
  encoding: 415,
  buffer_budget: 503,
  body_timeout: 408,
  streaming_uploads: 503,
  pool_full: 503,
  upstream_refused: 502,
  upstream_reset: 502,
  upstream_invalid: 502,
  upstream_timeout: 504,
});

/**
 * `Retry-After` seconds per rejection reason that a client may simply retry later (RFC 9110 §10.2.3):
 * the process-wide buffer budget, the slots of streamed uploads (upload-slots.ts) and the upstream
 * pool's connections free up as other requests finish.
 */
export const REJECTION_RETRY_AFTER: Readonly<Partial<Record<RejectionReason, number>>> = Object.freeze({
  buffer_budget: 1,
  streaming_uploads: 1,
  pool_full: 1,
});

/**
 * Refusals with a 5xx status that the client, not the shim or its upstream, caused (a protocol upgrade,
 * 501; an HTTP version other than 1.x, 505): any client can repeat them, so they are logged as a
 * client's mistake (info), not as a server error.
 */
export const CLIENT_CAUSED_5XX: ReadonlySet<RejectionReason> = new Set(['upgrade', 'http_version']);

/**
 * `Content-Type` of every JSON document the shim makes itself: its errors (SPEC §7), the admin routes
 * and the usage report (RFC 8259 §11; its `charset` parameter has no effect on compliant recipients).
 */
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** The message of a refused protocol upgrade (501), from the hygiene gate or the front server. */
export const UPGRADE_REFUSED_MESSAGE = 'Protocol upgrades (WebSocket, h2c) are not supported by this proxy.';

/**
 * An error the shim answers itself. Thrown by gates and body rewrites; turned into the JSON error
 * response by {@link errorBody}.
 *
 * @example
 * throw new ShimError('body', 'Request body is not valid JSON: Unexpected token at byte 12.');
 */
export class ShimError extends Error {
  /** HTTP status sent to the client. */
  readonly statusCode: number;
  /** Metric label / log field for why the request was rejected. */
  readonly reason: RejectionReason;

  /**
   * A refusal to answer with the reason's status.
   * @param reason Why the request is refused; decides {@link statusCode} (`REJECTION_STATUS`).
   * @param message What is wrong and how to fix it: the JSON error's `message`, sent to the client.
   * @throws Nothing.
   */
  constructor(reason: RejectionReason, message: string) {
    super(message);
    this.name = 'ShimError';
    this.reason = reason;
    this.statusCode = REJECTION_STATUS[reason];
  }
}

/**
 * Serializes a shim-made error as the service's error shape (SPEC §7).
 * @param statusCode HTTP status (e.g. 401).
 * @param message What is wrong and how to fix it.
 * @returns UTF-8 JSON bytes `{"statusCode":401,"message":"…","error":"Unauthorized"}`.
 * @throws Nothing.
 */
export function errorBody(statusCode: number, message: string): Buffer {
  return Buffer.from(
    JSON.stringify({ statusCode, message, error: STATUS_CODES[statusCode] ?? 'Error' }),
    'utf8',
  );
}

/**
 * The head and body of a shim-made error (SPEC §7), for both writers: respond.ts `sendError` and the
 * front server's own refusals (server.ts). Never stored by a cache (`no-store`: it describes this
 * request, not the resource; RFC 9111 §5.2.2.5).
 * @param statusCode HTTP status (e.g. 502).
 * @param message What is wrong and how to fix it.
 * @param extra Headers to add after the framing (service version, warnings, CORS), flat `[name, value, …]`.
 * @returns `headers`, flat: `Content-Type`, `Content-Length`, `Cache-Control`, then `extra` (a new
 *   array: the caller may push `Connection: close`); `body` from {@link errorBody}.
 * @throws Nothing.
 * @example
 * errorHead(504, 'The upstream service did not respond in time.', ['Service-Version', '0.60.0']).headers
 * // → ['Content-Type', 'application/json; charset=utf-8', 'Content-Length', '102',
 * //    'Cache-Control', 'no-store', 'Service-Version', '0.60.0']
 */
export function errorHead(
  statusCode: number,
  message: string,
  extra: readonly string[],
): { headers: string[]; body: Buffer } {
  const body = errorBody(statusCode, message);
  const headers = [
    'Content-Type',
    JSON_CONTENT_TYPE,
    'Content-Length',
    String(body.length),
    'Cache-Control',
    'no-store',
  ];
  for (const value of extra) headers.push(value);
  return { headers, body };
}
