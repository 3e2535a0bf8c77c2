/**
 * Request hygiene (SPEC §3 step 1): reject request targets and framing that different HTTP parsers
 * could read differently, before anything else looks at the request.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { ShimError, UPGRADE_REFUSED_MESSAGE } from '../core/errors.ts';
import type { Gate } from '../core/exchange.ts';
import { expectsContinue } from '../core/expect-continue.ts';
import { isHostSyntax } from '../core/host-syntax.ts';
import { headerCount, isHttp10OrOlder, trimOws } from '../core/raw-headers.ts';

/** Percent-encodings that must never appear in a path: `/`, `\`, NUL. */
const FORBIDDEN_ENCODING = /%(?:2f|5c|00)/i;
/** A dot segment: `.` or `..`, percent-encoded or not, also with `;` matrix parameters (`..;x`). */
const DOT_SEGMENT = /(?:^|\/)(?:\.|%2e){1,2}(?:;[^/]*)?(?:\/|$)/i;
/** How many rounds of percent-decoding are inspected (`%25252e` is three rounds from `.`). */
const DECODE_ROUNDS = 4;

/** Decodes every `%XX` to the byte's Latin-1 character, leaving malformed escapes as they are. */
function percentDecodeBytes(text: string): string {
  return text.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

/**
 * Checks a request target (the raw `req.url`) for the hygiene rules of SPEC §3:
 * origin-form only (RFC 9112 §3.2.1), no dot segments (RFC 3986 §3.3, also `%2e` and double
 * encodings), no encoded slash or backslash, no backslash, no NUL or other control character.
 * @param target The raw request target, e.g. `/missions/1?x=y`.
 * @returns `undefined` when clean, else the message for a 400.
 * @throws Nothing.
 */
export function checkRequestTarget(target: string): string | undefined {
  if (target.charCodeAt(0) !== 0x2f /* / */) {
    return 'The request target must be in origin-form (a path starting with "/"); absolute-form, authority-form and "*" are not accepted.';
  }
  // A fragment is never part of a request target (RFC 9112 §3.2.1); Node passes a raw `#` through,
  // and `/static/..#/user/me` would otherwise end a dot segment unseen.
  if (target.includes('#')) return 'The request target must not contain "#".';
  const q = target.indexOf('?');
  const path = q === -1 ? target : target.slice(0, q);
  // Fast path: the common clean path has none of `.`, `%`, `\`, control characters, `;`.
  if (!/[.%\\\0-\x1f\x7f;]/.test(path)) return undefined;
  // Inspect the path as sent and after each round of decoding, so that double encodings
  // (`%252e%252e`, `%25%32%66`) cannot smuggle a segment past a server that decodes twice.
  let level = path;
  for (let round = 0; round < DECODE_ROUNDS; round++) {
    if (level.includes('\\')) return 'The path must not contain a backslash (also percent-encoded).';
    if (level.includes('\0')) return 'The path must not contain NUL (also percent-encoded).';
    // An upstream that strips tabs and line breaks (WHATWG URL) would join `\t..` into `..`
    // (found by test/fuzz/hygiene.fuzz.test.ts).
    if (/[\x01-\x1f\x7f]/.test(level))
      return 'The path must not contain control characters (also percent-encoded).';
    if (FORBIDDEN_ENCODING.test(level))
      return 'The path must not contain an encoded slash, backslash or NUL.';
    if (DOT_SEGMENT.test(level)) {
      return 'The path must not contain "." or ".." segments (also percent-encoded).';
    }
    const next = level.includes('%') ? percentDecodeBytes(level) : level;
    if (next === level) return undefined;
    level = next;
  }
  return 'The path is percent-encoded too many times over.';
}

/**
 * Checks message framing (RFC 9112 §6.1, §6.3): a request with both `Content-Length` and
 * `Transfer-Encoding`, or a `Transfer-Encoding` other than exactly `chunked`, is ambiguous between
 * parsers (request smuggling) and is rejected; so is any `Transfer-Encoding` in an HTTP/1.0 request,
 * whose framing RFC 9112 §6.1 says to treat as faulty (HTTP/1.0 has no chunked coding: a server in
 * front may have read the body up to the close instead). A `Content-Length` above 2^53 − 1 is
 * refused too: the shim frames the upstream request from the number it reads, and a larger one would
 * reach the upstream rounded, a body length the two would disagree on.
 * @param headers The parsed request headers.
 * @param httpVersion The request's version, e.g. `1.1` (Node's `req.httpVersion`).
 * @returns `undefined` when the framing is unambiguous, else the message for a 400.
 * @throws Nothing.
 */
export function checkFraming(headers: IncomingHttpHeaders, httpVersion = '1.1'): string | undefined {
  const length = headers['content-length'];
  // Node's parser has already refused a length that is not digits or over 2^64 − 1.
  if (length !== undefined && length.length > 15 && !Number.isSafeInteger(Number(length))) {
    return 'Content-Length is larger than this proxy can forward exactly (2^53 − 1 bytes).';
  }
  const te = headers['transfer-encoding'];
  if (te === undefined) return undefined;
  if (isHttp10OrOlder(httpVersion)) {
    return 'An HTTP/1.0 request must not carry Transfer-Encoding (RFC 9112 §6.1).';
  }
  if (headers['content-length'] !== undefined) {
    return 'A request must not carry both Content-Length and Transfer-Encoding.';
  }
  // Only SP and HTAB are optional whitespace around a field value (trimOws).
  if (trimOws(te).toLowerCase() !== 'chunked') {
    return 'Transfer-Encoding must be exactly "chunked".';
  }
  return undefined;
}

/**
 * Checks that a request carries at most one `Host` header (RFC 9112 §3.2: more than one → 400). Node
 * keeps the first and drops the others, where another server may read the last.
 * @param rawHeaders The request's flat raw header list (`[name, value, …]`).
 * @returns `undefined` when there is at most one, else the message for a 400.
 * @throws Nothing.
 */
export function checkSingleHost(rawHeaders: readonly string[]): string | undefined {
  return headerCount(rawHeaders, 'host') > 1 ? 'Send exactly one Host header.' : undefined;
}

/** {@link checkHost}'s message for a `Host` with a comma. */
const HOST_COMMA_MESSAGE =
  'The Host header must be a host name or address with an optional port, without a comma: this proxy passes it on in X-Forwarded-Host, a comma-separated list (RFC 9110 §5.6.1).';

/**
 * Checks the `Host` header (RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without
 * Host, or with a Host of an invalid field value). The shim forwards `Host` and copies it into
 * `X-Forwarded-Host`, where an upstream may build links and redirects from it (`Host: evil.test/x`,
 * `Host: a@evil.test`): only a host and port pass, and the host must not be empty (`Host:`,
 * `Host: :80`): the shim serves `http` and `https` only, whose URIs have a non-empty host (RFC 9110
 * §4.2.1: a recipient MUST reject one without), and an origin-form request's target URI takes its
 * authority from `Host` (RFC 9112 §3.3); nginx answers both 400 too. A comma, which RFC 3986's
 * reg-name allows but no DNS name or address has, is refused too: this hop's `X-Forwarded-Host` is one
 * element of a comma-separated list (RFC 9110 §5.6.1), and `Host: real.example,evil.test` made it two,
 * of which Express reads the first and Rails or Symfony the last (after a front proxy's host check
 * that matched a prefix).
 * @param host The parsed `Host` header (Node keeps the first; {@link checkSingleHost} refuses a second).
 * @param httpVersion The request's version, e.g. `1.1`: without `Host`, only HTTP/1.0 passes (its
 *   clients, such as load-balancer health checks, may omit it).
 * @returns `undefined` when valid (or absent from an HTTP/1.0 request), else the message for a 400.
 * @throws Nothing.
 */
export function checkHost(host: string | undefined, httpVersion = '1.1'): string | undefined {
  if (host === undefined) {
    return isHttp10OrOlder(httpVersion)
      ? undefined
      : 'An HTTP/1.1 request must carry a Host header (RFC 9112 §3.2).';
  }
  if (host === '' || host.charCodeAt(0) === 0x3a /* : */)
    return 'The Host header must name a host: an "http" or "https" URI has a non-empty one (RFC 9110 §4.2.1).';
  if (host.includes(',')) return HOST_COMMA_MESSAGE;
  if (isHostSyntax(host)) return undefined;
  return 'The Host header must be a host name or address with an optional port (RFC 9110 §7.2).';
}

/**
 * Checks the `Expect` header (RFC 9110 §10.1.1): `100-continue` is the only expectation defined, and
 * a server MAY answer any other with 417. An HTTP/1.0 request's `Expect` is ignored (§10.1.1: a server
 * MUST ignore a 100-continue expectation in HTTP/1.0; Node does not act on it either).
 * @param expect The `Expect` header, absent for most requests.
 * @param httpVersion The request's version, e.g. `1.1`.
 * @returns `undefined` when there is nothing to refuse, else the message for a 417.
 * @throws Nothing.
 */
export function checkExpectation(expect: string | undefined, httpVersion = '1.1'): string | undefined {
  if (expect === undefined || isHttp10OrOlder(httpVersion)) return undefined;
  if (expectsContinue(expect, httpVersion)) return undefined;
  return 'The only expectation this proxy meets is "Expect: 100-continue" (RFC 9110 §10.1.1).';
}

/**
 * Checks the request's HTTP version: the shim speaks HTTP/1.1, and 1.0 (and 0.9) to older clients.
 * Node's parser also accepts `HTTP/2.0` on a request line (for HTTP/2's connection preface, `PRI *
 * HTTP/2.0`, which the front server refuses), and would then handle the message with HTTP/1.1's framing
 * but HTTP/1.0's connection rule (close unless `keep-alive`): a textual HTTP/2.0 request is neither, and
 * gets 505, as nginx and Apache httpd answer it (RFC 9110 §15.6.6: the server refuses the major
 * version; RFC 9112 §2.3).
 * @param httpVersion The request's version, e.g. `1.1` (Node's `req.httpVersion`).
 * @returns `undefined` for 1.1, 1.0 and 0.9, else the message for a 505.
 * @throws Nothing.
 */
export function checkHttpVersion(httpVersion: string): string | undefined {
  if (httpVersion === '1.1' || isHttp10OrOlder(httpVersion)) return undefined;
  return `HTTP/${httpVersion} is not supported on an HTTP/1.x connection: send the request as HTTP/1.1.`;
}

/**
 * Whether the request asks for a protocol upgrade (WebSocket, h2c), which the shim does not support.
 * @param headers The parsed request headers.
 * @returns `true` when an `Upgrade` header is present.
 * @throws Nothing.
 */
export function isUpgradeRequest(headers: IncomingHttpHeaders): boolean {
  return headers.upgrade !== undefined;
}

/**
 * The hygiene gate for one request.
 * @param target The raw request target (`req.url`), e.g. `/missions/1?x=y`.
 * @param headers The parsed request headers.
 * @param rawHeaders The raw header list, for {@link checkSingleHost} (skipped when omitted).
 * @param httpVersion The request's version (default `1.1`), for {@link checkHttpVersion},
 *   {@link checkFraming}, {@link checkHost} and {@link checkExpectation}.
 * @throws {ShimError} `http_version` (505), `hygiene` (400), `expectation` (417) or `upgrade` (501).
 */
export function assertHygiene(
  target: string,
  headers: IncomingHttpHeaders,
  rawHeaders: readonly string[] = [],
  httpVersion = '1.1',
): void {
  const version = checkHttpVersion(httpVersion);
  if (version) throw new ShimError('http_version', version);
  if (isUpgradeRequest(headers)) {
    throw new ShimError('upgrade', UPGRADE_REFUSED_MESSAGE);
  }
  const problem =
    checkRequestTarget(target) ??
    checkFraming(headers, httpVersion) ??
    checkSingleHost(rawHeaders) ??
    checkHost(headers.host, httpVersion);
  if (problem) throw new ShimError('hygiene', problem);
  const expectation = checkExpectation(headers.expect, httpVersion);
  if (expectation) throw new ShimError('expectation', expectation);
}

/**
 * The hygiene gate: {@link assertHygiene} on the raw request target, headers, raw headers and version.
 * @param req The request (`url`, `headers`, `rawHeaders`, `httpVersion`); a missing `url` is read as
 *   `''`, which is refused as not origin-form.
 * @throws {ShimError} `http_version` (505), `hygiene` (400), `expectation` (417) or `upgrade` (501).
 */
export const hygieneGate: Gate = (req) => {
  assertHygiene(req.url ?? '', req.headers, req.rawHeaders, req.httpVersion);
};
