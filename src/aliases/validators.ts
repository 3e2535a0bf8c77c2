/**
 * Which validator a legacy client's 304 carries (SPEC §6: "a 304 carries the validator the 200
 * carried"). A patched 200 carries the upstream's entity tag made weak and marked (`W/"x+patched"`);
 * an unpatched one (a body that is not JSON, or one served during a brownout) carries the upstream's
 * own (`"x"`). A 304
 * usually has no `Content-Type`, so its body's kind cannot tell which 200 the client holds: the
 * client's `If-None-Match` can, since the client sends the tag it was given.
 */
import { entityTags, patchedEtag } from '../core/validators.ts';

/**
 * Whether a 304 answers a client that holds the response unpatched: the 304's entity tag is strong
 * (`"x"`) and the client's `If-None-Match` names it in that strong form and not as `W/"x+patched"` (the
 * form of the patched 200, src/core/validators.ts; or its strong spelling `"x+patched"`) or `W/"x"`. Then the 304 keeps the strong tag, as the
 * 200 the client holds carried it. A patching `GET` or `HEAD` (the only methods a 304 answers) forwards
 * only the patched tags (`upstreamIfNoneMatch`), and no `If-Modified-Since` beside `If-None-Match`
 * (outgoing-request.ts), so such a 304 now answers a `*` only.
 * @param ifNoneMatch The client's `If-None-Match`.
 * @param etag The 304's `ETag`.
 * @returns `true` when the 304 must keep the upstream's strong tag.
 * @throws Nothing.
 * @example
 * revalidatesUnpatched('"p1"', '"p1"'); // → true: an image, say, never patched
 * revalidatesUnpatched('W/"v1+patched"', '"v1"'); // → false: the patched JSON the client holds
 */
export function revalidatesUnpatched(ifNoneMatch: string | undefined, etag: string | undefined): boolean {
  if (etag === undefined || !etag.startsWith('"')) return false;
  const tags = entityTags(ifNoneMatch);
  const patched = patchedEtag(etag);
  return (
    tags.includes(etag) &&
    !tags.includes(`W/${etag}`) &&
    !tags.includes(patched) &&
    !tags.includes(patched.slice(2)) // its strong spelling, as a cache may send it (fix 159)
  );
}
