import { SemVer } from 'semver';
import { describe, expect, it } from 'vitest';
import { wantsAliases } from '../../../src/aliases/version-gate.ts';

const on = { enabled: true, sunsetVersion: new SemVer('1.0.0') };

describe('wantsAliases', () => {
  it.each([
    ['0.59.0', true],
    ['0.0.1', true],
    ['0.59.0-dev.20260101', true],
    ['1.0.0-rc.1', true], // semver.satisfies('1.0.0-rc.1', '<1.0.0') is false: the trap this avoids
    ['1.0.0-0', true],
    ['1.0.0', false],
    ['1.0.0+build.7', false],
    ['1.0.1', false],
    ['2.0.0-alpha', false],
  ])('client %s → %s', (version, expected) => {
    expect(wantsAliases(on, new SemVer(version))).toBe(expected);
  });

  it('is false without a client version (public paths)', () => {
    expect(wantsAliases(on, undefined)).toBe(false);
  });

  it('is false when the layer is off', () => {
    expect(wantsAliases({ ...on, enabled: false }, new SemVer('0.1.0'))).toBe(false);
  });

  it('follows the configured sunset version', () => {
    const settings = { enabled: true, sunsetVersion: new SemVer('0.60.0') };
    expect(wantsAliases(settings, new SemVer('0.59.9'))).toBe(true);
    expect(wantsAliases(settings, new SemVer('0.60.0'))).toBe(false);
  });
});
