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
