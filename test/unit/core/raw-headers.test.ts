/**
 * Reading a head as Node received it (src/core/raw-headers.ts): raw header list scans, optional
 * whitespace (RFC 9110 §5.5), the protocol version.
 */
import { IncomingMessage } from 'node:http';
import { describe, expect, it, vi } from 'vitest';
import {
  combinedFieldValue,
  headerCount,
  headerValue,
  isHeaderName,
  isHttp10OrOlder,
  trimOws,
} from '../../../src/core/raw-headers.ts';

describe('isHeaderName', () => {
  it.each<[string, string, boolean]>([
    ['Host', 'host', true],
    ['HOST', 'host', true],
    ['Hosts', 'host', false],
    ['Hos', 'host', false],
    ['Connection', 'connection', true],
    ['Hosx', 'host', false], // the same length, another name
    ['Set-Cookie', 'connection', false],
  ])('%s is %s: %s', (name, lower, expected) => expect(isHeaderName(name, lower)).toBe(expected));
});

describe('headerCount', () => {
  it.each<[string[], string, number]>([
    [[], 'x-api-key', 0],
    [['x-api-key', 'a'], 'x-api-key', 1],
    [['X-API-Key', 'a', 'x-api-key', 'b'], 'x-api-key', 2],
    [['X-Api-Key-2', 'a', 'x-api-keyx', 'b', 'Host', 'x'], 'x-api-key', 0],
    [['x-api-key', 'a', 'Host', 'x', 'X-API-KEY', 'b', 'x-api-key', 'c'], 'x-api-key', 3],
  ])('%j counts %s %d times', (raw, name, n) => {
    expect(headerCount(raw, name)).toBe(n);
  });
});

describe('combinedFieldValue', () => {
  it.each<[string[], string | undefined]>([
    [[], undefined],
    [['Accept', 'a/b'], undefined],
    [['Content-Type', 'application/json'], 'application/json'],
    // Two lines with different values: the list a joining recipient sees (RFC 9110 §5.3).
    [['Content-Type', 'application/json', 'content-type', 'text/plain'], 'application/json, text/plain'],
    [['content-type', 'text/plain', 'Content-Type', 'application/json'], 'text/plain, application/json'],
    // The same value again (after its optional whitespace) counts once.
    [['Content-Type', 'a/b', 'CONTENT-TYPE', ' a/b\t'], 'a/b'],
    [['Content-Type', 'a/b', 'X', 'y', 'Content-Type', 'c/d', 'Content-Type', 'a/b'], 'a/b, c/d'],
    [['Content-Type', ''], ''],
  ])('%j → %j', (raw, expected) => expect(combinedFieldValue(raw, 'content-type')).toBe(expected));

  it('keeps every distinct line of a long list, in order, each once', () => {
    const raw = Array.from({ length: 4000 }, (_, i) => ['Content-Type', `t/${i % 2000}`]).flat();
    const members = combinedFieldValue(raw, 'content-type')?.split(', ');
    expect(members).toHaveLength(2000);
    expect(members?.[0]).toBe('t/0');
    expect(members?.at(-1)).toBe('t/1999');
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

  /** A message whose parsed headers must not be built: reading `headers` throws. */
  const rawOnly = (rawHeaders: string[]) =>
    ({
      rawHeaders,
      get headers(): never {
        throw new Error('message.headers was built');
      },
    }) as Pick<IncomingMessage, 'rawHeaders' | 'headers'>;

  it.each<[string, string[], string | undefined]>([
    ['vary', ['Content-Type', 'a', 'Vary', 'Accept-Encoding'], 'Accept-Encoding'],
    ['service-version', ['SERVICE-VERSION', '1.2.3', 'Vary', 'x'], '1.2.3'],
    ['etag', ['Vary', 'x', 'Date', 'y'], undefined],
  ])('reads %s from %j without building message.headers (it occurs once at most)', (name, raw, expected) => {
    expect(headerValue(rawOnly(raw), name)).toBe(expected);
  });

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

describe('trimOws', () => {
  it.each<[string, string]>([
    [' chunked ', 'chunked'],
    ['\t chunked\t', 'chunked'],
    ['chunked\u00a0', 'chunked\u00a0'],
    ['\u000bchunked', '\u000bchunked'],
    ['a b', 'a b'],
    ['  ', ''],
  ])('%j → %j (SP and HTAB only)', (value, expected) => expect(trimOws(value)).toBe(expected));

  // Fix 82 made the trim a walk from each end, linear: these guard that walk (one that scanned the
  // inner run too would read more characters). The regular expression it replaced made no such calls,
  // so its quadratic cost is caught end to end, in test/security/redos-header-whitespace.test.ts.
  it.each<[string, string, string, number]>([
    ['an inner run of 100,000 spaces', `a${' '.repeat(100_000)}b`, `a${' '.repeat(100_000)}b`, 2],
    [
      'an inner run of 100,000 tabs and spaces, OWS at both ends',
      ` a${' \t'.repeat(50_000)}b\t`,
      `a${' \t'.repeat(50_000)}b`,
      4,
    ],
    ['100,000 spaces and nothing else', ' '.repeat(100_000), '', 100_000],
  ])('examines each character at most once: %s', (_what, value, expected, most) => {
    const reads = vi.spyOn(String.prototype, 'charCodeAt');
    try {
      expect(trimOws(value)).toBe(expected);
      expect(reads.mock.calls.length).toBeLessThanOrEqual(most);
    } finally {
      reads.mockRestore();
    }
  });
});

describe('isHttp10OrOlder', () => {
  it.each<[string, boolean]>([
    ['0.9', true],
    ['1.0', true],
    ['1.1', false],
    ['2.0', false],
  ])('%s → %s', (version, expected) => expect(isHttp10OrOlder(version)).toBe(expected));
});
