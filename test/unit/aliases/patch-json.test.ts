import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { injectScanFailure } from '../../../src/aliases/json-scan.ts';
import { createJsonPatch, GROWTH_SLACK, patchJson } from '../../../src/aliases/patch-json.ts';
import { ALIAS_TABLE, responsePairs } from '../../../src/aliases/table.ts';
import {
  addAliases,
  cutInserted,
  random,
  refuseNextMemoryGrow,
  serialize,
  treeArbitrary,
} from './helpers.ts';

const pairs = responsePairs();
/** The whole-buffer result in the shape these tables compare: the outcome, with body and pieces when patched. */
const patch = (text: string | Buffer) => {
  const result = patchJson(pairs, Buffer.isBuffer(text) ? text : Buffer.from(text));
  return result.outcome.kind === 'patched'
    ? { kind: 'patched' as const, body: result.body, insertions: result.insertions }
    : result.outcome;
};
const patched = (text: string) => {
  const result = patch(text);
  if (result.kind !== 'patched') throw new Error(`expected patched, got ${JSON.stringify(result)}`);
  return result.body.toString('utf8');
};

describe('patchJson — every response row of the service document table', () => {
  it.each(ALIAS_TABLE.filter((r) => r.where === 'response').map((r) => [r.canonical, r.alias] as const))(
    '%s → %s',
    (canonical, alias) => {
      const c = JSON.stringify(canonical);
      const a = JSON.stringify(alias);
      // canonical only → alias inserted at the end of the object, same value bytes
      expect(patched(`{"uuid":"u",${c}:[{"v":1.50}],"x":1}`)).toBe(
        `{"uuid":"u",${c}:[{"v":1.50}],"x":1,${a}:[{"v":1.50}]}`,
      );
      // both → unchanged
      expect(patch(`{${c}:[1],${a}:[2]}`)).toEqual({ kind: 'unchanged' });
      expect(patch(`{${a}:[2],${c}:[1]}`)).toEqual({ kind: 'unchanged' });
      // neither → unchanged
      expect(patch('{"uuid":"u","name":"metadata"}')).toEqual({ kind: 'unchanged' });
    },
  );
});

describe('patchJson — bytes', () => {
  it.each([
    [
      '{"metadata":12345678901234567890,"x":1.50}',
      '{"metadata":12345678901234567890,"x":1.50,"tags":12345678901234567890}',
    ],
    ['{ "metadata" : 1.50 , "x":1}', '{ "metadata" : 1.50 , "x":1,"tags":1.50}'],
    [
      '{"metadata":"\\u00e9\\n\\"","tags2":0}',
      '{"metadata":"\\u00e9\\n\\"","tags2":0,"tags":"\\u00e9\\n\\""}',
    ],
    [
      '[{"metadata":1},{"metadata":2,"tags":3},{"a":{"metadata":[]}}]',
      '[{"metadata":1,"tags":1},{"metadata":2,"tags":3},{"a":{"metadata":[],"tags":[]}}]',
    ],
    ['{"data":[{"metadata":{}}],"count":1}', '{"data":[{"metadata":{},"tags":{}}],"count":1}'],
    [
      '{"project":{"requiredMetadataTypes":["a"]},"metadata":null}',
      '{"project":{"requiredMetadataTypes":["a"],"requiredTags":["a"]},"metadata":null,"tags":null}',
    ],
    [
      '{"metadata":1,"requiredMetadataTypes":2}',
      '{"metadata":1,"requiredMetadataTypes":2,"tags":1,"requiredTags":2}',
    ],
    // escaped spellings count, on either side
    ['{"m\\u0065tadata":1}', '{"m\\u0065tadata":1,"tags":1}'],
    ['{"metadata":1,"t\\u0061gs":2}', null],
    // the alias after the canonical value: known only when the object closes
    ['{"metadata":[1],"tags":[2]}', null],
    ['{"metadata":[1],"x":{"tags":0},"tags":[2]}', null],
    // a value copied from the chunk must be held before a nested object's copies (found by fuzzing)
    [
      '{"metadata":1,"x":{"tags":1,"metadata":2},"y":{"metadata":3}}',
      '{"metadata":1,"x":{"tags":1,"metadata":2},"y":{"metadata":3,"tags":3},"tags":1}',
    ],
    [
      '{"requiredMetadataTypes":"r","tags":{"a":{"metadata":null}},"metadata":{"metadata":"m"}}',
      '{"requiredMetadataTypes":"r","tags":{"a":{"metadata":null,"tags":null}},"metadata":{"metadata":"m","tags":"m"},"requiredTags":"r"}',
    ],
    // canonical twice: the last value (JSON.parse semantics), after the last member
    ['{"metadata":1,"x":0,"metadata":2}', '{"metadata":1,"x":0,"metadata":2,"tags":2}'],
    // nested canonical: the copy is the patched value, so patching is idempotent
    [
      '{"metadata":{"metadata":[1]}}',
      '{"metadata":{"metadata":[1],"tags":[1]},"tags":{"metadata":[1],"tags":[1]}}',
    ],
    [
      '{"metadata":[{"metadata":1},{"metadata":2}]}',
      '{"metadata":[{"metadata":1,"tags":1},{"metadata":2,"tags":2}],"tags":[{"metadata":1,"tags":1},{"metadata":2,"tags":2}]}',
    ],
    // keys only, never string values; pretty-printing kept (the piece goes just before the `}`)
    ['["metadata",{"x":"metadata"}]', null],
    ['{\n  "metadata": [\n    1\n  ]\n}\n', '{\n  "metadata": [\n    1\n  ]\n,"tags":[\n    1\n  ]}\n'],
  ])('%j', (input, output) => {
    if (output === null) expect(patch(input)).toEqual({ kind: 'unchanged' });
    else {
      expect(patched(input)).toBe(output);
      expect(JSON.parse(output)).toEqual(addAliases(JSON.parse(input), pairs));
    }
  });

  it('reports the insertions', () => {
    expect(patch('[{"metadata":1},{"requiredMetadataTypes":[]}]')).toMatchObject({
      kind: 'patched',
      insertions: [
        { pair: 0, offset: 14, length: ',"tags":1'.length },
        { pair: 1, offset: 43, length: ',"requiredTags":[]'.length },
      ],
    });
  });
});

describe('patchJson — pairs', () => {
  it('accepts any pairs table, up to 30 pairs', () => {
    const custom = [{ canonical: 'new', alias: 'old' }];
    expect(patchJson(custom, Buffer.from('{"new":1}')).outcome).toEqual({ kind: 'patched' });
    const many = Array.from({ length: 31 }, (_, k) => ({ canonical: `c${k}`, alias: `a${k}` }));
    expect(() => patchJson(many, Buffer.from('{}'))).toThrow(/at most 30/);
    const thirty = many.slice(0, 30);
    expect(patchJson(thirty, Buffer.from('{"c29":1}')).body.toString()).toBe('{"c29":1,"a29":1}');
  });

  it('inserts aliases of every length whole, on both sides of the bound of the byte-by-byte copy', () => {
    // `,"alias":` is copied byte by byte up to 32 bytes, natively above: lengths around the bound.
    for (const length of [1, 27, 28, 29, 30, 200]) {
      const alias = 'a'.repeat(length);
      const body = patchJson([{ canonical: 'c', alias }], Buffer.from('[{"c":{"v":"é"}},{"c":2}]')).body;
      expect(body.toString()).toBe(`[{"c":{"v":"é"},"${alias}":{"v":"é"}},{"c":2,"${alias}":2}]`);
    }
  });
});

describe('patchJson — invalid input', () => {
  it('validates every body, with or without canonical keys (no precheck: the stream cannot look ahead)', () => {
    expect(patch('{"a":1')).toEqual({ kind: 'skipped', reason: 'invalid_json' });
    expect(patch('{"\\u006detadata":1,')).toEqual({ kind: 'skipped', reason: 'invalid_json' });
  });

  it.each([
    ['truncated', '{"metadata":[1,2'],
    ['trailing comma', '{"metadata":1,}'],
    ['two values', '{"a":1} {}'],
    ['a byte order mark', '\ufeff{"metadata":1}'],
  ])('skips invalid JSON (%s) and passes its bytes verbatim', (_, text) => {
    const result = patchJson(pairs, Buffer.from(text));
    expect(result.outcome).toEqual({ kind: 'skipped', reason: 'invalid_json' });
    expect(result.body.equals(Buffer.from(text))).toBe(true);
  });

  it('keeps the pieces inserted before the first invalid byte, and passes the rest verbatim', () => {
    const text = '[{"metadata":1},{"metadata":2},x]';
    const result = patchJson(pairs, Buffer.from(text));
    expect(result.outcome).toEqual({ kind: 'skipped', reason: 'invalid_json' });
    expect(result.body.toString()).toBe('[{"metadata":1,"tags":1},{"metadata":2,"tags":2},x]');
    const two = patchJson(pairs, Buffer.from('{"metadata":1} {}'));
    expect(two.outcome).toEqual({ kind: 'skipped', reason: 'invalid_json' });
    expect(two.body.toString()).toBe('{"metadata":1,"tags":1} {}');
  });

  it('passes an empty body as unchanged (nothing to patch)', () => {
    expect(patch('')).toEqual({ kind: 'unchanged' });
  });

  it('skips invalid UTF-8 in a key or a value', () => {
    const key = Buffer.concat([Buffer.from('{"metadata":1,"'), Buffer.from([0xff]), Buffer.from('":2}')]);
    const value = Buffer.concat([
      Buffer.from('{"metadata":"'),
      Buffer.from([0xed, 0xa0, 0x80]),
      Buffer.from('"}'),
    ]);
    expect(patch(key)).toEqual({ kind: 'skipped', reason: 'invalid_json' });
    expect(patch(value)).toEqual({ kind: 'skipped', reason: 'invalid_json' });
  });

  it('never throws, whatever the bytes', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 64 }),
        fc.constantFrom('', '{"metadata":', '[{"metadata":1},'),
        (bytes, prefix) => {
          const result = patch(Buffer.concat([Buffer.from(prefix), bytes]));
          expect(['patched', 'unchanged', 'skipped']).toContain(result.kind);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('skips canonical values nested so deeply in canonical values that copies would explode', () => {
    const depth = 40; // each level doubles the copies: 2^40 bytes if it were rendered
    const text = `${'{"metadata":'.repeat(depth)}1${'}'.repeat(depth)}`;
    expect(patch(text)).toEqual({ kind: 'skipped', reason: 'too_deep' });
  });

  it('still patches moderate nesting of canonical values within the growth slack', () => {
    const depth = 10;
    const text = `${'{"metadata":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const result = patch(text);
    expect(result.kind).toBe('patched');
    if (result.kind !== 'patched') return;
    expect(result.body.length).toBeLessThanOrEqual(text.length * 2 + GROWTH_SLACK);
    expect(JSON.parse(result.body.toString())).toEqual(addAliases(JSON.parse(text), pairs));
  });
});

describe('patchJson — size and depth', () => {
  it('patches at the bottom of 100,000 levels of nesting', () => {
    const depth = 100_000;
    const text = `${'[{"a":'.repeat(depth)}{"metadata":7}${'}]'.repeat(depth)}`;
    const result = patch(text);
    expect(result.kind).toBe('patched');
    if (result.kind !== 'patched') return;
    expect(result.body.toString()).toBe(text.replace('{"metadata":7}', '{"metadata":7,"tags":7}'));
  });

  it('counts the innermost object against the bound on open objects with reported members', () => {
    // maxValueBytes / 32 = 1,024 open objects with a reported member (here an alias, which opens one too).
    const nested = (levels: number) =>
      `${'{"tags":0,"x":'.repeat(levels)}{"metadata":1}${'}'.repeat(levels)}`;
    const options = { maxValueBytes: 32 * 1024 };
    const over = Buffer.from(nested(1024));
    expect(patchJson(pairs, over, options).outcome).toEqual({ kind: 'skipped', reason: 'too_deep' });
    expect(patchJson(pairs, over, options).body.equals(over)).toBe(true);
    const within = patchJson(pairs, Buffer.from(nested(1023)), options);
    expect(within.outcome).toEqual({ kind: 'patched' });
    expect(within.body.toString()).toBe(nested(1023).replace('{"metadata":1}', '{"metadata":1,"tags":1}'));
    // The same bound where the member's object is not closed in the same window (the text cut between
    // the value and the `}`): the frame is opened by onMember rather than inserted at once.
    const cutPatch = (levels: number) => {
      const text = Buffer.from(nested(levels));
      const cut = text.indexOf('{"metadata":1}') + '{"metadata":1'.length;
      const patch = createJsonPatch(pairs, options);
      const body = Buffer.concat([
        patch.write(text.subarray(0, cut)),
        patch.write(text.subarray(cut)),
        patch.end(),
      ]);
      return { outcome: patch.outcome, body: body.toString() };
    };
    expect(cutPatch(1024)).toEqual({ outcome: { kind: 'skipped', reason: 'too_deep' }, body: nested(1024) });
    expect(cutPatch(1023)).toEqual({
      outcome: { kind: 'patched' },
      body: nested(1023).replace('{"metadata":1}', '{"metadata":1,"tags":1}'),
    });
  });

  it('patches every level of 100,000 nested objects (when maxValueBytes allows that many open objects)', () => {
    const depth = 100_000;
    const text = `${'{"metadata":0,"x":'.repeat(depth)}0${'}'.repeat(depth)}`;
    const bounded = patchJson(pairs, Buffer.from(text));
    expect(bounded.outcome).toEqual({ kind: 'skipped', reason: 'too_deep' }); // 1 MiB / 32 B < 100,000
    expect(bounded.body.toString()).toBe(text);
    const whole = patchJson(pairs, Buffer.from(text), { maxValueBytes: 4 * 1024 * 1024 });
    const result =
      whole.outcome.kind === 'patched'
        ? { kind: 'patched' as const, body: whole.body, insertions: whole.insertions }
        : whole.outcome;
    expect(result.kind).toBe('patched');
    if (result.kind !== 'patched') return;
    expect(result.insertions).toHaveLength(depth);
    expect(result.body.toString()).toBe(text.replaceAll('}', ',"tags":0}'));
  });

  it('patches an object with 1,000,000 members', () => {
    const parts = ['{'];
    for (let k = 0; k < 1_000_000; k++) parts.push(`"k${k}":${k},`);
    parts.push('"metadata":[1]}');
    const text = parts.join('');
    const result = patch(text);
    expect(result.kind).toBe('patched');
    if (result.kind !== 'patched') return;
    expect(result.body.length).toBe(text.length + ',"tags":[1]'.length);
    expect(result.body.toString().endsWith('"metadata":[1],"tags":[1]}')).toBe(true);
  });

  it('patches a list of 10,000 missions', () => {
    const missions = Array.from({ length: 10_000 }, (_, k) => ({
      uuid: `m-${k}`,
      metadata: [{ uuid: `t-${k}`, value: k / 3 }],
      project: { requiredMetadataTypes: [`mt-${k % 7}`] },
    }));
    const text = JSON.stringify({ data: missions, count: 10_000 });
    const result = patch(text);
    expect(result.kind).toBe('patched');
    if (result.kind !== 'patched') return;
    expect(result.insertions).toHaveLength(20_000);
    expect(JSON.parse(result.body.toString())).toEqual(addAliases(JSON.parse(text), pairs));
  });
});

describe('patchJson — properties', () => {
  const keys = ['metadata', 'tags', 'requiredMetadataTypes', 'requiredTags'];
  const input = fc
    .tuple(treeArbitrary(keys), fc.integer())
    .map(([tree, seed]) => serialize(tree, random(seed)));

  it('matches the reference model (JSON.parse, add aliases)', () => {
    fc.assert(
      fc.property(input, (text) => {
        const result = patch(text);
        expect(result.kind).not.toBe('skipped');
        const out = result.kind === 'patched' ? result.body.toString() : text;
        expect(JSON.parse(out)).toEqual(addAliases(JSON.parse(text), pairs));
      }),
      { numRuns: 1000 },
    );
  });

  it('patch-then-cut gives the upstream bytes back; each piece is ,"alias":<value>', () => {
    fc.assert(
      fc.property(input, (text) => {
        const body = Buffer.from(text);
        const result = patch(body);
        if (result.kind !== 'patched') return;
        expect(cutInserted(result.body, result.insertions).equals(body)).toBe(true);
        let shift = 0;
        for (const { offset, length, pair } of result.insertions) {
          const piece = result.body.subarray(offset + shift, offset + shift + length).toString();
          expect(piece.startsWith(`,${JSON.stringify(pairs[pair]!.alias)}:`)).toBe(true);
          shift += length;
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('is idempotent: patching a patched body changes nothing', () => {
    fc.assert(
      fc.property(input, (text) => {
        const result = patch(text);
        if (result.kind === 'patched') expect(patch(result.body)).toEqual({ kind: 'unchanged' });
      }),
      { numRuns: 1000 },
    );
  });
});

describe('patchJson — a failure of the JSON scanner', () => {
  it('stops patching, passes the rest verbatim and calls onScanFailure with the trap', () => {
    const failures: Error[] = [];
    const patch = createJsonPatch(responsePairs(), {
      maxValueBytes: 1024,
      onScanFailure: (failure) => failures.push(failure),
    });
    expect(patch.write(Buffer.from('[{"metadata":1}')).toString()).toBe('[{"metadata":1,"tags":1}');
    const trap = new Error('unreachable');
    injectScanFailure(trap);
    const rest = Buffer.from(',{"metadata":2}]');
    expect(patch.write(rest)).toBe(rest);
    expect(patch.end().length).toBe(0);
    expect(failures).toEqual([trap]);
    expect(patch.outcome).toEqual({ kind: 'skipped', reason: 'scanner_failed' });
  });

  it('at the end, too: memory it cannot get is scanner_failed and onScanFailure, not a throw out of end()', () => {
    const failures: Error[] = [];
    const deep = createJsonPatch(responsePairs(), {
      maxValueBytes: 1024,
      onScanFailure: (failure) => failures.push(failure),
    });
    // 60,000 open levels: more than a fresh instance holds before its memory grows; a trap in another
    // patch's scan gives the instance up, so the deep one's end must grow the new instance's memory.
    const open = Buffer.from('['.repeat(60_000));
    expect(deep.write(open)).toBe(open);
    injectScanFailure(new Error('unreachable'));
    const other = createJsonPatch(responsePairs(), { maxValueBytes: 1024 });
    other.write(Buffer.from('[1]'));
    const refused = new RangeError('WebAssembly.Memory.grow(): Maximum memory size exceeded');
    const grow = refuseNextMemoryGrow(refused);
    try {
      expect(deep.end().length).toBe(0);
    } finally {
      grow.mockRestore();
    }
    expect(failures).toEqual([refused]);
    expect(deep.outcome).toEqual({ kind: 'skipped', reason: 'scanner_failed' });
  });
});
