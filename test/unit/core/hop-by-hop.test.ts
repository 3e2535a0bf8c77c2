/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) are never forwarded; neither is any header named in `Connection`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  connectionOptions,
  connectionTokens,
  endToEndRawHeaders,
  forwardedValue,
  HOP_BY_HOP,
} from '../../../src/core/hop-by-hop.ts';

/** RFC 9110 §7.6.1 names, plus the RFC 2616 §13.5.1 ones and the de-facto `Proxy-Connection`. */
const HOP_NAMES = [
  'Connection',
  'Proxy-Connection',
  'Keep-Alive',
  'TE',
  'Transfer-Encoding',
  'Upgrade',
  'Trailer',
  'Proxy-Authenticate',
  'Proxy-Authorization',
];

describe('HOP_BY_HOP', () => {
  it.each(HOP_NAMES)('contains %s (lower-cased)', (name) => {
    expect(HOP_BY_HOP.has(name.toLowerCase())).toBe(true);
  });

  it.each(['content-length', 'content-type', 'set-cookie', 'host', 'authorization', 'cookie', 'x-api-key'])(
    'does not contain the end-to-end header %s',
    (name) => {
      expect(HOP_BY_HOP.has(name)).toBe(false);
    },
  );
});

describe('connectionOptions', () => {
  it.each<[string | string[] | undefined, string[]]>([
    [undefined, []],
    ['', []],
    ['close', ['close']],
    ['keep-alive', ['keep-alive']],
    ['Close', ['close']],
    ['Keep-Alive, X-Foo', ['keep-alive', 'x-foo']],
    [' X-Foo ,  close ,, ', ['x-foo', 'close']],
    [
      ['X-A', 'close, X-B'],
      ['x-a', 'close', 'x-b'],
    ],
  ])('%j → %j', (value, expected) => {
    expect(connectionOptions(value)).toEqual(expected);
  });
});

describe('connectionTokens', () => {
  it.each<[string | string[] | undefined, string[]]>([
    [undefined, []],
    ['', []],
    ['close', []],
    ['keep-alive', []],
    ['Keep-Alive, X-Foo', ['x-foo']],
    [' X-Foo ,  x-bar ,, ', ['x-foo', 'x-bar']],
    [
      ['X-A', 'close, X-B'],
      ['x-a', 'x-b'],
    ],
    ['Upgrade', ['upgrade']],
  ])('%j → %j', (value, expected) => {
    expect(connectionTokens(value)).toEqual(expected);
  });
});

describe('forwardedValue', () => {
  it.each<[string, Record<string, string | string[]>, string, string | string[] | undefined]>([
    [
      'a header Connection names is not forwarded',
      { 'x-api-key': 'k', connection: 'x-api-key' },
      'x-api-key',
      undefined,
    ],
    [
      'named among others, in any case',
      { 'service-client-version': '0.59.0', connection: 'keep-alive, Service-Client-Version' },
      'service-client-version',
      undefined,
    ],
    [
      'a header Connection does not name goes on',
      { 'x-api-key': 'k', connection: 'keep-alive, x-other' },
      'x-api-key',
      'k',
    ],
    ['without Connection', { cookie: 'authtoken=a' }, 'cookie', 'authtoken=a'],
    ['an absent header', { connection: 'origin' }, 'origin', undefined],
    ['a list value', { 'x-list': ['a', 'b'], connection: 'close' }, 'x-list', ['a', 'b']],
  ])('%s', (_what, headers, name, expected) => {
    expect(forwardedValue(headers, name)).toEqual(expected);
  });
});

describe('endToEndRawHeaders', () => {
  it.each(HOP_NAMES)('drops %s in any case', (name) => {
    for (const spelled of [name, name.toLowerCase(), name.toUpperCase()]) {
      expect(endToEndRawHeaders(['Content-Type', 'text/plain', spelled, 'x', 'X-Id', '1'])).toEqual([
        'Content-Type',
        'text/plain',
        'X-Id',
        '1',
      ]);
    }
  });

  it('drops every hop-by-hop header at once', () => {
    const raw = HOP_NAMES.flatMap((n) => [n, 'v']);
    expect(endToEndRawHeaders(['Date', 'now', ...raw, 'ETag', '"1"'])).toEqual([
      'Date',
      'now',
      'ETag',
      '"1"',
    ]);
  });

  it('drops the headers named in Connection, in any case, from any Connection header', () => {
    const raw = [
      'Connection',
      'keep-alive, X-Private',
      'x-private',
      'secret',
      'X-Public',
      'ok',
      'X-Other',
      'gone',
      'connection',
      'x-other',
      'Keep-Alive',
      'timeout=5',
    ];
    expect(endToEndRawHeaders(raw)).toEqual(['X-Public', 'ok']);
  });

  it('keeps names as sent, order and repeated headers (two Set-Cookie)', () => {
    const raw = [
      'X-Request-ID',
      'abc',
      'Set-Cookie',
      'a=1; Path=/',
      'connection',
      'close',
      'content-type',
      'application/json',
      'Set-Cookie',
      'b=2; HttpOnly',
      'WWW-Authenticate',
      'Basic',
      'WWW-Authenticate',
      'Bearer',
    ];
    expect(endToEndRawHeaders(raw)).toEqual([
      'X-Request-ID',
      'abc',
      'Set-Cookie',
      'a=1; Path=/',
      'content-type',
      'application/json',
      'Set-Cookie',
      'b=2; HttpOnly',
      'WWW-Authenticate',
      'Basic',
      'WWW-Authenticate',
      'Bearer',
    ]);
  });

  it('drops the extra names asked for', () => {
    const raw = ['Content-Length', '10', 'ETag', '"x"', 'Content-Type', 'application/json'];
    expect(endToEndRawHeaders(raw, new Set(['content-length', 'etag']))).toEqual([
      'Content-Type',
      'application/json',
    ]);
  });

  it('returns a new list and leaves its input alone', () => {
    const raw = ['A', '1', 'Connection', 'close'];
    const out = endToEndRawHeaders(raw);
    expect(out).not.toBe(raw);
    expect(raw).toEqual(['A', '1', 'Connection', 'close']);
  });

  it('never returns a hop-by-hop name or a name listed in Connection (property)', () => {
    const randomCase = (s: string) =>
      fc
        .array(fc.boolean(), { minLength: s.length, maxLength: s.length })
        .map((flags) => [...s].map((c, i) => (flags[i] ? c.toUpperCase() : c.toLowerCase())).join(''));
    const token = fc.string({ unit: fc.constantFrom(...'abcxyz-'.split('')), minLength: 1, maxLength: 5 });
    const name = fc.oneof(
      fc.constantFrom(...HOP_NAMES).chain(randomCase),
      fc.constantFrom('Set-Cookie', 'Content-Type', 'content-length', 'X-Id').chain(randomCase),
      token,
    );
    const connectionValue = fc
      .array(fc.oneof(token, fc.constantFrom('close', 'keep-alive', 'Set-Cookie', ' X-Id ', '')), {
        maxLength: 4,
      })
      .map((tokens) => tokens.join(','));
    const header = fc.oneof(
      fc.tuple(name, fc.string({ maxLength: 5 })),
      fc.tuple(fc.constantFrom('Connection', 'connection', 'CONNECTION'), connectionValue),
    );
    fc.assert(
      fc.property(fc.array(header, { maxLength: 12 }), (pairs) => {
        const raw = pairs.flat();
        const listed = new Set(
          pairs.filter(([n]) => n.toLowerCase() === 'connection').flatMap(([, v]) => connectionTokens(v)),
        );
        const out = endToEndRawHeaders(raw);
        const outNames = out.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
        for (const n of outNames) {
          expect(HOP_BY_HOP.has(n)).toBe(false);
          expect(listed.has(n)).toBe(false);
        }
        // What remains is exactly the kept pairs, in order, untouched.
        const expected = pairs
          .filter(([n]) => !HOP_BY_HOP.has(n.toLowerCase()) && !listed.has(n.toLowerCase()))
          .flat();
        expect(out).toEqual(expected);
      }),
      { numRuns: 1000 },
    );
  });
});
