import { describe, expect, it } from 'vitest';
import { aliasWarning, deprecationHeaders, warningText } from '../../../src/aliases/deprecation.ts';

describe('warningText', () => {
  it.each([
    ['tags', 'tags'],
    ['t"a\\gs', 'tags'],
    ['tä\u0000g\r\ns', 'tgs'],
    ['https://example.com/a b', 'https://example.com/a b'],
  ])('%j → %j', (text, safe) => {
    expect(warningText(text)).toBe(safe);
  });
});

describe('aliasWarning', () => {
  it('has the Kubernetes form', () => {
    expect(aliasWarning('tags', 'metadata')).toBe('299 - "tags is deprecated; use metadata"');
  });

  it('keeps the quoted string valid for any name', () => {
    expect(aliasWarning('a"b\\c', 'd\r\ne\u00e9')).toBe('299 - "abc is deprecated; use de"');
  });
});

describe('deprecationHeaders', () => {
  it('is empty when nothing is configured', () => {
    expect(deprecationHeaders({})).toEqual([]);
  });

  it('formats Deprecation (RFC 9745), Sunset (RFC 8594) and Link', () => {
    expect(
      deprecationHeaders({
        deprecatedAt: new Date('2025-06-30T23:59:59.999Z'),
        sunsetAt: new Date('2026-01-01T12:30:00Z'),
        docsUrl: 'https://example.com/docs/aliases',
      }),
    ).toEqual([
      ['Deprecation', '@1751327999'],
      ['Sunset', 'Thu, 01 Jan 2026 12:30:00 GMT'],
      ['Link', '<https://example.com/docs/aliases>; rel="deprecation"'],
    ]);
  });
});
