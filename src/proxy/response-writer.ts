/**
 * Writing the upstream's response to the client (SPEC §4, §6): the response head for a streamed
 * or a patched body, and `Vary` merging. The patch pumps (response-patch.ts) send a patched
 * response's head only with its first body byte, so that an upstream dying before any byte can still
 * be answered with a 502.
 */
import type { IncomingMessage } from 'node:http';
import { endToEndRawHeaders } from './hop-by-hop.ts';

/**
 * Adds a header name to a `Vary` value (RFC 9110 §12.5.5): no duplicate (compared case-insensitively),
 * `*` kept as `*` (it already varies on everything), empty members dropped.
 * @param upstream The upstream's `Vary` (Node joins repeated fields with `, `), or `undefined`.
 * @param name The request header the response also depends on, e.g. `Service-Client-Version`.
 * @returns The merged value, e.g. `Accept-Encoding, Service-Client-Version`.
 * @example
 * mergeVary('accept-encoding', 'Service-Client-Version') // → 'accept-encoding, Service-Client-Version'
 * mergeVary('*', 'Service-Client-Version') // → '*'
 */
export function mergeVary(upstream: string | undefined, name: string): string {
  if (upstream === undefined) return name;
  const members = upstream
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m !== '');
  if (members.includes('*')) return '*';
  const lower = name.toLowerCase();
  if (!members.some((m) => m.toLowerCase() === lower)) members.push(name);
  return members.join(', ');
}

/**
 * A strong entity tag made weak (RFC 9110 §8.8.1): a patched body is no longer byte-identical, but
 * still the same resource state; a weak tag stays weak.
 * @example weakEtag('"v1"') // → 'W/"v1"'
 */
export function weakEtag(etag: string): string {
  return etag.startsWith('W/') ? etag : `W/${etag}`;
}

/**
 * One header of a received message, read from its raw header list: exactly `message.headers[name]`,
 * without building the parsed headers object, which Node does lazily on first access and a
 * pass-through never needs otherwise (about 1 µs per response of 7 headers). A name that occurs more
 * than once (and `set-cookie`, always an array) is left to `message.headers`, so Node's own rules
 * (first kept, joined, or listed) decide.
 * @param message The upstream's response (`rawHeaders`, and `headers` for repeated names).
 * @param lowerName The header name, lower case.
 * @returns The value as `message.headers` has it, `undefined` when absent.
 * @example
 * headerValue(upstreamRes, 'vary') // → 'Accept-Encoding' for a response with `Vary: Accept-Encoding`
 */
export function headerValue(
  message: Pick<IncomingMessage, 'rawHeaders' | 'headers'>,
  lowerName: string,
): string | string[] | undefined {
  if (lowerName === 'set-cookie') return message.headers[lowerName]; // always an array in Node's view
  const raw = message.rawHeaders;
  let found: number | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length !== lowerName.length || name.toLowerCase() !== lowerName) continue;
    if (found !== undefined) return message.headers[lowerName];
    found = i + 1;
  }
  return found === undefined ? undefined : raw[found];
}

const DROP_VARY: ReadonlySet<string> = new Set(['vary']);
const DROP_ON_PATCH: ReadonlySet<string> = new Set(['content-length', 'etag']);
const DROP_ON_PATCH_AND_VARY: ReadonlySet<string> = new Set(['content-length', 'etag', 'vary']);

/** What {@link responseHead} needs about the upstream's response. */
export interface UpstreamHead {
  /** `IncomingMessage.rawHeaders` (flat, case kept). */
  readonly rawHeaders: readonly string[];
  /** The upstream's `ETag`, if any. */
  readonly etag: string | undefined;
  /** The upstream's `Vary`, joined, if any. */
  readonly vary: string | undefined;
}

/**
 * The client's response head for an upstream response (flat `[name, value, …]`).
 *
 * - End-to-end headers as the upstream sent them (hop-by-hop dropped; `Set-Cookie` and every other
 *   header untouched, repeats and case kept), then `extra` (the shim's own, e.g. `Warning`).
 * - `patched`: no `Content-Length` (the body goes chunked), strong `ETag` made weak (SPEC §6).
 * - `varyName`: merged into `Vary` with {@link mergeVary}.
 *
 * @param upstream The upstream head.
 * @param extra Headers the shim adds, flat.
 * @param patched The body will be patched (or this is a bodiless response to a patched exchange).
 * @param varyName Request header the response varies on (`undefined`: `Vary` untouched).
 */
export function responseHead(
  upstream: UpstreamHead,
  extra: readonly string[],
  patched: boolean,
  varyName: string | undefined,
): string[] {
  const drop = patched
    ? varyName === undefined
      ? DROP_ON_PATCH
      : DROP_ON_PATCH_AND_VARY
    : varyName === undefined
      ? undefined
      : DROP_VARY;
  const head = endToEndRawHeaders(upstream.rawHeaders, drop);
  if (patched && upstream.etag !== undefined) head.push('ETag', weakEtag(upstream.etag));
  if (varyName !== undefined) head.push('Vary', mergeVary(upstream.vary, varyName));
  for (const value of extra) head.push(value);
  return head;
}
