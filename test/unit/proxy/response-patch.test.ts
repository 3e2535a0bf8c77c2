/**
 * The response-patch seam (SPEC §6, CONTRACT ResponsePatch): patches chained and outcomes combined
 * (the pumps: pump-patch.test.ts, pump-coded-patch.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { chainPatches, combinedOutcome } from '../../../src/proxy/response-patch.ts';
import type { PatchOutcome, ResponsePatch } from '../../../src/proxy/types.ts';

/** Upper-cases every byte; holds back the last byte of each chunk until the next (to test end()). */
function upperCasing(): ResponsePatch & { destroyed: number } {
  let held: Buffer | undefined;
  let changed = false;
  return {
    destroyed: 0,
    write(chunk) {
      const all = held ? Buffer.concat([held, chunk]) : chunk;
      const upper = Buffer.from(all.toString('latin1').toUpperCase(), 'latin1');
      if (!upper.equals(all)) changed = true;
      held = upper.subarray(upper.length - 1);
      return upper.subarray(0, upper.length - 1);
    },
    end() {
      const last = held ?? Buffer.alloc(0);
      held = undefined;
      return last;
    },
    destroy() {
      this.destroyed++;
      held = undefined;
    },
    get outcome(): PatchOutcome {
      return changed ? { kind: 'patched' } : { kind: 'unchanged' };
    },
  };
}

/** Inserts `!` after every `a`. */
function exclaiming(): ResponsePatch {
  return {
    write(chunk) {
      return Buffer.from(chunk.toString('latin1').replaceAll('A', 'A!'), 'latin1');
    },
    end() {
      return Buffer.alloc(0);
    },
    destroy() {},
    outcome: { kind: 'unchanged' },
  };
}

const collect = (patch: ResponsePatch, chunks: string[]) => {
  const out: string[] = [];
  for (const c of chunks) out.push(patch.write(Buffer.from(c, 'latin1')).toString('latin1'));
  out.push(patch.end().toString('latin1'));
  return out.join('');
};

describe('chainPatches', () => {
  it('returns a single patch as is', () => {
    const p = upperCasing();
    expect(chainPatches([p])).toBe(p);
  });

  it('feeds each patch what the one before emitted, in order, through end()', () => {
    const chained = chainPatches([upperCasing(), exclaiming()]);
    expect(collect(chained, ['ab', 'ca', 'a'])).toBe('A!BCA!A!');
  });

  it('destroys every patch', () => {
    const a = upperCasing();
    const b = upperCasing();
    chainPatches([a, b]).destroy();
    expect([a.destroyed, b.destroyed]).toEqual([1, 1]);
  });

  it('rejects an empty list', () => {
    expect(() => chainPatches([])).toThrow(RangeError);
  });
});

describe('combinedOutcome', () => {
  it.each<[PatchOutcome[], PatchOutcome]>([
    [[{ kind: 'unchanged' }, { kind: 'unchanged' }], { kind: 'unchanged' }],
    [[{ kind: 'unchanged' }, { kind: 'patched' }], { kind: 'patched' }],
    [[{ kind: 'patched' }, { kind: 'skipped', reason: 'too_deep' }], { kind: 'skipped', reason: 'too_deep' }],
  ])('%j → %j', (outcomes, expected) => expect(combinedOutcome(outcomes)).toEqual(expected));
});
