/**
 * Recognises JSON media types in `Content-Type` header values (RFC 8259 §11 `application/json`; RFC 6839
 * §3.1 structured syntax suffix `+json`; RFC 9110 §8.3.1 media type syntax, parameters allowed).
 */

/** `application/json` or `application/<name>+json`, any case, optional parameters. */
const JSON_MEDIA_TYPE = /^[ \t]*application\/(?:[a-z0-9!#$&^_.+-]*\+)?json[ \t]*(?:;.*)?$/is;

/**
 * Whether a `Content-Type` value names JSON.
 * @param contentType The header value, or `undefined` when absent.
 * @returns `true` for `application/json`, `application/json; charset=utf-8`, `application/problem+json`,
 *   `Application/JSON`; `false` for `text/json`, `application/jsonp`, `application/json-seq`, absent.
 * @throws Nothing.
 * @example
 * isJsonMediaType('application/vnd.api+json; charset=utf-8'); // true
 */
export function isJsonMediaType(contentType: string | undefined): boolean {
  return contentType !== undefined && JSON_MEDIA_TYPE.test(contentType);
}

/**
 * The members of a header value read as a list: split at each `,` outside a quoted string (RFC 9110
 * §5.6.4, §5.6.6: a parameter value may quote a comma), each trimmed of spaces and tabs.
 */
function listMembers(value: string): string[] {
  const members: string[] = [];
  let from = 0;
  let quoted = false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (quoted && c === 0x5c)
      i++; // a quoted-pair: the next character is literal
    else if (c === 0x22) quoted = !quoted;
    else if (c === 0x2c && !quoted) {
      members.push(value.slice(from, i).trim());
      from = i + 1;
    }
  }
  members.push(value.slice(from).trim());
  return members;
}

/**
 * Whether a `Content-Type` value is several media types, one of them JSON: `application/json,
 * text/plain`, `application/json,`, `text/plain, application/json`. The field is a singleton (RFC 9110
 * §8.3), "sometimes incorrectly generated multiple times, resulting in a combined field value that
 * appears to be a list"; recipients then pick different members — Rack's `media_type`, Werkzeug's
 * `parse_options_header` and Rails take the first, others the last — so whether the body is JSON
 * depends on who reads it (docs/reliability.md fix 168).
 * @param contentType The header value, or `undefined` when absent.
 * @returns `true` for a list (a `,` outside quoted strings) with a member {@link isJsonMediaType}
 *   accepts; `false` for one media type, `application/json; x="a,b"` among them.
 * @throws Nothing.
 * @example
 * isJsonInMediaTypeList('application/json, text/plain'); // true
 * isJsonInMediaTypeList('application/json; charset=utf-8'); // false
 */
export function isJsonInMediaTypeList(contentType: string | undefined): boolean {
  if (contentType === undefined || !contentType.includes(',')) return false;
  const members = listMembers(contentType);
  return members.length > 1 && members.some((member) => JSON_MEDIA_TYPE.test(member));
}
