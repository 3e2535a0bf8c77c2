/**
 * Fuzzing the response patcher (SPEC §6) with arbitrary bytes and arbitrary JSON: it terminates, never
 * throws, agrees with a strict RFC 8259 oracle on which bodies are JSON, and every patch satisfies the
 * alias invariants — cut the inserted pieces and the upstream bytes come back; parsed, every object
 * with a canonical member and no alias has the alias with the same value; patching twice changes
 * nothing. (Goes with `src/aliases/` at 1.0.)
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { patchJson } from '../../../src/aliases/patch-json.ts';
import { responsePairs } from '../../../src/aliases/table.ts';
import { addAliases, cutInserted } from '../../unit/aliases/helpers.ts';
import { FUZZ_TIMEOUT_MS, fuzzParams } from '../budget.ts';
import { anyBody, jsonText, parseJson, parseStrict } from './arbitraries.ts';

const pairs = responsePairs();
const KEYS = ['metadata', 'tags', 'requiredMetadataTypes', 'requiredTags', 'm\\u0065tadata'];

describe('patchJson under fuzzing', () => {
  it(
    'never throws; skips exactly the bodies that are not strict UTF-8 JSON',
    () => {
      fc.assert(
        fc.property(anyBody(KEYS), (body) => {
          const result = patchJson(pairs, body, { precheck: false });
          expect(['patched', 'unchanged', 'skipped']).toContain(result.kind);
          const oracle = parseStrict(body);
          if (result.kind === 'skipped' && result.reason === 'too_deep') return;
          expect(result.kind === 'skipped', body.toString('latin1')).toBe(!oracle.valid);
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'with the precheck (as in production) never throws, and patches only valid JSON',
    () => {
      fc.assert(
        fc.property(anyBody(KEYS), (body) => {
          const result = patchJson(pairs, body);
          if (result.kind === 'patched') expect(parseStrict(body).valid).toBe(true);
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'patches valid JSON: cut gives the bytes back, the model holds, and it is idempotent',
    () => {
      fc.assert(
        fc.property(jsonText(KEYS), (text) => {
          const body = Buffer.from(text);
          const result = patchJson(pairs, body);
          expect(result.kind).not.toBe('skipped');
          if (result.kind !== 'patched') {
            expect(addAliases(parseJson(text), pairs)).toEqual(parseJson(text));
            return;
          }
          expect(cutInserted(result.body, result.insertions).equals(body)).toBe(true);
          // parseJson, not JSON.parse: see its comment (a V8 bug in Node 24 misreads escaped keys).
          expect(parseJson(result.body.toString())).toEqual(addAliases(parseJson(text), pairs));
          expect(patchJson(pairs, result.body)).toEqual({ kind: 'unchanged' });
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );
});
