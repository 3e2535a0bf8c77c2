/**
 * Writing the upstream's response to the client (SPEC §4, §6): the response head for a streamed
 * or a patched body, `Vary` merging, bodiless responses, a HEAD's chunked framing and relayable reason
 * phrases. Every response's head (patched or passed through) goes with its first body byte, or alone
 * after `RESPONSE_HEAD_HOLD_MS` (head-hold.ts); until then an upstream failure is still answered with a
 * 502 or 504.
 */
import { endToEndRawHeaders } from '../core/hop-by-hop.ts';
import { isHttp10OrOlder } from '../core/raw-headers.ts';
import { patchedEtag } from '../core/validators.ts';

/** Statuses whose responses have no body, whatever their headers say (RFC 9110 §6.4.1, §15.3.5, §15.4.5). */
const BODILESS_STATUS = new Set([204, 205, 304]);

/**
 * Whether a response has no body, whatever its headers say: the answer to a HEAD (RFC 9110 §9.3.2), a
 * 204, 205 or 304 (§6.4.1, §15.3.5, §15.4.5).
 * @param method The request's method (`req.method`).
 * @param status The upstream's final status.
 * @returns `true` when no body follows the head. Never throws.
 * @example
 * isBodiless('HEAD', 200) // → true
 * isBodiless('GET', 304) // → true
 * isBodiless('GET', 200) // → false
 */
export function isBodiless(method: string | undefined, status: number): boolean {
  return method === 'HEAD' || BODILESS_STATUS.has(status);
}

/**
 * Whether a HEAD response to a patched exchange says `Transfer-Encoding: chunked`, the framing of the
 * patched GET (its length is unknown until it is sent). RFC 9112 §6.1 lets a server send it on a HEAD
 * response (never to an HTTP/1.0 client, never on a 204 or 304), and RFC 9110 §9.3.2 asks a HEAD to
 * carry the GET's fields. Without it the HEAD response has neither a length nor a coding, and llhttp —
 * the parser of Node's HTTP client, under axios, got, node-fetch and superagent — takes it for a
 * response delimited by the close: the client drops its keep-alive connection after every such HEAD
 * (the upstream's own HEAD carries its `Content-Length`, and the connection is kept).
 * @param status The upstream's final status.
 * @param httpVersion The client's HTTP version (`req.httpVersion`).
 * @returns `true` for an HTTP/1.1 client and a status with a body. Never throws.
 * @example
 * headSaysChunked(200, '1.1') // → true
 * headSaysChunked(200, '1.0') // → false
 * headSaysChunked(304, '1.1') // → false
 */
export function headSaysChunked(status: number, httpVersion: string): boolean {
  return !BODILESS_STATUS.has(status) && !isHttp10OrOlder(httpVersion);
}

/** A reason phrase Node's `writeHead` accepts (RFC 9112 §4 `reason-phrase`, or empty). */
const REASON_PHRASE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * The upstream's reason phrase when Node can write it (RFC 9112 §4: HTAB, SP, VCHAR, obs-text). Node's
 * parser also takes a NUL or other controls there, on which `writeHead` throws: such a phrase is
 * dropped (a client ignores it anyway), and Node's own for the status goes instead.
 * @param phrase The upstream's reason phrase (`IncomingMessage.statusMessage`).
 * @returns The phrase, or `undefined` for Node's own. Never throws.
 * @example
 * relayableReasonPhrase('Not Found') // → 'Not Found'
 * relayableReasonPhrase('OK\0') // → undefined
 */
export function relayableReasonPhrase(phrase: string | undefined): string | undefined {
  return REASON_PHRASE.test(phrase ?? '') ? phrase : undefined;
}

/**
 * Adds a header name to a `Vary` value (RFC 9110 §12.5.5): no duplicate (compared case-insensitively),
 * neither the added name nor one the upstream repeated (nginx's `gzip_vary` adds a second
 * `Vary: Accept-Encoding` line to a backend's own, and Node joins the two), `*` kept as `*` (it already
 * varies on everything), empty members dropped.
 * @param upstream The upstream's `Vary` (Node joins repeated fields with `, `), or `undefined`.
 * @param name The request header the response also depends on, e.g. `Service-Client-Version`.
 * @returns The merged value, e.g. `Accept-Encoding, Service-Client-Version`.
 * @throws Nothing.
 * @example
 * mergeVary('accept-encoding', 'Service-Client-Version') // → 'accept-encoding, Service-Client-Version'
 * mergeVary('*', 'Service-Client-Version') // → '*'
 */
export function mergeVary(upstream: string | undefined, name: string): string {
  if (upstream === undefined) return name;
  const members: string[] = [];
  const seen = new Set<string>();
  for (const piece of upstream.split(',')) {
    const member = piece.trim();
    if (member === '*') return '*';
    const lower = member.toLowerCase();
    if (member === '' || seen.has(lower)) continue;
    seen.add(lower);
    members.push(member);
  }
  if (!seen.has(name.toLowerCase())) members.push(name);
  return members.join(', ');
}

/**
 * Whether a response must leave `Vary` as the upstream sent it: a 304 without `Vary`. A cache that
 * revalidates a stored response replaces each of its header fields with the 304's (RFC 9111 §3.2,
 * §4.3.4), so a 304 naming only the client-version header would cut the upstream's members
 * (`Accept-Encoding`) out of the stored response's `Vary`, and the cache would then serve its gzip body
 * to a client that does not accept gzip. Express' `compression` sends `Vary: Accept-Encoding` on the
 * 200 and none on its 304 (no `Content-Type` there). Without `Vary` the 304 leaves the stored one, which
 * the shim wrote on the 200 with the client-version header merged in, whole.
 * @param status The upstream's status.
 * @param upstreamVary The upstream's `Vary`, joined, if any.
 * @returns `true` for a 304 without `Vary`: no `Vary` is added.
 * @throws Nothing.
 * @example revalidationKeepsVary(304, undefined) // → true
 */
export function revalidationKeepsVary(status: number, upstreamVary: string | undefined): boolean {
  return status === 304 && upstreamVary === undefined;
}

/**
 * What a patched body makes false: its length, its validator (weakened and marked instead), and
 * digests of the upstream's bytes (RFC 9530 `Content-Digest`, `Repr-Digest`; RFC 3230 `Digest`; RFC 1864
 * `Content-MD5`), which a client that checks them would find wrong: dropped rather than recomputed,
 * since a digest of a streamed body is known only at its end.
 */
const PATCH_FALSIFIES = ['content-length', 'etag', 'content-digest', 'repr-digest', 'digest', 'content-md5'];
const PATCHED = 1;
const VARIED = 2;
const RANGES_REFUSED = 4;
/** A 204: no `Content-Length` (RFC 9110 §8.6: a server MUST NOT send one in a 1xx or 204). */
const NO_CONTENT = 8;
/** The names {@link responseHead} drops, by its flags (made once each). */
const dropSets: Array<ReadonlySet<string> | undefined> = Array.from({ length: 16 }, (_, flags) => {
  const names = [
    ...(flags & PATCHED ? PATCH_FALSIFIES : []),
    ...(flags & VARIED ? ['vary'] : []),
    ...(flags & RANGES_REFUSED ? ['accept-ranges'] : []),
    ...(flags & NO_CONTENT ? ['content-length'] : []),
  ];
  return names.length === 0 ? undefined : new Set(names);
});

/** What {@link responseHead} needs about the upstream's response. */
export interface UpstreamHead {
  /** The upstream's status. */
  readonly status: number;
  /** `IncomingMessage.rawHeaders` (flat, case kept). */
  readonly rawHeaders: readonly string[];
  /** The upstream's `ETag`, if any. */
  readonly etag: string | undefined;
  /** The upstream's `Vary`, joined, if any. */
  readonly vary: string | undefined;
}

/** How {@link responseHead} changes the upstream's head. */
export interface ResponseHeadOptions {
  /**
   * The body will be patched (or this is a bodiless response to a patched exchange): no
   * `Content-Length`, the `ETag` made weak and marked, no digest of the upstream's bytes.
   */
  readonly patched: boolean;
  /** Request header the response varies on, merged into `Vary`; `undefined`: `Vary` untouched. */
  readonly varyName: string | undefined;
  /** The exchange's `Range` and `If-Range` were not forwarded: `Accept-Ranges: none` (default `false`). */
  readonly rangesRefused?: boolean;
}

/**
 * The client's response head for an upstream response (flat `[name, value, …]`).
 *
 * - End-to-end headers as the upstream sent them (hop-by-hop dropped; `Set-Cookie` and every other
 *   header untouched, repeats and case kept), then `extra` (the shim's own, e.g. `Warning`). A 204's
 *   `Content-Length` is dropped: RFC 9110 §8.6 forbids one there (nginx drops it too), and a client or
 *   cache that believed it would read the next response's bytes as this one's body.
 * - `options.patched`: no `Content-Length` (the body goes chunked), `ETag` made weak and marked (SPEC §6;
 *   validators.ts `patchedEtag`), no digest of the upstream's bytes (`Content-Digest`, `Repr-Digest`, `Digest`, `Content-MD5`).
 * - `options.varyName`: merged into `Vary` with {@link mergeVary}.
 * - `options.rangesRefused`: the client's `Range` was not forwarded (SPEC §6), so `Accept-Ranges: none`
 *   replaces whatever the upstream advertised (RFC 9110 §14.3): this client cannot get ranges.
 * - A CORS response (the upstream sent `Access-Control-Allow-Origin`): the names in `extra` are added
 *   to `Access-Control-Expose-Headers` ({@link exposedNames}), one field line with the upstream's
 *   members first, so a browser client can read them.
 *
 * @param upstream The upstream head.
 * @param extra Headers the shim adds, flat.
 * @param options Patched, the `Vary` name, ranges refused ({@link ResponseHeadOptions}).
 * @returns The head to send, flat `[name, value, …]` (a new array): the upstream's end-to-end fields
 *   as adjusted above, then `extra`.
 * @throws Nothing.
 * @example
 * responseHead({ status: 200, rawHeaders: ['ETag', '"a"'], etag: '"a"', vary: undefined }, ['Warning', 'w'], { patched: true, varyName: 'V' })
 * // → ['ETag', 'W/"a+patched"', 'Vary', 'V', 'Warning', 'w']
 */
export function responseHead(
  upstream: UpstreamHead,
  extra: readonly string[],
  options: ResponseHeadOptions,
): string[] {
  const { patched, varyName, rangesRefused = false } = options;
  const flags =
    (patched ? PATCHED : 0) |
    (varyName === undefined ? 0 : VARIED) |
    (rangesRefused ? RANGES_REFUSED : 0) |
    (upstream.status === 204 ? NO_CONTENT : 0);
  const head = endToEndRawHeaders(upstream.rawHeaders, dropSets[flags]);
  if (patched && upstream.etag !== undefined) head.push('ETag', patchedEtag(upstream.etag));
  if (varyName !== undefined) head.push('Vary', mergeVary(upstream.vary, varyName));
  if (rangesRefused) head.push('Accept-Ranges', 'none');
  // Judged on the end-to-end head (an exposure the upstream made hop-by-hop is gone).
  const expose = extra.length === 0 ? undefined : exposedNames(head, extra);
  const out = expose === undefined ? head : exposingAlso(head, expose);
  for (const value of extra) out.push(value);
  return out;
}

/**
 * `head` with its `Access-Control-Expose-Headers` made one field line that lists the upstream's
 * members and then `names`: one line rather than two, since a cache that revalidates a stored response
 * replaces each of its fields with the 304's (RFC 9111 §3.2), and a second line of the shim's would
 * replace the upstream's list.
 * @param head A response head, flat.
 * @param names The names to add, joined (from {@link exposedNames}).
 * @returns A new flat head: the other fields in order, then the merged field.
 */
function exposingAlso(head: readonly string[], names: string): string[] {
  const out: string[] = [];
  const members: string[] = [];
  for (let i = 0; i < head.length; i += 2) {
    const name = head[i] as string;
    const value = head[i + 1] as string;
    if (name.toLowerCase() !== 'access-control-expose-headers') out.push(name, value);
    else {
      for (const member of value.split(',')) if (member.trim() !== '') members.push(member.trim());
    }
  }
  members.push(names);
  out.push('Access-Control-Expose-Headers', members.join(', '));
  return out;
}

/**
 * Names never worth exposing: those a CORS reader always sees (Fetch standard, "CORS-safelisted
 * response-header name"), and `Vary`, which is for caches, not for the page.
 */
const NOT_EXPOSED = new Set([
  'cache-control',
  'content-language',
  'content-length',
  'content-type',
  'expires',
  'last-modified',
  'pragma',
  'vary',
]);

/**
 * The names of the headers the shim adds that a cross-origin page must be allowed to read (Fetch
 * standard, CORS protocol: a response header outside the safelist reaches the page's script only when
 * `Access-Control-Expose-Headers` names it). Only for a response the upstream made readable across
 * origins (`Access-Control-Allow-Origin` present): the upstream owns the CORS policy, the shim only makes
 * the headers it and its plugins add (`Warning`, a plugin's signals) visible where the upstream's bodies
 * already are. `*` is no wildcard for a credentialed request, so names are listed even then.
 * @param rawHeaders The response head to be sent, before `extra` (flat, end-to-end fields only).
 * @param extra The shim's headers (flat `[name, value, …]`).
 * @returns The names to expose, joined with `, ` in the order first added, or `undefined` when the
 *   response is not a CORS response or every name is safelisted, `Vary` or already exposed.
 * @throws Nothing.
 * @example
 * exposedNames(['Access-Control-Allow-Origin', 'https://app.example'], ['Warning', '299 - "…"'])
 * // → 'Warning'
 */
export function exposedNames(rawHeaders: readonly string[], extra: readonly string[]): string | undefined {
  let cors = false;
  for (let i = 0; i < rawHeaders.length && !cors; i += 2) {
    cors = (rawHeaders[i] as string).toLowerCase() === 'access-control-allow-origin';
  }
  if (!cors) return undefined;
  const exposed = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() !== 'access-control-expose-headers') continue;
    for (const member of (rawHeaders[i + 1] as string).split(',')) exposed.add(member.trim().toLowerCase());
  }
  const names: string[] = [];
  for (let i = 0; i < extra.length; i += 2) {
    const name = extra[i] as string;
    const lower = name.toLowerCase();
    if (NOT_EXPOSED.has(lower) || exposed.has(lower)) continue;
    exposed.add(lower);
    names.push(name);
  }
  return names.length === 0 ? undefined : names.join(', ');
}

/**
 * The fields of an upstream's `103 Early Hints` to pass on (RFC 8297; RFC 9110 §15.2: a proxy MUST
 * forward the 1xx responses it did not ask for), as Node's `ServerResponse.writeEarlyHints` takes them:
 * end-to-end fields only but `Content-Length` (none in a 1xx: RFC 9110 §8.6), names lower-cased,
 * repeats as arrays (in linear time: an upstream may repeat a field as often as the parser's size
 * limit lets through, every field being read since fix 121).
 * @param rawHeaders The 103's `rawHeaders` (flat, as Node's `information` event gives them).
 * @returns The hints, or `undefined` when there is no `Link` (Node sends no 103 without one, and a 103
 *   without preload links tells the client nothing).
 * @throws Nothing.
 * @example
 * earlyHints(['Link', '</a.css>; rel=preload', 'Connection', 'keep-alive']) // → { link: '</a.css>; rel=preload' }
 */
export function earlyHints(rawHeaders: readonly string[]): Record<string, string | string[]> | undefined {
  // No prototype: a field named `constructor`, `toString` or `__proto__` is a field like any other
  // (with `{}` it found Object.prototype's member as its "earlier value" and sent it on).
  const hints: Record<string, string | string[]> = Object.create(null);
  const fields = endToEndRawHeaders(rawHeaders, dropSets[NO_CONTENT]);
  for (let i = 0; i < fields.length; i += 2) {
    const name = (fields[i] as string).toLowerCase();
    const value = fields[i + 1] as string;
    const prior = hints[name];
    if (prior === undefined) hints[name] = value;
    else if (Array.isArray(prior)) prior.push(value);
    else hints[name] = [prior, value];
  }
  return hints.link === undefined ? undefined : hints;
}
