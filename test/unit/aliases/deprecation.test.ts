import { describe, expect, it } from 'vitest';
import {
  aliasWarning,
  deprecationHeaders,
  warningText,
  yieldToUpstreamDates,
} from '../../../src/aliases/deprecation.ts';

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

describe('yieldToUpstreamDates', () => {
  const ours = (): Array<[string, string]> => [
    ['Deprecation', '@1767225600'],
    ['Sunset', 'Fri, 01 Jan 2027 00:00:00 GMT'],
    ['Link', '<https://docs.test/tags>; rel="deprecation"'],
    ['Warning', '299 - "tags is deprecated; use metadata"'],
  ];
  it.each<[string, Record<string, string>, string[]]>([
    ['neither', {}, ['Deprecation', 'Sunset', 'Link', 'Warning']],
    ['Deprecation', { deprecation: '@1700000000' }, ['Sunset', 'Link', 'Warning']],
    ['Sunset', { sunset: 'Sat, 01 Jan 2028 00:00:00 GMT' }, ['Deprecation', 'Link', 'Warning']],
    ['both', { deprecation: '@1700000000', sunset: 'Sat, 01 Jan 2028 00:00:00 GMT' }, ['Link', 'Warning']],
    [
      'a Link of its own (a list: both kept)',
      { link: '<https://up.test>; rel="sunset"' },
      ['Deprecation', 'Sunset', 'Link', 'Warning'],
    ],
  ])('the upstream sends %s: the layer keeps the rest', (_what, upstream, kept) => {
    const headers = ours();
    yieldToUpstreamDates(headers, upstream);
    expect(headers.map(([name]) => name)).toEqual(kept);
  });
});
