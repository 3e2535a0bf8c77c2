/**
 * The credential gate (service document part 5; SPEC §3 step 5): the shim checks presence and form of
 * credentials; the upstream verifies them.
 */
import type { IncomingMessage } from 'node:http';
import cookieParser from 'cookie-parser';
import type { RequestHandler } from 'express';
import { ShimError } from '../proxy/errors.ts';
import { stateOf } from '../proxy/exchange.ts';

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
 * Counts how often a header name occurs in `rawHeaders` (case-insensitive): Node joins a repeated
 * unknown header with `, `, which would hide a duplicated credential.
 */
export function headerCount(rawHeaders: readonly string[], lowerName: string): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length === lowerName.length && name.toLowerCase() === lowerName) n++;
  }
  return n;
}

/**
 * Checks a request's credentials.
 * @param req The request (its headers and raw headers).
 * @param cookies Parsed cookies (cookie-parser: the first occurrence of a repeated name wins, as in
 * the upstream's own cookie parser); only consulted when no API key is sent.
 * @param rules Cookie names and API-key header.
 * @returns Which credential admitted the request, or the problem for the 401 message.
 */
export function checkCredentials(
  req: Pick<IncomingMessage, 'headers' | 'rawHeaders'>,
  cookies: () => Record<string, unknown>,
  rules: CredentialRules,
): CredentialVerdict {
  const key = req.headers[rules.apiKeyHeader];
  if (key !== undefined) {
    if (headerCount(req.rawHeaders, rules.apiKeyHeader) > 1) {
      return { problem: `Send exactly one ${rules.apiKeyHeader} header.` };
    }
    if (typeof key === 'string' && key.trim() !== '') return 'api-key';
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

/** Express middleware: 401 unless {@link checkCredentials} admits the request. */
export function credentialGate(rules: CredentialRules): RequestHandler {
  const parse = cookieParser();
  return (req, res, next) => {
    const state = stateOf(res);
    if (state.unchecked) return next();
    const cookies = () => {
      if (req.cookies === undefined) parse(req, res, () => {});
      return (req.cookies ?? {}) as Record<string, unknown>;
    };
    const verdict = checkCredentials(req, cookies, rules);
    if (typeof verdict === 'object') throw new ShimError('credentials', verdict.problem);
    state.exchange.logFields.credential = verdict;
    next();
  };
}
