/**
 * Request message framing as the gates and the forwarder both read it (RFC 9112 §6).
 */
import type { IncomingHttpHeaders } from 'node:http';

/**
 * Whether the client sends a body at all (RFC 9112 §6.1–6.3): `Transfer-Encoding` present (chunked;
 * the hygiene gate refuses every other coding and `Transfer-Encoding` with `Content-Length`), or a
 * `Content-Length` above 0. Node's parser has already refused a malformed or conflicting length
 * (400) before this runs; a value that still does not read as a number (`NaN`) counts as no body,
 * and `00` is 0.
 * @param headers The client's parsed headers (lower-cased names).
 * @returns `true` when there is a body to stream or rewrite.
 * @throws Nothing.
 * @example
 * hasRequestBody({ 'content-length': '12' }) // → true
 * hasRequestBody({ 'content-length': '00' }) // → false
 */
export function hasRequestBody(headers: IncomingHttpHeaders): boolean {
  return headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
}
