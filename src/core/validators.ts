/**
 * Entity tags of patched responses (SPEC §6; RFC 9110 §8.8.3). A response a hook patches is another
 * representation than the upstream's: its tag must differ from the upstream's under the weak comparison
 * that `If-None-Match` uses (RFC 9110 §13.1.2, §8.8.3.3: representations selected by content negotiation
 * have distinct tags). `W/"x"` and `"x"` are weakly equal, and browsers revalidate a stored response of
 * another `Vary` variant with its tag: Chromium (150), holding a current client's `"x"` and asked by a
 * legacy client of the same page (`Vary: Service-Client-Version` mismatch), sends `If-None-Match: "x"`
 * and, on the upstream's 304, serves the stored body to the legacy client, and the reverse. So a patched
 * response carries the upstream's tag weakened **and marked** (`W/"x+patched"`), and a patching
 * exchange's `If-None-Match` goes upstream with the marked tags unmarked; on a `GET` or `HEAD` every other
 * tag is dropped (those name a representation this client is not served: another variant's, or an
 * unpatched one), on a write every tag goes as sent too (a precondition is never made weaker).
 */

/** Appended to the opaque part of a patched response's entity tag. */
const PATCHED_MARK = '+patched';

/**
 * The entity tags of an `If-None-Match` or `If-Match` value, as written (RFC 9110 §8.8.3, §13.1.2):
 * `W/"x"` or `"x"` each, in order; `*` as `*`. Commas inside the quotes belong to the tag. A malformed
 * member ends the list (what was read before it is returned).
 * @param value The header value (Node joins repeated fields with `, `), or `undefined`.
 * @returns The tags, e.g. `['W/"a"', '"b,c"']` for `W/"a", "b,c"`.
 * @throws Nothing.
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
 * The entity tag of a patched response: the upstream's made weak (its bytes differ, RFC 9110 §8.8.1)
 * and marked, so that it is weakly equal to no tag the upstream sends (RFC 9110 §8.8.3).
 * @param etag The upstream's `ETag`, strong or weak.
 * @returns `W/"<opaque>+patched"`; a value that is no quoted tag is only made weak. Never throws.
 * @example patchedEtag('"v1"') // → 'W/"v1+patched"'
 * @example patchedEtag('W/"419-abc"') // → 'W/"419-abc+patched"'
 */
export function patchedEtag(etag: string): string {
  const opaque = etag.startsWith('W/') ? etag.slice(2) : etag;
  if (opaque.length < 2 || !opaque.startsWith('"') || !opaque.endsWith('"')) return `W/${opaque}`;
  return `W/${opaque.slice(0, -1)}${PATCHED_MARK}"`;
}

/**
 * A patching exchange's `If-None-Match` as the upstream must see it. Each tag of a patched response
 * ({@link patchedEtag}), weak as sent or in its strong spelling (`"x+patched"`: weakly equal, RFC 9110
 * §8.8.3.2; a cache revalidating its stored copy may send it so), goes as the upstream's tag, unmarked
 * and strong (`"x"`): the same tag as `W/"x"` to a server that compares weakly, as `If-None-Match`
 * must, and the upstream's own tag, when it was strong, to one that compares strongly, reads the first
 * tag only (lighttpd 1.4's mod_deflate) or compares the whole field as a string (fix 161). Whether the
 * upstream's tag was weak is not kept in the mark: behind a server that compares a weak tag as a string,
 * a legacy client's revalidation gets a 200 (the body, never a wrong 304). `*` goes as it is. What
 * happens to the client's other tags depends on what a false condition answers (RFC 9110 §13.1.2):
 * - `GET` and `HEAD` (`revalidation`): a 304, on which the client uses the copy its tag names. Such a
 *   copy is not the representation this client is served (another variant's, or an unpatched one), so
 *   those tags are dropped and the upstream is not asked about them.
 * - Any other method: a 412, and the method is not performed. This is a precondition of a write
 *   ("create only", "not over that version"), evaluated by the origin (§13.2.1). Every tag goes as
 *   sent, a patched one also unmarked in both spellings (`"x", W/"x"`), so the condition is at least as
 *   strict as the client made it, whatever comparison the upstream makes (an upstream whose own tag
 *   ends in `+patched` still matches the tag as sent; fix 160). Such a field is up to three times the
 *   client's: an upstream with a small header limit may answer 431, which goes to the client.
 * @param value The client's `If-None-Match` (repeats joined with `, `), or `undefined`.
 * @param revalidation Whether the request is a `GET` or `HEAD`, so that a false condition answers 304.
 * @returns The value to forward, or `undefined` to forward none.
 * @throws Nothing.
 * @example upstreamIfNoneMatch('W/"v1+patched"', true) // → '"v1"'
 * @example upstreamIfNoneMatch('"v1+patched"', true) // → '"v1"'
 * @example upstreamIfNoneMatch('"v1"', true) // → undefined: a current client's copy, or an unpatched one
 * @example upstreamIfNoneMatch('"v1", W/"v2+patched"', false) // → '"v1", "v2", W/"v2", W/"v2+patched"': a PUT's precondition, whole
 */
export function upstreamIfNoneMatch(value: string | undefined, revalidation: boolean): string | undefined {
  const kept: string[] = [];
  for (const tag of entityTags(value)) {
    // The strong spelling too: weakly equal (RFC 9110 §8.8.3.2), and what a cache sends when it
    // revalidates the stored patched response (Apache Traffic Server 9.2 drops the `W/`; fix 159).
    const opaque = tag.startsWith('W/') ? tag.slice(2) : tag;
    const patched = opaque.length >= PATCHED_MARK.length + 2 && opaque.endsWith(`${PATCHED_MARK}"`);
    if (patched) {
      const unmarked = `${opaque.slice(0, -PATCHED_MARK.length - 1)}"`;
      if (revalidation) kept.push(unmarked);
      else kept.push(unmarked, `W/${unmarked}`);
    }
    if (!revalidation || tag === '*') kept.push(tag); // `*` is never a patched tag
  }
  return kept.length === 0 ? undefined : kept.join(', ');
}
