/**
 * Differential fuzzing of `decodeName` (fix 83) against the code it replaced: `decodeURIComponent`
 * inside `try`, `undefined` when it throws. Fix 83 decides the outcome without an exception; any
 * difference is a behaviour change of the query rewrite (which names it renames). Pieces weighted
 * towards the escapes that `Decode` (ECMA-262) rejects: a `%` without two hex digits, a lone
 * continuation byte, overlong forms, surrogates encoded in UTF-8 (`%ED%A0%80`), sequences above
 * U+10FFFF, and truncated sequences; plus raw lone surrogates and other code points. (Review of fixes
 * 79–83: 3.3 million strings, exhaustive over every one- and two-byte escape, no difference.)
 * (Goes with `src/aliases/` at 1.0.)
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeName } from '../../../src/aliases/rewrite-query.ts';
import { FUZZ_TIMEOUT_MS, fuzzParams } from '../budget.ts';
import { anyCodePoint } from '../code-points.ts';

/** The decoding before fix 83 (d934fee). */
function throwingDecode(raw: string): string | undefined {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

const escapedByte = fc.tuple(fc.integer({ min: 0, max: 255 }), fc.boolean()).map(([byte, upper]) => {
  const hex = byte.toString(16).padStart(2, '0');
  return `%${upper ? hex.toUpperCase() : hex}`;
});
/** A lead byte and 0 to 4 bytes that often continue it (0x80–0xBF), escaped. */
const escapedSequence = fc
  .tuple(
    fc.integer({ min: 0xc0, max: 0xff }),
    fc.array(fc.oneof(fc.integer({ min: 0x80, max: 0xbf }), fc.integer({ min: 0, max: 255 })), {
      maxLength: 4,
    }),
  )
  .map(([lead, rest]) => [lead, ...rest].map((b) => `%${b.toString(16).padStart(2, '0')}`).join(''));
const piece = fc.oneof(
  escapedByte,
  escapedSequence,
  fc.constantFrom(
    '%',
    '%%',
    '%2',
    '%g0',
    '%0g',
    '%ED%A0%80',
    '%ED%B0%80',
    '%F4%90%80%80',
    '%C0%AF',
    '%E0%80%AF',
  ),
  fc.constantFrom('\ud800', '\udfff', '\ud83d\ude00', 'é', 'a', '[', '=', '+'),
  anyCodePoint,
);

describe('decodeName under differential fuzzing', () => {
  it(
    'decodes exactly what decodeURIComponent decodes, and refuses exactly what it throws on',
    () => {
      fc.assert(
        fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
          const raw = pieces.join('');
          expect(decodeName(raw)).toBe(throwingDecode(raw));
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );
});
