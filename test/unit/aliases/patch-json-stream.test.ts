/**
 * The streaming response patch (SPEC §6, issue 9 item 1): chunk boundaries never change the bytes or
 * the outcome, only copies of canonical values are held (bounded per response and by the budget), and
 * everything else leaves at once as slices of the chunk. Pure: no sockets, no clock.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createJsonPatch, type JsonPatchOptions, patchJson } from '../../../src/aliases/patch-json.ts';
import { responsePairs } from '../../../src/aliases/table.ts';
import type { BufferBudget } from '../../../src/proxy/types.ts';
import { jsonText, parseJson } from '../../fuzz/aliases/arbitraries.ts';
import { addAliases, cutInserted } from './helpers.ts';

const pairs = responsePairs();
const KEYS = ['metadata', 'tags', 'requiredMetadataTypes', 'requiredTags', 'm\\u0065tadata', 't\\u0061gs'];
const MIB = 1024 * 1024;

/** Feeds `body` cut at `cuts` (any order, any values; clamped and sorted) and collects what is emitted. */
function stream(body: Buffer, cuts: readonly number[], options: Partial<JsonPatchOptions> = {}) {
  const patch = createJsonPatch(pairs, { maxValueBytes: MIB, ...options });
  const pieces: Buffer[] = [];
  const emit = (bytes: Buffer) => pieces.push(Buffer.from(bytes));
  let from = 0;
  const points = [...new Set(cuts.map((c) => Math.min(Math.max(c, 0), body.length)))].sort((a, b) => a - b);
  for (const cut of [...points, body.length]) {
    patch.write(body.subarray(from, cut), emit);
    from = cut;
  }
  patch.end(emit);
  return { body: Buffer.concat(pieces), outcome: patch.outcome, patch };
}

/** A budget that records its peak, refusing above `limit`. */
function fakeBudget(limit: number) {
  let used = 0;
  let peak = 0;
  const budget: BufferBudget = {
    tryReserve(bytes) {
      if (used + bytes > limit) return false;
      used += bytes;
      peak = Math.max(peak, used);
      return true;
    },
    release(bytes) {
      used -= bytes;
    },
    get used() {
      return used;
    },
    limit,
  };
  return { budget, peak: () => peak };
}

const cutsArbitrary = fc.array(fc.nat({ max: 4096 }), { maxLength: 8 });

describe('createJsonPatch — chunks', () => {
  it('emits each chunk at once, as the chunk itself when nothing is inserted in it', () => {
    const patch = createJsonPatch(pairs, { maxValueBytes: MIB });
    const emitted: Buffer[] = [];
    const first = Buffer.from('[{"metadata":[1,2],');
    patch.write(first, (b) => emitted.push(b));
    expect(emitted).toEqual([first]);
    expect(emitted[0]).toBe(first);
    expect(patch.outcome).toEqual({ kind: 'unchanged' });
    patch.write(Buffer.from('"x":3}]'), (b) => emitted.push(b));
    expect(Buffer.concat(emitted).toString()).toBe('[{"metadata":[1,2],"x":3,"tags":[1,2]}]');
    expect(patch.outcome).toEqual({ kind: 'patched' });
    patch.end(() => expect.fail('nothing is held back'));
  });

  it('inserts nothing when the alias comes after the canonical value, wherever the cuts are', () => {
    const body = Buffer.from('{"metadata":[1],"x":{"y":2},"t\\u0061gs":[2]}');
    for (let cut = 0; cut <= body.length; cut++) {
      const result = stream(body, [cut]);
      expect(result.outcome).toEqual({ kind: 'unchanged' });
      expect(result.body.equals(body)).toBe(true);
    }
  });

  it('calls onInsert once per inserted member', () => {
    const inserted: string[] = [];
    stream(Buffer.from('[{"metadata":1},{"requiredMetadataTypes":[],"metadata":{"metadata":2}}]'), [7, 30], {
      onInsert: (canonical, alias) => inserted.push(`${canonical}>${alias}`),
    });
    expect(inserted).toEqual([
      'metadata>tags',
      'metadata>tags',
      'metadata>tags',
      'requiredMetadataTypes>requiredTags',
    ]);
  });

  it('reports a truncated body as invalid at the end, having inserted what closed', () => {
    const result = stream(Buffer.from('[{"metadata":1},{"metadata":'), [5]);
    expect(result.outcome).toEqual({ kind: 'skipped', reason: 'invalid_json' });
    expect(result.body.toString()).toBe('[{"metadata":1,"tags":1},{"metadata":');
  });

  it('patches at the bottom of 100,000 levels fed in 16 KiB chunks, without recursion', () => {
    const depth = 100_000;
    const text = `${'[{"a":'.repeat(depth)}{"metadata":7}${'}]'.repeat(depth)}`;
    const body = Buffer.from(text);
    const cuts = Array.from({ length: Math.ceil(body.length / 16384) }, (_, k) => k * 16384);
    const result = stream(body, cuts);
    expect(result.outcome).toEqual({ kind: 'patched' });
    expect(result.body.toString()).toBe(text.replace('{"metadata":7}', '{"metadata":7,"tags":7}'));
  });

  it('stops at maxNesting with too_deep and passes the rest verbatim', () => {
    const body = Buffer.from(`${'['.repeat(50)}${']'.repeat(50)}`);
    const result = stream(body, [10], { maxNesting: 20 });
    expect(result.outcome).toEqual({ kind: 'skipped', reason: 'too_deep' });
    expect(result.body.equals(body)).toBe(true);
  });
});

describe('createJsonPatch — bounded memory (MAX_PATCH_VALUE, the budget)', () => {
  const big = `"${'x'.repeat(200)}"`;
  const text = `[{"metadata":1},{"metadata":${big}},{"metadata":2}]`;
  const body = Buffer.from(text);

  it('passes the rest unpatched from a value over maxValueBytes on, at every cut', () => {
    for (let cut = 0; cut <= body.length; cut++) {
      const result = stream(body, [cut], { maxValueBytes: 100 });
      expect(result.outcome).toEqual({ kind: 'skipped', reason: 'value_too_large' });
      expect(result.body.toString()).toBe(text.replace('{"metadata":1}', '{"metadata":1,"tags":1}'));
    }
  });

  it('holds at most maxValueBytes, reserved from the budget and all released at the end', () => {
    const { budget, peak } = fakeBudget(MIB);
    const result = stream(body, [3, 40, 90], { maxValueBytes: 4096, budget });
    expect(result.outcome).toEqual({ kind: 'patched' });
    expect(peak()).toBeGreaterThan(0);
    expect(peak()).toBeLessThanOrEqual(4096);
    expect(budget.used).toBe(0);
  });

  it('reserves nothing for a body without canonical keys', () => {
    const { budget, peak } = fakeBudget(MIB);
    stream(Buffer.from('[{"a":[1,2,3]},{"tags":0}]'), [4], { budget });
    expect(peak()).toBe(0);
  });

  it('passes the rest unpatched when the budget refuses (budget_exhausted), and releases it', () => {
    const { budget } = fakeBudget(0);
    const result = stream(body, [20], { budget });
    expect(result.outcome).toEqual({ kind: 'skipped', reason: 'budget_exhausted' });
    expect(result.body.equals(body)).toBe(true);
    expect(budget.used).toBe(0);
  });

  it('destroy drops the held copy and releases the budget, idempotently', () => {
    const { budget } = fakeBudget(MIB);
    const patch = createJsonPatch(pairs, { maxValueBytes: MIB, budget });
    patch.write(Buffer.from('{"metadata":[1,2,3'), () => {});
    expect(budget.used).toBeGreaterThan(0);
    patch.destroy();
    patch.destroy();
    expect(budget.used).toBe(0);
    const later: Buffer[] = [];
    patch.write(Buffer.from(']}'), (b) => later.push(b));
    expect(Buffer.concat(later).toString()).toBe(']}');
  });

  it('a patch destroyed before any byte (HEAD, 304) is unchanged and holds nothing', () => {
    const { budget, peak } = fakeBudget(MIB);
    const patch = createJsonPatch(pairs, { maxValueBytes: MIB, budget });
    patch.destroy();
    expect(patch.outcome).toEqual({ kind: 'unchanged' });
    expect(peak()).toBe(0);
  });
});

describe('createJsonPatch — properties over generated documents and random cuts', () => {
  const documents = jsonText(KEYS);

  it('the cuts never change the bytes or the outcome', () => {
    fc.assert(
      fc.property(documents, cutsArbitrary, (text, cuts) => {
        const body = Buffer.from(text);
        const whole = patchJson(pairs, body);
        const split = stream(body, cuts);
        expect(split.body.equals(whole.body)).toBe(true);
        expect(split.outcome).toEqual(whole.outcome);
      }),
      { numRuns: 300 },
    );
  });

  it('cutting the inserted members out gives the upstream bytes; the model holds', () => {
    fc.assert(
      fc.property(documents, (text) => {
        const body = Buffer.from(text);
        const result = patchJson(pairs, body);
        expect(result.outcome.kind).not.toBe('skipped');
        expect(cutInserted(result.body, result.insertions).equals(body)).toBe(true);
        expect(parseJson(result.body.toString())).toEqual(addAliases(parseJson(text), pairs));
      }),
      { numRuns: 300 },
    );
  });

  it('is idempotent: patching the output again, in other chunks, inserts nothing', () => {
    fc.assert(
      fc.property(documents, cutsArbitrary, (text, cuts) => {
        const once = stream(Buffer.from(text), cuts);
        const twice = stream(
          once.body,
          cuts.map((c) => c + 3),
        );
        expect(twice.outcome).toEqual({ kind: 'unchanged' });
        expect(twice.body.equals(once.body)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('with small maxValueBytes: same bytes at any cuts, cut gives the input, held ≤ the bound, all released', () => {
    fc.assert(
      fc.property(documents, cutsArbitrary, fc.integer({ min: 1, max: 64 }), (text, cuts, maxValueBytes) => {
        const body = Buffer.from(text);
        const whole = patchJson(pairs, body, { maxValueBytes });
        const { budget, peak } = fakeBudget(MIB);
        const split = stream(body, cuts, { maxValueBytes, budget });
        expect(split.body.equals(whole.body)).toBe(true);
        expect(split.outcome).toEqual(whole.outcome);
        expect(cutInserted(whole.body, whole.insertions).equals(body)).toBe(true);
        expect(peak()).toBeLessThanOrEqual(maxValueBytes);
        expect(budget.used).toBe(0);
      }),
      { numRuns: 300 },
    );
  });

  it('bytes that are not JSON: the cuts never change the bytes or the outcome either', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 64 }),
        fc.constantFrom('', '{"metadata":', '[{"metadata":1},{"tags":[', '{"metadata":"\\u00'),
        cutsArbitrary,
        (noise, prefix, cuts) => {
          const body = Buffer.concat([Buffer.from(prefix), noise]);
          const whole = patchJson(pairs, body);
          const split = stream(
            body,
            cuts.map((c) => c % (body.length + 1)),
          );
          expect(split.body.equals(whole.body)).toBe(true);
          expect(split.outcome).toEqual(whole.outcome);
        },
      ),
      { numRuns: 500 },
    );
  });
});
