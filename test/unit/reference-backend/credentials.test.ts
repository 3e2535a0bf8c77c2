import { describe, expect, it } from 'vitest';
import { hasCredentials, parseCookieHeader } from '../../../src/reference-backend/credentials.ts';

describe('parseCookieHeader', () => {
  it.each([
    [undefined, {}],
    ['', {}],
    ['a=1', { a: '1' }],
    ['a=1; b=2', { a: '1', b: '2' }],
    ['a=1;b=2', { a: '1', b: '2' }],
    ['a="q"', { a: 'q' }],
    ['a=1; a=2', { a: '1' }],
    ['junk; =x; a=', { a: '' }],
    ['a=x=y', { a: 'x=y' }],
  ])('%j', (header, expected) => {
    expect(Object.fromEntries(parseCookieHeader(header))).toEqual(expected);
  });
});

describe('hasCredentials', () => {
  it.each([
    [{}, false],
    [{ 'x-api-key': 'k' }, true],
    [{ 'x-api-key': '' }, false],
    [{ 'x-api-key': '  ' }, false],
    [{ cookie: 'authtoken=a; refreshtoken=r' }, true],
    [{ cookie: 'authtoken=a' }, false],
    [{ cookie: 'refreshtoken=r' }, false],
    [{ cookie: 'authtoken=; refreshtoken=r' }, false],
    [{ cookie: 'authtoken=""; refreshtoken=r' }, false],
    [{ cookie: 'AUTHTOKEN=a; refreshtoken=r' }, false],
    [{ cookie: 'other=1; authtoken=a; x=2; refreshtoken=r' }, true],
  ])('%j → %j', (headers, expected) => {
    expect(hasCredentials(headers)).toBe(expected);
  });
});
