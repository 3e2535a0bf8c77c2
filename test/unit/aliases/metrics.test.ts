import { Registry } from 'prom-client';
import { SemVer } from 'semver';
import { describe, expect, it } from 'vitest';
import { createAliasMetrics, MAX_CLIENT_LABELS } from '../../../src/aliases/metrics.ts';

describe('createAliasMetrics', () => {
  it('labels clients by major.minor', () => {
    const { clientLabel } = createAliasMetrics(new Registry());
    expect(clientLabel(new SemVer('0.59.3'))).toBe('0.59');
    expect(clientLabel(new SemVer('0.59.0-rc.1+b'))).toBe('0.59');
    expect(clientLabel(new SemVer('1.0.0-rc.1'))).toBe('1.0');
  });

  it('caps the number of distinct client labels', () => {
    const { clientLabel } = createAliasMetrics(new Registry());
    for (let minor = 0; minor < MAX_CLIENT_LABELS; minor++)
      expect(clientLabel(new SemVer(`0.${minor}.0`))).toBe(`0.${minor}`);
    expect(clientLabel(new SemVer(`0.${MAX_CLIENT_LABELS}.0`))).toBe('other');
    expect(clientLabel(new SemVer('0.1.7'))).toBe('0.1');
  });

  it('starts the brownout counters at 0 for the routes it is given', async () => {
    const registry = new Registry();
    createAliasMetrics(registry, () => [], ['GET /files', 'POST /missions']);
    const text = await registry.metrics();
    for (const name of ['shim_alias_brownout_requests_total', 'shim_alias_brownout_refusals_total']) {
      expect(text).toContain(`${name}{route="GET /files"} 0\n`);
      expect(text).toContain(`${name}{route="POST /missions"} 0\n`);
    }
  });
});
