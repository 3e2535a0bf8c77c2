/**
 * Public paths and CORS preflights (SPEC §3 steps 2 and 3): requests that are forwarded without the
 * version and credential gates.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Gate } from '../core/exchange.ts';
import { hasRequestBody } from '../core/framing.ts';
import { forwardedValue } from '../core/hop-by-hop.ts';

/** Public path rules as read from `PUBLIC_PATHS`. */
export interface PublicPaths {
  /** Exact paths; one trailing slash is also accepted. Case-sensitive. */
  exact: readonly string[];
  /** Prefixes (entries that ended in `/*`, kept with their trailing `/`). */
  prefixes: readonly string[];
}

/**
 * Builds the public-path predicate.
 * @param rules Exact entries and prefixes.
 * @returns `(path) => boolean` for a raw path without the query (already hygiene-checked, so it has
 * no dot segments or encoded slashes that could step out of a prefix).
 * @throws Nothing (nor does the predicate).
 * @example
 * const isPublic = publicPathMatcher({ exact: ['/api/health'], prefixes: ['/static/'] });
 * isPublic('/api/health/'); // true
 * isPublic('/api/healthz'); // false
 */
export function publicPathMatcher(rules: PublicPaths): (path: string) => boolean {
  const exact = new Set<string>();
  for (const p of rules.exact) {
    const bare = p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p;
    exact.add(bare);
    exact.add(bare === '/' ? bare : `${bare}/`);
  }
  const prefixes = [...rules.prefixes];
  return (path) => {
    if (exact.has(path)) return true;
    for (const prefix of prefixes) if (path.startsWith(prefix)) return true;
    return false;
  };
}

/**
 * Whether a request is a CORS preflight (Fetch standard, "CORS-preflight request"): `OPTIONS` with
 * `Origin` and `Access-Control-Request-Method`, and no body. Browsers send neither cookies nor custom headers on a
 * preflight, so it cannot pass the version and credential gates and is forwarded unchecked.
 * @param method The request method as Node parsed it (upper case).
 * @param headers The request's parsed headers (lower-cased names).
 * @returns `true` for a preflight.
 * @throws Nothing.
 */
export function isPreflight(method: string, headers: IncomingHttpHeaders): boolean {
  return (
    method === 'OPTIONS' &&
    // Both as the upstream will get them: a `Connection` naming one drops it (forwardedValue).
    forwardedValue(headers, 'origin') !== undefined &&
    forwardedValue(headers, 'access-control-request-method') !== undefined &&
    // A preflight never has a body (Fetch standard); one that does is not a browser's and is checked.
    // The forwarder's own rule, so that the two never disagree (`Content-Length: 00` is no body).
    !hasRequestBody(headers)
  );
}

/**
 * The gate for SPEC §3 steps 2 and 3: marks a CORS preflight ({@link isPreflight}: `state.unchecked =
 * 'preflight'`) and, otherwise, a request to a public path ({@link publicPathMatcher} on the path
 * without the query: `'public'`) as unchecked, so that the client-version and credential gates let
 * it pass and it is forwarded as it is. Preflights are marked whatever their path.
 * @param rules `PUBLIC_PATHS`: exact paths and prefixes.
 * @returns The gate, to run after hygiene and before the client-version gate. Never throws.
 * @example
 * publicPathGate({ exact: ['/api/health'], prefixes: [] })(req, state); // GET /api/health → state.unchecked === 'public'
 */
export function publicPathGate(rules: PublicPaths): Gate {
  const isPublic = publicPathMatcher(rules);
  return (req, state) => {
    if (isPreflight(state.exchange.method, req.headers)) state.unchecked = 'preflight';
    else if (isPublic(state.exchange.path)) state.unchecked = 'public';
  };
}
