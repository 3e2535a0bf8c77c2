import { describe, expect, it } from 'vitest';
import { isAlias, pairOf, renameKeyNames } from '../../../src/aliases/rename-names.ts';
import { responsePairs } from '../../../src/aliases/table.ts';

describe('renameKeyNames: name 2k is the canonical of rename k, 2k + 1 its alias', () => {
  it('encodes every pair of the response table so that isAlias and pairOf read it back', () => {
    const pairs = responsePairs();
    const names = renameKeyNames(pairs);
    pairs.forEach((pair, k) => {
      for (const [text, alias] of [
        [pair.canonical, false],
        [pair.alias, true],
      ] as const) {
        const name = names.names.indexOf(text);
        expect(name).toBe(2 * k + (alias ? 1 : 0));
        expect(isAlias(name)).toBe(alias);
        expect(pairOf(name)).toBe(k);
      }
    });
  });
});
