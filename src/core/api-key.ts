/**
 * The one rule for the API key a request carries (SPEC §3 step 5; service document part 5), spoken by
 * the credential gate (gates/credentials.ts), which admits on it, and by plugins that identify a caller
 * by its key, so that they never disagree on whether a key was sent.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { forwardedValue } from './hop-by-hop.ts';

/**
 * The API key a request carries, by the one rule that admits it (SPEC §3 step 5: `API_KEY_HEADER`
 * non-empty; service document part 5): the header's value with surrounding whitespace removed
 * (`String.prototype.trim`, so also a no-break space or other Unicode space, which HTTP's field parsing
 * keeps, RFC 9110 §5.5). Shared by the credential gate and everything that identifies a caller by its
 * key, so that they never disagree on whether a key was sent.
 * @param headers Request headers (lower-cased names, as Node parses them).
 * @param apiKeyHeader Lower-cased header name (`API_KEY_HEADER`).
 * @returns The trimmed key, or `undefined` when the header is absent, not one string, only whitespace,
 *   or named by `Connection` (the forwarder drops it: {@link forwardedValue}).
 * @throws Nothing.
 * @example
 * apiKeyOf({ 'x-api-key': ' k ' }, 'x-api-key'); // 'k'
 * apiKeyOf({ 'x-api-key': '\u00a0' }, 'x-api-key'); // undefined
 */
export function apiKeyOf(headers: IncomingHttpHeaders, apiKeyHeader: string): string | undefined {
  const key = forwardedValue(headers, apiKeyHeader);
  if (typeof key !== 'string') return undefined;
  const trimmed = key.trim();
  return trimmed === '' ? undefined : trimmed;
}
