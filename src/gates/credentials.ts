/**
 * The credential gate (service document part 5; SPEC §3 step 5): the shim checks presence and form of
 * credentials; the upstream verifies them.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { parse as parseCookie } from 'cookie';
import { apiKeyOf } from '../core/api-key.ts';
import { ShimError } from '../core/errors.ts';
import type { Gate } from '../core/exchange.ts';
import { forwardedValue } from '../core/hop-by-hop.ts';
import { headerCount } from '../core/raw-headers.ts';

/** Where credentials may come from. */
export interface CredentialRules {
  /** Cookies that together form the cookie credential: all present and non-empty. */
  cookies: readonly string[];
  /** Lower-cased header name carrying an API key (non-empty). */
  apiKeyHeader: string;
}

/** Which credential admitted a request, or why none did. */
export type CredentialVerdict = 'api-key' | 'cookies' | { problem: string };

/**
 * Parses a `Cookie` request header as plain RFC 6265 §4.2.1 values with the `cookie` package, the
 * parser Express and cookie-parser use underneath (same version), so the shim reads a cookie exactly
 * as an Express/Nest upstream does: `name=value` pairs separated by `;`, whitespace trimmed, one pair
 * of surrounding double quotes removed, percent-decoding where valid, the first occurrence of a
 * repeated name wins. None of cookie-parser's JSON (`j:…`) or signed (`s:…`) readings, which made
 * `authtoken=j:{…}` count as absent: that is why the cookie-parser middleware is not used (issue 10;
 * test/security/cookie-json-confusion.test.ts). A cookie named `__proto__` is dropped by the parser.
 * @param header The `Cookie` header (Node joins repeated headers with `; `), or `undefined`.
 * @returns Name → value, on a prototype-less object (a cookie named `__proto__` is just a name).
 * @throws Nothing for a string or `undefined` (the parser keeps an undecodable value as sent).
 */
export function parseCookies(header: string | undefined): Readonly<Record<string, string | undefined>> {
  const jar: Record<string, string | undefined> = Object.create(null);
  return header === undefined ? jar : Object.assign(jar, parseCookie(header));
}

/**
 * The `Cookie` header as the upstream will get it (absent when `Connection` names it: {@link forwardedValue}).
 * @param headers Request headers (lower-cased names, as Node parses them).
 * @returns The header's value, or `undefined` when absent, named by `Connection`, or not one string.
 * @throws Nothing.
 */
function forwardedCookie(headers: IncomingHttpHeaders): string | undefined {
  const cookie = forwardedValue(headers, 'cookie');
  return typeof cookie === 'string' ? cookie : undefined;
}

/**
 * Checks a request's credentials.
 * @param req The request (its headers and raw headers).
 * @param cookies Parsed cookies ({@link parseCookies}); only consulted when no API key is sent.
 * @param rules Cookie names and API-key header.
 * @returns Which credential admitted the request, or the problem for the 401 message.
 * @throws Whatever `cookies` throws ({@link parseCookies} throws nothing); nothing of its own.
 */
export function checkCredentials(
  req: Pick<IncomingMessage, 'headers' | 'rawHeaders'>,
  cookies: () => Record<string, unknown>,
  rules: CredentialRules,
): CredentialVerdict {
  if (req.headers[rules.apiKeyHeader] !== undefined) {
    // Node joins a repeated unknown header with `, `, which would hide a duplicated key.
    if (headerCount(req.rawHeaders, rules.apiKeyHeader) > 1) {
      return { problem: `Send exactly one ${rules.apiKeyHeader} header.` };
    }
    if (apiKeyOf(req.headers, rules.apiKeyHeader) !== undefined) return 'api-key';
  }
  const jar = cookies();
  const missing = rules.cookies.filter((name) => {
    const v = Object.hasOwn(jar, name) ? jar[name] : undefined;
    return typeof v !== 'string' || v.trim() === '';
  });
  if (missing.length === 0) return 'cookies';
  return {
    problem: `Authenticate with the cookies ${rules.cookies.join(' and ')} or a non-empty ${rules.apiKeyHeader} header (missing or empty: ${missing.join(', ')}).`,
  };
}

/**
 * The credential a request carries, as one text, for per-consumer bounds (route labels, which keep
 * only a digest of it): the API key, else the auth cookies' values, else `undefined` (no credential:
 * public paths, preflights). The text is the secret itself, not a consumer's name: hash it before
 * keeping it, never log it.
 * @param req The request's headers.
 * @param rules Cookie names and API-key header.
 * @returns `key:<api key>`, `cookies:<value>;<value>`, or `undefined`.
 * @throws Nothing.
 * @example
 * credentialIdentity({ headers: { 'x-api-key': ' k ' } }, rules) // → 'key:k'
 */
export function credentialIdentity(
  req: Pick<IncomingMessage, 'headers'>,
  rules: CredentialRules,
): string | undefined {
  const key = apiKeyOf(req.headers, rules.apiKeyHeader);
  if (key !== undefined) return `key:${key}`;
  const jar = parseCookies(forwardedCookie(req.headers));
  const values = rules.cookies.map((name) => jar[name] ?? '');
  return values.every((v) => v.trim() === '') ? undefined : `cookies:${values.join(';')}`;
}

/**
 * The credential gate (SPEC §3 step 5; service document part 5): admits a request with exactly one
 * non-empty API-key header, or with every cookie of `rules.cookies` present and non-empty
 * ({@link checkCredentials}), and records which in the log field `credential` (`api-key` or
 * `cookies`, never the value). A repeated API-key header is refused whatever else is sent. Skipped (no check) for a request the public-path gate marked
 * unchecked (a CORS preflight or a public path, steps 2–3). Presence and form only: the upstream
 * verifies the credential.
 * @param rules Cookie names (`AUTH_COOKIES`) and the lower-cased API-key header (`API_KEY_HEADER`).
 * @returns The gate, to run after the client-version gate.
 * @throws {ShimError} (from the gate) `credentials` (401), its message naming what is missing.
 * @example
 * credentialGate({ cookies: ['authtoken', 'refreshtoken'], apiKeyHeader: 'x-api-key' })(req, state);
 */
export function credentialGate(rules: CredentialRules): Gate {
  return (req, state) => {
    if (state.unchecked) return;
    const cookies = () => parseCookies(forwardedCookie(req.headers));
    const verdict = checkCredentials(req, cookies, rules);
    if (typeof verdict === 'object') throw new ShimError('credentials', verdict.problem);
    state.exchange.logFields.credential = verdict;
  };
}
