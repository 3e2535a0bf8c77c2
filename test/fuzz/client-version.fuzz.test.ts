/**
 * Fuzzing the client-version parser (SPEC §3 step 4) with arbitrary strings and header shapes: it
 * terminates, never throws, accepts exactly strict SemVer 2.0 and the Python dev form, and reads
 * every accepted value as the version it spells.
 */
import fc from 'fast-check';
import { compare, valid } from 'semver';
import { describe, expect, it } from 'vitest';
import { isBelow, parseClientVersion } from '../../src/gates/client-version.ts';
import { FUZZ_TIMEOUT_MS, fuzzParams } from './budget.ts';
import { anyCodePoint } from './code-points.ts';

const numeric = fc.oneof(fc.nat(20).map(String), fc.constantFrom('0', '00', '01', '9007199254740993', '-1'));
const ident = fc.oneof(
  numeric,
  fc.stringMatching(/^[0-9A-Za-z-]{1,6}$/),
  fc.constantFrom('rc', 'dev', 'alpha', 'x.y', '', 'é'),
);
/** Version-like strings: near misses of the grammar are the interesting inputs. */
const versionLike = fc
  .tuple(
    fc.constantFrom('', '', '', 'v', ' ', '='),
    numeric,
    fc.array(numeric, { minLength: 0, maxLength: 3 }),
    fc.option(fc.array(ident, { minLength: 1, maxLength: 3 })),
    fc.option(fc.array(ident, { minLength: 1, maxLength: 2 })),
    fc.option(fc.nat(99_999_999)),
    fc.constantFrom('', '', '', ' ', '\t', '\n'),
  )
  .map(([prefix, major, rest, pre, build, dev, suffix]) => {
    let text = `${prefix}${[major, ...rest].join('.')}`;
    if (pre) text += `-${pre.join('.')}`;
    if (build) text += `+${build.join('.')}`;
    if (dev !== null) text += `.dev${dev}`;
    return text + suffix;
  });
const anyValue = fc.oneof(
  versionLike,
  fc.string({ unit: anyCodePoint, maxLength: 300 }),
  fc.string({ maxLength: 12 }),
);

const STRICT =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;
const PYTHON_DEV = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)\.dev(\d+)$/;

describe('parseClientVersion', () => {
  it(
    'never throws on any string, array or absence',
    () => {
      fc.assert(
        fc.property(
          fc.oneof(anyValue, fc.array(anyValue, { maxLength: 3 }), fc.constant(undefined)),
          (value) => {
            const parsed = parseClientVersion(value);
            expect(parsed === undefined || typeof parsed.version === 'string').toBe(true);
          },
        ),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'accepts exactly strict SemVer 2.0 and X.Y.Z.devN (up to 256 characters)',
    () => {
      fc.assert(
        fc.property(anyValue, (text) => {
          const expected =
            text.length <= 256 && (STRICT.test(text) || PYTHON_DEV.test(text)) && safeIntegers(text);
          const parsed = parseClientVersion(text);
          if (!expected) {
            expect(parsed, text).toBeUndefined();
            return;
          }
          // Major, minor or patch beyond 2^53 are rejected by the semver library; anything else is accepted.
          expect(parsed, text).toBeDefined();
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'reads an accepted value as the version it spells (build metadata aside; dev → -dev.N)',
    () => {
      fc.assert(
        fc.property(versionLike, (text) => {
          const parsed = parseClientVersion(text);
          if (!parsed) return;
          expect(valid(parsed.version)).toBe(parsed.version);
          const dev = PYTHON_DEV.exec(text);
          if (dev) expect(parsed.version).toBe(`${dev[1]}.${dev[2]}.${dev[3]}-dev.${dev[4]}`);
          else expect(parsed.version).toBe(text.replace(/\+.*$/, ''));
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'orders accepted versions as SemVer does, and isBelow agrees with that order',
    () => {
      fc.assert(
        fc.property(versionLike, versionLike, (a, b) => {
          const pa = parseClientVersion(a);
          const pb = parseClientVersion(b);
          if (!pa || !pb) return;
          expect(isBelow(pa, pb)).toBe(compare(pa.version, pb.version) < 0);
          expect(isBelow(pa, undefined)).toBe(false);
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );
});

/** Whether major, minor and patch are safe integers (the semver library's limit; prerelease ids may be larger). */
function safeIntegers(text: string): boolean {
  return (/^(\d+)\.(\d+)\.(\d+)/.exec(text) ?? [])
    .slice(1)
    .every((part) => Number.isSafeInteger(Number(part)));
}
