import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { injectScanFailure } from '../../../src/aliases/json-scan.ts';
import { rewriteBody } from '../../../src/aliases/rewrite-body.ts';
import { compileRoutes } from '../../../src/aliases/route-match.ts';
import { ALIAS_TABLE, type AliasRename } from '../../../src/aliases/table.ts';
import { ShimError } from '../../../src/core/errors.ts';
import { entriesOf, Obj, objectArbitrary, random, renameMembers, serialize } from './helpers.ts';

const missions = [
  { canonical: 'metadata', alias: 'tags' },
  { canonical: 'ignoreMissingMetadata', alias: 'ignoreTags' },
];
const rewrite = (text: string, renames: readonly AliasRename[] = missions) => {
  const { body, aliasesUsed } = rewriteBody(renames, Buffer.from(text));
  return { text: body.toString('utf8'), aliasesUsed };
};

describe('rewriteBody — every body row of the service document table', () => {
  const routes = compileRoutes();
  const rows = ALIAS_TABLE.filter((r) => r.where === 'body');

  it.each(rows.map((r) => [r.method!, r.path!, r.canonical, r.alias] as const))(
    '%s %s: %s ← %s',
    (method, path, canonical, alias) => {
      const renames = routes.match(method, path.replace(':uuid', 'u-1'))!.body;
      const a = JSON.stringify(alias);
      const c = JSON.stringify(canonical);

      // alias only → renamed in place
      expect(rewrite(`{${a}:[1,"x"],"name":"m"}`, renames)).toEqual({
        text: `{${c}:[1,"x"],"name":"m"}`,
        aliasesUsed: [alias],
      });
      // both → canonical kept, alias dropped
      expect(rewrite(`{${a}:1,${c}:2}`, renames)).toEqual({ text: `{${c}:2}`, aliasesUsed: [alias] });
      expect(rewrite(`{${c}:2,${a}:1}`, renames)).toEqual({ text: `{${c}:2}`, aliasesUsed: [alias] });
      // neither → the same Buffer
      const neither = Buffer.from('{"name":"m","x":{"tags":1}}');
      expect(rewriteBody(renames, neither).body).toBe(neither);
    },
  );
});

describe('rewriteBody — bytes', () => {
  it('keeps values byte for byte', () => {
    expect(rewrite('{"tags":12345678901234567890,"x":1.50}').text).toBe(
      '{"metadata":12345678901234567890,"x":1.50}',
    );
    expect(rewrite('{ "tags" :\t[1.0e+2, "\\u00e9\\n", -0] , "y" : "ü" }').text).toBe(
      '{ "metadata" :\t[1.0e+2, "\\u00e9\\n", -0] , "y" : "ü" }',
    );
  });

  it('renames escaped spellings of the alias', () => {
    expect(rewrite('{"t\\u0061gs":1}')).toEqual({ text: '{"metadata":1}', aliasesUsed: ['tags'] });
    expect(rewrite('{"t\\u0061gs":1,"m\\u0065tadata":2}')).toEqual({
      text: '{"m\\u0065tadata":2}',
      aliasesUsed: ['tags'],
    });
  });

  it('leaves nested members and values alone', () => {
    const body = Buffer.from('{"a":{"tags":1},"b":["tags",{"tags":2}],"c":"tags"}');
    expect(rewriteBody(missions, body)).toEqual({ body, aliasesUsed: [] });
    expect(rewriteBody(missions, body).body).toBe(body);
  });

  it.each([
    ['{"tags":1}', '{"metadata":1}'],
    ['{"tags":1,"metadata":2}', '{"metadata":2}'],
    ['{"metadata":2,"tags":1}', '{"metadata":2}'],
    ['{"a":0,"tags":1,"metadata":2}', '{"a":0,"metadata":2}'],
    // whitespace: a dropped member takes one comma with it, and the whitespace between
    ['{ "tags" : 1 , "metadata" : 2 }', '{ "metadata" : 2 }'],
    ['{ "a" : 0 , "tags" : 1 , "metadata" : 2 }', '{ "a" : 0  , "metadata" : 2 }'],
    ['{\n  "tags": 1,\n  "metadata": 2\n}', '{\n  "metadata": 2\n}'],
    ['{\n  "a": 0,\n  "tags": 1,\n  "metadata": 2\n}', '{\n  "a": 0,\n  "metadata": 2\n}'],
    ['{\n  "metadata": 2,\n  "tags": 1\n}', '{\n  "metadata": 2\n}'],
    // duplicates of the alias: the last one wins (JSON.parse semantics)
    ['{"tags":1,"tags":2}', '{"metadata":2}'],
    ['{"tags":1,"a":0,"tags":2}', '{"a":0,"metadata":2}'],
    ['{"tags":1,"tags":2,"metadata":3}', '{"metadata":3}'],
    ['{"metadata":3,"tags":1,"tags":2}', '{"metadata":3}'],
    ['{"a":0,"tags":1,"tags":2,"b":0,"tags":3,"metadata":4}', '{"a":0,"b":0,"metadata":4}'],
    ['{"tags":1,"tags":2,"a":0,"metadata":3}', '{"a":0,"metadata":3}'],
    // two renames on one route
    ['{"ignoreTags":true,"tags":[]}', '{"ignoreMissingMetadata":true,"metadata":[]}'],
    ['{"ignoreTags":true,"tags":[],"metadata":[1]}', '{"ignoreMissingMetadata":true,"metadata":[1]}'],
    [
      '{"tags":[],"ignoreTags":true,"ignoreMissingMetadata":false}',
      '{"metadata":[],"ignoreMissingMetadata":false}',
    ],
  ])('%j → %j', (input, output) => {
    const result = rewrite(input);
    expect(result.text).toBe(output);
    expect(() => JSON.parse(result.text)).not.toThrow();
  });

  it('lists each alias used once, in table order', () => {
    expect(rewrite('{"tags":1,"ignoreTags":2,"tags":3}').aliasesUsed).toEqual(['tags', 'ignoreTags']);
  });

  it('returns other JSON values unchanged, the same Buffer', () => {
    for (const text of ['[{"tags":1}]', '"tags"', '1', 'null', '{}', ' {"a":1} ']) {
      const body = Buffer.from(text);
      expect(rewriteBody(missions, body).body).toBe(body);
    }
  });

  it('cannot pollute prototypes', () => {
    const before = Object.keys(Object.prototype);
    rewrite('{"__proto__":{"polluted":1},"constructor":{"prototype":{"x":1}},"tags":1}');
    expect(Object.keys(Object.prototype)).toEqual(before);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });
});

describe('rewriteBody — malformed bodies', () => {
  it.each([
    ['{"tags":1', 9, /expected ',' or '}'/],
    ['{"tags":1,}', 10, /expected a string key/],
    ['', 0, /expected a JSON value/],
    ['tags=1', 0, /expected a JSON value but found 't'/],
    ['{"tags":1}{}', 10, /after the JSON value/],
  ])('%j → 400 naming byte %d', (text, offset, message) => {
    const run = () => rewriteBody(missions, Buffer.from(text));
    expect(run).toThrow(ShimError);
    expect(run).toThrow(new RegExp(`at byte ${offset}\\.`));
    expect(run).toThrow(message);
    try {
      run();
    } catch (error) {
      expect((error as ShimError).statusCode).toBe(400);
      expect((error as ShimError).reason).toBe('body');
    }
  });

  it('says what to send', () => {
    expect(() => rewriteBody(missions, Buffer.from('{"tags":1'))).toThrow(
      /^Request body is not valid JSON: .* at byte 9\. Send a UTF-8 JSON text \(RFC 8259\)\.$/,
    );
  });

  it('rejects invalid UTF-8 anywhere, not only in keys', () => {
    const body = Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    expect(() => rewriteBody(missions, body)).toThrow(/invalid UTF-8 in string at byte 9\./);
  });
});

describe('rewriteBody — size and depth', () => {
  it('rewrites a body nested 100,000 levels deep (top level only)', () => {
    const depth = 100_000;
    const text = `{"tags":${'[{"tags":'.repeat(depth)}0${'}]'.repeat(depth)}}`;
    const { body, aliasesUsed } = rewriteBody(missions, Buffer.from(text));
    expect(aliasesUsed).toEqual(['tags']);
    expect(body.toString()).toBe(`{"metadata":${text.slice('{"tags":'.length)}`);
  });

  it('rewrites an object with 1,000,000 members', () => {
    const parts = ['{'];
    for (let k = 0; k < 1_000_000; k++) parts.push(`"k${k}":${k},`);
    parts.push('"tags":1,"metadata":2}');
    const text = parts.join('');
    const { body } = rewriteBody(missions, Buffer.from(text));
    expect(body.length).toBe(text.length - ',"tags":1'.length);
    expect(body.subarray(-20).toString()).toBe('"k999999":999999,"metadata":2}'.slice(-20));
  });
});

describe('rewriteBody — properties', () => {
  const keys = ['tags', 'metadata', 'ignoreTags', 'ignoreMissingMetadata'];
  const input = fc.tuple(objectArbitrary(keys), fc.integer());

  it('matches the reference model: canonical wins, last alias wins, order kept', () => {
    fc.assert(
      fc.property(input, ([object, seed]) => {
        const text = serialize(object, random(seed));
        const out = rewriteBody(missions, Buffer.from(text)).body.toString();
        const expected = serialize(renameMembers(object, missions), random(seed));
        expect(entriesOf(out)).toEqual(entriesOf(expected));
      }),
      { numRuns: 500 },
    );
  });

  it('leaves no alias member at the top level, and the canonical value when both were sent', () => {
    fc.assert(
      fc.property(input, fc.jsonValue(), fc.jsonValue(), ([object, seed], aliasValue, canonicalValue) => {
        const members = [...object.members.filter((m) => m.key !== 'metadata')];
        const at = seed % (members.length + 1);
        members.splice(Math.abs(at), 0, { key: 'tags', value: null });
        const text = serialize(new Obj(members), random(seed))
          .replace(/^\{/, () => `{"metadata":${JSON.stringify(canonicalValue)},`)
          .replace(/\}$/, () => `,"tags":${JSON.stringify(aliasValue)}}`);
        const parsed = JSON.parse(rewriteBody(missions, Buffer.from(text)).body.toString());
        expect(Object.hasOwn(parsed, 'tags')).toBe(false);
        expect(Object.hasOwn(parsed, 'ignoreTags')).toBe(false);
        expect(parsed.metadata).toEqual(JSON.parse(JSON.stringify(canonicalValue)));
      }),
      { numRuns: 300 },
    );
  });

  it('is idempotent: a rewritten body comes back as the same Buffer', () => {
    fc.assert(
      fc.property(input, ([object, seed]) => {
        const once = rewriteBody(missions, Buffer.from(serialize(object, random(seed)))).body;
        const twice = rewriteBody(missions, once);
        expect(twice.body).toBe(once);
        expect(twice.aliasesUsed).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it('changes nothing but the alias members: kept bytes appear in order', () => {
    fc.assert(
      fc.property(input, ([object, seed]) => {
        const text = serialize(object, random(seed));
        const out = rewriteBody(missions, Buffer.from(text)).body.toString();
        // Remove every key token of the rewritten names from both; the remaining bytes of the output
        // are a subsequence of the input's (members were only dropped, never altered).
        let cursor = 0;
        for (const ch of out.replace(/"metadata"|"ignoreMissingMetadata"/g, '')) {
          cursor = text.indexOf(ch, cursor);
          expect(cursor).toBeGreaterThanOrEqual(0);
          cursor++;
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe('rewriteBody — a failure of the JSON scanner is the shim’s, not the client’s', () => {
  it('throws a plain Error (the core answers 500 and logs it at error), not the 400 ShimError', () => {
    const trap = new Error('unreachable');
    injectScanFailure(trap);
    let thrown: unknown;
    try {
      rewrite('{"tags":1}');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(Error);
    expect(thrown).not.toBeInstanceOf(ShimError);
    expect((thrown as Error).message).toMatch(/the JSON scanner failed: unreachable/);
    expect((thrown as Error).cause).toBe(trap);
    // The next body is scanned as usual.
    expect(rewrite('{"tags":1}').text).toBe('{"metadata":1}');
  });
});
