/**
 * Writing the upstream's response (SPEC §6; RFC 9110 §8.8.1 weak validators, §12.5.5 Vary): the
 * response head for streamed and patched bodies, and Vary merging.
 */
import { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { headerValue, mergeVary, responseHead, weakEtag } from '../../../src/proxy/response-writer.ts';

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
  ])('%j → %j', (upstream, expected) => {
    expect(mergeVary(upstream, 'Service-Client-Version')).toBe(expected);
  });

  it('is idempotent', () => {
    const once = mergeVary('Accept', 'Service-Client-Version');
    expect(mergeVary(once, 'Service-Client-Version')).toBe(once);
  });
});

describe('weakEtag', () => {
  it.each([
    ['"v1"', 'W/"v1"'],
    ['W/"v1"', 'W/"v1"'],
  ])('%s → %s', (etag, expected) => expect(weakEtag(etag)).toBe(expected));
});

describe('responseHead', () => {
  const upstream = {
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
    expect(responseHead(upstream, ['Warning', 'w'], false, undefined)).toEqual([
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
    expect(responseHead(upstream, [], true, undefined)).toEqual([
      'Content-Type',
      'application/json',
      'Set-Cookie',
      'a=1; HttpOnly',
      'Set-Cookie',
      'b=2',
      'Vary',
      'Accept-Encoding',
      'ETag',
      'W/"e1"',
    ]);
  });

  it('with a Vary name: one merged Vary, streamed or patched', () => {
    for (const patched of [false, true]) {
      const head = responseHead(upstream, [], patched, 'Service-Client-Version');
      const vary = head.filter((_, i) => i % 2 === 1 && head[i - 1] === 'Vary');
      expect(vary).toEqual(['Accept-Encoding, Service-Client-Version']);
    }
  });

  it('with a Vary name and no upstream Vary: the name alone', () => {
    const head = responseHead({ rawHeaders: [], etag: undefined, vary: undefined }, [], false, 'V');
    expect(head).toEqual(['Vary', 'V']);
  });
});

describe('headerValue', () => {
  /** A received message as Node's parser fills it: rawHeaders, and the lazily built headers from them. */
  function received(rawHeaders: string[]): IncomingMessage {
    const message = new IncomingMessage(undefined as never); // no socket: only the header views are read
    message.rawHeaders = rawHeaders;
    (message as unknown as { _addHeaderLines(h: string[], n: number): void })._addHeaderLines(
      rawHeaders,
      rawHeaders.length,
    );
    return message;
  }

  it.each<[string, string[]]>([
    ['vary', ['Content-Type', 'a', 'Vary', 'Accept-Encoding']],
    ['vary', ['Vary', 'Accept-Encoding', 'vary', 'Origin']],
    ['etag', ['ETag', '"a"', 'etag', '"b"']],
    ['etag', []],
    ['service-version', ['Service-Version', '1.2.3']],
    ['service-version', ['Service-Version', '1.2.3', 'SERVICE-VERSION', '1.2.4']],
    ['set-cookie', ['Set-Cookie', 'a=1', 'Set-Cookie', 'b=2']],
    ['set-cookie', ['Set-Cookie', 'a=1']],
    ['x', ['X', '', 'Y', 'z']],
  ])('%s in %j is what message.headers has', (name, raw) => {
    expect(headerValue(received(raw), name)).toEqual(received(raw).headers[name]);
  });
});
