/**
 * The streaming response patch (SPEC §6, issue 9 item 1): chunk boundaries never change the bytes or
 * the outcome, only copies of canonical values are held (bounded per response and by the budget), and
 * everything else leaves at once: the chunk itself, or one buffer per patched chunk. Pure: no sockets,
 * no clock.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { injectScanFailure } from '../../../src/aliases/json-scan.ts';
import {
  createJsonPatch,
  type JsonPatchOptions,
  MAX_SPARE_OUTPUT,
  MIN_SPARE_OUTPUT,
  OUTPUT_POOL_SIZE,
  patchJson,
} from '../../../src/aliases/patch-json.ts';
import { responsePairs } from '../../../src/aliases/table.ts';
import { createBufferBudget } from '../../../src/core/buffer-budget.ts';
import type { BufferBudget } from '../../../src/core/types.ts';
import { jsonText, parseJson } from '../../fuzz/aliases/arbitraries.ts';
import { addAliases, cutInserted } from './helpers.ts';

const pairs = responsePairs();
const KEYS = ['metadata', 'tags', 'requiredMetadataTypes', 'requiredTags', 'm\\u0065tadata', 't\\u0061gs'];
const MIB = 1024 * 1024;

/**
 * Feeds `body` cut at `cuts` (any order, any values; clamped and sorted) and collects what is returned
 * (copied at once). With `recycle`, each output is given back at once, as a socket that wrote it would.
 */
function stream(
  body: Buffer,
  cuts: readonly number[],
  options: Partial<JsonPatchOptions> = {},
  recycle = false,
) {
  const patch = createJsonPatch(pairs, { maxValueBytes: MIB, ...options });
  const pieces: Buffer[] = [];
  let from = 0;
  const points = [...new Set(cuts.map((c) => Math.min(Math.max(c, 0), body.length)))].sort((a, b) => a - b);
  for (const cut of [...points, body.length]) {
    const out = patch.write(body.subarray(from, cut));
    pieces.push(Buffer.from(out));
    if (recycle) patch.recycle?.(out);
    from = cut;
  }
  pieces.push(Buffer.from(patch.end()));
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
  it('returns each chunk at once, as the chunk itself when nothing is inserted in it', () => {
    const patch = createJsonPatch(pairs, { maxValueBytes: MIB });
    const first = Buffer.from('[{"metadata":[1,2],');
    expect(patch.write(first)).toBe(first);
    expect(patch.outcome).toEqual({ kind: 'unchanged' });
    const second = Buffer.from('"x":3}]');
    const patched = patch.write(second);
    expect(patched.toString()).toBe('"x":3,"tags":[1,2]}]');
    expect(patch.outcome).toEqual({ kind: 'patched' });
    expect(patch.end().length).toBe(0); // nothing is held back
    expect(patch.write(Buffer.from(' ')).length).toBe(0); // nothing after the end
  });

  it('writes the chunk and every piece inserted in it into one buffer, owned by the caller', () => {
    // 3 items per chunk, 2 insertions per item: one output per chunk, whatever the growth estimate.
    const item = '{"metadata":{"k":"v"},"requiredMetadataTypes":["a"],"n":1}';
    const patch = createJsonPatch(pairs, { maxValueBytes: MIB });
    const outputs: Buffer[] = [];
    const copies: string[] = [];
    for (const chunk of ['[', `${item},${item},${item}`, `,${item},${item},${item}`, ']']) {
      const out = patch.write(Buffer.from(chunk));
      outputs.push(out);
      copies.push(out.toString());
    }
    patch.end();
    const patchedItem = item.replace('"n":1}', '"n":1,"tags":{"k":"v"},"requiredTags":["a"]}');
    expect(copies).toEqual([
      '[',
      `${patchedItem},${patchedItem},${patchedItem}`,
      `,${patchedItem},${patchedItem},${patchedItem}`,
      ']',
    ]);
    // The patch never writes to what it returned: later chunks left the earlier outputs as they were.
    expect(outputs.map((b) => b.toString())).toEqual(copies);
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
    patch.write(Buffer.from('{"metadata":[1,2,3'));
    expect(budget.used).toBeGreaterThan(0);
    patch.destroy();
    patch.destroy();
    expect(budget.used).toBe(0);
    expect(patch.write(Buffer.from(']}')).toString()).toBe(']}');
  });

  it('a patch destroyed before any byte (HEAD, 304) is unchanged and holds nothing', () => {
    const { budget, peak } = fakeBudget(MIB);
    const patch = createJsonPatch(pairs, { maxValueBytes: MIB, budget });
    patch.destroy();
    expect(patch.outcome).toEqual({ kind: 'unchanged' });
    expect(peak()).toBe(0);
  });
});

describe('createJsonPatch — one output buffer per patched chunk, reused once recycled', () => {
  const item = '{"metadata":{"k":"v"},"n":1}';
  const patchedItem = '{"metadata":{"k":"v"},"n":1,"tags":{"k":"v"}}';
  /** 1,000 items (29 KB in, 46 KB out: over MIN_SPARE_OUTPUT, so memory of their own). */
  const items = Buffer.from(`${item},`.repeat(1000));
  const expected = `${patchedItem},`.repeat(1000);
  const started = (options: Partial<JsonPatchOptions> = {}) => {
    const patch = createJsonPatch(pairs, { maxValueBytes: MIB, ...options });
    expect(patch.write(Buffer.from('[')).toString()).toBe('[');
    return patch;
  };

  it('writes into the memory of an output again only after it was recycled, and only the last one', () => {
    const patch = started();
    const a = patch.write(items);
    const b = patch.write(items);
    expect(b.buffer).not.toBe(a.buffer);
    patch.recycle?.(a); // not the last output: the caller may still hold b… and a is ignored
    const c = patch.write(items);
    expect([a.buffer, b.buffer]).not.toContain(c.buffer);
    patch.recycle?.(c);
    const d = patch.write(items);
    expect(d.buffer).toBe(c.buffer);
    for (const out of [b, d]) expect(out.toString()).toBe(expected);
  });

  it('ignores buffers that are not its own: the chunk passed through, a copy of an output', () => {
    const patch = started();
    const plain = Buffer.from(' 1,'.repeat(3000));
    expect(patch.write(plain)).toBe(plain);
    patch.recycle?.(plain);
    const a = patch.write(items);
    patch.recycle?.(Buffer.from(a));
    const b = patch.write(items);
    expect(b.buffer).not.toBe(a.buffer);
    expect(b.toString()).toBe(expected);
  });

  it('reserves a kept buffer from the budget; at the end and on destroy it goes to the budget’s pool', () => {
    for (const finish of ['end', 'destroy'] as const) {
      const { budget } = fakeBudget(MIB);
      const patch = started({ budget });
      const held = budget.used; // the copies
      const a = patch.write(items);
      patch.recycle?.(a);
      expect(budget.used - held).toBeGreaterThanOrEqual(a.length);
      const size = a.buffer.byteLength;
      if (finish === 'end') {
        // The last chunk goes out in the kept buffer, which comes back once written, after the end.
        const last = patch.write(Buffer.from(`${items}${item}]`));
        expect(last.buffer).toBe(a.buffer);
        patch.end();
        expect(budget.used).toBe(0);
        patch.recycle?.(last);
      } else {
        patch.destroy();
      }
      // The copies are released; the idle output stays reserved, in the pool, once.
      expect(budget.used).toBe(size);
      patch.recycle?.(a);
      expect(budget.used).toBe(size);
    }
  });

  it('hands a finished response’s output buffer to the next response of the same budget', () => {
    const { budget } = fakeBudget(MIB);
    const first = started({ budget });
    const a = first.write(items);
    expect(a.buffer.byteLength).toBe(2 ** Math.ceil(Math.log2(a.length))); // pooled sizes: powers of two
    first.end();
    first.recycle?.(a); // written after the end: pooled
    expect(budget.used).toBe(a.buffer.byteLength);
    const second = started({ budget });
    const b = second.write(items);
    expect(b.buffer).toBe(a.buffer);
    expect(b.toString()).toBe(expected);
    expect(budget.used).toBeLessThan(a.buffer.byteLength); // out of the pool: the copies only
    // Another budget (another runtime) has a pool of its own.
    const other = started({ budget: fakeBudget(MIB).budget });
    expect(other.write(items).buffer).not.toBe(a.buffer);
  });

  it(`pools at most ${OUTPUT_POOL_SIZE} idle buffers per budget, and none the budget refuses`, () => {
    const { budget } = fakeBudget(64 * MIB);
    const patches = Array.from({ length: OUTPUT_POOL_SIZE + 4 }, () => started({ budget }));
    const outputs = patches.map((patch) => patch.write(items));
    patches.forEach((patch, k) => {
      patch.destroy();
      patch.recycle?.(outputs[k]!);
    });
    expect(budget.used).toBe(OUTPUT_POOL_SIZE * outputs[0]!.buffer.byteLength);
    const tight = fakeBudget(1024).budget;
    const patch = started({ budget: tight });
    const out = patch.write(items);
    patch.destroy();
    patch.recycle?.(out);
    expect(tight.used).toBe(0);
  });

  it('keeps nothing the budget refuses, and patches on', () => {
    const { budget } = fakeBudget(32 * 1024); // room for the copies, not for a 46 KB output
    const patch = started({ budget });
    const a = patch.write(items);
    patch.recycle?.(a);
    const b = patch.write(items);
    expect(b.buffer).not.toBe(a.buffer);
    expect(b.toString()).toBe(expected);
    expect(patch.outcome).toEqual({ kind: 'patched' });
  });

  it(`keeps no slice of Node's shared pool (outputs under MIN_SPARE_OUTPUT, ${MIN_SPARE_OUTPUT} bytes)`, () => {
    const patch = started();
    const few = Buffer.from(`${item},`.repeat(10));
    const a = patch.write(few);
    expect(a.buffer.byteLength).toBeGreaterThan(a.length); // a slice of the pool
    patch.recycle?.(a);
    const b = patch.write(few);
    expect(b.buffer === a.buffer && b.byteOffset === a.byteOffset).toBe(false);
  });

  it(`keeps no output larger than MAX_SPARE_OUTPUT (${MAX_SPARE_OUTPUT} bytes)`, () => {
    const patch = started();
    const large = Buffer.from(`${item},`.repeat(Math.ceil(MAX_SPARE_OUTPUT / item.length)));
    const a = patch.write(large);
    expect(a.length).toBeGreaterThan(MAX_SPARE_OUTPUT);
    patch.recycle?.(a);
    expect(patch.write(large).buffer).not.toBe(a.buffer);
  });
});

describe('createJsonPatch — properties over generated documents and random cuts', () => {
  const documents = jsonText(KEYS);

  it('the cuts never change the bytes or the outcome, with outputs recycled or not', () => {
    fc.assert(
      fc.property(documents, cutsArbitrary, fc.boolean(), (text, cuts, recycle) => {
        const body = Buffer.from(text);
        const whole = patchJson(pairs, body);
        const { budget } = fakeBudget(MIB);
        const split = stream(body, cuts, { budget }, recycle);
        expect(split.body.equals(whole.body)).toBe(true);
        expect(split.outcome).toEqual(whole.outcome);
        expect(budget.used).toBe(0);
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

describe('createJsonPatch — output buffers kept for reuse are handed to one chunk each, large enough', () => {
  const item = (v: string) => `{"metadata":{"k":"${v}"},"n":1}`;
  const patchedItem = (v: string) => `{"metadata":{"k":"${v}"},"n":1,"tags":{"k":"${v}"}}`;
  /** `count` items with the value `v`, and the same patched (from 120 items on, outputs of memory of their own). */
  const items = (count: number, v: string) => ({
    body: Buffer.from(`${item(v)},`.repeat(count)),
    expected: `${patchedItem(v)},`.repeat(count),
  });
  const started = (options: Partial<JsonPatchOptions> = {}) => {
    const patch = createJsonPatch(pairs, { maxValueBytes: MIB, ...options });
    patch.write(Buffer.from('['));
    return patch;
  };
  const few = items(120, 'v'); // 5.5 KB out: an 8 KiB buffer
  const many = items(1000, 'v'); // 46 KB out: a 64 KiB buffer

  it('does not write a chunk into a kept buffer too small for it', () => {
    const patch = started();
    const a = patch.write(few.body);
    patch.recycle?.(a);
    // One insertion, then a tail longer than the kept buffer.
    const tail = `{"x":"${'y'.repeat(20_000)}"},`;
    expect(patch.write(Buffer.from(`{"metadata":1},${tail}`)).toString()).toBe(
      `{"metadata":1,"tags":1},${tail}`,
    );
  });

  it('takes from the pool a buffer large enough, and gives each pooled buffer to one response at a time', () => {
    const { budget } = fakeBudget(64 * MIB);
    // Two responses in flight, then written after their end: the pool holds [64 KiB, 8 KiB].
    const [a, b] = [started({ budget }), started({ budget })];
    const [outA, outB] = [a.write(many.body), b.write(few.body)];
    for (const [patch, out] of [
      [a, outA],
      [b, outB],
    ] as const) {
      patch.end();
      patch.recycle?.(out);
    }
    const [large, small] = [outA.buffer, outB.buffer];
    const first = started({ budget }).write(many.body);
    expect(first.buffer).toBe(large); // the small one does not do
    expect(first.toString()).toBe(many.expected);
    const second = started({ budget }).write(items(120, 'a').body);
    expect(second.buffer).toBe(small);
    const third = started({ budget }).write(items(120, 'b').body); // the pool is empty: a new buffer
    expect(third.buffer).not.toBe(small);
    expect(second.toString()).toBe(items(120, 'a').expected);
    expect(third.toString()).toBe(items(120, 'b').expected);
  });

  it('reserves a spare that grows by what it grew, and gives all of it back at the end (but what goes to the pool)', () => {
    const { budget } = fakeBudget(64 * MIB);
    const patch = started({ budget });
    const small = patch.write(few.body);
    const held = budget.used; // the copies
    patch.recycle?.(small); // kept: 8 KiB reserved
    const large = patch.write(many.body); // too large for it: a 64 KiB buffer
    patch.recycle?.(large); // kept instead: 64 KiB reserved in all
    expect(budget.used).toBe(held + large.buffer.byteLength);
    patch.end();
    expect(budget.used).toBe(large.buffer.byteLength); // the idle spare, now in the pool
  });

  it('without a budget keeps its spare all the same, and ends or is destroyed without one', () => {
    for (const finish of ['end', 'destroy'] as const) {
      const patch = started();
      const a = patch.write(many.body);
      patch.recycle?.(a);
      const b = patch.write(many.body);
      expect(b.buffer).toBe(a.buffer);
      expect(b.toString()).toBe(many.expected);
      expect(() => patch[finish]()).not.toThrow();
      expect(() => patch.recycle?.(b)).not.toThrow(); // written after the end: no pool without a budget
    }
  });
});

describe('createJsonPatch — what is held, and when it is given back', () => {
  it('holds a value of exactly maxValueBytes; one byte more is too large', () => {
    const text = Buffer.from(`{"metadata":"${'x'.repeat(98)}"}`); // a value of 100 bytes
    expect(patchJson(pairs, text, { maxValueBytes: 100 }).outcome).toEqual({ kind: 'patched' });
    expect(patchJson(pairs, text, { maxValueBytes: 99 }).outcome).toEqual({
      kind: 'skipped',
      reason: 'value_too_large',
    });
  });

  it('holds only the last value of a canonical member sent twice (the one it copies)', () => {
    const [v1, v2] = [`"${'a'.repeat(60)}"`, `"${'b'.repeat(60)}"`];
    const text = `{"metadata":${v1},"metadata":${v2}}`;
    for (let cut = 0; cut <= text.length; cut++) {
      const result = stream(Buffer.from(text), [cut], { maxValueBytes: 100 });
      expect(result.outcome).toEqual({ kind: 'patched' });
      expect(result.body.toString()).toBe(`{"metadata":${v1},"metadata":${v2},"tags":${v2}}`);
    }
  });

  it('holds the copies of one object at a time: a long list patches with a small maxValueBytes, fed byte by byte', () => {
    const body = Buffer.from(`[${Array.from({ length: 100 }, (_, k) => `{"metadata":${k}}`).join(',')}]`);
    const cuts = Array.from({ length: body.length }, (_, k) => k);
    const result = stream(body, cuts, { maxValueBytes: 16 });
    expect(result.outcome).toEqual({ kind: 'patched' });
    expect(result.body.equals(patchJson(pairs, body).body)).toBe(true);
  });

  it('a value that ends in a later chunk, then a long tail: holds nothing once the value is copied', () => {
    const tail = `,"pad":"${'p'.repeat(300)}","x":{"metadata":2}}`;
    const text = `{"metadata":[1,2,3]${tail}`;
    const result = stream(Buffer.from(text), [15], { maxValueBytes: 64 });
    expect(result.outcome).toEqual({ kind: 'patched' });
    expect(result.body.toString()).toBe(
      `{"metadata":[1,2,3],"pad":"${'p'.repeat(300)}","x":{"metadata":2,"tags":2},"tags":[1,2,3]}`,
    );
  });

  it('counts a value waiting for its object to close against maxValueBytes with the values of the objects inside it', () => {
    // The outer copy (9 bytes) waits for the outer `}`; the inner one (9 bytes) is held with it: 18 > 16.
    const text = Buffer.from('{"metadata":"xxxxxxx","child":{"metadata":"yyyyyyy"}}');
    for (const cuts of [[], [20], [45]]) {
      const result = stream(text, cuts, { maxValueBytes: 16 });
      expect(result.outcome).toEqual({ kind: 'skipped', reason: 'value_too_large' });
      expect(result.body.equals(text)).toBe(true);
    }
    // Each alone fits.
    const alone = stream(text, [], { maxValueBytes: 18 });
    expect(alone.outcome).toEqual({ kind: 'patched' });
    expect(alone.body.toString()).toBe(
      '{"metadata":"xxxxxxx","child":{"metadata":"yyyyyyy","tags":"yyyyyyy"},"tags":"xxxxxxx"}',
    );
  });

  it('inserts no copy into a canonical value it can no longer hold', () => {
    // At the inner `}`, the outer value held so far and the piece to insert into it exceed 30 bytes.
    const text = Buffer.from('{"metadata":{"metadata":"xxxxx"}}');
    const result = stream(text, [], { maxValueBytes: 30 });
    expect(result.outcome).toEqual({ kind: 'skipped', reason: 'value_too_large' });
    expect(result.body.equals(text)).toBe(true);
  });

  it('gives the held copies back to the budget as soon as it stops patching, and all of a grown hold at the end', () => {
    const { budget } = fakeBudget(MIB);
    const skipped = createJsonPatch(pairs, { maxValueBytes: 100, budget });
    skipped.write(Buffer.from(`[{"metadata":"${'x'.repeat(50)}`));
    expect(budget.used).toBeGreaterThan(0);
    skipped.write(Buffer.from(`${'x'.repeat(100)}"}]`));
    expect(skipped.outcome).toEqual({ kind: 'skipped', reason: 'value_too_large' });
    expect(budget.used).toBe(0); // before the end: the rest of a long body holds nothing
    // A value held across chunks, over the first hold buffer (1 KiB): the hold grows, all released at the end.
    const grown = createJsonPatch(pairs, { maxValueBytes: MIB, budget });
    grown.write(Buffer.from(`[{"metadata":"${'x'.repeat(600)}`));
    grown.write(Buffer.from('x'.repeat(1000)));
    grown.write(Buffer.from('x'.repeat(1000)));
    expect(budget.used).toBeGreaterThanOrEqual(2600);
    grown.write(Buffer.from('"}]'));
    grown.end();
    expect(grown.outcome).toEqual({ kind: 'patched' });
    expect(budget.used).toBe(0);
  });

  it('counts a piece it inserted into a canonical value whose hold the budget then refuses (fix 112)', () => {
    // At the inner `}`, the piece goes out, then holding it in the outer value needs the hold to grow
    // past 1 KiB, which a budget of 1,500 bytes refuses: the patch stops after the piece.
    const text = `{"metadata":{"pad":"${'p'.repeat(960)}","metadata":"${'y'.repeat(28)}"}}`;
    const piece = `,"tags":"${'y'.repeat(28)}"`;
    const patched = text.replace(`${'y'.repeat(28)}"}}`, `${'y'.repeat(28)}"${piece}}}`);
    const inserted: string[] = [];
    const patch = createJsonPatch(pairs, {
      maxValueBytes: MIB,
      budget: createBufferBudget(1500),
      onInsert: (_canonical, alias) => inserted.push(alias),
    });
    expect(patch.write(Buffer.from(text)).toString()).toBe(patched);
    patch.end();
    expect(patch.outcome).toEqual({ kind: 'skipped', reason: 'budget_exhausted' });
    expect(inserted).toEqual(['tags']);
    // The whole-buffer form gives the same bytes, and the piece among its insertions.
    const whole = patchJson(pairs, Buffer.from(text), { budget: createBufferBudget(1500) });
    expect(whole.body.toString()).toBe(patched);
    expect(whole.insertions).toEqual([{ pair: 0, offset: text.length - 2, length: piece.length }]);
  });

  it('never throws on a scanner failure without an onScanFailure', () => {
    const patch = createJsonPatch(pairs, { maxValueBytes: MIB });
    injectScanFailure(new Error('unreachable'));
    const body = Buffer.from('{"metadata":1}');
    expect(patch.write(body)).toBe(body);
    expect(patch.outcome).toEqual({ kind: 'skipped', reason: 'scanner_failed' });
  });
});
