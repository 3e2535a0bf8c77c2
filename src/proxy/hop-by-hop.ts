/**
 * Hop-by-hop header handling (RFC 9110 §7.6.1): these describe one connection and are never
 * forwarded; neither is any header named in `Connection`.
 */

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

/**
 * Names listed in a `Connection` header value (RFC 9110 §7.6.1), lower-cased.
 * @param connection The header value(s), e.g. `keep-alive, X-Foo`.
 */
export function connectionTokens(connection: string | string[] | undefined): string[] {
  // The common values name nothing: no splitting (an upstream sends `keep-alive` on every response).
  if (connection === undefined || connection === 'keep-alive' || connection === 'close') return [];
  const text = Array.isArray(connection) ? connection.join(',') : connection;
  const out: string[] = [];
  for (const t of text.split(',')) {
    const name = t.trim().toLowerCase();
    if (name !== '' && name !== 'close' && name !== 'keep-alive') out.push(name);
  }
  return out;
}

/**
 * Filters a flat raw header list (`[name, value, name, value, …]`, as `IncomingMessage.rawHeaders`)
 * down to the end-to-end headers, keeping names' case, order and repeats (e.g. several `Set-Cookie`).
 * @param rawHeaders Flat list of header names and values.
 * @param drop Extra lower-cased names to drop (e.g. `content-length` when the body changes).
 * @returns A new flat list.
 */
export function endToEndRawHeaders(rawHeaders: readonly string[], drop?: ReadonlySet<string>): string[] {
  let listed: Set<string> | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length === 10 && name.toLowerCase() === 'connection') {
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
