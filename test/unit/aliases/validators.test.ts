import { describe, expect, it } from 'vitest';
import { revalidatesUnpatched } from '../../../src/aliases/validators.ts';

describe('revalidatesUnpatched', () => {
  it.each<[string | undefined, string | undefined, boolean]>([
    ['"p1"', '"p1"', true], // the client holds the strong tag: an unpatched 200
    ['"x", "p1"', '"p1"', true],
    ['W/"v1"', '"v1"', false], // the weak tag of the patched 200
    ['"v1", W/"v1"', '"v1"', false], // both: keep the patched form
    ['W/"v1+patched"', '"v1"', false], // the marked tag of the patched 200 (src/core/validators.ts)
    ['"v1", W/"v1+patched"', '"v1"', false], // a cache holding both variants: the patched one matched
    ['"v1", "v1+patched"', '"v1"', false], // the same, the patched tag as a cache revalidates it (fix 159)
    ['*', '"v1"', false],
    [undefined, '"v1"', false], // If-Modified-Since only: the body's kind decides
    ['W/"v1"', 'W/"v1"', false], // a weak upstream tag stays as it is anyway
    ['"p1"', undefined, false],
  ])('If-None-Match %j, ETag %j → %s', (inm, etag, expected) => {
    expect(revalidatesUnpatched(inm, etag)).toBe(expected);
  });
});
