/**
 * Entity tags of patched responses (RFC 9110 §8.8.3, §13.1.2): the patched representation's tag is
 * weakly equal to none of the upstream's, and a patching exchange's If-None-Match names the upstream's
 * tags of the patched representations only.
 */
import { describe, expect, it } from 'vitest';
import { entityTags, patchedEtag, upstreamIfNoneMatch } from '../../../src/core/validators.ts';

describe('entityTags (RFC 9110 §8.8.3)', () => {
  it.each<[string | undefined, string[]]>([
    [undefined, []],
    ['', []],
    ['"a"', ['"a"']],
    ['W/"a", "b"', ['W/"a"', '"b"']],
    ['"b,c",W/"d"', ['"b,c"', 'W/"d"']], // a comma inside the quotes belongs to the tag
    ['*', ['*']],
    [' \t"a" ,, "b"', ['"a"', '"b"']],
    ['"a", junk, "b"', ['"a"']], // a malformed member ends the list
    ['"unterminated', []],
    ['W/', []],
  ])('%j → %j', (value, tags) => {
    expect(entityTags(value)).toEqual(tags);
  });
});

describe('patchedEtag', () => {
  it.each([
    ['"v1"', 'W/"v1+patched"'],
    ['W/"v1"', 'W/"v1+patched"'], // Express' default weak tag: the patched one must differ from it too
    ['""', 'W/"+patched"'],
    ['W/"419-flWQoAi7+neNESML7qNdrng9uAQ"', 'W/"419-flWQoAi7+neNESML7qNdrng9uAQ+patched"'],
  ])('%s → %s', (etag, expected) => expect(patchedEtag(etag)).toBe(expected));

  it('is weakly equal to no upstream tag it came from, and maps back', () => {
    for (const etag of ['"v1"', 'W/"v1"', '"a,b"']) {
      const patched = patchedEtag(etag);
      expect(patched.replace(/^W\//, '')).not.toBe(etag.replace(/^W\//, ''));
      const opaque = etag.replace(/^W\//, '');
      expect(upstreamIfNoneMatch(patched, true)).toBe(opaque);
      expect(upstreamIfNoneMatch(patched, false)).toBe(`${opaque}, W/${opaque}, ${patched}`); // a write: also as sent
    }
  });
});

describe('upstreamIfNoneMatch', () => {
  it.each<[string | undefined, string | undefined]>([
    [undefined, undefined],
    ['', undefined],
    ['W/"v1+patched"', '"v1"'],
    ['"v1"', undefined], // another variant's copy (a current client's, shared by a browser cache), or unpatched
    ['W/"v1"', undefined], // likewise: weakly equal to the upstream's own tag
    ['"v1", W/"v2+patched", W/"v3"', '"v2"'],
    ['*', '*'],
    // The strong spelling, weakly equal (RFC 9110 §8.8.3.2): Apache Traffic Server revalidates its stored
    // copy of a patched response with it, dropping the `W/` (fix 159).
    ['"v1+patched"', '"v1"'],
    ['"v1", "v2+patched"', '"v2"'],
    ['"+patched"', '""'],
    ['W/"a,b+patched"', '"a,b"'],
    ['W/"a+patched", "b+patched"', '"a", "b"'],
  ])('GET or HEAD (a 304 hands over a copy): %j → %j', (value, expected) =>
    expect(upstreamIfNoneMatch(value, true)).toBe(expected),
  );

  // RFC 9110 §13.1.2: on any other method a false condition is a 412 and the write is not performed.
  it.each<[string | undefined, string | undefined]>([
    [undefined, undefined],
    ['', undefined],
    ['W/"v1+patched"', '"v1", W/"v1", W/"v1+patched"'],
    ['"v1"', '"v1"'],
    ['W/"v1"', 'W/"v1"'],
    ['"v1", W/"v2+patched", W/"v3"', '"v1", "v2", W/"v2", W/"v2+patched", W/"v3"'],
    ['*', '*'],
    // Also as sent: an upstream whose own tag is `"v1+patched"` must still refuse the write (review of fix 159).
    ['"v1+patched"', '"v1", W/"v1", "v1+patched"'],
  ])('a write (a 412 refuses it): %j → %j, never a weaker precondition', (value, expected) =>
    expect(upstreamIfNoneMatch(value, false)).toBe(expected),
  );
});
