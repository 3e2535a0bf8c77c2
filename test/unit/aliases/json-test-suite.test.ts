/**
 * JSONTestSuite (https://github.com/nst/JSONTestSuite, MIT): every `y_` file must be accepted and every
 * `n_` file rejected by the scanner, the body rewrite and the patch; `i_` files are the implementation's
 * choice, pinned below so that a change of verdict is deliberate.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { KeyNames, scanJson } from '../../../src/aliases/json-scan.ts';
import { patchJson } from '../../../src/aliases/patch-json.ts';
import { rewriteBody } from '../../../src/aliases/rewrite-body.ts';
import { responsePairs } from '../../../src/aliases/table.ts';
import { ShimError } from '../../../src/proxy/errors.ts';

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

/** Whether patchJson's precheck lets the body through to the full scan. */
const prechecked = (bytes: Buffer) =>
  bytes.includes('"metadata"') || bytes.includes('"requiredMetadataTypes"') || bytes.includes(0x5c);

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
      expect(patchJson(pairs, bytes).kind).toBe('unchanged');
      expect(patchJson(pairs, bytes, { precheck: false }).kind).toBe('unchanged');
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
      expect(patchJson(pairs, bytes, { precheck: false })).toEqual({
        kind: 'skipped',
        reason: 'invalid_json',
      });
      // With the precheck, a body that cannot hold a canonical key is passed on without a scan.
      expect(patchJson(pairs, bytes)).toEqual(
        prechecked(bytes) ? { kind: 'skipped', reason: 'invalid_json' } : { kind: 'unchanged' },
      );
    });
  });

  describe('i_ files: pinned verdicts', () => {
    it.each(files.filter((f) => f.startsWith('i_')))('%s', (file) => {
      const bytes = read(file);
      const accepted = ACCEPTED_I.has(file);
      expect(scanJson(bytes, names, noop, Number.POSITIVE_INFINITY) === undefined).toBe(accepted);
      if (accepted) expect(rewriteBody(renames, bytes).body).toBe(bytes);
      else expectRejectedBody(bytes);
      expect(patchJson(pairs, bytes, { precheck: false })).toEqual(
        accepted ? { kind: 'unchanged' } : { kind: 'skipped', reason: 'invalid_json' },
      );
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
        if (result.kind !== 'skipped') expect(() => JSON.parse(wrapped.toString('utf8'))).not.toThrow();
      } else {
        expect(result.kind).toBe('patched');
        if (result.kind !== 'patched') return;
        // The copy goes right after the value, before any whitespace that follows it.
        const [, lead, value, trail] = /^([ \t\n\r]*)([\s\S]*?)([ \t\n\r]*)$/.exec(bytes.toString('utf8'))!;
        expect(result.body.toString('utf8')).toBe(`{"metadata":${lead}${value},"tags":${value}${trail}}`);
      }
    });
  });
});
