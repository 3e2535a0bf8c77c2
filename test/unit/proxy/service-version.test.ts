/**
 * The service version (SPEC §2 `SERVICE_VERSION`, §6, §7): configured, or learned from the upstream.
 */
import { parse, type SemVer } from 'semver';
import { describe, expect, it } from 'vitest';
import { ServiceVersion } from '../../../src/proxy/service-version.ts';

const v = (text: string): SemVer => parse(text) as SemVer;

describe('ServiceVersion', () => {
  it('is unknown until configured or observed', () => {
    const sv = new ServiceVersion(undefined);
    expect(sv.text).toBeUndefined();
    expect(sv.parsed).toBeUndefined();
  });

  it('learns the version from the upstream header', () => {
    const sv = new ServiceVersion(undefined);
    sv.observe('0.60.0');
    expect(sv.text).toBe('0.60.0');
    expect(sv.parsed?.version).toBe('0.60.0');
  });

  it('keeps the last value the upstream sent', () => {
    const sv = new ServiceVersion(undefined);
    sv.observe('0.60.0');
    sv.observe('0.61.0-rc.1');
    expect(sv.text).toBe('0.61.0-rc.1');
    expect(sv.parsed?.prerelease).toEqual(['rc', 1]);
    sv.observe('0.59.0');
    expect(sv.text).toBe('0.59.0');
  });

  it('trims surrounding space', () => {
    const sv = new ServiceVersion(undefined);
    sv.observe(' 0.60.0 ');
    expect(sv.text).toBe('0.60.0');
  });

  it.each<[string | string[] | undefined]>([[undefined], [''], ['latest'], ['0.60'], [['0.61.0', '0.62.0']]])(
    'ignores %j and keeps what it knew',
    (value) => {
      const sv = new ServiceVersion(undefined);
      sv.observe('0.60.0');
      sv.observe(value);
      expect(sv.text).toBe('0.60.0');
      expect(sv.parsed?.version).toBe('0.60.0');
    },
  );

  it('ignores upstream values when pinned by SERVICE_VERSION', () => {
    const sv = new ServiceVersion(v('1.2.3'));
    expect(sv.text).toBe('1.2.3');
    sv.observe('2.0.0');
    expect(sv.text).toBe('1.2.3');
    expect(sv.parsed?.version).toBe('1.2.3');
  });
});
