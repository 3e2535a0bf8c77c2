/**
 * Request hygiene (SPEC §3 step 1): origin-form targets without dot segments, encoded slashes,
 * backslashes or NUL; unambiguous framing; no protocol upgrades.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ShimError } from '../../../src/core/errors.ts';
import type { ExchangeState } from '../../../src/core/exchange.ts';
import {
  assertHygiene,
  checkExpectation,
  checkFraming,
  checkHost,
  checkHttpVersion,
  checkRequestTarget,
  checkSingleHost,
  hygieneGate,
  isUpgradeRequest,
} from '../../../src/gates/hygiene.ts';
import { fuzzParams } from '../../fuzz/budget.ts';
import { anyCodePoint } from '../../fuzz/code-points.ts';

describe('checkRequestTarget', () => {
  it.each([
    ['absolute-form', 'http://x/y'],
    ['absolute-form https', 'https://backend.internal/missions'],
    ['authority-form', 'x:80'],
    ['asterisk-form', '*'],
    ['empty', ''],
    ['relative path', 'missions/1'],
  ])('rejects a target that is not origin-form: %s %j', (_name, target) => {
    expect(checkRequestTarget(target)).toMatch(/origin-form/);
  });

  it.each([
    '/.',
    '/..',
    '/./a',
    '/../a',
    '/a/.',
    '/a/..',
    '/a/./b',
    '/a/../b',
    '/a/..?x=1',
    '/a/%2e/b',
    '/a/%2E/b',
    '/a/%2e%2e/b',
    '/a/%2E%2E',
    '/a/.%2e/b',
    '/a/%2e./b',
    '/a/%252e%252e/b',
    '/a/%252E%252E',
    '/a/%25252e%25252e/b',
    '/a/%25%32%65%25%32%65/b',
    '/a/..;x/b',
    '/a/..;/b',
    '/a/.;jsessionid=1/b',
    '/a/%2e%2e;x/b',
  ])('rejects the dot segment in %j', (target) => {
    expect(checkRequestTarget(target)).toMatch(/segments/);
  });

  it.each([
    '/a%2fb',
    '/a%2Fb',
    '/a/%2f',
    '/a%252fb',
    '/a%25252fb',
    '/a%25%32%66b',
    '/a%25%32%46b',
    '/a%5cb',
    '/a%5Cb',
    '/a%255cb',
    '/a%00b',
    '/a%2500b',
  ])('rejects the encoded slash, backslash or NUL in %j', (target) => {
    expect(checkRequestTarget(target)).toMatch(/encoded slash|backslash|NUL/);
  });

  it.each(['/a\\b', '/a\\..\\b', '/\\\\evil', '/a\0b'])('rejects a raw backslash or NUL: %j', (target) => {
    expect(checkRequestTarget(target)).toMatch(/backslash|NUL/);
  });

  it('rejects a path percent-encoded too many times over', () => {
    expect(checkRequestTarget('/a/%25252525252e')).toBeDefined();
    // Four rounds are inspected: a harmless `A` encoded three times over passes, four times over does not.
    expect(checkRequestTarget('/a%252541')).toBeUndefined();
    expect(checkRequestTarget('/a%25252541')).toBe('The path is percent-encoded too many times over.');
  });

  it.each(['/a%09..', '/a%0d%0a/b', '/a%7f', '/a%2509b', '/a%01'])(
    'rejects the control character, once decoded, in %j',
    (target) => {
      expect(checkRequestTarget(target)).toBe(
        'The path must not contain control characters (also percent-encoded).',
      );
    },
  );

  it.each([
    '/',
    '/missions',
    '/missions/',
    '/missions/5f0c3a9e-1f2b-4c3d-8e9f-0a1b2c3d4e5f/metadata',
    '/a/.hidden',
    '/a/..hidden',
    '/a/hidden.',
    '/a/...',
    '/a/..../b',
    '/a/.../b',
    '/a/b.c/d..e',
    '/files/a%20b',
    '/files/50%25',
    '/files/%E2%9C%93',
    '/files/a%2',
    '/files/100%',
    '/a;b=c/d',
    '/x?q=../y',
    '/x?q=%2e%2e%2f',
    '/x?path=a\\b',
    '/x?a=%00',
    '/files?tags[x]=v&tags[]=w',
  ])('accepts the legitimate target %j', (target) => {
    expect(checkRequestTarget(target)).toBeUndefined();
  });

  // Regression: a raw `#` is not allowed in a request target (RFC 9112 §3.2.1), yet Node's parser
  // passes `/static/..#/user/me` through; a public-path prefix (`/static/*`) would then match and an
  // upstream that resolves the path would serve `/user/me` unchecked.
  it('rejects a dot segment ended by a raw "#" (or the "#" itself)', () => {
    expect(checkRequestTarget('/static/..#/user/me')).toBeDefined();
  });

  describe('properties', () => {
    it('never throws, whatever the string', () => {
      fc.assert(
        fc.property(fc.oneof(fc.string({ unit: anyCodePoint }), fc.string({ unit: 'grapheme' })), (s) => {
          const result = checkRequestTarget(s);
          expect(result === undefined || typeof result === 'string').toBe(true);
          checkRequestTarget(`/${s}`);
        }),
        fuzzParams(), // 200 runs in npm test; `npm run fuzz` sets a long budget
      );
    });

    /** A harmless segment: unreserved characters, never only dots. */
    const segment = fc
      .string({ unit: fc.constantFrom(...'abcXYZ019-_~.'.split('')), minLength: 1, maxLength: 8 })
      .filter((s) => !/^\.{1,2}$/.test(s));
    const segments = fc.array(segment, { maxLength: 4 });
    const query = fc.oneof(
      fc.constant(''),
      fc.string({ unit: fc.constantFrom(...'ab=&./%2e\\'.split('')), maxLength: 10 }).map((q) => `?${q}`),
    );
    /** One dot, as sent or percent-encoded once, twice or byte by byte. */
    const dot = fc.constantFrom('.', '%2e', '%2E', '%252e', '%252E', '%25%32%65', '%25%32%45', '%25252e');

    it('rejects every path with a dot segment, however encoded', () => {
      fc.assert(
        fc.property(
          segments,
          fc.array(dot, { minLength: 1, maxLength: 2 }),
          fc.constantFrom('', ';', ';x', ';jsessionid=1'),
          fc.oneof(segments, fc.constant(null)),
          query,
          (before, dots, matrix, after, q) => {
            const head = before.map((s) => `/${s}`).join('');
            const tail = after === null ? '' : `/${after.join('/')}`;
            const target = `${head}/${dots.join('')}${matrix}${tail}${q}`;
            expect(checkRequestTarget(target), target).toBeDefined();
          },
        ),
        { numRuns: 1000 },
      );
    });

    it('rejects every path with an encoded slash, backslash or NUL', () => {
      const forbidden = fc.constantFrom(
        '%2f',
        '%2F',
        '%252f',
        '%252F',
        '%25%32%66',
        '%25%32%46',
        '%5c',
        '%5C',
        '%255c',
        '%00',
        '%2500',
        '\\',
      );
      fc.assert(
        fc.property(
          segments,
          segment,
          fc.nat(8),
          forbidden,
          segments,
          query,
          (before, s, at, bad, after, q) => {
            const cut = Math.min(at, s.length);
            const middle = `${s.slice(0, cut)}${bad}${s.slice(cut)}`;
            const target = ['', ...before, middle, ...after].join('/') + q;
            expect(checkRequestTarget(target), target).toBeDefined();
          },
        ),
        { numRuns: 1000 },
      );
    });

    it('accepts every path made of harmless segments, whatever the query', () => {
      fc.assert(
        fc.property(segments, fc.boolean(), query, (segs, slash, q) => {
          const target = `/${segs.join('/')}${slash && segs.length > 0 ? '/' : ''}${q}`;
          expect(checkRequestTarget(target), target).toBeUndefined();
        }),
        { numRuns: 1000 },
      );
    });
  });
});

describe('checkFraming', () => {
  it.each<[string, IncomingHttpHeaders]>([
    ['no body headers', {}],
    ['Content-Length only', { 'content-length': '10' }],
    ['chunked', { 'transfer-encoding': 'chunked' }],
    ['Chunked (codings are case-insensitive)', { 'transfer-encoding': 'Chunked' }],
    // Node's parser strips OWS (SP, HTAB) around a field value (RFC 9110 §5.5); a leading or trailing
    // space is not part of the value, so these are `chunked`.
    ['chunked with trailing OWS', { 'transfer-encoding': 'chunked ' }],
    ['chunked with leading OWS', { 'transfer-encoding': ' chunked' }],
    ['chunked with HTAB', { 'transfer-encoding': '\tchunked' }],
    ['Content-Length 2^53 − 1', { 'content-length': '9007199254740991' }],
    ['Content-Length with 20 leading zeros', { 'content-length': '000000000000000000003' }],
  ])('accepts %s', (_name, headers) => {
    expect(checkFraming(headers)).toBeUndefined();
  });

  it.each<[string, IncomingHttpHeaders]>([
    ['CL + TE', { 'content-length': '10', 'transfer-encoding': 'chunked' }],
    ['CL 0 + TE', { 'content-length': '0', 'transfer-encoding': 'chunked' }],
    ['CL + TE identity', { 'content-length': '10', 'transfer-encoding': 'identity' }],
  ])('rejects %s', (_name, headers) => {
    expect(checkFraming(headers)).toMatch(/both Content-Length and Transfer-Encoding/);
  });

  it.each(['9007199254740992', '9007199254740993', '18446744073709551615'])(
    'rejects Content-Length %s: above 2^53 − 1 it would reach the upstream rounded',
    (length) => {
      expect(checkFraming({ 'content-length': length })).toMatch(
        /larger than this proxy can forward exactly/,
      );
    },
  );

  it.each(['1.0', '0.9'])(
    'rejects any Transfer-Encoding in an HTTP/%s request (RFC 9112 §6.1)',
    (version) => {
      expect(checkFraming({ 'transfer-encoding': 'chunked' }, version)).toBe(
        'An HTTP/1.0 request must not carry Transfer-Encoding (RFC 9112 §6.1).',
      );
      expect(checkFraming({ 'content-length': '3' }, version)).toBeUndefined();
      expect(checkFraming({}, version)).toBeUndefined();
    },
  );

  it('accepts chunked in HTTP/1.1 (the default version)', () => {
    expect(checkFraming({ 'transfer-encoding': 'chunked' }, '1.1')).toBeUndefined();
  });

  it.each([
    'gzip, chunked',
    'chunked, identity',
    'chunked, chunked',
    'chunked,chunked',
    'chunked,',
    ', chunked',
    'chunked ;q=1',
    'chun ked',
    'chunked chunked',
    '"chunked"',
    'identity',
    'gzip',
    'xchunked',
    '',
  ])('rejects Transfer-Encoding %j', (te) => {
    expect(checkFraming({ 'transfer-encoding': te })).toMatch(/exactly "chunked"/);
  });

  // Regression: `String.prototype.trim` strips more than OWS (SP, HTAB; RFC 9110 §5.6.3): NBSP, VT,
  // FF and BOM too, so `chunked\u00a0` passed as "exactly chunked". Node's own parser refuses such a
  // body today; this is defence in depth.
  it.each(['chunked\u00a0', '\u000bchunked', 'chunked\u000c', '\ufeffchunked'])(
    'rejects Transfer-Encoding %j with non-OWS whitespace',
    (te) => {
      expect(checkFraming({ 'transfer-encoding': te })).toBeDefined();
    },
  );
});

describe('checkSingleHost', () => {
  it.each<[string[], boolean]>([
    [[], true],
    [['Host', 'a'], true],
    [['Host', 'a', 'X-Host', 'b'], true],
    [['Host', 'a', 'host', 'b'], false],
    [['HOST', 'a', 'Host', 'a'], false],
  ])('%j → one Host: %s', (raw, single) => {
    expect(checkSingleHost(raw)).toBe(single ? undefined : 'Send exactly one Host header.');
  });
});

describe('checkHost', () => {
  it.each([
    'shim.test',
    'example.com:8080',
    '127.0.0.1:1',
    '[::1]',
    '[::1]:8080',
    '[2001:db8::a]:443',
    '[v1.fe80::a+en1]',
    'a_b.example',
    'xn--bcher-kva.example',
    'host:', // an empty port (RFC 3986 §3.2.3)
  ])('accepts %j', (host) => {
    expect(checkHost(host)).toBeUndefined();
  });

  it('accepts an absent Host only in HTTP/1.0 (RFC 9112 §3.2)', () => {
    expect(checkHost(undefined, '1.0')).toBeUndefined();
    expect(checkHost(undefined, '1.1')).toMatch(/^An HTTP\/1\.1 request must carry a Host header/);
    expect(checkHost(undefined)).toMatch(/must carry a Host/);
  });

  it.each([
    'evil.test/reset?to=x',
    'a@evil.test',
    'user:pass@evil.test',
    'a b',
    'a\tb',
    'x"><script>',
    'evil.test#',
    'host:http',
    'host:80:80',
    '[::1',
    '[::1]x',
    '[::g]',
    '[127.0.0.1]',
    '%zz',
    'bücher.example',
    'evil.test\\',
  ])('rejects %j', (host) => {
    expect(checkHost(host)).toMatch(/^The Host header must be /);
  });

  it.each(['real.example,evil.test', 'real.example,', ',evil.test', 'a,b:8080'])(
    'rejects %j: in X-Forwarded-Host, a comma-separated list, it would be two hosts (RFC 9110 §5.6.1)',
    (host) => {
      expect(checkHost(host)).toMatch(/without a comma/);
    },
  );

  it.each(['', ':', ':80', ':8080'])(
    'rejects %j: an "http" URI has a non-empty host (RFC 9110 §4.2.1)',
    (host) => {
      expect(checkHost(host)).toMatch(/^The Host header must name a host/);
      expect(checkHost(host, '1.0')).toMatch(/^The Host header must name a host/);
    },
  );
});

describe('checkExpectation', () => {
  it.each<[string | undefined, string, boolean]>([
    [undefined, '1.1', true],
    ['100-continue', '1.1', true],
    ['100-Continue', '1.1', true],
    ['100-continue, x', '1.1', true], // as Node's server reads it: 100 Continue is sent
    ['foo', '1.1', false],
    ['', '1.1', false],
    ['200-ok', '1.1', false],
    ['100-continuex', '1.1', false],
    ['foo', '1.0', true], // HTTP/1.0: ignored (RFC 9110 §10.1.1)
  ])('%j in HTTP/%s → met: %s', (expect_, version, met) => {
    const problem = checkExpectation(expect_, version);
    if (met) expect(problem).toBeUndefined();
    else expect(problem).toMatch(/100-continue/);
  });
});

describe('checkHttpVersion', () => {
  it.each([
    ['1.1', true],
    ['1.0', true],
    ['0.9', true],
    ['2.0', false],
    ['3.0', false],
    ['1.2', false],
  ])('HTTP/%s → served: %s', (version, served) => {
    const problem = checkHttpVersion(version);
    if (served) expect(problem).toBeUndefined();
    else
      expect(problem).toBe(
        `HTTP/${version} is not supported on an HTTP/1.x connection: send the request as HTTP/1.1.`,
      );
  });
});

describe('isUpgradeRequest', () => {
  it.each<[IncomingHttpHeaders, boolean]>([
    [{}, false],
    [{ connection: 'upgrade' }, false],
    [{ upgrade: 'websocket', connection: 'Upgrade' }, true],
    [{ upgrade: 'h2c' }, true],
    [{ upgrade: '' }, true],
  ])('%j → %s', (headers, expected) => {
    expect(isUpgradeRequest(headers)).toBe(expected);
  });
});

describe('assertHygiene', () => {
  const statusOf = (target: string, headers: IncomingHttpHeaders, version = '1.1'): number | undefined => {
    try {
      assertHygiene(target, { host: 'shim.test', ...headers }, [], version);
      return undefined;
    } catch (err) {
      expect(err).toBeInstanceOf(ShimError);
      return (err as ShimError).statusCode;
    }
  };

  it.each<[string, IncomingHttpHeaders, number | undefined]>([
    ['/missions', {}, undefined],
    ['/missions', { 'transfer-encoding': 'chunked' }, undefined],
    ['/a/../b', {}, 400],
    ['http://x/y', {}, 400],
    ['/a%2fb', {}, 400],
    ['/missions', { 'content-length': '1', 'transfer-encoding': 'chunked' }, 400],
    ['/missions', { 'transfer-encoding': 'gzip, chunked' }, 400],
    ['/missions', { host: 'shim.test:8080' }, undefined],
    ['/missions', { host: 'evil.test/x' }, 400],
    ['/missions', { host: undefined }, 400],
    ['/missions', { expect: 'foo' }, 417],
    ['/missions', { expect: '100-continue' }, undefined],
    ['/socket', { upgrade: 'websocket', connection: 'Upgrade' }, 501],
    // The upgrade refusal comes first, whatever else is wrong.
    ['/a/../b', { upgrade: 'websocket' }, 501],
  ])('%s %j → %s', (target, headers, status) => {
    expect(statusOf(target, headers)).toBe(status);
  });

  it('refuses a second Host header (RFC 9112 §3.2) with 400', () => {
    expect(() =>
      assertHygiene('/missions', { host: 'shim.test' }, ['Host', 'shim.test', 'Host', 'evil.test']),
    ).toThrow(expect.objectContaining({ reason: 'hygiene', statusCode: 400 }));
  });

  it('lets an HTTP/1.0 request without Host or with any Expect through', () => {
    expect(statusOf('/missions', { host: undefined, expect: 'foo' }, '1.0')).toBeUndefined();
  });

  it('refuses another HTTP version with 505 first, whatever else is wrong', () => {
    expect(statusOf('/missions', {}, '2.0')).toBe(505);
    expect(statusOf('/a/../b', { upgrade: 'websocket' }, '2.0')).toBe(505);
    expect(() => assertHygiene('/', { host: 'a' }, [], '2.0')).toThrow(
      expect.objectContaining({ reason: 'http_version', statusCode: 505 }),
    );
  });

  it('uses the hygiene, expectation and upgrade reasons', () => {
    expect(() => assertHygiene('/', { host: 'a', expect: 'x' })).toThrow(
      expect.objectContaining({ reason: 'expectation', statusCode: 417 }),
    );
    expect(() => assertHygiene('/a/..', {})).toThrow(expect.objectContaining({ reason: 'hygiene' }));
    expect(() => assertHygiene('/', { upgrade: 'h2c' })).toThrow(
      expect.objectContaining({ reason: 'upgrade' }),
    );
  });
});

describe('hygieneGate', () => {
  const gate = (req: Partial<IncomingMessage>) => () =>
    hygieneGate(
      {
        headers: { host: 'shim.test' },
        rawHeaders: ['Host', 'shim.test'],
        httpVersion: '1.1',
        ...req,
      } as IncomingMessage,
      {} as ExchangeState,
    );

  it('checks the raw target, the headers, the raw headers and the version of the request', () => {
    expect(gate({ url: '/missions' })).not.toThrow();
    expect(gate({ url: '/a/../b' })).toThrow(expect.objectContaining({ reason: 'hygiene' }));
    expect(gate({ url: undefined })).toThrow(/origin-form/);
    expect(gate({ url: '/', rawHeaders: ['Host', 'a', 'Host', 'b'] })).toThrow(/exactly one Host/);
    expect(gate({ url: '/', headers: {}, httpVersion: '1.0' })).not.toThrow();
    expect(gate({ url: '/', headers: {}, httpVersion: '1.1' })).toThrow(/must carry a Host/);
  });
});
