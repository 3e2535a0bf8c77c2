/**
 * The alias layer's own configuration schema (issue 11 item 6), composed by `loadConfig`: defaults,
 * values, cross-variable rules (RFC 9745 §3 deprecation before sunset), brownout validation, consumer
 * settings.
 */
import { describe, expect, it } from 'vitest';
import type { AliasSettings } from '../../../src/aliases/config.ts';
import { aliasPlugin } from '../../../src/aliases/index.ts';
import { PLUGINS } from '../../../src/app.ts';
import { ConfigError, configVariables, loadConfig } from '../../../src/config.ts';

const settingsOf = (env: NodeJS.ProcessEnv) =>
  loadConfig(env, [aliasPlugin]).plugins.aliases as AliasSettings;
function problemsOf(env: NodeJS.ProcessEnv): string[] {
  try {
    loadConfig(env, [aliasPlugin]);
    return [];
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
}

describe("the alias plugin's variables", () => {
  it("are registered in app.ts and composed after the core's", () => {
    expect(PLUGINS).toContain(aliasPlugin);
    expect(configVariables(PLUGINS)).toEqual(
      expect.arrayContaining([
        'ALIASES',
        'ALIAS_SUNSET_VERSION',
        'ALIAS_DEPRECATED_AT',
        'ALIAS_SUNSET_AT',
        'ALIAS_DOCS_URL',
        'ALIAS_SUNSET_POLICY_URL',
        'ALIAS_BROWNOUTS',
        'CONSUMER_HEADER',
        'CONSUMER_FINGERPRINT_KEY',
        'CONSUMER_TABLE_SIZE',
        'MAX_PATCH_VALUE',
      ]),
    );
  });

  it('default', () => {
    const s = settingsOf({});
    expect(s.enabled).toBe(true);
    expect(s.sunsetVersion.version).toBe('1.0.0');
    expect(s.consumerTableSize).toBe(1000);
    expect(s.maxPatchValue).toBe(1024 * 1024);
    for (const key of [
      'deprecatedAt',
      'sunsetAt',
      'docsUrl',
      'sunsetPolicyUrl',
      'brownouts',
      'consumerHeader',
    ]) {
      expect(s, key).not.toHaveProperty(key);
    }
    expect(loadConfig({ ALIASES: '' }, [aliasPlugin]).warnings).toEqual([]);
  });

  it('parse every value', () => {
    const s = settingsOf({
      ALIASES: 'off',
      ALIAS_SUNSET_VERSION: '2.0.0',
      ALIAS_DEPRECATED_AT: '2026-01-01T00:00:00Z',
      ALIAS_SUNSET_AT: '2026-07-01T00:00:00Z',
      ALIAS_DOCS_URL: 'https://docs.example.com/tags',
      ALIAS_SUNSET_POLICY_URL: 'https://docs.example.com/sunset-policy',
      ALIAS_BROWNOUTS: '2026-03-01T14:00Z/PT1H',
      CONSUMER_HEADER: 'X-Consumer-Id',
      CONSUMER_FINGERPRINT_KEY: 'k'.repeat(32),
      CONSUMER_TABLE_SIZE: '50',
      MAX_PATCH_VALUE: '64kb',
    });
    expect(s.enabled).toBe(false);
    expect(s.sunsetVersion.version).toBe('2.0.0');
    expect(s.deprecatedAt?.toISOString()).toBe('2026-01-01T00:00:00.000Z');
    expect(s.sunsetAt?.toISOString()).toBe('2026-07-01T00:00:00.000Z');
    expect(s.docsUrl).toBe('https://docs.example.com/tags');
    expect(s.sunsetPolicyUrl).toBe('https://docs.example.com/sunset-policy');
    expect(s.brownouts).toEqual([
      {
        start: Date.parse('2026-03-01T14:00Z'),
        end: Date.parse('2026-03-01T15:00Z'),
        text: '2026-03-01T14:00Z/PT1H',
      },
    ]);
    expect(s.consumerHeader).toBe('x-consumer-id');
    expect(s.consumerFingerprintKey).toBe('k'.repeat(32));
    expect(s.consumerTableSize).toBe(50);
    expect(s.maxPatchValue).toBe(64 * 1024);
  });

  it('accepts equal deprecation and sunset dates', () => {
    const s = settingsOf({
      ALIAS_DEPRECATED_AT: '2026-01-01T00:00:00Z',
      ALIAS_SUNSET_AT: '2026-01-01T00:00:00Z',
    });
    expect(s.sunsetAt?.getTime()).toBe(s.deprecatedAt?.getTime());
  });
});

describe('dates: ISO 8601, the same instant on every host', () => {
  it.each([
    ['2026-01-01', Date.UTC(2026, 0, 1)],
    ['2026-01-01T00:00:00Z', Date.UTC(2026, 0, 1)],
    ['2026-01-01T01:00+01:00', Date.UTC(2026, 0, 1)],
    ['2026-01-01T00:00:00.500Z', Date.UTC(2026, 0, 1, 0, 0, 0, 500)],
    // Any number of fraction digits, as in ALIAS_BROWNOUTS (milliseconds kept).
    ['2026-01-01T00:00:00.1234Z', Date.UTC(2026, 0, 1, 0, 0, 0, 123)],
  ])('%s', (text, epochMs) => {
    expect(settingsOf({ ALIAS_DEPRECATED_AT: text }).deprecatedAt?.getTime()).toBe(epochMs);
    expect(settingsOf({ ALIAS_SUNSET_AT: text }).sunsetAt?.getTime()).toBe(epochMs);
  });
});

describe('ALIAS_BROWNOUTS reads its edges with the same parser, without dates alone', () => {
  it('accepts a date-time with any number of fraction digits, as ALIAS_SUNSET_AT does', () => {
    const text = '2027-01-12T14:00:00.1234Z';
    expect(settingsOf({ ALIAS_BROWNOUTS: `${text}/PT1H` }).brownouts?.[0]?.start).toBe(
      settingsOf({ ALIAS_SUNSET_AT: text }).sunsetAt?.getTime(),
    );
  });

  it('refuses a date alone, which ALIAS_SUNSET_AT accepts as midnight UTC', () => {
    expect(settingsOf({ ALIAS_SUNSET_AT: '2027-01-12' }).sunsetAt?.getTime()).toBe(Date.UTC(2027, 0, 12));
    for (const schedule of ['2027-01-12/PT1H', '2027-01-12T14:00Z/2027-01-13']) {
      const problems = problemsOf({ ALIAS_BROWNOUTS: schedule });
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(
        /^ALIAS_BROWNOUTS: .*is a date alone: write the instant, e\.g\. 2027-01-1[23]T00:00Z/,
      );
    }
  });
});

describe('invalid alias settings are config errors, one line naming the variable', () => {
  it.each<[string, NodeJS.ProcessEnv]>([
    ['ALIASES', { ALIASES: 'maybe' }],
    ['ALIAS_SUNSET_VERSION', { ALIAS_SUNSET_VERSION: 'soon' }],
    ['ALIAS_DEPRECATED_AT', { ALIAS_DEPRECATED_AT: 'soon' }],
    ['ALIAS_SUNSET_AT', { ALIAS_SUNSET_AT: 'later' }],
    // A date-time without its time zone: another instant on a host with another TZ.
    ['ALIAS_DEPRECATED_AT', { ALIAS_DEPRECATED_AT: '2026-01-01T00:00:00' }],
    ['ALIAS_SUNSET_AT', { ALIAS_SUNSET_AT: 'Jan 1 2027' }],
    // RFC 9745 §3: Deprecation later than Sunset.
    [
      'ALIAS_SUNSET_AT',
      { ALIAS_DEPRECATED_AT: '2026-02-01T00:00:00Z', ALIAS_SUNSET_AT: '2026-01-01T00:00:00Z' },
    ],
    ['ALIAS_DOCS_URL', { ALIAS_DOCS_URL: 'not a url' }],
    ['ALIAS_SUNSET_POLICY_URL', { ALIAS_SUNSET_POLICY_URL: '/relative' }],
    ['ALIAS_BROWNOUTS', { ALIAS_BROWNOUTS: '2027-01-12T14:00Z/PT0S' }],
    ['ALIAS_BROWNOUTS', { ALIAS_BROWNOUTS: '2027-01-12T14:00Z/-PT1H' }],
    ['ALIAS_BROWNOUTS', { ALIAS_BROWNOUTS: '2027-01-12T14:00Z/PT2H,2027-01-12T15:00Z/PT1H' }],
    ['ALIAS_BROWNOUTS', { ALIAS_BROWNOUTS: 'tomorrow' }],
    ['CONSUMER_HEADER', { CONSUMER_HEADER: 'bad header' }],
    ['CONSUMER_HEADER', { CONSUMER_HEADER: 'Authorization' }],
    ['CONSUMER_HEADER', { CONSUMER_HEADER: 'X-Api-Key' }],
    ['CONSUMER_HEADER', { CONSUMER_HEADER: 'X-Token', API_KEY_HEADER: 'x-token' }],
    ['CONSUMER_FINGERPRINT_KEY', { CONSUMER_FINGERPRINT_KEY: 'short' }],
    ['CONSUMER_TABLE_SIZE', { CONSUMER_TABLE_SIZE: '0' }],
    ['CONSUMER_TABLE_SIZE', { CONSUMER_TABLE_SIZE: '1000001' }],
    ['MAX_PATCH_VALUE', { MAX_PATCH_VALUE: 'lots' }],
  ])('%s in %j', (variable, env) => {
    const problems = problemsOf(env);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^${variable}: \\S`));
  });

  it('reports a plugin problem together with a core one', () => {
    const problems = problemsOf({
      PORT: 'abc',
      ALIAS_DEPRECATED_AT: '2026-02-01T00:00:00Z',
      ALIAS_SUNSET_AT: '2026-01-01T00:00:00Z',
    });
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual(['ALIAS_SUNSET_AT', 'PORT']);
  });

  it('never echoes the fingerprint key in a problem', () => {
    const secret = 'hunter2-secret';
    const problems = problemsOf({ CONSUMER_FINGERPRINT_KEY: secret });
    expect(problems.join('\n')).not.toContain(secret);
  });
});

describe('without the plugin registered', () => {
  it('its variables are named in the start-up warning, not read', () => {
    const config = loadConfig(
      { ALIASES: 'off', ALIAS_SUNSET_AT: '2026-01-01T00:00:00Z', CONSUMER_HEADER: 'x' },
      [],
    );
    expect(config.plugins).toEqual({});
    expect(config.warnings.join('\n')).toContain('ALIASES, ALIAS_SUNSET_AT, CONSUMER_HEADER');
  });
});
