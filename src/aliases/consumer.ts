/**
 * Who sent an aliased request (issue 11 item 1), without ever keeping a credential: the identity a
 * gateway in front set (`CONSUMER_HEADER`), else a keyed fingerprint of the API key, else `session` for
 * a cookie session. Plus the User-Agent's product token (RFC 9110 §10.1.5). Every value is bounded and
 * restricted to visible ASCII so that no header can blow up the usage table, the log or a metric label.
 */
import { createHmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { apiKeyOf } from '../core/api-key.ts';

/** Longest consumer id or User-Agent token kept, in characters. */
export const MAX_CONSUMER_CHARS = 64;

/**
 * Characters of a consumer header's value read at most (its first ones): trimming and sanitising then
 * cost the same whatever the header's length (up to Node's 16 KiB head), and four times
 * {@link MAX_CONSUMER_CHARS} leaves room for whitespace around the longest id kept.
 */
const MAX_ID_INPUT_CHARS = MAX_CONSUMER_CHARS * 4;

/**
 * Characters of a User-Agent read at most (its first ones) to find the first product token: the regex's
 * work stays bounded whatever the header's length, and a `product/version` token, cut to
 * {@link MAX_CONSUMER_CHARS} once found, lies well inside it.
 */
const MAX_USER_AGENT_INPUT_CHARS = 512;

/** Consumer id of requests admitted by a cookie session. */
export const SESSION_CONSUMER = 'session';
/** Consumer id of API-key requests when no `CONSUMER_FINGERPRINT_KEY` is configured. */
export const UNKEYED_CONSUMER = 'api-key';

/** How consumers are identified. */
export interface ConsumerRules {
  /** Lower-cased identity header set by a gateway (`CONSUMER_HEADER`). */
  consumerHeader?: string;
  /** HMAC key (`CONSUMER_FINGERPRINT_KEY`); unset → API-key consumers are {@link UNKEYED_CONSUMER}. */
  fingerprintKey?: string;
  /** Lower-cased API key header (core `API_KEY_HEADER`). */
  apiKeyHeader: string;
}

/**
 * Keeps the characters that are safe in a log, a JSON document and a Prometheus label: visible ASCII
 * except `"`, `\` and the separators `,;` (a gateway id such as `team-a/ci@example.com` stays readable);
 * others become `_`. Cut to {@link MAX_CONSUMER_CHARS}.
 * @param value A header value as received, of any length (only its first 256 characters are read).
 * @returns The cleaned value, or `undefined` when nothing is left.
 * @throws Nothing.
 */
export function sanitizeId(value: string): string | undefined {
  const cleaned = value
    .slice(0, MAX_ID_INPUT_CHARS)
    .trim()
    .replace(/[^\x21-\x7e]|["\\,;]/g, '_')
    .slice(0, MAX_CONSUMER_CHARS);
  return cleaned === '' ? undefined : cleaned;
}

/** First value of a header, or `undefined`. */
function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The first 16 hex digits (64 bits) of HMAC-SHA-256(key, apiKey): stable across replicas and restarts
 * for one key, not reversible without the key, and short enough for a table.
 * @param fingerprintKey The HMAC key (`CONSUMER_FINGERPRINT_KEY`).
 * @param apiKey The trimmed API key.
 * @returns 16 lower-case hex digits.
 * @throws Nothing for string arguments.
 * @example
 * keyFingerprint('k'.repeat(16), 'secret-api-key'); // e.g. '3f9c0d2a1b7e4c55'
 */
export function keyFingerprint(fingerprintKey: string, apiKey: string): string {
  return createHmac('sha256', fingerprintKey).update(apiKey).digest('hex').slice(0, 16);
}

/**
 * The consumer id of a request.
 * 1. `CONSUMER_HEADER` set and present with a usable value → that value, {@link sanitizeId sanitised};
 * 2. an API key present by the credential gate's own rule (`apiKeyOf` in core/api-key.ts: not
 *    only whitespace, a no-break space included) → {@link keyFingerprint} of the trimmed key with
 *    `CONSUMER_FINGERPRINT_KEY`, or {@link UNKEYED_CONSUMER} without one (the key itself is never used
 *    as an id);
 * 3. otherwise (the credential gate admitted a cookie session) → {@link SESSION_CONSUMER}.
 * @param headers Request headers (lower-cased names).
 * @param rules The consumer header, the fingerprint key and the API-key header.
 * @returns One of three forms: the gateway's id, {@link sanitizeId sanitised} (`"\,;` and what is not
 *   visible ASCII become `_`; at most {@link MAX_CONSUMER_CHARS} characters; e.g. `team-robotics`); 16 hex
 *   digits, the key's fingerprint
 *   (e.g. `3f9c0d2a1b7e4c55`), or `api-key` ({@link UNKEYED_CONSUMER}) without a fingerprint key; or
 *   `session` ({@link SESSION_CONSUMER}). Never the credential itself.
 * @throws Nothing.
 * @example consumerOf({ 'x-api-key': 'k' }, { apiKeyHeader: 'x-api-key' }) // → 'api-key'
 */
export function consumerOf(headers: IncomingHttpHeaders, rules: ConsumerRules): string {
  if (rules.consumerHeader !== undefined) {
    const id = first(headers[rules.consumerHeader]);
    const clean = id === undefined ? undefined : sanitizeId(id);
    if (clean !== undefined) return clean;
  }
  const apiKey = apiKeyOf(headers, rules.apiKeyHeader);
  if (apiKey !== undefined) {
    return rules.fingerprintKey === undefined
      ? UNKEYED_CONSUMER
      : keyFingerprint(rules.fingerprintKey, apiKey);
  }
  return SESSION_CONSUMER;
}

/**
 * Whether a request the upstream answered with `status` counts as alias use: in the usage table
 * (`GET /aliases/usage`, `shim_alias_consumers`), in `shim_alias_uses_total{direction="request"}` and in
 * the brownout counters. The shim admits any non-empty API key and leaves verifying it to the upstream
 * (SPEC §3 step 5, service document part 5), so a request is evidence of a consumer only once the
 * upstream has answered it without refusing its credentials:
 * - 2xx, 3xx → counts: the upstream served it;
 * - 4xx other than 401 and 403 → counts: the upstream knew the caller and refused the request's
 *   content or state (400, 404, 409, …; a NestJS upstream runs its guards before its validation pipes).
 *   In a brownout, the upstream's 400 `property tags should not exist` is the very breakage being
 *   rehearsed;
 *   A 4xx the upstream sends before it checks credentials (a rate limiter's 429 in front of its
 *   authentication) counts too, made-up key or not: docs/removing-the-alias-layer.md says so;
 * - 401, 403 → do not count: the upstream refused the credentials (RFC 9110 §15.5.2), or refused the
 *   caller (§15.5.4) — which is also what a NestJS guard that returns `false` answers for a made-up key
 *   (the service document, part 5, does not say which the service sends). Anyone can provoke either;
 *   a real consumer's refused requests are few beside its served ones;
 * - 5xx → does not count: the upstream failed before it could say anything about the caller (a crash,
 *   its own gateway's 502/503), so a made-up key would count whenever the upstream is in trouble;
 * - no answer at all (the shim's 502/504, a client that went away, a request the shim refused) never
 *   reaches this test.
 * The rule of the route labels (docs/operations.md, "Route labels", rule 1) is stricter (2xx/3xx only)
 * because any 4xx path would teach a label; here the consumer is what must be real, not the path.
 * @param status The upstream response's status code.
 * @returns `true` when the request counts as alias use.
 * @throws Nothing.
 * @example
 * countsAsUse(200); // true
 * countsAsUse(401); // false
 * countsAsUse(403); // false
 */
export function countsAsUse(status: number): boolean {
  return status < 500 && status !== 401 && status !== 403;
}

/** `product` or `product/version` (RFC 9110 §10.1.5; tokens per §5.6.2). */
const PRODUCT = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+)(?:\/([!#$%&'*+.^_`|~0-9A-Za-z-]+))?/;

/**
 * The User-Agent's first product token, `product/version` (e.g. `kleinkram-cli/0.59.0` from
 * `kleinkram-cli/0.59.0 python-requests/2.31`), cut to {@link MAX_CONSUMER_CHARS}; `unknown` when
 * absent or not a token.
 * @param userAgent The `User-Agent` header (only its first 512 characters are read), or `undefined`.
 * @returns The token, e.g. `kleinkram-cli/0.59.0`, or `unknown`.
 * @throws Nothing.
 */
export function userAgentProduct(userAgent: string | undefined): string {
  const m =
    userAgent === undefined ? null : PRODUCT.exec(userAgent.slice(0, MAX_USER_AGENT_INPUT_CHARS).trimStart());
  if (!m) return 'unknown';
  return (m[2] === undefined ? m[1]! : `${m[1]}/${m[2]}`).slice(0, MAX_CONSUMER_CHARS);
}
