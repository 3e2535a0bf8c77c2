/**
 * Building the upstream request (SPEC §4; RFC 9110 §7.6.1, RFC 9112 §6): the smuggling defences as
 * pure functions — given the client's headers, the upstream's headers and framing.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import {
  buildUpstreamHeaders,
  type ClientHead,
  isUnderscoreSpelling,
  NOT_FORWARDED_AS_SENT,
  requestFraming,
  upstreamTarget,
} from '../../../src/proxy/outgoing-request.ts';

const client = (headers: IncomingHttpHeaders, over: Partial<ClientHead> = {}): ClientHead => ({
  method: 'GET',
  headers: { host: 'shim.test', ...headers },
  remoteAddress: '10.0.0.7',
  encrypted: false,
  ...over,
});

/** The built headers as `[name, value]` pairs with lower-cased names. */
const pairs = (flat: string[]) => {
  const out: Array<[string, string]> = [];
  for (let i = 0; i < flat.length; i += 2)
    out.push([(flat[i] as string).toLowerCase(), flat[i + 1] as string]);
  return out;
};
const values = (flat: string[], name: string) =>
  pairs(flat)
    .filter(([n]) => n === name)
    .map(([, v]) => v);

describe('requestFraming', () => {
  it.each<[string, IncomingHttpHeaders, number | undefined, unknown]>([
    ['Content-Length', { 'content-length': '12' }, undefined, { kind: 'length', length: 12 }],
    ['Content-Length 0', { 'content-length': '0' }, undefined, { kind: 'length', length: 0 }],
    ['chunked', { 'transfer-encoding': 'chunked' }, undefined, { kind: 'chunked' }],
    ['odd spelling of chunked', { 'transfer-encoding': 'gzip, cHuNkEd' }, undefined, { kind: 'chunked' }],
    [
      'both (TE wins, RFC 9112 §6.3)',
      { 'transfer-encoding': 'chunked', 'content-length': '5' },
      undefined,
      { kind: 'chunked' },
    ],
    ['a rewritten body', { 'transfer-encoding': 'chunked' }, 42, { kind: 'length', length: 42 }],
  ])('%s', (_name, headers, rewritten, expected) => {
    expect(requestFraming('POST', headers, rewritten)).toEqual(expected);
  });

  it('reads a Content-Length with leading zeros as its number (003 → 3)', () => {
    expect(requestFraming('POST', { 'content-length': '003' })).toEqual({ kind: 'length', length: 3 });
  });

  // RFC 9110 §8.6: Content-Length: 0 when the method defines a meaning for content; Node's default for
  // these methods would be an empty chunked body.
  it.each(['POST', 'PUT', 'PATCH', 'PROPFIND'])('no body on %s → Content-Length: 0', (method) => {
    expect(requestFraming(method, {})).toEqual({ kind: 'length', length: 0 });
  });

  it.each(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE'])('no body on %s → no framing at all', (method) => {
    expect(requestFraming(method, {})).toEqual({ kind: 'none' });
  });
});

describe('buildUpstreamHeaders', () => {
  it('keeps end-to-end headers and the client Host, in order', () => {
    const { headers } = buildUpstreamHeaders(client({ accept: 'application/json', 'x-api-key': 'k' }));
    expect(pairs(headers).slice(0, 3)).toEqual([
      ['host', 'shim.test'],
      ['accept', 'application/json'],
      ['x-api-key', 'k'],
    ]);
  });

  it('drops hop-by-hop headers (RFC 9110 §7.6.1)', () => {
    const { headers } = buildUpstreamHeaders(
      client({
        connection: 'keep-alive',
        'keep-alive': 'timeout=5',
        'proxy-connection': 'keep-alive',
        'proxy-authorization': 'Basic x',
        te: 'trailers',
        trailer: 'x',
        upgrade: 'h2c',
      }),
    );
    expect(pairs(headers).map(([n]) => n)).toEqual([
      'host',
      'x-forwarded-for',
      'x-forwarded-proto',
      'x-forwarded-host',
    ]);
  });

  it("gives a request without Host (HTTP/1.0) the upstream's authority, and no X-Forwarded-Host", () => {
    const noHost = { method: 'GET', headers: { accept: '*/*' }, remoteAddress: '10.0.0.1', encrypted: false };
    const { headers } = buildUpstreamHeaders(noHost, { upstreamHost: 'backend.internal:3000' });
    expect(pairs(headers)).toEqual([
      ['host', 'backend.internal:3000'],
      ['accept', '*/*'],
      ['x-forwarded-for', '10.0.0.1'],
      ['x-forwarded-proto', 'http'],
    ]);
  });

  it('adds no Host when the client sent none and no upstream authority is given', () => {
    const noHost = { method: 'GET', headers: { accept: '*/*' }, remoteAddress: '10.0.0.1', encrypted: false };
    const { headers } = buildUpstreamHeaders(noHost);
    expect(values(headers, 'host')).toEqual([]);
    expect(headers.every((h) => typeof h === 'string')).toBe(true);
  });

  it("keeps the client's Host, even empty, over the upstream's authority", () => {
    for (const host of ['shim.test', '']) {
      const { headers } = buildUpstreamHeaders(client({ host }), { upstreamHost: 'backend.internal:3000' });
      expect(values(headers, 'host')).toEqual([host]); // one Host: the client's
    }
  });

  it('drops the headers Connection names, but never Host', () => {
    const { headers } = buildUpstreamHeaders(
      client({ connection: 'X-Secret, host', 'x-secret': 's', 'x-other': 'o' }),
    );
    expect(values(headers, 'x-secret')).toEqual([]);
    expect(values(headers, 'x-other')).toEqual(['o']);
    expect(values(headers, 'host')).toEqual(['shim.test']);
  });

  it("drops the client's X-Forwarded-* that Connection names, and still sends this hop's (RFC 9110 §7.6.1)", () => {
    const { headers } = buildUpstreamHeaders(
      client({
        connection: 'X-Forwarded-For, x-forwarded-proto,X-FORWARDED-HOST',
        'x-forwarded-for': '6.6.6.6',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'evil.test',
      }),
    );
    expect(values(headers, 'x-forwarded-for')).toEqual(['10.0.0.7']);
    expect(values(headers, 'x-forwarded-proto')).toEqual(['http']);
    expect(values(headers, 'x-forwarded-host')).toEqual(['shim.test']);
  });

  it('keeps the X-Forwarded-* that Connection does not name', () => {
    const { headers } = buildUpstreamHeaders(
      client({
        connection: 'x-forwarded-host',
        'x-forwarded-for': '1.1.1.1',
        'x-forwarded-host': 'evil.test',
      }),
    );
    expect(values(headers, 'x-forwarded-for')).toEqual(['1.1.1.1, 10.0.0.7']);
    expect(values(headers, 'x-forwarded-host')).toEqual(['shim.test']);
  });

  it('re-frames a body of known length even when Connection names Content-Length (smuggling)', () => {
    const { headers, framing } = buildUpstreamHeaders(
      client({ connection: 'content-length', 'content-length': '5' }),
    );
    expect(values(headers, 'content-length')).toEqual(['5']);
    expect(framing).toEqual({ kind: 'length', length: 5 });
  });

  it('re-chunks a chunked body even when Connection names Transfer-Encoding', () => {
    const { headers, framing } = buildUpstreamHeaders(
      client({ connection: 'transfer-encoding', 'transfer-encoding': 'gzip, chunked' }),
    );
    expect(values(headers, 'transfer-encoding')).toEqual(['chunked']);
    expect(values(headers, 'content-length')).toEqual([]);
    expect(framing.kind).toBe('chunked');
  });

  it('never sends both Content-Length and Transfer-Encoding', () => {
    const { headers } = buildUpstreamHeaders(
      client({ 'transfer-encoding': 'chunked', 'content-length': '3' }),
    );
    expect(values(headers, 'content-length')).toEqual([]);
    expect(values(headers, 'transfer-encoding')).toEqual(['chunked']);
  });

  it('frames a rewritten body with its own length', () => {
    const { headers } = buildUpstreamHeaders(client({ 'transfer-encoding': 'chunked' }), {
      rewrittenLength: 17,
    });
    expect(values(headers, 'content-length')).toEqual(['17']);
    expect(values(headers, 'transfer-encoding')).toEqual([]);
  });

  it('sends no framing header for a GET, HEAD, DELETE or OPTIONS without a body', () => {
    for (const method of ['GET', 'HEAD', 'DELETE', 'OPTIONS']) {
      const { headers, framing } = buildUpstreamHeaders(client({}, { method }));
      expect(values(headers, 'content-length')).toEqual([]);
      expect(values(headers, 'transfer-encoding')).toEqual([]);
      expect(framing).toEqual({ kind: 'none' });
    }
  });

  it('sends Content-Length: 0, never chunked, for a POST, PUT or PATCH without a body (RFC 9110 §8.6)', () => {
    for (const method of ['POST', 'PUT', 'PATCH']) {
      const { headers, framing } = buildUpstreamHeaders(client({}, { method }));
      expect(values(headers, 'content-length')).toEqual(['0']);
      expect(values(headers, 'transfer-encoding')).toEqual([]);
      expect(framing).toEqual({ kind: 'length', length: 0 });
    }
  });

  it('drops Expect: Node already answered 100 Continue', () => {
    const { headers } = buildUpstreamHeaders(client({ expect: '100-continue', 'content-length': '3' }));
    expect(values(headers, 'expect')).toEqual([]);
  });

  it('appends this hop to X-Forwarded-For, -Proto and -Host', () => {
    const { headers } = buildUpstreamHeaders(
      client(
        {
          'x-forwarded-for': '1.1.1.1, 2.2.2.2',
          'x-forwarded-proto': 'https',
          'x-forwarded-host': 'edge.test',
        },
        { encrypted: true },
      ),
    );
    expect(values(headers, 'x-forwarded-for')).toEqual(['1.1.1.1, 2.2.2.2, 10.0.0.7']);
    expect(values(headers, 'x-forwarded-proto')).toEqual(['https, https']);
    expect(values(headers, 'x-forwarded-host')).toEqual(['edge.test, shim.test']);
  });

  it("joins every value of the client's X-Forwarded-* with `, ` before this hop's", () => {
    const { headers } = buildUpstreamHeaders(
      client({ 'x-forwarded-for': ['1.1.1.1', '2.2.2.2'], 'x-forwarded-host': ['a.test', 'b.test'] }),
    );
    expect(values(headers, 'x-forwarded-for')).toEqual(['1.1.1.1, 2.2.2.2, 10.0.0.7']);
    expect(values(headers, 'x-forwarded-host')).toEqual(['a.test, b.test, shim.test']);
  });

  it('passes Forwarded (RFC 7239) untouched in append mode', () => {
    const { headers } = buildUpstreamHeaders(client({ forwarded: 'for=1.1.1.1;proto=https' }));
    expect(values(headers, 'forwarded')).toEqual(['for=1.1.1.1;proto=https']);
  });

  it('drops a client Proxy header (httpoxy, CVE-2016-5385), keeps others that start with it', () => {
    const { headers } = buildUpstreamHeaders(
      client({ proxy: ['http://evil.test:8080', 'http://evil.test:8081'], 'proxy-id': 'kept' }),
    );
    expect(values(headers, 'proxy')).toEqual([]);
    expect(values(headers, 'proxy-id')).toEqual(['kept']);
  });

  it('a patching exchange sends If-Modified-Since only without If-None-Match (RFC 9110 §13.1.3)', () => {
    const ims = 'Wed, 25 Nov 2026 10:00:00 GMT';
    const patched = (h: Record<string, string>) =>
      buildUpstreamHeaders(client(h), { patchable: true }).headers;
    // The client's unmarked tag is dropped: the date must not answer for it.
    const unmarked = patched({ 'if-none-match': '"v1"', 'if-modified-since': ims });
    expect(values(unmarked, 'if-none-match')).toEqual([]);
    expect(values(unmarked, 'if-modified-since')).toEqual([]);
    const marked = patched({ 'if-none-match': 'W/"v1+patched"', 'if-modified-since': ims });
    expect(values(marked, 'if-none-match')).toEqual(['"v1"']);
    expect(values(marked, 'if-modified-since')).toEqual([]);
    expect(values(patched({ 'if-modified-since': ims }), 'if-modified-since')).toEqual([ims]);
    // Only If-Modified-Since goes: the headers after it go on.
    const after = patched({ 'if-none-match': '"v1"', 'if-modified-since': ims, accept: '*/*', 'x-id': '1' });
    expect(values(after, 'accept')).toEqual(['*/*']);
    expect(values(after, 'x-id')).toEqual(['1']);
    // An If-None-Match that Connection names is this hop's (RFC 9110 §7.6.1): the upstream gets none,
    // and the client's If-Modified-Since is the request's only precondition.
    const hopTags = patched({
      connection: 'If-None-Match',
      'if-none-match': '"v1"',
      'if-modified-since': ims,
    });
    expect(values(hopTags, 'if-none-match')).toEqual([]);
    expect(values(hopTags, 'if-modified-since')).toEqual([ims]);
    // Not a patching exchange: both as sent (the upstream applies the precedence itself).
    const current = buildUpstreamHeaders(
      client({ 'if-none-match': '"v1"', 'if-modified-since': ims }),
    ).headers;
    expect(values(current, 'if-modified-since')).toEqual([ims]);
  });

  it.each(['PUT', 'POST', 'DELETE', 'PATCH'])(
    'a patching %s keeps its If-None-Match whole, patched tags also mapped back (a write precondition, RFC 9110 §13.1.2)',
    (method) => {
      const ims = 'Wed, 25 Nov 2026 10:00:00 GMT';
      const { headers } = buildUpstreamHeaders(
        client({ 'if-none-match': '"doc-v1", W/"v2+patched"', 'if-modified-since': ims }, { method }),
        { patchable: true },
      );
      expect(values(headers, 'if-none-match')).toEqual(['"doc-v1", "v2", W/"v2", W/"v2+patched"']);
      // Ignored by the upstream on a write (RFC 9110 §13.1.3): passed on as any other header.
      expect(values(headers, 'if-modified-since')).toEqual([ims]);
    },
  );

  describe('header names with `_` for `-` (one variable to CGI-style upstreams: RFC 3875 §4.1.18)', () => {
    it('drops the spellings of headers the shim owns and CGI meta-variables, in every forwarding mode, and names them', () => {
      for (const forwardedHeaders of ['append', 'replace'] as const) {
        const built = buildUpstreamHeaders(
          client({
            x_forwarded_for: '6.6.6.6',
            x_forwarded_host: 'evil.test',
            transfer_encoding: 'chunked',
            script_name: '/api',
            'x-other': 'kept',
          }),
          { forwardedHeaders },
        );
        for (const name of ['x_forwarded_for', 'x_forwarded_host', 'transfer_encoding', 'script_name'])
          expect(values(built.headers, name)).toEqual([]);
        expect(values(built.headers, 'x-other')).toEqual(['kept']);
        expect(values(built.headers, 'x-forwarded-for')).toEqual(['10.0.0.7']);
        expect(built.underscored).toEqual([
          'x_forwarded_for',
          'x_forwarded_host',
          'transfer_encoding',
          'script_name',
        ]);
        expect(built).not.toHaveProperty('invalidForwarded'); // absent when none was
      }
    });

    it('forwards every other header with `_` unchanged (SPEC §4), the admission headers as configured', () => {
      const built = buildUpstreamHeaders(
        client({ x_api_key: 'k', 'client-version': '1.0.0', client_version: 'forged', x_request_id: 'r1' }),
        { admissionHeaders: new Set(['x_api_key', 'client-version']) },
      );
      expect(values(built.headers, 'x_api_key')).toEqual(['k']);
      expect(values(built.headers, 'x_request_id')).toEqual(['r1']);
      expect(values(built.headers, 'client_version')).toEqual([]);
      expect(built.underscored).toEqual(['client_version']);
    });

    it('says nothing when none was dropped', () => {
      expect(buildUpstreamHeaders(client({ accept: '*/*', x_custom: '1' })).underscored).toBeUndefined();
    });

    it.each([
      ['x_forwarded_for', undefined, true],
      ['proxy_authorization', undefined, true],
      ['content_length', undefined, true],
      ['script_name', undefined, true],
      ['path_info', undefined, true],
      ['x_api_key', new Set(['x-api-key']), true],
      ['x_api_key', new Set(['x_api_key']), false],
      ['x_api_key', undefined, false],
      ['x_request_id', undefined, false],
      ['_', undefined, false],
      ['x-forwarded-for', undefined, false],
    ])('isUnderscoreSpelling(%j, %j) → %j', (name, admission, expected) =>
      expect(isUnderscoreSpelling(name, admission)).toBe(expected),
    );
  });

  describe('NOT_FORWARDED_AS_SENT (what config.ts refuses as API_KEY_HEADER)', () => {
    // A header the set does not name reaches the upstream as sent, in the mode that drops most (a
    // legacy GET with validators, FORWARDED_HEADERS=replace) when it is the admission header: the key
    // the gate admitted is the key the upstream checks.
    it.each([
      'authorization',
      'x-api-key',
      'api-key',
      'apikey',
      'x-auth-token',
      'x_api_key',
      'ocp-apim-subscription-key',
      'x-amz-security-token',
      'accept',
      'accept-encoding',
      'user-agent',
      'referer',
      'origin',
      'from',
      'via',
      'max-forwards',
      'prefer',
      'priority',
      'cache-control',
      'pragma',
      'if-match',
      'if-unmodified-since',
      'content-type',
      'content-encoding',
      'x-real-ip',
      'x-request-id',
      'traceparent',
      'sec-fetch-mode',
    ])('%s goes upstream as sent', (name) => {
      expect(NOT_FORWARDED_AS_SENT.has(name)).toBe(false);
      const built = buildUpstreamHeaders(
        client({ [name]: 'k3y', 'if-none-match': 'W/"a+patched"', 'if-modified-since': 'x' }),
        { patchable: true, forwardedHeaders: 'replace', admissionHeaders: new Set([name]) },
      );
      expect(values(built.headers, name)).toEqual(['k3y']);
    });

    it('names Proxy-Authorization, Proxy, Forwarded, the validators a legacy request maps and the CGI names', () => {
      for (const name of [
        'proxy-authorization',
        'proxy',
        'forwarded',
        'if-none-match',
        'range',
        'script_name',
      ])
        expect(NOT_FORWARDED_AS_SENT.has(name)).toBe(true);
    });
  });

  it('a HEAD goes as Connection: close (its connection is never reused); other methods carry none', () => {
    expect(values(buildUpstreamHeaders(client({}, { method: 'HEAD' })).headers, 'connection')).toEqual([
      'close',
    ]);
    expect(
      values(
        buildUpstreamHeaders(client({ connection: 'keep-alive' }, { method: 'HEAD' })).headers,
        'connection',
      ),
    ).toEqual(['close']);
    expect(values(buildUpstreamHeaders(client({})).headers, 'connection')).toEqual([]);
  });

  describe("forwardedHeaders: 'replace' (a front door clients reach directly)", () => {
    const spoofed = {
      'x-forwarded-for': '6.6.6.6',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'evil.test',
      forwarded: 'for=6.6.6.6;host=evil.test;proto=https',
    };

    it("drops the client's X-Forwarded-For, -Proto, -Host and Forwarded; sends this hop's alone", () => {
      const built = buildUpstreamHeaders(client(spoofed), { forwardedHeaders: 'replace' });
      expect(values(built.headers, 'x-forwarded-for')).toEqual(['10.0.0.7']);
      expect(values(built.headers, 'x-forwarded-proto')).toEqual(['http']);
      expect(values(built.headers, 'x-forwarded-host')).toEqual(['shim.test']);
      expect(values(built.headers, 'forwarded')).toEqual([]);
      expect(built.invalidForwarded).toBeUndefined();
    });

    it('sends https over TLS, and no X-Forwarded-Host for a client without Host (HTTP/1.0)', () => {
      const noHost = { method: 'GET', headers: { ...spoofed }, remoteAddress: '10.0.0.1', encrypted: true };
      const { headers } = buildUpstreamHeaders(noHost, {
        forwardedHeaders: 'replace',
        upstreamHost: 'backend.internal:3000',
      });
      expect(values(headers, 'x-forwarded-proto')).toEqual(['https']);
      expect(values(headers, 'x-forwarded-host')).toEqual([]);
      expect(values(headers, 'host')).toEqual(['backend.internal:3000']);
    });

    it('keeps every other header', () => {
      const { headers } = buildUpstreamHeaders(
        client({ ...spoofed, 'x-forwarded-port': '443', accept: '*/*' }),
        {
          forwardedHeaders: 'replace',
        },
      );
      expect(values(headers, 'accept')).toEqual(['*/*']);
      expect(values(headers, 'x-forwarded-port')).toEqual(['443']);
    });
  });

  describe('a client X-Forwarded-Host or -Proto no proxy would write (X-Forwarded-Host injection)', () => {
    it.each([
      'evil.test/reset?to=x',
      'a@evil.test',
      'evil.test#',
      'x"><script>',
      'edge.test, evil.test/reset',
      ', edge.test',
      'edge.test,,shim.test',
      'bücher.example',
    ])('drops X-Forwarded-Host %j; the client Host goes alone', (value) => {
      const built = buildUpstreamHeaders(client({ 'x-forwarded-host': value }));
      expect(values(built.headers, 'x-forwarded-host')).toEqual(['shim.test']);
      expect(built.invalidForwarded).toEqual(['x-forwarded-host']);
    });

    it.each(['https://evil.test/#', 'http s', 'https, evil.test/x', '1http', ''])(
      'drops X-Forwarded-Proto %j unless empty',
      (value) => {
        const built = buildUpstreamHeaders(client({ 'x-forwarded-proto': value }));
        expect(values(built.headers, 'x-forwarded-proto')).toEqual(['http']);
        expect(built.invalidForwarded).toEqual(value === '' ? undefined : ['x-forwarded-proto']);
      },
    );

    it('keeps lists of hosts with ports, IP literals and schemes, with any whitespace around elements', () => {
      const built = buildUpstreamHeaders(
        client({
          'x-forwarded-host': 'edge.test:8443 ,\t[::1]:80, 10.0.0.1',
          'x-forwarded-proto': 'https,wss',
        }),
      );
      expect(values(built.headers, 'x-forwarded-host')).toEqual([
        'edge.test:8443 ,\t[::1]:80, 10.0.0.1, shim.test',
      ]);
      expect(values(built.headers, 'x-forwarded-proto')).toEqual(['https,wss, http']);
      expect(built.invalidForwarded).toBeUndefined();
    });

    it('names both when both are forged, and keeps X-Forwarded-For', () => {
      const built = buildUpstreamHeaders(
        client({ 'x-forwarded-for': '1.1.1.1', 'x-forwarded-host': 'a/b', 'x-forwarded-proto': 'a:b' }),
      );
      expect(built.invalidForwarded).toEqual(['x-forwarded-proto', 'x-forwarded-host']);
      expect(built).not.toHaveProperty('underscored'); // absent when none was
      expect(values(built.headers, 'x-forwarded-for')).toEqual(['1.1.1.1, 10.0.0.7']);
    });
  });

  it('starts X-Forwarded-* when the client sent none, and skips an unknown address', () => {
    const { headers } = buildUpstreamHeaders(client({}, { remoteAddress: undefined }));
    expect(values(headers, 'x-forwarded-for')).toEqual([]);
    expect(values(headers, 'x-forwarded-proto')).toEqual(['http']);
    expect(values(headers, 'x-forwarded-host')).toEqual(['shim.test']);
  });

  it('drops Range and If-Range only when asked (a response hook may patch the body)', () => {
    const h = { range: 'bytes=0-9', 'if-range': '"e1"' };
    expect(values(buildUpstreamHeaders(client(h)).headers, 'range')).toEqual(['bytes=0-9']);
    const dropped = buildUpstreamHeaders(client(h), { patchable: true }).headers;
    expect(values(dropped, 'range')).toEqual([]);
    expect(values(dropped, 'if-range')).toEqual([]);
  });

  it('forwards the joined Cookie the gates judged, as one header', () => {
    const { headers } = buildUpstreamHeaders(client({ cookie: 'authtoken=a; refreshtoken=r' }));
    expect(values(headers, 'cookie')).toEqual(['authtoken=a; refreshtoken=r']);
  });

  it('forwards every value of a header Node keeps as a list', () => {
    const { headers } = buildUpstreamHeaders(client({ 'set-cookie': ['a=1', 'b=2'] }));
    expect(values(headers, 'set-cookie')).toEqual(['a=1', 'b=2']);
  });
});

describe('upstreamTarget', () => {
  it.each([
    ['/', '/missions?x=1', '/missions?x=1'],
    ['', '/missions', '/missions'],
    ['/api', '/missions', '/api/missions'],
    ['/api/', '/missions', '/api/missions'],
  ])('%j + %j → %j', (prefix, target, expected) => expect(upstreamTarget(prefix, target)).toBe(expected));
});
