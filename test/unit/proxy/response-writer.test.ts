/**
 * Writing the upstream's response (SPEC §6; RFC 9110 §8.8.1 weak validators, §12.5.5 Vary): the
 * response head for streamed and patched bodies, and Vary merging.
 */
import { describe, expect, it } from 'vitest';
import {
  earlyHints,
  exposedNames,
  headSaysChunked,
  isBodiless,
  mergeVary,
  relayableReasonPhrase,
  responseHead,
  revalidationKeepsVary,
} from '../../../src/proxy/response-writer.ts';

describe('isBodiless (RFC 9110 §9.3.2, §6.4.1)', () => {
  it.each<[string | undefined, number, boolean]>([
    ['HEAD', 200, true],
    ['HEAD', 404, true],
    ['GET', 204, true],
    ['GET', 205, true],
    ['GET', 304, true],
    ['GET', 200, false],
    ['POST', 201, false],
    ['GET', 206, false],
    [undefined, 200, false],
  ])('%s %i → %s', (method, status, expected) => {
    expect(isBodiless(method, status)).toBe(expected);
  });
});

describe("headSaysChunked (RFC 9112 §6.1: a HEAD answer may say the GET's framing)", () => {
  it.each<[number, string, boolean]>([
    [200, '1.1', true],
    [404, '1.1', true],
    [200, '1.0', false],
    [200, '0.9', false],
    [204, '1.1', false],
    [304, '1.1', false],
  ])('%i to HTTP/%s → %s', (status, version, expected) => {
    expect(headSaysChunked(status, version)).toBe(expected);
  });
});

describe('relayableReasonPhrase (RFC 9112 §4)', () => {
  it.each<[string | undefined, string | undefined]>([
    ['OK', 'OK'],
    ['Not Found', 'Not Found'],
    ['', ''],
    ['Tab\there', 'Tab\there'],
    ['caf\u00e9 (obs-text)', 'caf\u00e9 (obs-text)'],
    ['NUL\0', undefined],
    ['bell\u0007', undefined],
    ['DEL\u007f', undefined],
    ['split\r\nX-Injected: 1', undefined],
    [undefined, undefined],
  ])('%j → %j', (phrase, expected) => {
    expect(relayableReasonPhrase(phrase)).toBe(expected);
  });
});

describe('mergeVary', () => {
  it.each<[string | undefined, string]>([
    [undefined, 'Service-Client-Version'],
    ['', 'Service-Client-Version'],
    ['Accept-Encoding', 'Accept-Encoding, Service-Client-Version'],
    ['accept-encoding,  origin', 'accept-encoding, origin, Service-Client-Version'],
    ['service-client-version', 'service-client-version'],
    ['Accept, SERVICE-CLIENT-VERSION', 'Accept, SERVICE-CLIENT-VERSION'],
    ['*', '*'],
    ['Accept, *', '*'],
    [' , Accept,, ', 'Accept, Service-Client-Version'],
    ['Accept-Encoding, Accept-Encoding', 'Accept-Encoding, Service-Client-Version'],
    ['Accept-Encoding, accept-encoding, Origin', 'Accept-Encoding, Origin, Service-Client-Version'],
    ['Service-Client-Version, service-client-version', 'Service-Client-Version'],
  ])('%j → %j', (upstream, expected) => {
    expect(mergeVary(upstream, 'Service-Client-Version')).toBe(expected);
  });

  it('is idempotent', () => {
    const once = mergeVary('Accept', 'Service-Client-Version');
    expect(mergeVary(once, 'Service-Client-Version')).toBe(once);
  });
});

describe('revalidationKeepsVary', () => {
  // RFC 9111 §4.3.4: a 304's fields replace the stored ones; a 304 without Vary leaves the stored Vary whole.
  it.each<[number, string | undefined, boolean]>([
    [304, undefined, true],
    [304, 'Accept-Encoding', false],
    [304, '', false],
    [200, undefined, false],
    [204, undefined, false],
    [404, undefined, false],
  ])('%d with Vary %j → %j', (status, vary, expected) => {
    expect(revalidationKeepsVary(status, vary)).toBe(expected);
  });
});

describe('exposedNames (CORS: the shim’s headers readable where the upstream allowed the origin)', () => {
  const signals = [
    'Warning',
    '299 - "tags is deprecated; use metadata"',
    'Deprecation',
    '@1',
    'Link',
    '<u>; rel="deprecation"',
    'Warning',
    'w2',
  ];

  it('a CORS response: each added name once, in order', () => {
    expect(exposedNames(['Access-Control-Allow-Origin', 'https://app.example'], signals)).toBe(
      'Warning, Deprecation, Link',
    );
  });

  it('not a CORS response (no Access-Control-Allow-Origin): nothing', () => {
    expect(exposedNames(['Content-Type', 'application/json', 'Vary', 'Origin'], signals)).toBeUndefined();
  });

  it('names the upstream already exposes (any case, any spacing) or safelisted ones are left out', () => {
    const raw = [
      'access-control-allow-origin',
      '*',
      'Access-Control-Expose-Headers',
      'x-request-id ,LINK',
      'Access-Control-Expose-Headers',
      'warning',
    ];
    expect(exposedNames(raw, [...signals, 'Cache-Control', 'no-store'])).toBe('Deprecation');
    expect(exposedNames(raw, ['Warning', 'w', 'Link', 'l'])).toBeUndefined();
  });

  it('`*` exposed by the upstream still gets the names (no wildcard for a credentialed request)', () => {
    const raw = [
      'Access-Control-Allow-Origin',
      'https://app.example',
      'Access-Control-Allow-Credentials',
      'true',
      'Access-Control-Expose-Headers',
      '*',
    ];
    expect(exposedNames(raw, ['Sunset', 's'])).toBe('Sunset');
  });
});

describe('responseHead', () => {
  const upstream = {
    status: 200,
    rawHeaders: [
      'Content-Type',
      'application/json',
      'Content-Length',
      '14',
      'ETag',
      '"e1"',
      'Set-Cookie',
      'a=1; HttpOnly',
      'Set-Cookie',
      'b=2',
      'Vary',
      'Accept-Encoding',
      'Connection',
      'keep-alive, X-Hop',
      'X-Hop',
      'h',
      'Transfer-Encoding',
      'chunked',
    ],
    etag: '"e1"',
    vary: 'Accept-Encoding',
  };

  it('streamed: end-to-end headers as sent, then the shim’s', () => {
    expect(responseHead(upstream, ['Warning', 'w'], { patched: false, varyName: undefined })).toEqual([
      'Content-Type',
      'application/json',
      'Content-Length',
      '14',
      'ETag',
      '"e1"',
      'Set-Cookie',
      'a=1; HttpOnly',
      'Set-Cookie',
      'b=2',
      'Vary',
      'Accept-Encoding',
      'Warning',
      'w',
    ]);
  });

  it('patched: no Content-Length, weak ETag, Set-Cookie untouched', () => {
    expect(responseHead(upstream, [], { patched: true, varyName: undefined })).toEqual([
      'Content-Type',
      'application/json',
      'Set-Cookie',
      'a=1; HttpOnly',
      'Set-Cookie',
      'b=2',
      'Vary',
      'Accept-Encoding',
      'ETag',
      'W/"e1+patched"',
    ]);
  });

  it('patched: no digest of the upstream bytes (RFC 9530, RFC 3230, RFC 1864); streamed: kept', () => {
    const digests = [
      'Content-Digest',
      'sha-256=:ypwdde+d3Vs=:',
      'Repr-Digest',
      'sha-256=:ypwdde+d3Vs=:',
      'Digest',
      'SHA-256=ypwdde+d3Vs=',
      'Content-MD5',
      'Q2hlY2sgSW50ZWdyaXR5IQ==',
    ];
    const withDigests = {
      status: 200,
      rawHeaders: ['Content-Type', 'application/json', ...digests],
      etag: undefined,
      vary: undefined,
    };
    expect(responseHead(withDigests, [], { patched: true, varyName: undefined })).toEqual([
      'Content-Type',
      'application/json',
    ]);
    expect(responseHead(withDigests, [], { patched: false, varyName: undefined })).toEqual(
      withDigests.rawHeaders,
    );
  });

  it('ranges refused (Range not forwarded): Accept-Ranges none replaces the upstream’s (RFC 9110 §14.3)', () => {
    const ranged = {
      status: 200,
      rawHeaders: ['Accept-Ranges', 'bytes', 'Content-Length', '5'],
      etag: undefined,
      vary: undefined,
    };
    expect(responseHead(ranged, [], { patched: false, varyName: undefined, rangesRefused: true })).toEqual([
      'Content-Length',
      '5',
      'Accept-Ranges',
      'none',
    ]);
    expect(responseHead(ranged, [], { patched: true, varyName: 'V', rangesRefused: true })).toEqual([
      'Vary',
      'V',
      'Accept-Ranges',
      'none',
    ]);
    expect(responseHead(ranged, [], { patched: false, varyName: undefined })).toEqual(ranged.rawHeaders);
  });

  it('a CORS response with headers of the shim: Access-Control-Expose-Headers names them, streamed or patched', () => {
    const cors = {
      status: 200,
      rawHeaders: ['Access-Control-Allow-Origin', 'https://app.example', 'Content-Length', '2'],
      etag: undefined,
      vary: undefined,
    };
    expect(responseHead(cors, ['Warning', 'w'], { patched: false, varyName: undefined })).toEqual([
      ...cors.rawHeaders,
      'Access-Control-Expose-Headers',
      'Warning',
      'Warning',
      'w',
    ]);
    expect(responseHead(cors, ['Warning', 'w'], { patched: true, varyName: undefined })).toEqual([
      'Access-Control-Allow-Origin',
      'https://app.example',
      'Access-Control-Expose-Headers',
      'Warning',
      'Warning',
      'w',
    ]);
    expect(responseHead(cors, [], { patched: true, varyName: undefined })).toEqual([
      'Access-Control-Allow-Origin',
      'https://app.example',
    ]);
  });

  it('one Access-Control-Expose-Headers line, the upstream’s members first (a 304 replaces a stored field whole)', () => {
    const cors = {
      status: 200,
      rawHeaders: [
        'Access-Control-Expose-Headers',
        'X-Request-Id, ',
        'Access-Control-Allow-Origin',
        'https://app.example',
        'access-control-expose-headers',
        'X-Trace',
      ],
      etag: undefined,
      vary: undefined,
    };
    expect(
      responseHead(cors, ['Warning', 'w', 'Deprecation', '@1'], { patched: false, varyName: undefined }),
    ).toEqual([
      'Access-Control-Allow-Origin',
      'https://app.example',
      'Access-Control-Expose-Headers',
      'X-Request-Id, X-Trace, Warning, Deprecation',
      'Warning',
      'w',
      'Deprecation',
      '@1',
    ]);
    // Nothing new to expose: the upstream's lines stay as they were.
    expect(responseHead(cors, ['X-Trace', 't'], { patched: false, varyName: undefined })).toEqual([
      ...cors.rawHeaders,
      'X-Trace',
      't',
    ]);
  });

  it('an exposure the upstream made hop-by-hop (named in Connection) is gone, so the names are exposed anew', () => {
    const cors = {
      status: 200,
      rawHeaders: [
        'Access-Control-Allow-Origin',
        'https://app.example',
        'Connection',
        'access-control-expose-headers',
        'Access-Control-Expose-Headers',
        'Warning',
      ],
      etag: undefined,
      vary: undefined,
    };
    expect(responseHead(cors, ['Warning', 'w'], { patched: false, varyName: undefined })).toEqual([
      'Access-Control-Allow-Origin',
      'https://app.example',
      'Access-Control-Expose-Headers',
      'Warning',
      'Warning',
      'w',
    ]);
  });

  it('with a Vary name: one merged Vary, streamed or patched', () => {
    for (const patched of [false, true]) {
      const head = responseHead(upstream, [], { patched, varyName: 'Service-Client-Version' });
      const vary = head.filter((_, i) => i % 2 === 1 && head[i - 1] === 'Vary');
      expect(vary).toEqual(['Accept-Encoding, Service-Client-Version']);
    }
  });

  it('a 204 carries no Content-Length (RFC 9110 §8.6), streamed or patched; a 304 keeps its own', () => {
    const noContent = {
      status: 204,
      rawHeaders: ['Content-Length', '5', 'X-Trace', 't'],
      etag: undefined,
      vary: undefined,
    };
    for (const patched of [false, true])
      expect(responseHead(noContent, [], { patched, varyName: undefined })).toEqual(['X-Trace', 't']);
    const notModified = { ...noContent, status: 304 };
    expect(responseHead(notModified, [], { patched: false, varyName: undefined })).toEqual(
      notModified.rawHeaders,
    );
    // The patched GET has no length: nor has its 304.
    expect(responseHead(notModified, [], { patched: true, varyName: undefined })).toEqual(['X-Trace', 't']);
  });

  it('with a Vary name and no upstream Vary: the name alone', () => {
    const head = responseHead({ status: 200, rawHeaders: [], etag: undefined, vary: undefined }, [], {
      patched: false,
      varyName: 'V',
    });
    expect(head).toEqual(['Vary', 'V']);
  });
});

describe('earlyHints', () => {
  it('keeps the end-to-end fields of a 103, lower-cased, repeats as arrays', () => {
    expect(
      earlyHints([
        'Link',
        '</a.css>; rel=preload; as=style',
        'Link',
        '</b.js>; rel=preload; as=script',
        'Connection',
        'X-Hop',
        'X-Hop',
        'h',
        'Keep-Alive',
        'timeout=5',
        'X-Trace',
        't1',
      ]),
    ).toEqual({
      link: ['</a.css>; rel=preload; as=style', '</b.js>; rel=preload; as=script'],
      'x-trace': 't1',
    });
  });

  it("a 103 field named like a member of Object.prototype: passed on as sent, never the prototype's member", () => {
    const hints = earlyHints([
      'Link',
      '</a.css>; rel=preload',
      'Constructor',
      'c1',
      'toString',
      't1',
      '__proto__',
      'p1',
      '__proto__',
      'p2',
    ]);
    expect(hints).toBeDefined();
    expect(Object.keys(hints!)).toEqual(['link', 'constructor', 'tostring', '__proto__']);
    expect(hints!.constructor).toBe('c1');
    expect(hints!.tostring).toBe('t1');
    expect(Object.getOwnPropertyDescriptor(hints, '__proto__')?.value).toEqual(['p1', 'p2']);
  });

  it('keeps every repeat of a field, in order', () => {
    const raw = ['Link', '</a.css>; rel=preload'];
    for (let k = 0; k < 1000; k++) raw.push('X-Hint', `h${k}`);
    const hints = earlyHints(raw)!;
    expect(hints['x-hint']).toEqual(Array.from({ length: 1000 }, (_, k) => `h${k}`));
  });

  it('drops a Content-Length (RFC 9110 §8.6: none in a 1xx)', () => {
    expect(earlyHints(['Link', '</a.css>; rel=preload', 'Content-Length', '5'])).toEqual({
      link: '</a.css>; rel=preload',
    });
  });

  it('is undefined without a Link (Node would send nothing)', () => {
    expect(earlyHints(['X-Trace', 't1'])).toBeUndefined();
    expect(earlyHints([])).toBeUndefined();
  });
});
