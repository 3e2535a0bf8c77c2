/**
 * The syntax of a `Host` value (RFC 9110 §7.2), shared by the hygiene gate, which answers 400 to a
 * `Host` outside it, and the outgoing request, which drops a client's `X-Forwarded-Host` outside it.
 */
import { isIPv6 } from 'node:net';

/**
 * uri-host [ ":" port ] (RFC 9110 §7.2, RFC 3986 §3.2.2–3.2.3): a reg-name (unreserved, sub-delims,
 * `%XX`; IPv4 addresses and DNS names are reg-names too) or an IP-literal in brackets, then optional
 * digits after a colon.
 */
const HOST = /^(?:(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*|\[([^\]]*)\])(?::[0-9]*)?$/;
/** IPvFuture (RFC 3986 §3.2.2): `v` 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ). */
const IP_FUTURE = /^v[0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+$/;

/**
 * Whether `value` is a host and optional port as a `Host` header carries it (RFC 9110 §7.2):
 * `example.com`, `example.com:8080`, `127.0.0.1`, `[::1]:443`, `[v1.x]`. Nothing else: no path,
 * query, fragment, userinfo, space or markup (`evil.test/reset?to=x`, `a@evil.test`). Empty is
 * valid (RFC 9110 §7.2: a target URI without authority); callers that need a host check that apart.
 * @param value The header value (or one element of a list), without surrounding whitespace.
 * @returns `true` when it matches the grammar.
 * @throws Nothing.
 * @example
 * isHostSyntax('[::1]:8080') // → true
 * isHostSyntax('evil.test/reset?to=x') // → false
 */
export function isHostSyntax(value: string): boolean {
  const m = HOST.exec(value);
  if (m === null) return false;
  const literal = m[1];
  return literal === undefined || isIPv6(literal) || IP_FUTURE.test(literal);
}
