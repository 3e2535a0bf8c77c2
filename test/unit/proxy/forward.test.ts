/**
 * forward.ts is wiring only; its pure parts live in their own modules. This checks that what app.ts
 * imports from it stays exported, and the "large unread body" test that decides between draining
 * and closing.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { hasLargeUnreadBody, upstreamErrorKind } from '../../../src/proxy/forward.ts';

describe('re-exports', () => {
  it('classifies upstream errors', () => {
    expect(upstreamErrorKind(Object.assign(new Error('x'), { code: 'ECONNREFUSED' }))).toBe('refused');
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
