import fc from 'fast-check';
import qs from 'qs';
import { describe, expect, it, vi } from 'vitest';
import { decodeName, rewriteQuery } from '../../../src/aliases/rewrite-query.ts';
import { compileRoutes } from '../../../src/aliases/route-match.ts';
import { ALIAS_TABLE } from '../../../src/aliases/table.ts';

const files = [{ canonical: 'metadataByTypeUuid', alias: 'tags' }];
const rewrite = (query: string) => rewriteQuery(files, query);

describe('rewriteQuery — every query row of the service document table', () => {
  const routes = compileRoutes();
  it.each(
    ALIAS_TABLE.filter((r) => r.where === 'query').map(
      (r) => [r.method!, r.path!, r.canonical, r.alias] as const,
    ),
  )('%s %s: %s ← %s', (method, path, canonical, alias) => {
    const renames = routes.match(method, path.replace(':uuid', 'p'))!.query;
    expect(rewriteQuery(renames, `${alias}=v1&take=10`)).toEqual({
      query: `${canonical}=v1&take=10`,
      aliasesUsed: [alias],
    });
    expect(rewriteQuery(renames, `${alias}=v1&${canonical}=v2`)).toEqual({
      query: `${canonical}=v2`,
      aliasesUsed: [alias],
    });
    expect(rewriteQuery(renames, 'take=10&skip=0')).toEqual({ query: 'take=10&skip=0', aliasesUsed: [] });
  });
});

describe('rewriteQuery — forms of a name', () => {
  it.each([
    ['tags=a', 'metadataByTypeUuid=a'],
    ['tags', 'metadataByTypeUuid'],
    ['tags=', 'metadataByTypeUuid='],
    ['tags[]=a&tags[]=b', 'metadataByTypeUuid[]=a&metadataByTypeUuid[]=b'],
    ['tags[x]=v', 'metadataByTypeUuid[x]=v'],
    ['tags[x][y]=v', 'metadataByTypeUuid[x][y]=v'],
    ['tags%5B%5D=v', 'metadataByTypeUuid%5B%5D=v'],
    ['tags%5b0%5d=v', 'metadataByTypeUuid%5b0%5d=v'],
    ['t%61gs=v', 'metadataByTypeUuid=v'],
    ['%74%61%67%73[]=v', 'metadataByTypeUuid[]=v'],
    ['tags=a=b&x=%ZZ', 'metadataByTypeUuid=a=b&x=%ZZ'],
    ['tags=%E2%9C%93+%20&a=1&&b=2&', 'metadataByTypeUuid=%E2%9C%93+%20&a=1&&b=2&'],
    // A key that starts with a bracket pair names what is inside it (qs: `[tags]` is `tags`).
    ['[tags]=v', '[metadataByTypeUuid]=v'],
    ['%5Btags%5D=v', '%5BmetadataByTypeUuid%5D=v'],
    ['%5btags]=v', '%5bmetadataByTypeUuid]=v'],
    ['[tags][]=a&[tags][]=b', '[metadataByTypeUuid][]=a&[metadataByTypeUuid][]=b'],
    ['[t%61gs]x=v', '[metadataByTypeUuid]x=v'],
  ])('%s → %s', (input, output) => {
    expect(rewrite(input)).toEqual({ query: output, aliasesUsed: ['tags'] });
  });

  it.each([
    'Tags=a', // names match case-sensitively
    'TAGS=a',
    'tagsx=a',
    'xtags=a',
    'tag=a',
    'a=tags',
    'tags%=a', // malformed percent-encoding matches no name
    't%6=a',
    '%E2%28=1',
    'ta+gs=a',
    'tags%5D=a',
    'tagsx5b=a', // `5b` without its `%` is no bracket
    'tags%2b=a', // `%2b` is `+`, not `%5B`
    'tags%5=a',
    '[tags=a', // a leading bracket never closed
    '[ta[gs]=a', // … or closed only after another opens: qs reads `[ta` then `[gs]`
    '[]tags=a',
    'x[tags]=a', // nested under x
    '[Tags]=a',
    '',
    '&&',
  ])('%j is not the alias: the identical string comes back', (input) => {
    const result = rewrite(input);
    expect(result).toEqual({ query: input, aliasesUsed: [] });
  });
});

describe('rewriteQuery — canonical wins', () => {
  it.each([
    ['tags=a&metadataByTypeUuid=b', 'metadataByTypeUuid=b'],
    ['metadataByTypeUuid=b&tags=a', 'metadataByTypeUuid=b'],
    ['x=1&tags=a&y=2&metadataByTypeUuid=b&tags[]=c&z=3', 'x=1&y=2&metadataByTypeUuid=b&z=3'],
    ['tags=a&tags=b&metadataByTypeUuid%5B%5D=c', 'metadataByTypeUuid%5B%5D=c'],
    ['metadataByTypeUuid[x]=c&t%61gs=a', 'metadataByTypeUuid[x]=c'],
    ['a=1&&tags=2&metadataByTypeUuid=3', 'a=1&&metadataByTypeUuid=3'],
    ['tags=1&&metadataByTypeUuid=3', '&metadataByTypeUuid=3'],
    ['metadataByTypeUuid', 'metadataByTypeUuid'],
    ['tags=U1&[metadataByTypeUuid]=U2', '[metadataByTypeUuid]=U2'],
    ['%5Btags%5D=a&metadataByTypeUuid[]=b', 'metadataByTypeUuid[]=b'],
  ])('%s → %s', (input, output) => {
    expect(rewrite(input).query).toBe(output);
  });

  it('handles several renames independently', () => {
    const renames = [
      { canonical: 'metadata', alias: 'tags' },
      { canonical: 'ignoreMissingMetadata', alias: 'ignoreTags' },
    ];
    expect(rewriteQuery(renames, 'ignoreTags=1&tags=2&metadata=3')).toEqual({
      query: 'ignoreMissingMetadata=1&metadata=3',
      aliasesUsed: ['tags', 'ignoreTags'],
    });
  });
});

describe('rewriteQuery — parameter cloaking behind a raw `;` (fix 158)', () => {
  // Twisted, Rack 2, CherryPy and Go before 1.17 split parameters on `;` as well as `&`.
  it.each([
    ['x=1;tags=a', 'an alias after a `;` in a value'],
    ['x;tags=a', 'an alias after a `;` in a key'],
    ['tags;x=1', 'an alias before a `;` in a key'],
    ['x=1;t%61gs[]=a&take=10', 'an encoded alias form'],
    ['metadataByTypeUuid=m;tags=a', 'an alias after the canonical name'],
    ['tags=a;metadataByTypeUuid=m', 'the canonical name after the alias'],
    ['x=1;metadataByTypeUuid=m&tags=a', 'the canonical name after a `;`, the alias after a `&`'],
    ['metadataByTypeUuid=m&tags=a;take=10', 'an alias piece to drop that holds a `;`'],
    ['x=1;[tags]=a', 'a leading-bracket form'],
  ])('%s (%s): reported, nothing renamed', (input) => {
    expect(rewrite(input)).toEqual({ query: input, aliasesUsed: ['tags'], cloaked: 'tags' });
  });

  it.each([
    ['tags=a;b', 'metadataByTypeUuid=a;b'],
    ['tags=a;b=c', 'metadataByTypeUuid=a;b=c'],
    ['x=1%3Btags=a&tags=b', 'x=1%3Btags=a&metadataByTypeUuid=b'],
    ['x=1;metadataByTypeUuid=m', 'x=1;metadataByTypeUuid=m'],
    ['x=a;b&tags=c', 'x=a;b&metadataByTypeUuid=c'],
  ])("%s → %s: a `;` beside no alias is a value's byte, as before", (input, output) => {
    const result = rewrite(input);
    expect(result.query).toBe(output);
    expect(result.cloaked).toBeUndefined();
  });

  it('names the first cloaked alias in the order of the renames, and every alias used', () => {
    const renames = [
      { canonical: 'metadata', alias: 'tags' },
      { canonical: 'ignoreMissingMetadata', alias: 'ignoreTags' },
    ];
    expect(rewriteQuery(renames, 'ignoreTags=1&x=2;tags=3')).toEqual({
      query: 'ignoreTags=1&x=2;tags=3',
      aliasesUsed: ['tags', 'ignoreTags'],
      cloaked: 'tags',
    });
  });

  /** The names a parser splitting on `&` and `;` reads (Twisted 22.4 `parse_qs`), decoded. */
  const semicolonNames = (q: string) =>
    q
      .split(/[&;]/)
      .filter((piece) => piece !== '')
      .map((piece) => decodeName(piece.split('=')[0]!));
  /** A form of the alias or the canonical name, as the shim reads names (qs's brackets). */
  const renamedForm = (name: string | undefined) =>
    name !== undefined && /^\[?(tags|metadataByTypeUuid)(\]|\[|$)/.test(name);

  it('a query not reported reads, to a parser that splits on `;`, with no alias and the canonical winning', () => {
    const part = fc.constantFrom(
      'tags',
      't%61gs',
      'tags[]',
      '[tags]',
      '%5Btags%5D',
      'metadataByTypeUuid',
      '[metadataByTypeUuid]',
      'x',
      'take',
      '',
    );
    const value = fc.constantFrom('', '=a', '=b;c', '=;', '=1;tags', '=m;metadataByTypeUuid=n');
    const pieces = fc.array(fc.tuple(part, value, fc.constantFrom('&', ';')), { maxLength: 6 });
    fc.assert(
      fc.property(pieces, (ps) => {
        const q = ps.map(([k, v, sep], i) => (i === 0 ? '' : sep) + k + v).join('');
        const result = rewrite(q);
        if (result.cloaked !== undefined) {
          expect(result.query).toBe(q);
          return;
        }
        const before = semicolonNames(q);
        const after = semicolonNames(result.query);
        expect(after).not.toContain('tags');
        // Nothing but the alias is lost: every other name is read as often as before.
        const others = (names: (string | undefined)[]) => names.filter((n) => !renamedForm(n)).sort();
        expect(others(after)).toEqual(others(before));
        const canonicalCount = (names: (string | undefined)[]) =>
          names.filter((n) => n === 'metadataByTypeUuid').length;
        if (before.includes('metadataByTypeUuid')) expect(canonicalCount(after)).toBe(canonicalCount(before));
      }),
      { numRuns: 3000 },
    );
  });
});

describe('rewriteQuery — properties', () => {
  const piece = fc.oneof(
    fc
      .constantFrom(
        'tags',
        't%61gs',
        'tags[]',
        'tags%5B%5D',
        'tags[k]',
        'metadataByTypeUuid',
        'take',
        '',
        'Tags',
      )
      .chain((key) =>
        fc
          .option(fc.webSegment(), { nil: undefined })
          .map((value) => (value === undefined ? key : `${key}=${value}`)),
      ),
    fc.webSegment(),
  );
  const query = fc.array(piece, { maxLength: 8 }).map((pieces) => pieces.join('&'));

  /** Pieces whose name is neither the alias nor the canonical name. */
  const others = (q: string) =>
    q.split('&').filter((p) => !/^(tags|t%61gs|metadataByTypeUuid)([[%=]|$)/.test(p));

  it('keeps every other piece byte for byte, in order', () => {
    fc.assert(
      fc.property(query, (q) => {
        expect(others(rewrite(q).query)).toEqual(others(q));
      }),
      { numRuns: 1000 },
    );
  });

  it('leaves no alias form, and keeps every canonical form as sent', () => {
    fc.assert(
      fc.property(query, (q) => {
        const result = rewrite(q);
        if (result.cloaked !== undefined) {
          expect(result.query).toBe(q); // refused by the layer (fix 158), never forwarded
          return;
        }
        const pieces = result.query.split('&');
        expect(pieces.filter((p) => /^(tags|t%61gs)([[%=]|$)/.test(p))).toEqual([]);
        const canonical = (s: string) => s.split('&').filter((p) => /^metadataByTypeUuid([[%=]|$)/.test(p));
        if (canonical(q).length > 0) expect(canonical(rewrite(q).query)).toEqual(canonical(q));
      }),
      { numRuns: 1000 },
    );
  });

  /**
   * What Express's extended query parser (qs, the reference backend's) reads from a query once the
   * rename is done: the alias's value under the canonical name, or only the canonical when both were
   * sent (SPEC §5).
   */
  const renamedByQs = (q: string) => {
    const parsed: Record<string, unknown> = qs.parse(q);
    if (Object.hasOwn(parsed, 'tags')) {
      if (!Object.hasOwn(parsed, 'metadataByTypeUuid')) parsed.metadataByTypeUuid = parsed.tags;
      delete parsed.tags;
    }
    return parsed;
  };

  it('agrees with qs: the rewritten query parses as the original with the alias renamed or dropped', () => {
    const key = fc.constantFrom(
      'tags',
      't%61gs',
      'tags[]',
      'tags%5B%5D',
      'tags[k]',
      '[tags]',
      '%5Btags%5D',
      '[tags][]',
      '[t%61gs]',
      '[tags]x',
      'metadataByTypeUuid',
      '[metadataByTypeUuid]',
      'metadataByTypeUuid[]',
      'x[tags]',
      '[take]',
      'take',
      'Tags',
    );
    const value = fc.constantFrom('', 'a', 'b%20c', '1');
    const pieces = fc.array(fc.tuple(key, fc.option(value, { nil: undefined })), { maxLength: 6 });
    fc.assert(
      fc.property(pieces, (ps) => {
        // Keys of one shape only per name: qs merges `tags=a` and `tags[k]=b` in ways that depend on order.
        const q = ps.map(([k, v]) => (v === undefined ? k : `${k}=${v}`)).join('&');
        expect(qs.parse(rewrite(q).query)).toEqual(renamedByQs(q));
      }),
      { numRuns: 2000 },
    );
  });

  it('is idempotent', () => {
    fc.assert(
      fc.property(query, (q) => {
        const first = rewrite(q);
        const once = first.query;
        if (first.cloaked !== undefined) expect(rewrite(once)).toEqual(first);
        else expect(rewrite(once)).toEqual({ query: once, aliasesUsed: [] });
      }),
      { numRuns: 1000 },
    );
  });
});

describe('decodeName — malformed escapes cost no exception (fix 83)', () => {
  /** What the rewrite did before fix 83: `decodeURIComponent`, a throw meaning "no name". */
  const reference = (raw: string): string | undefined => {
    try {
      return decodeURIComponent(raw);
    } catch {
      return undefined;
    }
  };
  /** Escapes that decode, and each way ECMA-262 `Decode` (RFC 3629) refuses one. */
  const pieces = [
    'a',
    '%',
    '%4',
    '%41',
    '%zz',
    '%%41',
    '%7f',
    '%80', // a continuation byte leading
    '%C3%A9',
    '%c3',
    '%c3a9', // the continuation not escaped
    '%C3%41', // not a continuation byte
    '%C0%AF', // overlong
    '%E2%82%AC',
    '%E0%A0%80', // U+0800, the first three-byte sequence
    '%E2%82',
    '%ED%A0%80', // a surrogate
    '%F0%9F%98%80',
    '%F4%90%80%80', // above U+10FFFF
    '%F8%80%80%80%80',
    '%FF',
    '%5B',
    'é',
  ];

  it('agrees with decodeURIComponent on every string of up to three pieces', () => {
    for (const a of pieces)
      for (const b of pieces)
        for (const c of ['', ...pieces]) expect(decodeName(a + b + c), a + b + c).toBe(reference(a + b + c));
  });

  it('agrees with decodeURIComponent on arbitrary strings of escapes', () => {
    const hex = fc.integer({ min: 0, max: 255 }).map((b) => `%${b.toString(16).padStart(2, '0')}`);
    const text = fc
      .array(fc.oneof(hex, fc.constantFrom('%', '%4', 'a', '%e0', '%f0', '%c2'), fc.string({ maxLength: 2 })))
      .map((parts) => parts.join(''));
    fc.assert(
      fc.property(text, (raw) => {
        expect(decodeName(raw)).toBe(reference(raw));
      }),
      { numRuns: 2000 },
    );
  });

  it.each(['%', '%ff', '%e0%80', 'a%', '%C0%AF'])(
    'a query of 10,000 pieces "%s" is judged without one exception',
    (piece) => {
      const decode = vi.spyOn(globalThis, 'decodeURIComponent');
      try {
        const q = Array(10_000).fill(piece).join('&');
        expect(rewrite(q)).toEqual({ query: q, aliasesUsed: [] });
        expect(decode.mock.results.filter((r) => r.type === 'throw')).toHaveLength(0);
      } finally {
        decode.mockRestore();
      }
    },
  );
});
