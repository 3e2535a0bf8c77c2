import { describe, expect, it } from 'vitest';
import { acceptsGzip, computeEtag } from '../../../src/reference-backend/respond.ts';

describe('acceptsGzip', () => {
  it.each([
    [undefined, false],
    ['', false],
    ['gzip', true],
    ['GZIP', true],
    ['gzip, deflate, br', true],
    ['br;q=1.0, gzip;q=0.5', true],
    ['gzip;q=0', false],
    ['gzip; q=0.000', false],
    ['identity', false],
    ['deflate', false],
    ['*', true],
    ['*;q=0', false],
    ['*, gzip;q=0', false],
    ['x-gzip', true],
  ])('%j → %j', (header, expected) => {
    expect(acceptsGzip(header)).toBe(expected);
  });
});

describe('computeEtag', () => {
  it('is a strong, quoted tag that depends on the bytes', () => {
    const a = computeEtag(Buffer.from('{"a":1}'));
    expect(a).toMatch(/^"7-[A-Za-z0-9+/]{27}"$/);
    expect(computeEtag(Buffer.from('{"a":1}'))).toBe(a);
    expect(computeEtag(Buffer.from('{"a":2}'))).not.toBe(a);
  });
});
