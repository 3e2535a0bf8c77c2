/**
 * The deprecation signals a legacy client receives when it used an alias (SPEC §5): one `Warning` per
 * alias, as the Kubernetes API server sends for deprecated APIs, and the configured `Deprecation`
 * (RFC 9745), `Sunset` (RFC 8594), `Link rel="deprecation"` (RFC 9745 §3) and `Link rel="sunset"`
 * (RFC 8594 §3) headers.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { AliasSettings } from './config.ts';

/** Total bytes of `Warning` values one response may carry; further warnings are left out. */
export const WARNING_BUDGET = 4096;

/**
 * Text made safe inside a `Warning` value's quoted string (RFC 9111 §5.5; qdtext, RFC 9110 §5.6.4):
 * only visible ASCII and space are kept, and `"` and `\` are dropped rather than escaped.
 * @param text Any text, e.g. an alias name or a URL.
 * @returns The text without the characters a quoted string cannot hold.
 * @throws Nothing.
 * @example warningText('t"ags\n') // → 'tags'
 */
export function warningText(text: string): string {
  return text.replace(/[^\x20-\x7e]|["\\]/g, '');
}

/**
 * The `Warning` value for one alias (RFC 9111 §5.5 syntax: code 299 "miscellaneous persistent warning",
 * agent `-`, quoted text).
 * @param alias The deprecated name.
 * @param canonical The name to use instead.
 * @returns The field value, both names passed through {@link warningText}.
 * @throws Nothing.
 * @example
 * aliasWarning('tags', 'metadata'); // '299 - "tags is deprecated; use metadata"'
 */
export function aliasWarning(alias: string, canonical: string): string {
  // Names come from the alias table; keep the quoted-string valid whatever a future row holds.
  return `299 - "${warningText(alias)} is deprecated; use ${warningText(canonical)}"`;
}

/**
 * The headers sent once per response that used an alias, from the configuration.
 * @param settings `deprecatedAt` → `Deprecation: @<epoch seconds>` (RFC 9745 §2.1, a Structured Field
 *   Date); `sunsetAt` → `Sunset: <IMF-fixdate>` (RFC 8594 §3, an HTTP-date); `docsUrl` →
 *   `Link: <url>; rel="deprecation"` (RFC 9745 §3); `sunsetPolicyUrl` → `Link: <url>; rel="sunset"`
 *   (RFC 8594 §3: a link to the sunset policy), a separate field beside the deprecation link.
 * @returns `[name, value]` pairs in that order; empty when nothing is configured.
 * @throws Nothing.
 */
export function deprecationHeaders(
  settings: Pick<AliasSettings, 'deprecatedAt' | 'sunsetAt' | 'docsUrl' | 'sunsetPolicyUrl'>,
): Array<[name: string, value: string]> {
  const headers: Array<[string, string]> = [];
  if (settings.deprecatedAt !== undefined) {
    headers.push(['Deprecation', `@${Math.floor(settings.deprecatedAt.getTime() / 1000)}`]);
  }
  if (settings.sunsetAt !== undefined) headers.push(['Sunset', settings.sunsetAt.toUTCString()]);
  if (settings.docsUrl !== undefined) headers.push(['Link', `<${settings.docsUrl}>; rel="deprecation"`]);
  if (settings.sunsetPolicyUrl !== undefined) {
    headers.push(['Link', `<${settings.sunsetPolicyUrl}>; rel="sunset"`]);
  }
  return headers;
}

/**
 * Leaves the upstream's own `Deprecation` and `Sunset` alone: drops the layer's from `headers` (in place)
 * where the upstream's response carries the field. Each holds one value (RFC 9745 §2.1: a Structured
 * Field Item; RFC 8594 §3: one HTTP-date), and a second field line makes the combined value invalid
 * (`@1700000000, @1767225600`), which a recipient must ignore (RFC 9651 §4.2; RFC 9110 §5.3): both
 * signals were lost. The upstream's field is about the resource it serves; the alias's deprecation is
 * still told by its `Warning` and `Link`.
 * @param headers The exchange's added response headers (`[name, value]`, names as
 *   {@link deprecationHeaders} writes them).
 * @param upstream The upstream response's headers (Node's, lower-cased names).
 * @throws Nothing.
 * @example
 * const added: Array<[string, string]> = [['Deprecation', '@1767225600'], ['Link', '<https://d>; rel="deprecation"']];
 * yieldToUpstreamDates(added, { deprecation: '@1700000000' }); // added → [['Link', '<https://d>; rel="deprecation"']]
 */
export function yieldToUpstreamDates(
  headers: Array<[name: string, value: string]>,
  upstream: IncomingHttpHeaders,
): void {
  for (let k = headers.length - 1; k >= 0; k--) {
    const name = headers[k]![0];
    if (
      (name === 'Deprecation' && upstream.deprecation !== undefined) ||
      (name === 'Sunset' && upstream.sunset !== undefined)
    )
      headers.splice(k, 1);
  }
}
