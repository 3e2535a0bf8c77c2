import { describe, expect, it } from 'vitest';
import {
  assertKnownFields,
  assertKnownParams,
  intParam,
  isJsonMediaType,
  metadataObject,
  parseJsonObject,
  parseQuery,
  uuidListParam,
  uuidPathParam,
} from '../../../src/reference-backend/validation.ts';

const A = 'a0000000-0000-4000-8000-000000000001';
const B = 'a0000000-0000-4000-8000-000000000002';

function message(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

describe('parseQuery', () => {
  it.each([
    ['', {}],
    ['a=1', { a: { values: ['1'], structured: false } }],
    ['a=1&a=2', { a: { values: ['1', '2'], structured: true } }],
    ['tags[]=x&tags[]=y', { tags: { values: ['x', 'y'], structured: true } }],
    ['tags[k]=x', { tags: { values: ['x'], structured: true } }],
    ['tags%5B%5D=x', { tags: { values: ['x'], structured: true } }],
    ['flag', { flag: { values: [''], structured: false } }],
    ['a=b+c%20d', { a: { values: ['b c d'], structured: false } }],
    ['a=%zz', { a: { values: ['%zz'], structured: false } }],
    ['&&=x&b=', { b: { values: [''], structured: false } }],
  ])('%j', (raw, expected) => {
    expect(Object.fromEntries(parseQuery(raw))).toEqual(expected);
  });
});

describe('assertKnownParams / assertKnownFields', () => {
  it.each([
    ['tags=x', 'property tags should not exist'],
    ['tags[]=x', 'property tags should not exist'],
    ['tags[a]=x', 'property tags should not exist'],
    ['skip=1&tagTypeUUID=x', 'property tagTypeUUID should not exist'],
    ['skip=1&take=2', undefined],
  ])('query %j → %j', (raw, expected) => {
    expect(message(() => assertKnownParams(parseQuery(raw), new Set(['skip', 'take'])))).toBe(expected);
  });

  it.each([
    [{ name: 'x', tags: {} }, 'property tags should not exist'],
    [{ ignoreTags: true }, 'property ignoreTags should not exist'],
    [{ name: 'x' }, undefined],
  ])('body %j → %j', (body, expected) => {
    expect(message(() => assertKnownFields(body, new Set(['name'])))).toBe(expected);
  });
});

describe('intParam', () => {
  const bounds = { fallback: 100, min: 0, max: 10_000 };
  it.each([
    ['', 100, undefined],
    ['take=5', 5, undefined],
    ['take=abc', undefined, 'take must be an integer number'],
    ['take=1.5', undefined, 'take must be an integer number'],
    ['take=1&take=2', undefined, 'take must be an integer number'],
    ['take=-1', undefined, 'take must not be less than 0'],
    ['take=10001', undefined, 'take must not be greater than 10000'],
  ])('%j', (raw, value, error) => {
    expect(message(() => intParam(parseQuery(raw), 'take', bounds))).toBe(error);
    if (value !== undefined) expect(intParam(parseQuery(raw), 'take', bounds)).toBe(value);
  });
});

describe('uuidListParam', () => {
  it.each([
    ['', undefined, undefined],
    [`m=${A}`, [A], undefined],
    [`m=${A}&m=${B.toUpperCase()}`, [A, B], undefined],
    [`m[]=${A}&m[]=${B}`, [A, B], undefined],
    ['m=nope', undefined, 'm must be a UUID'],
    [`m[]=${A}&m[]=nope`, undefined, 'each value in m must be a UUID'],
  ])('%j', (raw, value, error) => {
    expect(message(() => uuidListParam(parseQuery(raw), 'm'))).toBe(error);
    if (error === undefined) expect(uuidListParam(parseQuery(raw), 'm')).toEqual(value);
  });
});

describe('isJsonMediaType', () => {
  it.each([
    ['application/json', true],
    ['Application/JSON; charset=utf-8', true],
    ['application/vnd.api+json', true],
    ['application/merge-patch+json', true],
    ['text/json', false],
    ['application/jsonx', false],
    ['text/plain', false],
    [undefined, false],
  ])('%j → %j', (type, expected) => {
    expect(isJsonMediaType(type)).toBe(expected);
  });
});

describe('parseJsonObject', () => {
  it.each([
    ['', {}],
    ['  ', {}],
    ['{"a":1}', { a: 1 }],
  ])('%j parses', (text, expected) => {
    expect(parseJsonObject(text)).toEqual(expected);
  });

  it.each([
    ['{"a":', /JSON/],
    ['nope', /not valid JSON/],
    ['[1]', /^request body must be a JSON object$/],
    ['"x"', /^request body must be a JSON object$/],
    ['null', /^request body must be a JSON object$/],
  ])('%j is rejected', (text, expected) => {
    expect(message(() => parseJsonObject(text))).toMatch(expected);
  });

  it('keeps __proto__ as an own member (so whitelisting reports it)', () => {
    const body = parseJsonObject('{"__proto__":{"x":1}}');
    expect(message(() => assertKnownFields(body, new Set()))).toBe('property __proto__ should not exist');
  });
});

describe('metadataObject', () => {
  it.each([
    [{}, undefined, undefined],
    [{ metadata: null }, undefined, undefined],
    [
      { metadata: { [A]: 'x', [B]: 2 } },
      [
        [A, 'x'],
        [B, 2],
      ],
      undefined,
    ],
    [{ metadata: { [A.toUpperCase()]: true } }, [[A, true]], undefined],
    [{ metadata: [] }, undefined, 'metadata must be an object'],
    [{ metadata: 'x' }, undefined, 'metadata must be an object'],
    [{ metadata: { nope: 'x' } }, undefined, 'each key in metadata must be a metadata type UUID'],
    [
      { metadata: { [A]: { v: 1 } } },
      undefined,
      'each value in metadata must be a string, number or boolean',
    ],
    [{ metadata: { [A]: null } }, undefined, 'each value in metadata must be a string, number or boolean'],
  ])('%j', (body, value, error) => {
    expect(message(() => metadataObject(body, 'metadata', false))).toBe(error);
    if (error === undefined) expect(metadataObject(body, 'metadata', false)).toEqual(value);
  });

  it('is required when asked', () => {
    expect(message(() => metadataObject({}, 'metadata', true))).toBe('metadata must be an object');
  });
});

describe('uuidPathParam', () => {
  it.each([
    [A, A],
    [A.toUpperCase(), A],
    [encodeURIComponent(A), A],
  ])('%j → %j', (raw, expected) => {
    expect(uuidPathParam(raw)).toBe(expected);
  });

  it.each(['abc', '', '%zz', `${A}x`])('%j is rejected', (raw) => {
    expect(message(() => uuidPathParam(raw))).toBe('Validation failed (uuid is expected)');
  });
});
