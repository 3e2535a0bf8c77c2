/**
 * Hop-by-hop header handling (RFC 9110 §7.6.1): these describe one connection and are never
 * forwarded; neither is any header named in `Connection`.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { isHeaderName } from './raw-headers.ts';

/** Hop-by-hop header names (lower case), RFC 9110 §7.6.1 plus the de-facto `keep-alive` and `proxy-connection`. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

const NO_OPTIONS: readonly string[] = Object.freeze([]);
const KEEP_ALIVE: readonly string[] = Object.freeze(['keep-alive']);
const CLOSE: readonly string[] = Object.freeze(['close']);

/**
 * The connection options of a `Connection` header value (RFC 9110 §7.6.1): each list member trimmed
 * and lower-cased, empty members dropped — `close`, `keep-alive` and the names of hop-by-hop fields.
 * The common values (`keep-alive`, `close`) cost no splitting and no new array.
 * @param connection The header value(s), e.g. `Keep-Alive, X-Foo`.
 * @returns The options, e.g. `['keep-alive', 'x-foo']` (read-only: may be shared).
 * @throws Nothing.
 */
export function connectionOptions(connection: string | string[] | undefined): readonly string[] {
  if (connection === undefined) return NO_OPTIONS;
  if (connection === 'keep-alive') return KEEP_ALIVE;
  if (connection === 'close') return CLOSE;
  const text = Array.isArray(connection) ? connection.join(',') : connection;
  const out: string[] = [];
  for (const member of text.split(',')) {
    const option = member.trim().toLowerCase();
    if (option !== '') out.push(option);
  }
  return out;
}

/**
 * Names of the fields a `Connection` header value lists (RFC 9110 §7.6.1), lower-cased: its
 * {@link connectionOptions} but `close` and `keep-alive`.
 * @param connection The header value(s), e.g. `keep-alive, X-Foo`.
 * @returns The names, e.g. `['x-foo']` (read-only: may be shared).
 * @throws Nothing.
 */
export function connectionTokens(connection: string | string[] | undefined): readonly string[] {
  // The common values name nothing (an upstream sends `keep-alive` on every response).
  if (connection === undefined || connection === 'keep-alive' || connection === 'close') return NO_OPTIONS;
  return connectionOptions(connection).filter((o) => o !== 'close' && o !== 'keep-alive');
}

/**
 * A request header's value as the upstream will get it: `undefined` when the client's `Connection`
 * names it, since the forwarder drops every header `Connection` names (RFC 9110 §7.6.1;
 * `buildUpstreamHeaders`). The gates read what they admit a request on (the client version, the
 * credentials, a preflight's `Origin` and `Access-Control-Request-Method`) through it, so that what
 * they checked is what goes upstream: `Connection: Service-Client-Version, x-api-key` made the gates
 * admit a request that reached the upstream with neither.
 * @param headers Request headers (lower-cased names, as Node parses them).
 * @param name Lower-cased header name.
 * @returns `headers[name]`, or `undefined` when `Connection` names it.
 * @throws Nothing.
 * @example
 * forwardedValue({ 'x-api-key': 'k', connection: 'x-api-key' }, 'x-api-key'); // undefined
 */
export function forwardedValue(headers: IncomingHttpHeaders, name: string): string | string[] | undefined {
  const value = headers[name];
  if (value === undefined || headers.connection === undefined) return value;
  return connectionTokens(headers.connection).includes(name) ? undefined : value;
}

/**
 * Filters a flat raw header list (`[name, value, name, value, …]`, as `IncomingMessage.rawHeaders`)
 * down to the end-to-end headers, keeping names' case, order and repeats (e.g. several `Set-Cookie`).
 * @param rawHeaders Flat list of header names and values.
 * @param drop Extra lower-cased names to drop (e.g. `content-length` when the body changes).
 * @returns A new flat list.
 * @throws Nothing.
 */
export function endToEndRawHeaders(rawHeaders: readonly string[], drop?: ReadonlySet<string>): string[] {
  let listed: Set<string> | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (isHeaderName(rawHeaders[i] as string, 'connection')) {
      // Usually `keep-alive` alone, which names nothing to drop.
      for (const t of connectionTokens(rawHeaders[i + 1])) {
        listed ??= new Set();
        listed.add(t);
      }
    }
  }
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || listed?.has(lower) || drop?.has(lower)) continue;
    out.push(name, rawHeaders[i + 1] as string);
  }
  return out;
}
