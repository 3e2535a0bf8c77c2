/**
 * Fuzzing the query rewriter (SPEC §5) with arbitrary strings: it terminates, never throws, and keeps
 * the documented contract — only parameter names change (a piece is kept, or its base name replaced by
 * the canonical name, or, when a canonical form is present, dropped), nothing is reordered, no alias
 * form survives, and rewriting twice changes nothing; a query reported as cloaked behind a `;` (fix 158)
 * is left as it is. (Goes with `src/aliases/` at 1.0.)
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { rewriteQuery } from '../../../src/aliases/rewrite-query.ts';
import type { AliasRename } from '../../../src/aliases/table.ts';
import { FUZZ_TIMEOUT_MS, fuzzParams } from '../budget.ts';
import { anyCodePoint } from '../code-points.ts';

const RENAMES: readonly AliasRename[] = [
  { canonical: 'metadataByTypeUuid', alias: 'tags' },
  { canonical: 'metadataTypeUUID', alias: 'tagTypeUUID' },
];

/**
 * The documented name of a piece: its key up to `[` or `%5B`, or what a leading `[…]` (`%5B…%5D`)
 * holds when it closes before another opens; percent-decoded (undefined if malformed). `start`/`end`:
 * where the raw name lies in the piece.
 */
function nameOf(piece: string): { name: string | undefined; start: number; end: number } {
  const eq = piece.indexOf('=');
  const key = eq === -1 ? piece : piece.slice(0, eq);
  const leading = /^(\[|%5b)((?:(?!\[|%5b|\]|%5d).)*)(\]|%5d)/i.exec(key);
  let start = 0;
  let end = key.length;
  if (leading) {
    start = leading[1]!.length;
    end = start + leading[2]!.length;
  } else if (!/^(\[|%5b)/i.test(key)) {
    const m = /\[|%5b/i.exec(key);
    if (m) end = m.index;
  }
  try {
    return { name: decodeURIComponent(key.slice(start, end)), start, end };
  } catch {
    return { name: undefined, start, end };
  }
}

const NAME = fc.constantFrom(
  'tags',
  'tagTypeUUID',
  'metadataByTypeUuid',
  'metadataTypeUUID',
  't%61gs',
  'tags%5B%5D',
  'tags[]',
  'tags[x]',
  '[tags]',
  '%5Btags%5D',
  '[tags][]',
  '[t%61gs]x',
  '[ta[gs]',
  '[tags',
  '%74ags',
  'Tags',
  'tag',
  'take',
  'skip',
  '%',
  '%E0%A4',
  'tags%',
  '',
  'a+b',
);
const VALUE = fc.oneof(
  fc.constantFrom('', '1', 'a%20b', '%', '=', 'tags', '%26'),
  fc.string({ maxLength: 6 }),
);
const query = fc.oneof(
  fc
    .array(fc.tuple(NAME, fc.option(VALUE)), { maxLength: 8 })
    .map((ps) => ps.map(([n, v]) => (v === null ? n : `${n}=${v}`)).join('&')),
  fc.string({ unit: anyCodePoint, maxLength: 80 }),
  fc.string({ unit: fc.constantFrom(...'tags[]=&%5BbDd'.split('')), maxLength: 30 }),
);

describe('rewriteQuery under fuzzing', () => {
  it(
    'never throws, and returns the identical string when no alias is used',
    () => {
      fc.assert(
        fc.property(query, (q) => {
          const { query: out, aliasesUsed } = rewriteQuery(RENAMES, q);
          if (aliasesUsed.length === 0) expect(out).toBe(q);
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'changes names only: each piece kept, renamed in its base name, or dropped for a present canonical',
    () => {
      fc.assert(
        fc.property(query, (q) => {
          const { query: out, aliasesUsed, cloaked } = rewriteQuery(RENAMES, q);
          if (cloaked !== undefined) {
            // Refused by the layer (parameter cloaking behind a `;`, fix 158): nothing renamed.
            expect(out).toBe(q);
            expect(aliasesUsed).toContain(cloaked);
            return;
          }
          const inPieces = q.split('&');
          const outPieces = out.split('&');
          const names = inPieces.map((p) => nameOf(p).name);
          let j = 0;
          for (const piece of inPieces) {
            const { name, start, end } = nameOf(piece);
            const rename = RENAMES.find((r) => r.alias === name);
            if (!rename) {
              expect(outPieces[j++], q).toBe(piece);
              continue;
            }
            expect(aliasesUsed).toContain(rename.alias);
            if (names.includes(rename.canonical)) continue; // canonical wins: dropped
            expect(outPieces[j++], q).toBe(piece.slice(0, start) + rename.canonical + piece.slice(end));
          }
          if (out !== '' || q !== '') expect(j, q).toBe(out === '' && j === 0 ? 0 : outPieces.length);
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'leaves no alias form behind and is idempotent',
    () => {
      fc.assert(
        fc.property(query, (q) => {
          const { query: out, cloaked } = rewriteQuery(RENAMES, q);
          if (cloaked !== undefined) return; // refused, never forwarded (fix 158)
          for (const piece of out.split('&')) {
            expect(RENAMES.map((r) => r.alias)).not.toContain(nameOf(piece).name);
          }
          expect(rewriteQuery(RENAMES, out)).toEqual({ query: out, aliasesUsed: [] });
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );
});
