/**
 * Fuzzing the response patcher (SPEC §6) with arbitrary bytes and arbitrary JSON: it terminates, never
 * throws, agrees with a strict RFC 8259 oracle on which bodies are JSON, and every patch satisfies the
 * alias invariants — cut the inserted pieces and the upstream bytes come back; parsed, every object
 * with a canonical member and no alias has the alias with the same value; patching twice changes
 * nothing; cutting the body into chunks anywhere changes nothing. (Goes with `src/aliases/` at 1.0.)
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createJsonPatch, patchJson } from '../../../src/aliases/patch-json.ts';
import { responsePairs } from '../../../src/aliases/table.ts';
import { addAliases, cutInserted } from '../../unit/aliases/helpers.ts';
import { FUZZ_TIMEOUT_MS, fuzzParams } from '../budget.ts';
import { anyBody, jsonText, parseJson, parseStrict } from './arbitraries.ts';

const pairs = responsePairs();
const KEYS = ['metadata', 'tags', 'requiredMetadataTypes', 'requiredTags', 'm\\u0065tadata'];

/** The streaming patch fed `body` cut at `cuts`: output bytes and outcome. */
function stream(body: Buffer, cuts: readonly number[]) {
  const patch = createJsonPatch(pairs, { maxValueBytes: 1024 * 1024 });
  const out: Buffer[] = [];
  let from = 0;
  for (const cut of [...new Set(cuts.map((c) => c % (body.length + 1)))].sort((a, b) => a - b)) {
    out.push(Buffer.from(patch.write(body.subarray(from, cut))));
    from = cut;
  }
  out.push(Buffer.from(patch.write(body.subarray(from))));
  out.push(Buffer.from(patch.end()));
  return { body: Buffer.concat(out), outcome: patch.outcome };
}

describe('patchJson under fuzzing', () => {
  it(
    'never throws; skips exactly the bodies that are not strict UTF-8 JSON, passing them verbatim',
    () => {
      fc.assert(
        fc.property(anyBody(KEYS), (body) => {
          const result = patchJson(pairs, body);
          expect(['patched', 'unchanged', 'skipped']).toContain(result.outcome.kind);
          const oracle = parseStrict(body);
          if (result.outcome.kind === 'skipped' && result.outcome.reason === 'too_deep') return;
          if (body.length === 0) return; // empty: `unchanged`, nothing to patch
          expect(result.outcome.kind === 'skipped', body.toString('latin1')).toBe(!oracle.valid);
          // Never repaired: whatever was inserted before the first invalid byte, cut, gives the input.
          expect(cutInserted(result.body, result.insertions).equals(body)).toBe(true);
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'gives the same bytes and outcome wherever the body is cut into chunks',
    () => {
      fc.assert(
        fc.property(
          fc.oneof(
            anyBody(KEYS),
            jsonText(KEYS).map((t) => Buffer.from(t)),
          ),
          fc.array(fc.nat(), { maxLength: 6 }),
          (body, cuts) => {
            const whole = patchJson(pairs, body);
            const split = stream(body, cuts);
            expect(split.body.equals(whole.body)).toBe(true);
            expect(split.outcome).toEqual(whole.outcome);
          },
        ),
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
          expect(result.outcome.kind).not.toBe('skipped');
          if (result.outcome.kind !== 'patched') {
            expect(addAliases(parseJson(text), pairs)).toEqual(parseJson(text));
            return;
          }
          expect(cutInserted(result.body, result.insertions).equals(body)).toBe(true);
          // parseJson, not JSON.parse: see its comment (a V8 bug in Node 24 misreads escaped keys).
          expect(parseJson(result.body.toString())).toEqual(addAliases(parseJson(text), pairs));
          expect(patchJson(pairs, result.body).outcome).toEqual({ kind: 'unchanged' });
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );
});
