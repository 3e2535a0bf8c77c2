/**
 * The response-patch seam (SPEC §6, CONTRACT ResponsePatch): patches chained and outcomes combined
 * (the pumps: pump-patch.test.ts, pump-coded-patch.test.ts), the plan of a response a plugin asked to
 * patch, and the reservation of a coded response's decoder window (pure: fakes, no socket).
 */
import { EventEmitter } from 'node:events';
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { createBufferBudget } from '../../../src/core/buffer-budget.ts';
import type { PatchOutcome, ResponsePatch } from '../../../src/core/types.ts';
import {
  chainPatches,
  combinedOutcome,
  patchPlan,
  reserveDecoderWindow,
} from '../../../src/proxy/response-patch.ts';

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

describe('patchPlan', () => {
  it.each<[string, boolean, number, string | undefined, unknown]>([
    ['a 200 without a coding', false, 200, undefined, { kind: 'patch', coding: 'identity' }],
    ['a 200 in gzip', false, 200, 'gzip', { kind: 'patch', coding: 'gzip' }],
    ['x-gzip', false, 200, 'x-gzip', { kind: 'patch', coding: 'gzip' }],
    ['a 404 in br (an error body is patched too)', false, 404, 'br', { kind: 'patch', coding: 'br' }],
    ['zstd', false, 200, 'zstd', { kind: 'patch', coding: 'zstd' }],
    ['stacked codings', false, 200, 'gzip, br', { kind: 'pass', reason: 'unsupported_encoding' }],
    ['compress', false, 200, 'compress', { kind: 'pass', reason: 'unsupported_encoding' }],
    ['a 206 (a part is not a document)', false, 206, undefined, { kind: 'pass', reason: undefined }],
    [
      'a 206 in a coding the shim cannot undo (counted)',
      false,
      206,
      'compress',
      { kind: 'pass', reason: 'unsupported_encoding' },
    ],
    ['no body (HEAD, 204, 304)', true, 200, 'gzip', { kind: 'head' }],
  ])('%s', (_what, bodiless, status, coding, expected) => {
    expect(patchPlan(bodiless, status, coding)).toEqual(expected);
  });

  it('makes no object per response', () => {
    expect(patchPlan(false, 200, 'gzip')).toBe(patchPlan(false, 200, 'gzip'));
    expect(patchPlan(true, 304, undefined)).toBe(patchPlan(true, 200, undefined));
  });
});

/** An upstream response not yet read: `read()` gives `first` once, `unshift` records what came back. */
function unreadSource(first: Buffer | null) {
  const source = Object.assign(new EventEmitter(), {
    given: false,
    unshifted: [] as Buffer[],
    read() {
      if (source.given) return null;
      source.given = true;
      return first;
    },
    unshift(chunk: Buffer) {
      source.unshifted.push(chunk);
    },
  });
  return source;
}

describe('reserveDecoderWindow', () => {
  const brotli = (lgwin: number) =>
    zlib.brotliCompressSync('{"metadata":[1]}', { params: { [zlib.constants.BROTLI_PARAM_LGWIN]: lgwin } });

  it('waits for the first bytes, puts them back, reserves the window they declare until the response closes', () => {
    const budget = createBufferBudget(64 * 1024 * 1024);
    const body = brotli(22);
    const source = unreadSource(body);
    const res = new EventEmitter();
    const told: boolean[] = [];
    reserveDecoderWindow(source, res, 'br', budget, (reserved) => told.push(reserved));
    expect(told).toEqual([]);
    source.emit('readable');
    expect(told).toEqual([true]);
    expect(source.unshifted).toEqual([body]);
    expect(budget.used).toBe(2 ** 22);
    expect(source.listenerCount('readable')).toBe(0);
    res.emit('close');
    expect(budget.used).toBe(0);
  });

  it("no room within the request bodies' share: told false, nothing held", () => {
    // Three quarters of 4 MiB is 3 MiB: a 4 MiB window does not fit.
    const budget = createBufferBudget(4 * 1024 * 1024);
    const source = unreadSource(brotli(22));
    const res = new EventEmitter();
    const told: boolean[] = [];
    reserveDecoderWindow(source, res, 'br', budget, (reserved) => told.push(reserved));
    source.emit('readable');
    expect(told).toEqual([false]);
    expect(budget.used).toBe(0);
    expect(res.listenerCount('close')).toBe(0);
  });

  it('an empty body (its end first) reserves nothing and is told true', () => {
    const budget = createBufferBudget(1024);
    const source = unreadSource(null);
    const told: boolean[] = [];
    reserveDecoderWindow(source, new EventEmitter(), 'gzip', budget, (reserved) => told.push(reserved));
    source.emit('readable');
    expect(told).toEqual([true]);
    expect(source.unshifted).toEqual([]);
    expect(budget.used).toBe(0);
  });
});
