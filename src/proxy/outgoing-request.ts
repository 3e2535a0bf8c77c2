/**
 * Building the upstream request from the client's (SPEC §4): which headers go on, how the body is
 * framed, and the `X-Forwarded-*` of this hop. Pure functions: the smuggling defences are decided
 * here, from the client's headers alone, before any socket is touched.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { connectionTokens, HOP_BY_HOP } from '../core/hop-by-hop.ts';
import { isHostSyntax } from '../core/host-syntax.ts';
import { trimOws } from '../core/raw-headers.ts';
import { upstreamIfNoneMatch } from '../core/validators.ts';

/**
 * How the forwarded body is delimited (RFC 9112 §6): no body, a known length, or chunked.
 * The shim always frames explicitly, whatever Node would do by default for the method.
 */
export type Framing =
  | { readonly kind: 'none' }
  | { readonly kind: 'length'; readonly length: number }
  | { readonly kind: 'chunked' };

/**
 * Methods whose Node client frames a request without a body as "no body" (`useChunkedEncodingByDefault`
 * false in `node:http`'s `ClientRequest`); for every other method Node would send an empty chunked body.
 * These are also the methods whose semantics do not anticipate content (RFC 9110 §9.3).
 */
const BODILESS_BY_DEFAULT: ReadonlySet<string> = new Set([
  'GET',
  'HEAD',
  'DELETE',
  'OPTIONS',
  'TRACE',
  'CONNECT',
]);

/**
 * Decides the framing of the forwarded body (RFC 9112 §6.1–6.3).
 *
 * - A body the shim rewrote: its own length.
 * - `Transfer-Encoding` (any spelling Node's parser accepted, which ends in `chunked`): re-chunked,
 *   for every method. Node does not chunk DELETE/OPTIONS bodies by default and would write them raw
 *   after the head, where the upstream reads them as the next request (request smuggling;
 *   test/security/request-smuggling.test.ts). If `Content-Length` came too (the hygiene gate rejects
 *   that), `Transfer-Encoding` wins and the length is dropped (RFC 9112 §6.3 rule 3).
 * - `Content-Length`: kept, validated by Node's parser (as a number: `003` goes on as `3`).
 * - Neither: no body. For GET, HEAD, DELETE, OPTIONS, TRACE (and CONNECT): no framing header. For
 *   every other method (POST, PUT, PATCH, extension methods): `Content-Length: 0`, as RFC 9110 §8.6
 *   asks of a user agent when the method defines a meaning for content — left to Node, the request
 *   would go as `Transfer-Encoding: chunked` with an empty last chunk, which an upstream that refuses
 *   chunked requests (411) rejects.
 *
 * @param method The request method, e.g. `POST` (upper case, as Node parsed it).
 * @param headers The client's parsed headers (lower-cased names).
 * @param rewrittenLength Length in bytes of the body the shim will send instead, when it rewrote one.
 * @returns The framing of the upstream request (a `length` in bytes).
 * @throws Nothing.
 * @example
 * requestFraming('POST', { 'transfer-encoding': 'chunked' }) // → { kind: 'chunked' }
 * requestFraming('POST', {}) // → { kind: 'length', length: 0 }
 * requestFraming('GET', {}) // → { kind: 'none' }
 */
export function requestFraming(
  method: string,
  headers: IncomingHttpHeaders,
  rewrittenLength?: number,
): Framing {
  if (rewrittenLength !== undefined) return { kind: 'length', length: rewrittenLength };
  if (headers['transfer-encoding'] !== undefined) return { kind: 'chunked' };
  const declared = headers['content-length'];
  if (declared !== undefined) return { kind: 'length', length: Number(declared) };
  return BODILESS_BY_DEFAULT.has(method) ? { kind: 'none' } : { kind: 'length', length: 0 };
}

/** What {@link buildUpstreamHeaders} needs to know about the client's request. */
export interface ClientHead {
  /** The request method (`IncomingMessage.method`), e.g. `POST`: decides the framing of an empty body. */
  readonly method: string;
  /**
   * The client's headers as Node parsed them (`IncomingMessage.headers`): lower-cased names, repeats
   * joined (`Cookie` with `; `, most others with `, `) or, for singletons such as `Authorization`,
   * the first kept. Forwarding this view, not the raw lines, means the upstream reads exactly what
   * the gates judged (test/security/header-abuse.test.ts).
   */
  readonly headers: IncomingHttpHeaders;
  /** The client's address (`socket.remoteAddress`), `undefined` when the socket is gone. */
  readonly remoteAddress: string | undefined;
  /** Whether the client connection is TLS (the front door can sit behind a TLS-terminating server). */
  readonly encrypted: boolean;
}

/**
 * What the shim does with the forwarding headers a client sent (`FORWARDED_HEADERS`, src/config.ts):
 *
 * - `append` (SPEC §4, the default): this hop's `X-Forwarded-For`, `-Proto` and `-Host` are appended
 *   to the client's; `Forwarded` (RFC 7239) passes untouched. For a shim behind a proxy that sets
 *   these headers (an ingress), whose values the upstream should see first.
 * - `replace`: the client's `X-Forwarded-For`, `-Proto`, `-Host` and `Forwarded` are dropped; this
 *   hop's values go alone. For a shim that clients reach directly: an upstream that trusts its proxy
 *   (Express `trust proxy`) reads the first value, which would otherwise be the client's choice.
 */
export type ForwardedHeaders = 'append' | 'replace';

/** Options of {@link buildUpstreamHeaders}. */
export interface UpstreamHeaderOptions {
  /** The client's forwarding headers: appended to (default) or replaced; see {@link ForwardedHeaders}. */
  readonly forwardedHeaders?: ForwardedHeaders;
  /** Length of the rewritten body, when the shim rewrote it. */
  readonly rewrittenLength?: number;
  /**
   * A response hook may patch the body: what the client holds is not the upstream's representation, so
   * the upstream is asked for its full current one. `Range` and `If-Range` are dropped (RFC 9110 §14.2:
   * a range of a body to patch cannot be patched); a `GET`'s or `HEAD`'s `If-None-Match` goes with the
   * patched tags only, as the upstream's (validators.ts `upstreamIfNoneMatch`), or not at all; beside
   * it, no `If-Modified-Since` (RFC 9110 §13.1.3). Any other method's `If-None-Match` (a write's
   * precondition, answered 412) goes whole, its patched tags also as the upstream's.
   */
  readonly patchable?: boolean;
  /**
   * The upstream's authority (`host[:port]`, `URL.host`), sent as `Host` when the client sent none: an
   * HTTP/1.0 request may lack it, but the upstream request is HTTP/1.1, which must carry one (RFC 9112
   * §3.2; RFC 9110 §7.2: the target URI's authority).
   */
  readonly upstreamHost?: string;
  /**
   * The headers the shim admits a request on (`API_KEY_HEADER`, `CLIENT_VERSION_HEADER`), lower-cased
   * as configured: never dropped, and their spellings with `_` for `-` are ({@link isUnderscoreSpelling}).
   */
  readonly admissionHeaders?: ReadonlySet<string>;
}

/** Headers the shim sets itself, whatever the client sent: framing, `Expect`, and this hop's `X-Forwarded-*`. */
const REPLACED: ReadonlySet<string> = new Set([
  'content-length',
  'transfer-encoding',
  'expect',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
]);
const RANGE: ReadonlySet<string> = new Set(['range', 'if-range']);

/**
 * A client's `Proxy` header is never forwarded ("httpoxy", CVE-2016-5385). No HTTP client has a use for
 * it (it is no registered field), but a CGI-style upstream turns it into the environment variable
 * `HTTP_PROXY` (RFC 3875 §4.1.18), which HTTP libraries (Go's `net/http`, Python's `urllib`, PHP Guzzle,
 * curl) read as the proxy for the application's own outbound requests: the client would route them
 * through a host of its choosing. httpoxy.org's advice is to drop the header at the edge.
 */
const HTTPOXY = 'proxy';
/** Never dropped because `Connection` names it: the upstream needs it (SPEC §4 "the client's Host is kept"). */
const KEPT: ReadonlySet<string> = new Set(['host']);

/**
 * CGI meta-variables (RFC 3875 §4.1) whose names are valid header names. gunicorn before 22 takes a
 * header named `SCRIPT_NAME` as the variable and strips it from the path: `GET /api/health` (public)
 * with `SCRIPT_NAME: /api` reaches the application as `/health`, a path the gates never judged.
 */
const CGI_META_VARIABLES: ReadonlySet<string> = new Set([
  'auth_type',
  'content_length',
  'content_type',
  'gateway_interface',
  'path_info',
  'path_translated',
  'query_string',
  'remote_addr',
  'remote_host',
  'remote_ident',
  'remote_user',
  'request_method',
  'script_name',
  'server_name',
  'server_port',
  'server_protocol',
  'server_software',
]);

/**
 * Request header names (lower case) that do not reach the upstream as the client sent them, on some
 * request or other: hop-by-hop ({@link HOP_BY_HOP}), rebuilt ({@link REPLACED}), `Proxy`
 * ({@link HTTPOXY}), the CGI meta-variables, which CGI-style servers read as something else
 * ({@link CGI_META_VARIABLES}), `Forwarded` (dropped by
 * `FORWARDED_HEADERS=replace`), and the validators and ranges of a patchable request (`Range`,
 * `If-Range`, `If-None-Match`, `If-Modified-Since`; {@link buildUpstreamHeaders}). config.ts refuses
 * them as `API_KEY_HEADER`: the gate would admit a key that the upstream, which checks it, never sees.
 */
export const NOT_FORWARDED_AS_SENT: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP,
  ...REPLACED,
  HTTPOXY,
  ...CGI_META_VARIABLES,
  'forwarded',
  ...RANGE,
  'if-none-match',
  'if-modified-since',
]);

/**
 * Whether a client header name, with `_` in it, is another spelling of a header the shim sets, strips or
 * admits a request on, or a CGI meta-variable ({@link CGI_META_VARIABLES}) — such a header is not
 * forwarded. A name with `_` is a valid token (RFC 9110 §5.1) and a field of its own for the shim, but
 * CGI-style servers (WSGI: gunicorn, uWSGI; PHP-FPM; Rack) hand headers to the application as
 * `HTTP_` + the name upper-cased with `-` turned into `_` (RFC 3875 §4.1.18), so `X_Forwarded_For` and
 * `X-Forwarded-For` become one variable, which gunicorn 20.1 joins as `forged,this-hop`: the client's
 * forwarding header reaches the application although `FORWARDED_HEADERS=replace` drops it, and without
 * the check `X-Forwarded-Host` gets. Every other header with `_` goes upstream unchanged (SPEC §4);
 * nginx drops all of them by default (`underscores_in_headers off`), gunicorn ≥ 22 too (`header_map`).
 * @param name A lower-cased header name, as Node's `IncomingMessage.headers` has it.
 * @param admission The admission headers' names, lower-cased (see {@link UpstreamHeaderOptions.admissionHeaders}).
 * @returns `true` when the header must not be forwarded.
 * @throws Nothing.
 * @example
 * isUnderscoreSpelling('x_forwarded_for') // → true
 * isUnderscoreSpelling('script_name') // → true
 * isUnderscoreSpelling('x_request_id') // → false (forwarded)
 * isUnderscoreSpelling('x-forwarded-for') // → false (no `_`: handled as itself)
 */
export function isUnderscoreSpelling(name: string, admission?: ReadonlySet<string>): boolean {
  if (!name.includes('_') || admission?.has(name)) return false;
  if (CGI_META_VARIABLES.has(name)) return true;
  const dashed = name.replaceAll('_', '-');
  return REPLACED.has(dashed) || HOP_BY_HOP.has(dashed) || (admission?.has(dashed) ?? false);
}

/**
 * The upstream request's headers and framing, from the client's (SPEC §4; RFC 9110 §7.6.1, RFC 9112 §6).
 *
 * - End-to-end headers go on as the gates saw them (see {@link ClientHead.headers}), in order. A
 *   client without `Host` (HTTP/1.0) gets `upstreamHost` as `Host`, and no `X-Forwarded-Host` of its own.
 * - Hop-by-hop headers and every header `Connection` names are dropped (a client naming `Host` keeps
 *   it). Framing headers are always rebuilt from {@link requestFraming}, even when `Connection` names
 *   `Content-Length`: stripped, a GET/DELETE body would go upstream unframed (smuggling).
 * - `Expect` is dropped: the shim answers the client's `100-continue` itself (forward.ts, once the
 *   request passed the gates).
 * - `X-Forwarded-For`, `-Proto`, `-Host`: one header each, this hop's value (the client's address,
 *   `http`/`https`, the client's `Host`) appended to the client's (all repeats joined with `, `), or
 *   alone with `forwardedHeaders: 'replace'`, which also drops the client's `Forwarded`
 *   ({@link ForwardedHeaders}). A client's value goes alone, too, when `Connection` names it (RFC 9110
 *   §7.6.1), and when one of its elements is not what a proxy writes there: for `X-Forwarded-Host`,
 *   a host and optional port (RFC 9110 §7.2, the `Host` grammar the hygiene gate holds `Host` to);
 *   for `X-Forwarded-Proto`, a URI scheme (RFC 3986 §3.1). A proxy copies these from a `Host` and
 *   scheme it accepted, so any other value is a client's forgery (`evil.test/reset?to=x`,
 *   `https://evil.test/#`), which an upstream building links from the first value would echo: it is
 *   dropped, named in `invalidForwarded`, and the request goes on (the `Host` it carries was valid).
 * - A header whose name with `_` spells a header the shim sets, strips or admits on, or a CGI
 *   meta-variable, is dropped and named in `underscored` ({@link isUnderscoreSpelling}).
 * - `Proxy` is dropped (httpoxy, CVE-2016-5385: see {@link HTTPOXY}).
 * - With `patchable`: `Range` and `If-Range` dropped; `If-None-Match` as {@link upstreamIfNoneMatch}
 *   makes it (RFC 9110 §8.8.3: the client's tags of a patched response mapped back; on a `GET` or
 *   `HEAD` the others dropped, on any other method kept: a write's precondition is never weakened),
 *   or dropped; and when a `GET` or `HEAD` carries `If-None-Match`, its `If-Modified-Since` is dropped
 *   (RFC 9110 §13.1.3: ignored beside `If-None-Match`; forwarded alone, it would answer for the tags the
 *   shim dropped: a legacy client holding the unpatched copy of a JSON resource, from a brownout or
 *   another variant, got a 304 for it).
 * - A HEAD carries `Connection: close`: the shim never reuses a HEAD's upstream connection (an
 *   upstream may send a body after the head; upstream-attempt.ts).
 *
 * @param client The client's head (see {@link ClientHead}).
 * @param options Forwarding-header mode, rewritten body length, Range dropping, the upstream's authority.
 * @returns `headers`, flat `[name, value, …]` for `http.request`; the `framing` they announce; and
 *   `invalidForwarded`, the client's forwarding headers dropped for an invalid value (lower-cased
 *   names; absent when none was); `underscored`, the client's headers dropped by
 *   {@link isUnderscoreSpelling} (lower-cased, absent when none was).
 * @throws Nothing.
 * @example
 * buildUpstreamHeaders({ method: 'POST', headers: { host: 'a', 'transfer-encoding': 'chunked' }, remoteAddress: '10.0.0.1', encrypted: false })
 * // → { headers: ['host', 'a', 'Transfer-Encoding', 'chunked', 'X-Forwarded-For', '10.0.0.1', 'X-Forwarded-Proto', 'http', 'X-Forwarded-Host', 'a'], framing: { kind: 'chunked' } }
 */
export function buildUpstreamHeaders(
  client: ClientHead,
  options: UpstreamHeaderOptions = {},
): { headers: string[]; framing: Framing; invalidForwarded?: string[]; underscored?: string[] } {
  const { headers } = client;
  const listed = connectionTokens(headers.connection);
  const replace = options.forwardedHeaders === 'replace';
  const out: string[] = [];
  let underscored: string[] | undefined;
  if (headers.host === undefined && options.upstreamHost !== undefined)
    out.push('Host', options.upstreamHost);
  // A false condition answers a GET or HEAD with 304 (the client's copy), any other method with 412.
  const revalidation = client.method === 'GET' || client.method === 'HEAD';
  // RFC 9110 §13.1.3: a recipient MUST ignore If-Modified-Since when If-None-Match is present. The
  // upstream may see fewer tags (none) than the client sent, never the date the client's tags override.
  const dropModifiedSince =
    options.patchable === true &&
    revalidation &&
    headers['if-none-match'] !== undefined &&
    !listed.includes('if-none-match');
  for (const name in headers) {
    if (REPLACED.has(name) || HOP_BY_HOP.has(name) || name === HTTPOXY) continue;
    if (listed.length > 0 && listed.includes(name) && !KEPT.has(name)) continue;
    if (options.patchable && RANGE.has(name)) continue;
    if (options.patchable && name === 'if-none-match') {
      const forwarded = upstreamIfNoneMatch(text(headers[name]), revalidation);
      if (forwarded !== undefined) out.push(name, forwarded);
      continue;
    }
    if (dropModifiedSince && name === 'if-modified-since') continue;
    if (replace && name === 'forwarded') continue;
    if (isUnderscoreSpelling(name, options.admissionHeaders)) {
      if (underscored === undefined) underscored = [name];
      else underscored.push(name);
      continue;
    }
    const value = headers[name];
    if (typeof value === 'string') out.push(name, value);
    else if (value !== undefined) for (const v of value) out.push(name, v);
  }
  // A header `Connection` names is the previous hop's, never ours to pass on: not even as the prior
  // values of this hop's X-Forwarded-* (RFC 9110 §7.6.1).
  const prior = (name: string) => (replace || listed.includes(name) ? undefined : text(headers[name]));
  const forwardedFor = prior('x-forwarded-for');
  let forwardedProto = prior('x-forwarded-proto');
  let forwardedHost = prior('x-forwarded-host');
  let invalidForwarded: string[] | undefined;
  if (forwardedProto !== undefined && !everyElement(forwardedProto, isScheme)) {
    forwardedProto = undefined;
    invalidForwarded = ['x-forwarded-proto'];
  }
  if (forwardedHost !== undefined && !everyElement(forwardedHost, isHostSyntax)) {
    forwardedHost = undefined;
    invalidForwarded = [...(invalidForwarded ?? []), 'x-forwarded-host'];
  }
  // A HEAD's connection is not reused (upstream-attempt.ts): the upstream is told so.
  if (client.method === 'HEAD') out.push('Connection', 'close');
  const framing = requestFraming(client.method, client.headers, options.rewrittenLength);
  if (framing.kind === 'length') out.push('Content-Length', String(framing.length));
  else if (framing.kind === 'chunked') out.push('Transfer-Encoding', 'chunked');
  pushJoined(out, 'X-Forwarded-For', forwardedFor, client.remoteAddress);
  pushJoined(out, 'X-Forwarded-Proto', forwardedProto, client.encrypted ? 'https' : 'http');
  const host = client.headers.host;
  pushJoined(out, 'X-Forwarded-Host', forwardedHost, typeof host === 'string' ? host : undefined);
  if (invalidForwarded === undefined && underscored === undefined) return { headers: out, framing };
  return {
    headers: out,
    framing,
    ...(invalidForwarded !== undefined && { invalidForwarded }),
    ...(underscored !== undefined && { underscored }),
  };
}

/**
 * The upstream request target: the upstream URL's path prefix (without a trailing slash) followed by
 * the client's origin-form target (after query rewrites).
 * @param prefix The upstream URL's `pathname`, e.g. `/` or `/api/`.
 * @param target Origin-form target, e.g. `/missions?skip=1`.
 * @returns The target to send upstream.
 * @throws Nothing.
 * @example
 * upstreamTarget('/api/', '/missions') // → '/api/missions'
 */
export function upstreamTarget(prefix: string, target: string): string {
  const base = prefix.endsWith('/') ? prefix.slice(0, -1) : prefix;
  return base === '' ? target : `${base}${target}`;
}

/** URI scheme (RFC 3986 §3.1): ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ). */
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*$/;
const isScheme = (element: string) => SCHEME.test(element);

/**
 * Whether every element of a comma-separated list (RFC 9110 §5.6.1; optional whitespace around each)
 * is non-empty and passes `valid`. An empty whole value counts as no list (nothing to forward).
 */
function everyElement(list: string, valid: (element: string) => boolean): boolean {
  if (list === '') return true;
  for (const element of list.split(',')) {
    const trimmed = trimOws(element);
    if (trimmed === '' || !valid(trimmed)) return false;
  }
  return true;
}

function text(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

function join(prior: string | undefined, value: string): string {
  if (value === '') return prior ?? '';
  return prior === undefined || prior === '' ? value : `${prior}, ${value}`;
}

function pushJoined(out: string[], name: string, prior: string | undefined, own: string | undefined): void {
  const value = own === undefined || own === '' ? (prior ?? '') : join(prior, own);
  if (value !== '') out.push(name, value);
}
