/**
 * What to do when the upstream exchange fails (SPEC §4): send the request once more, answer with the
 * shim's own 502/504, or abort a response that has already started. Pure: decided from what is
 * known about the failure, never from a socket.
 */
import { REJECTION_STATUS, type RejectionReason, type UpstreamErrorKind } from '../core/errors.ts';

/** Idempotent methods (RFC 9110 §9.2.2): safe to send again when the first attempt was not processed. */
export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set([
  'GET',
  'HEAD',
  'OPTIONS',
  'TRACE',
  'PUT',
  'DELETE',
]);

/**
 * Error code the shim gives a new upstream connection not established within
 * `UPSTREAM_CONNECT_TIMEOUT_MS` (upstream-agent.ts). Classified `refused`: the upstream could not be
 * reached (SPEC §4: unreachable → 502), as for `EHOSTUNREACH`; no byte of the request was sent.
 */
export const CONNECT_TIMEOUT_CODE = 'ESHIMCONNECTTIMEDOUT';

const REFUSED = new Set([
  CONNECT_TIMEOUT_CODE,
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
]);

/**
 * Error code the shim gives its own upstream timeout (`UPSTREAM_TIMEOUT_MS`: no response head in
 * time, or a socket idle that long). Classified `timeout`.
 */
export const SHIM_TIMEOUT_CODE = 'ESHIMTIMEDOUT';

/**
 * Error code the shim gives an upstream request that closed with neither a response head nor an
 * error of its own. Known cause: a 101 (Switching Protocols) with `Connection: upgrade`, which Node's
 * client would hand to an `'upgrade'` listener; the shim has none, so Node destroys the socket and
 * closes the request in silence. Classified `invalid` ({@link upstreamErrorKind}), as is a 101 that
 * arrives as a response ({@link SWITCHED_PROTOCOLS_CODE}).
 */
export const NO_RESPONSE_CODE = 'ESHIMNORESPONSE';

/**
 * Error code the shim gives a 101 (Switching Protocols) from the upstream. The shim forwards no
 * `Upgrade` (the hygiene gate answers 501 to one), and a server MUST NOT switch to a protocol the
 * client did not name (RFC 9110 §15.2.2): the response is invalid, and its connection speaks
 * something else from there on. Classified `invalid`.
 */
export const SWITCHED_PROTOCOLS_CODE = 'ESHIMSWITCHED';

/**
 * Error code the shim gives a final response whose status is below 100 (`HTTP/1.1 099 X`: Node's
 * parser takes any three digits). RFC 9110 §15 has none, and Node's `writeHead` throws on one: relayed,
 * it ended the process. Classified `invalid`.
 */
export const INVALID_STATUS_CODE = 'ESHIMSTATUS';

/**
 * Error code the shim gives a response whose body comes in a transfer coding other than `chunked`
 * alone (`Transfer-Encoding: gzip`, `chunked, gzip`, `gzip, chunked`): Node's parser removes only the
 * chunked framing and hands on the coded bytes, which no field of the client's response would name
 * (`Transfer-Encoding` is hop-by-hop). Classified `invalid`, as nginx's proxy answers it (502, "upstream
 * sent unknown Transfer-Encoding"; RFC 9112 §6.1 defines only `chunked` for a recipient to remove).
 */
export const TRANSFER_CODING_CODE = 'ESHIMTRANSFERCODING';

/**
 * Whether the shim can relay a response framed by `transferEncoding` (RFC 9112 §6.1, §7): no
 * `Transfer-Encoding` (a length or the close delimits the body), exactly `chunked` (case-insensitive,
 * one field line), which Node's parser removes, or a response without content (to a HEAD, a 204 or a
 * 304: RFC 9112 §6.3), where the field only names what a GET would get and goes no further (hop-by-hop).
 * Any other coding of a body, `identity` (which RFC 9112 dropped) and `chunked` twice included, is
 * refused ({@link TRANSFER_CODING_CODE}), as nginx refuses it.
 * @param transferEncoding The response's `Transfer-Encoding` as Node joins it (`IncomingMessage.headers`:
 *   repeated field lines joined with `, `), or `undefined`.
 * @param method The request's method.
 * @param status The response's status.
 * @returns `true` when the body, if any, reaches the shim decoded.
 * @throws Nothing.
 * @example
 * relayableTransferCoding('Chunked', 'GET', 200) // → true
 * relayableTransferCoding('gzip, chunked', 'GET', 200) // → false
 * relayableTransferCoding('gzip, chunked', 'HEAD', 200) // → true
 */
export function relayableTransferCoding(
  transferEncoding: string | undefined,
  method: string | undefined,
  status: number,
): boolean {
  if (transferEncoding === undefined || transferEncoding.toLowerCase() === 'chunked') return true;
  return method === 'HEAD' || status === 204 || status === 304;
}

/**
 * An error of the shim's own about the upstream exchange, with a code {@link upstreamErrorKind}
 * classifies (one of this module's `*_CODE`s).
 * @param message What happened, for the log.
 * @param code The error's `code`.
 * @returns An `Error` with `code` set.
 * @throws Nothing.
 */
export const upstreamError = (message: string, code: string): NodeJS.ErrnoException =>
  Object.assign(new Error(message), { code });

/**
 * Classifies an upstream error (Node `errno` codes; llhttp's `HPE_*`, zlib's `Z_*`, brotli's `ERR__*`, zstd's `ZSTD_error_*`, the shim's {@link NO_RESPONSE_CODE}, {@link SWITCHED_PROTOCOLS_CODE}, {@link INVALID_STATUS_CODE} and {@link TRANSFER_CODING_CODE} for invalid responses, {@link SHIM_TIMEOUT_CODE} for its timeout; TLS
 * verification failures count as `refused`: the upstream could not be reached as configured).
 * @param err The error of the upstream request or response (its `code`, possibly absent).
 * @returns A bounded kind for metrics and the status mapping (502, or 504 for timeouts).
 * @throws Nothing.
 */
export function upstreamErrorKind(err: NodeJS.ErrnoException): UpstreamErrorKind {
  const code = err.code ?? '';
  if (REFUSED.has(code) || isTlsVerificationError(code)) return 'refused';
  // A body that does not decode with its declared Content-Encoding (zlib's Z_*, brotli's, zstd's) is invalid too.
  if (
    code.startsWith('HPE_') ||
    code.startsWith('Z_') ||
    code.startsWith('ERR__') ||
    code.startsWith('ZSTD_error_') ||
    code === 'ERR_INVALID_HTTP_RESPONSE' ||
    code === NO_RESPONSE_CODE ||
    code === SWITCHED_PROTOCOLS_CODE ||
    code === INVALID_STATUS_CODE ||
    code === TRANSFER_CODING_CODE
  ) {
    return 'invalid';
  }
  if (code === 'ETIMEDOUT' || code === SHIM_TIMEOUT_CODE) return 'timeout';
  return 'reset';
}

/**
 * The codes Node gives a certificate that does not verify (OpenSSL's `X509_V_ERR_*` without the prefix,
 * as Node's `verifyErrorString` names them), `ERR_TLS_CERT_ALTNAME_INVALID` (the name does not match),
 * and `EPROTO`, a handshake the upstream refused (it speaks only TLS 1.0 or 1.1, or only h2: fix 55).
 */
const TLS_REFUSED = new Set([
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_CRL',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'UNABLE_TO_DECRYPT_CRL_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'CERT_SIGNATURE_FAILURE',
  'CRL_SIGNATURE_FAILURE',
  'CERT_NOT_YET_VALID',
  'CERT_HAS_EXPIRED',
  'CRL_NOT_YET_VALID',
  'CRL_HAS_EXPIRED',
  'ERROR_IN_CERT_NOT_BEFORE_FIELD',
  'ERROR_IN_CERT_NOT_AFTER_FIELD',
  'ERROR_IN_CRL_LAST_UPDATE_FIELD',
  'ERROR_IN_CRL_NEXT_UPDATE_FIELD',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_CHAIN_TOO_LONG',
  'CERT_REVOKED',
  'INVALID_CA',
  'PATH_LENGTH_EXCEEDED',
  'INVALID_PURPOSE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'EPROTO',
]);

/** A TLS failure before the exchange: the certificate ({@link TLS_REFUSED}), or OpenSSL's `ERR_SSL_*`. */
function isTlsVerificationError(code: string): boolean {
  return TLS_REFUSED.has(code) || code.startsWith('ERR_SSL_');
}

/** What is known when an upstream exchange fails. */
export interface UpstreamFailure {
  /** The error from the upstream request or response stream. */
  readonly error: NodeJS.ErrnoException;
  /** The shim's own timer fired (`UPSTREAM_TIMEOUT_MS`): no headers in time, or an idle socket. */
  readonly timedOut: boolean;
  /** The upstream's response head had arrived. */
  readonly headReceived: boolean;
  /** The client's response has started (head sent): a status can no longer be chosen. */
  readonly clientStarted: boolean;
  /**
   * The upstream's whole response had been read, as its framing delimits it, before the failure: what
   * failed is the connection after it (bytes past the end of a response: a body longer than its
   * `Content-Length`, a body after a 204, 304 or HEAD response; RFC 9112 §6.3). Default `false`.
   */
  readonly responseComplete?: boolean;
  /** The request went out on a pooled connection used before (`ClientRequest.reusedSocket`). */
  readonly reusedSocket: boolean;
  /** Idempotent method, and the shim holds the whole body (or there is none): it can be sent again. */
  readonly replayable: boolean;
  /** This is already the second attempt. */
  readonly replayed: boolean;
}

/** What an upstream attempt knows when one of its deadlines fires ({@link idleCause}). */
export interface IdleState {
  /** The upstream's response head has arrived. */
  readonly headReceived: boolean;
  /** The client has not taken what was written to it (`res.writableNeedDrain`): backpressure paused the upstream's read. */
  readonly clientBackedUp: boolean;
  /** The request body streams to the upstream as it arrives (not held whole). */
  readonly streamedBody: boolean;
  /** The client has sent its whole request body (`req.complete`). */
  readonly uploadComplete: boolean;
  /** The upstream connection is made (TCP, and TLS for `https:`; upstream-agent.ts `isEstablished`). */
  readonly established: boolean;
  /** The upstream has not taken what was written to it (`ClientRequest.writableNeedDrain`). */
  readonly upstreamBackedUp: boolean;
}

/**
 * Whose stall a fired deadline of an upstream attempt is (`UPSTREAM_TIMEOUT_MS`: the upstream socket
 * idle, or no head in time):
 * - `client_stalled`: the response has started and the client stopped reading it; the upstream socket
 *   is idle because backpressure paused it (docs/reliability.md fix 62). Cut, not an upstream error.
 * - `upload_stalled`: before the head, a streamed body stopped arriving while the upstream, connected
 *   and taking everything it was sent, waits for the rest: 408, not a 504 that blames the upstream
 *   (fix 72); not while the connection is still being made, when the body waits in the shim (fix 76).
 * - `upstream`: the upstream's own silence: 504 before the head, an abort after it.
 * @param s What the attempt knows ({@link IdleState}).
 * @returns The cause. Pure; never throws.
 * @example
 * idleCause({ headReceived: true, clientBackedUp: true, streamedBody: false, uploadComplete: true, established: true, upstreamBackedUp: false }) // → 'client_stalled'
 */
export function idleCause(s: IdleState): 'client_stalled' | 'upload_stalled' | 'upstream' {
  if (s.headReceived && s.clientBackedUp) return 'client_stalled';
  if (!s.headReceived && s.streamedBody && !s.uploadComplete && s.established && !s.upstreamBackedUp)
    return 'upload_stalled';
  return 'upstream';
}

/** The decision for an {@link UpstreamFailure}. */
export type UpstreamDecision =
  | { readonly action: 'replay' }
  | {
      readonly action: 'respond';
      readonly kind: UpstreamErrorKind;
      readonly reason: RejectionReason;
      readonly status: number;
    }
  | { readonly action: 'abort'; readonly kind: UpstreamErrorKind }
  | { readonly action: 'finish'; readonly kind: UpstreamErrorKind };

/**
 * Decides what to do about a failed upstream exchange (SPEC §4; RFC 9110 §9.2.2 for the replay).
 *
 * - **Replay, once**: a pooled connection the upstream closed just as it was reused fails before any
 *   response byte, unprocessed. An idempotent request whose body the shim holds is sent once more, on
 *   another connection (test/e2e/reliability-keepalive-reuse.test.ts). Never after a timeout, a
 *   response head, or a first replay.
 * - **Respond** 502 (`refused`, `reset`, `invalid`) or 504 (`timeout`), while the client has received
 *   nothing — also after the upstream's head, for a patched response whose first byte was not sent.
 * - **Abort** the client connection once its response has started: a truncated body must never look
 *   complete.
 * - **Finish** the client's response when the upstream's response was complete before the failure:
 *   the error belongs to the upstream connection (which is not reused), not to this response. Counted
 *   all the same. Not after the shim's own timeout, which cuts a client that stopped reading.
 *
 * @param failure What is known (see {@link UpstreamFailure}).
 * @returns The action, with the metric `kind` and, for `respond`, the rejection reason and status.
 * @throws Nothing.
 */
export function decideUpstreamFailure(failure: UpstreamFailure): UpstreamDecision {
  const kind: UpstreamErrorKind = failure.timedOut ? 'timeout' : upstreamErrorKind(failure.error);
  if (
    kind === 'reset' &&
    failure.replayable &&
    failure.reusedSocket &&
    !failure.replayed &&
    !failure.headReceived &&
    !failure.clientStarted
  ) {
    return { action: 'replay' };
  }
  if (failure.responseComplete === true && !failure.timedOut) return { action: 'finish', kind };
  if (failure.clientStarted) return { action: 'abort', kind };
  const reason = `upstream_${kind}` as const;
  return { action: 'respond', kind, reason, status: REJECTION_STATUS[reason] };
}

/** Messages of the shim's own upstream error responses (SPEC §7: what is wrong and what to do). */
export const UPSTREAM_MESSAGES: Readonly<Record<UpstreamErrorKind, string>> = Object.freeze({
  refused: 'The upstream service could not be reached. Try again later.',
  reset: 'The upstream service closed the connection before responding. Try again later.',
  invalid: 'The upstream service sent an invalid HTTP response.',
  timeout: 'The upstream service did not respond in time (UPSTREAM_TIMEOUT_MS). Try again later.',
});
