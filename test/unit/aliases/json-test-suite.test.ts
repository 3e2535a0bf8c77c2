/**
 * JSONTestSuite (https://github.com/nst/JSONTestSuite, MIT): every `y_` file must be accepted and every
 * `n_` file rejected by the scanner, the body rewrite and the patch; `i_` files are the implementation's
 * choice, pinned below so that a change of verdict is deliberate. The streaming patch gives the same
 * bytes and outcome wherever the body is cut into chunks (every split point of every file).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { KeyNames, scanJson } from '../../../src/aliases/json-scan.ts';
import { createJsonPatch, patchJson } from '../../../src/aliases/patch-json.ts';
import { rewriteBody } from '../../../src/aliases/rewrite-body.ts';
import { responsePairs } from '../../../src/aliases/table.ts';
import { ShimError } from '../../../src/core/errors.ts';
import { cutInserted } from './helpers.ts';

/** Vendored copy of the corpus (test/fixtures/JSONTestSuite, MIT; see its SOURCE file). */
const CORPUS =
  process.env.JSON_TEST_SUITE_DIR ??
  fileURLToPath(new URL('../../fixtures/JSONTestSuite/test_parsing', import.meta.url));
const files = readdirSync(CORPUS)
  .filter((f) => f.endsWith('.json'))
  .sort();
const read = (file: string) => readFileSync(join(CORPUS, file));

const pairs = responsePairs();
const renames = [{ canonical: 'metadata', alias: 'tags' }];
const noop = { onKey() {}, onValue() {}, onObjectEnd() {} };
const names = new KeyNames(['metadata', 'tags']);

/** The `i_` files this scanner accepts; every other `i_` file is rejected (not UTF-8, or a BOM). */
const ACCEPTED_I = new Set([
  'i_number_double_huge_neg_exp.json',
  'i_number_huge_exp.json',
  'i_number_neg_int_huge_exp.json',
  'i_number_pos_double_huge_exp.json',
  'i_number_real_neg_overflow.json',
  'i_number_real_pos_overflow.json',
  'i_number_real_underflow.json',
  'i_number_too_big_neg_int.json',
  'i_number_too_big_pos_int.json',
  'i_number_very_big_negative_int.json',
  'i_object_key_lone_2nd_surrogate.json',
  'i_string_1st_surrogate_but_2nd_missing.json',
  'i_string_1st_valid_surrogate_2nd_invalid.json',
  'i_string_incomplete_surrogate_and_escape_valid.json',
  'i_string_incomplete_surrogate_pair.json',
  'i_string_incomplete_surrogates_escape_valid.json',
  'i_string_invalid_lonely_surrogate.json',
  'i_string_invalid_surrogate.json',
  'i_string_inverted_surrogates_U+1D11E.json',
  'i_string_lone_second_surrogate.json',
  'i_structure_500_nested_arrays.json',
]);

const INVALID = { kind: 'skipped', reason: 'invalid_json' };

/** The streaming patch fed `body` cut at `cuts` (ascending offsets): output bytes and outcome. */
function streamed(body: Buffer, cuts: readonly number[]) {
  const patch = createJsonPatch(pairs, { maxValueBytes: 1024 * 1024 });
  const out: Buffer[] = [];
  let from = 0;
  for (const cut of [...cuts, body.length]) {
    out.push(Buffer.from(patch.write(body.subarray(from, cut))));
    from = cut;
  }
  out.push(Buffer.from(patch.end()));
  return { body: Buffer.concat(out), outcome: patch.outcome };
}

/** Every split point, or for files over 64 KiB a sample of them (the start, the end, every 9973rd). */
function splitPoints(length: number): number[] {
  if (length <= 64 * 1024) return Array.from({ length: length + 1 }, (_, k) => k);
  const points = [0, 1, 2, length - 2, length - 1, length];
  for (let k = 3; k < length - 2; k += 9973) points.push(k);
  return points.sort((a, b) => a - b);
}

function expectRejectedBody(bytes: Buffer) {
  let thrown: unknown;
  try {
    rewriteBody(renames, bytes);
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(ShimError);
  expect((thrown as ShimError).statusCode).toBe(400);
  expect((thrown as ShimError).reason).toBe('body');
  expect((thrown as ShimError).message).toMatch(/^Request body is not valid JSON: .+ at byte \d+\./);
}

describe('JSONTestSuite test_parsing', () => {
  it('is the whole corpus', () => {
    expect(files.length).toBe(318);
  });

  describe('y_ files: accepted', () => {
    it.each(files.filter((f) => f.startsWith('y_')))('%s', (file) => {
      const bytes = read(file);
      expect(scanJson(bytes, names, noop, Number.POSITIVE_INFINITY)).toBeUndefined();
      expect(rewriteBody(renames, bytes).body).toBe(bytes);
      const result = patchJson(pairs, bytes);
      expect(result.outcome).toEqual({ kind: 'unchanged' });
      expect(result.body).toBe(bytes);
    });
  });

  describe('n_ files: rejected', () => {
    it.each(files.filter((f) => f.startsWith('n_')))('%s', (file) => {
      const bytes = read(file);
      const error = scanJson(bytes, names, noop, Number.POSITIVE_INFINITY);
      expect(error).toBeDefined();
      expect(error!.offset).toBeGreaterThanOrEqual(0);
      expect(error!.offset).toBeLessThanOrEqual(bytes.length);
      expectRejectedBody(bytes);
      // Never repaired: the bytes pass verbatim; an empty body is `unchanged` (nothing to patch).
      const result = patchJson(pairs, bytes);
      expect(result.outcome).toEqual(bytes.length === 0 ? { kind: 'unchanged' } : INVALID);
      expect(result.body.equals(bytes)).toBe(true);
    });
  });

  describe('i_ files: pinned verdicts', () => {
    it.each(files.filter((f) => f.startsWith('i_')))('%s', (file) => {
      const bytes = read(file);
      const accepted = ACCEPTED_I.has(file);
      expect(scanJson(bytes, names, noop, Number.POSITIVE_INFINITY) === undefined).toBe(accepted);
      if (accepted) expect(rewriteBody(renames, bytes).body).toBe(bytes);
      else expectRejectedBody(bytes);
      const result = patchJson(pairs, bytes);
      expect(result.outcome).toEqual(accepted ? { kind: 'unchanged' } : INVALID);
      expect(result.body.equals(bytes)).toBe(true);
    });
  });

  describe('each file wrapped as the value of a canonical member', () => {
    // `{"metadata":<file>}`: valid exactly when the file is, and then patched with an identical copy.
    it.each(files.filter((f) => !f.startsWith('i_')))('%s', (file) => {
      const bytes = read(file);
      const wrapped = Buffer.concat([Buffer.from('{"metadata":'), bytes, Buffer.from('}')]);
      const result = patchJson(pairs, wrapped);
      if (file.startsWith('n_')) {
        // Some n_ files are unclosed objects or arrays that the closing brace repairs; the rest stay invalid.
        // Pieces inserted before the first invalid byte stay (`{"metadata":{}}}`); cut, they give the input.
        if (result.outcome.kind === 'skipped')
          expect(cutInserted(result.body, result.insertions).equals(wrapped)).toBe(true);
        else expect(() => JSON.parse(wrapped.toString('utf8'))).not.toThrow();
      } else {
        expect(result.outcome).toEqual({ kind: 'patched' });
        // The copy goes just before the object's `}`, without the whitespace around the value.
        const [, lead, value, trail] = /^([ \t\n\r]*)([\s\S]*?)([ \t\n\r]*)$/.exec(bytes.toString('utf8'))!;
        expect(result.body.toString('utf8')).toBe(`{"metadata":${lead}${value}${trail},"tags":${value}}`);
        expect(cutInserted(result.body, result.insertions).equals(wrapped)).toBe(true);
      }
    });
  });

  describe('every split point: the streamed bytes and outcome are those of the whole body', () => {
    // Each file as it is, and wrapped as the value of a canonical member (so that copies cross the cuts).
    it.each(files)('%s', (file) => {
      const bytes = read(file);
      const wrapped = Buffer.concat([Buffer.from('{"metadata":'), bytes, Buffer.from('}')]);
      for (const body of [bytes, wrapped]) {
        const whole = patchJson(pairs, body);
        for (const cut of splitPoints(body.length)) {
          const split = streamed(body, [cut]);
          if (!split.body.equals(whole.body)) expect.fail(`${file}: cut at ${cut} changes the bytes`);
          expect(split.outcome).toEqual(whole.outcome);
        }
        // A few 3-way splits, and one byte per chunk for the small files.
        const n = body.length;
        for (const cuts of [
          [1, n - 1],
          [Math.floor(n / 3), Math.floor((2 * n) / 3)],
          [Math.floor(n / 2), Math.floor(n / 2) + 1],
        ]) {
          const split = streamed(
            body,
            cuts.filter((c) => c >= 0 && c <= n).sort((a, b) => a - b),
          );
          expect(split.body.equals(whole.body)).toBe(true);
          expect(split.outcome).toEqual(whole.outcome);
        }
        if (n <= 512) {
          const bytewise = streamed(
            body,
            Array.from({ length: n }, (_, k) => k),
          );
          expect(bytewise.body.equals(whole.body)).toBe(true);
          expect(bytewise.outcome).toEqual(whole.outcome);
        }
      }
    });
  });
});
