/**
 * Which validator a legacy client's 304 carries (SPEC §6: "a 304 carries the validator the 200
 * carried"). A patched 200 carries the upstream's entity tag made weak (`W/"x"`); an unpatched one (a
 * body that is not JSON, or one served during a brownout) carries the upstream's own (`"x"`). A 304
 * usually has no `Content-Type`, so its body's kind cannot tell which 200 the client holds: the
 * client's `If-None-Match` can, since the client sends the tag it was given.
 */

/**
 * The entity tags of an `If-None-Match` or `If-Match` value, as written (RFC 9110 §8.8.3, §13.1.2):
 * `W/"x"` or `"x"` each, in order; `*` as `*`. Commas inside the quotes belong to the tag. A malformed
 * member ends the list (what was read before it is returned).
 * @param value The header value (Node joins repeated fields with `, `), or `undefined`.
 * @returns The tags, e.g. `['W/"a"', '"b,c"']` for `W/"a", "b,c"`.
 */
export function entityTags(value: string | undefined): string[] {
  const tags: string[] = [];
  if (value === undefined) return tags;
  let at = 0;
  for (;;) {
    while (at < value.length && (value[at] === ' ' || value[at] === '\t' || value[at] === ',')) at++;
    if (at >= value.length) return tags;
    if (value[at] === '*') {
      tags.push('*');
      at++;
      continue;
    }
    const start = at;
    if (value.startsWith('W/', at)) at += 2;
    if (value[at] !== '"') return tags;
    const close = value.indexOf('"', at + 1);
    if (close === -1) return tags;
    tags.push(value.slice(start, close + 1));
    at = close + 1;
  }
}

/**
 * Whether a 304 answers a client that holds the response unpatched: the 304's entity tag is strong
 * (`"x"`) and the client's `If-None-Match` names it in that strong form and not as `W/"x"` (the form
 * of the patched 200). Then the 304 keeps the strong tag, as the 200 the client holds carried it.
 * @param ifNoneMatch The client's `If-None-Match`.
 * @param etag The 304's `ETag`.
 * @example
 * revalidatesUnpatched('"p1"', '"p1"'); // → true: an image, say, never patched
 * revalidatesUnpatched('W/"v1"', '"v1"'); // → false: the patched JSON the client holds
 */
export function revalidatesUnpatched(ifNoneMatch: string | undefined, etag: string | undefined): boolean {
  if (etag === undefined || !etag.startsWith('"')) return false;
  const tags = entityTags(ifNoneMatch);
  return tags.includes(etag) && !tags.includes(`W/${etag}`);
}
