/**
 * Credential presence check of the reference backend (service document §5): the session cookies
 * `authtoken` and `refreshtoken`, both non-empty, or a non-empty `x-api-key` header. Like the shim, the
 * backend checks presence only; any non-empty value is accepted.
 */
import type { IncomingHttpHeaders } from 'node:http';

/** Cookies that together form the session credential (service document §5). */
export const SESSION_COOKIES: readonly string[] = Object.freeze(['authtoken', 'refreshtoken']);

/** Header carrying an API key (service document §5). */
export const API_KEY_HEADER = 'x-api-key';

/**
 * Parses a `Cookie` request header (RFC 6265 §4.2.1: `name=value` pairs separated by `;`).
 * Pairs without `=` or with an empty name are skipped; the first occurrence of a name wins (as in the
 * `cookie` package); a value in double quotes is unquoted. Values are not percent-decoded.
 *
 * @param header The raw header value (Node joins repeated `Cookie` headers with `; `), or `undefined`.
 * @returns Cookie name → value.
 * @example
 * parseCookieHeader('authtoken=a; refreshtoken="b"'); // Map { 'authtoken' => 'a', 'refreshtoken' => 'b' }
 */
export function parseCookieHeader(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  if (header === undefined || header === '') return cookies;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if (eq === -1) continue;
    const name = pair.slice(0, eq).trim();
    if (name === '' || cookies.has(name)) continue;
    let value = pair.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    cookies.set(name, value);
  }
  return cookies;
}

/**
 * Whether a request carries credentials in one of the two accepted forms (service document §5).
 * @param headers Request headers as Node parsed them (lower-case names).
 * @returns `true` for a non-empty `x-api-key`, or when every cookie of {@link SESSION_COOKIES} is present
 *   and non-empty.
 */
export function hasCredentials(headers: IncomingHttpHeaders): boolean {
  const apiKey = headers[API_KEY_HEADER];
  if (typeof apiKey === 'string' && apiKey.trim() !== '') return true;
  const cookie = headers.cookie;
  if (cookie === undefined) return false;
  const cookies = parseCookieHeader(cookie);
  return SESSION_COOKIES.every((name) => (cookies.get(name) ?? '') !== '');
}
