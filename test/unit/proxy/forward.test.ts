/**
 * The pure exports of the forwarder: upstream error classification (SPEC §4: 502, or 504 for a
 * timeout) and the "large unread body" test that decides between draining and closing.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { hasLargeUnreadBody, upstreamErrorKind } from '../../../src/proxy/forward.ts';

describe('upstreamErrorKind', () => {
  it.each<[string | undefined, string]>([
    ['ECONNREFUSED', 'refused'],
    ['EHOSTUNREACH', 'refused'],
    ['ENETUNREACH', 'refused'],
    ['ENOTFOUND', 'refused'],
    ['EAI_AGAIN', 'refused'],
    ['EADDRNOTAVAIL', 'refused'],
    ['HPE_INVALID_CONSTANT', 'invalid'],
    ['HPE_INVALID_HEADER_TOKEN', 'invalid'],
    ['HPE_UNEXPECTED_CONTENT_LENGTH', 'invalid'],
    ['ERR_INVALID_HTTP_RESPONSE', 'invalid'],
    ['ETIMEDOUT', 'timeout'],
    ['ESHIMTIMEDOUT', 'timeout'],
    ['ECONNRESET', 'reset'],
    ['EPIPE', 'reset'],
    ['ECONNABORTED', 'reset'],
    ['ERR_STREAM_PREMATURE_CLOSE', 'reset'],
    [undefined, 'reset'],
  ])('%s → %s', (code, kind) => {
    const err: NodeJS.ErrnoException = Object.assign(new Error('upstream failed'), code ? { code } : {});
    expect(upstreamErrorKind(err)).toBe(kind);
  });
});

describe('hasLargeUnreadBody', () => {
  const req = (headers: IncomingHttpHeaders, readableEnded = false) =>
    ({ headers, readableEnded }) as unknown as IncomingMessage;

  it.each<[string, IncomingHttpHeaders, boolean, boolean]>([
    ['no body', {}, false, false],
    ['Content-Length 0', { 'content-length': '0' }, false, false],
    ['a small body', { 'content-length': '1024' }, false, false],
    ['exactly 64 KiB', { 'content-length': String(64 * 1024) }, false, false],
    ['one byte over 64 KiB', { 'content-length': String(64 * 1024 + 1) }, false, true],
    ['a gigabyte', { 'content-length': String(1024 ** 3) }, false, true],
    ['a chunked body (size unknown)', { 'transfer-encoding': 'chunked' }, false, true],
    ['a large body already read', { 'content-length': String(1024 ** 3) }, true, false],
    ['a chunked body already read', { 'transfer-encoding': 'chunked' }, true, false],
  ])('%s → %s', (_name, headers, ended, expected) => {
    expect(hasLargeUnreadBody(req(headers, ended))).toBe(expected);
  });
});
