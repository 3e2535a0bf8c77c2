/**
 * docs/configuration.md and docs/operations.md cannot drift from the code: the configuration table
 * lists exactly the variables `src/config.ts` reads, with the defaults it applies; the operations page
 * names every metric and the server timeouts as they are in the code.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.ts';
import { ADMIN_TIMEOUTS } from '../../src/observability/admin.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { MAX_HEADER_BYTES, SERVER_TIMEOUTS } from '../../src/proxy/server.ts';

const read = (name: string) => readFileSync(new URL(`../../docs/${name}`, import.meta.url), 'utf8');

/** Rows of the configuration table: `| \`NAME\` | default | meaning |`. */
function configRows(): Array<{ name: string; fallback: string }> {
  const rows: Array<{ name: string; fallback: string }> = [];
  for (const line of read('configuration.md').split('\n')) {
    const m = /^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|\s*([^|]*?)\s*\|/.exec(line);
    if (m) rows.push({ name: m[1] as string, fallback: m[2] as string });
  }
  return rows;
}

describe('docs/configuration.md', () => {
  const rows = configRows();

  it('has one row per variable the config module reads, and no other', () => {
    const names = rows.map((r) => r.name);
    expect(new Set(names).size).toBe(names.length);
    expect([...names].sort()).toEqual([...CONFIG_VARIABLES].sort());
  });

  it('shows the defaults the config module applies', () => {
    const implicit = loadConfig({});
    for (const { name, fallback } of rows) {
      if (fallback === 'unset') {
        // Unset means "no value": an empty string is read the same way.
        expect(loadConfig({ [name]: '' }), name).toEqual(implicit);
        continue;
      }
      const literal = /^`([^`]*)`$/.exec(fallback);
      expect(literal, `${name}: default must be \`value\` or unset`).not.toBeNull();
      expect(loadConfig({ [name]: literal?.[1] }), name).toEqual(implicit);
    }
  });

  it('would notice a wrong default', () => {
    // The check above compares configurations, so a different value must make a difference.
    expect(loadConfig({ SHUTDOWN_TIMEOUT_MS: '10001' })).not.toEqual(loadConfig({}));
    expect(loadConfig({ PUBLIC_PATHS: '/api/health/' })).not.toEqual(loadConfig({}));
  });

  it('documents "unset" only for variables without a default', () => {
    const implicit = loadConfig({}) as unknown as Record<string, unknown>;
    const unsetFields: Record<string, unknown> = {
      UPSTREAM_URL: implicit.upstreamUrl,
      UPSTREAM_CA_FILE: implicit.upstreamCa,
      SERVICE_VERSION: implicit.serviceVersion,
      MIN_CLIENT_VERSION: implicit.minClientVersion,
      ALIAS_DEPRECATED_AT: (implicit.aliases as Record<string, unknown>).deprecatedAt,
      ALIAS_SUNSET_AT: (implicit.aliases as Record<string, unknown>).sunsetAt,
      ALIAS_DOCS_URL: (implicit.aliases as Record<string, unknown>).docsUrl,
    };
    for (const { name } of rows.filter((r) => r.fallback === 'unset')) {
      expect(Object.keys(unsetFields), name).toContain(name);
      expect(unsetFields[name], name).toBeUndefined();
    }
  });
});

describe('docs/operations.md', () => {
  const text = read('operations.md');

  it('names every core metric', async () => {
    const names = (await createMetrics(false).registry.getMetricsAsJSON()).map((m) => m.name);
    expect(names.length).toBeGreaterThan(0);
    for (const name of [...names, 'shim_alias_uses_total']) expect(text, name).toContain(`\`${name}`);
  });

  it('states the server timeouts as they are in the code', () => {
    const seconds = (ms: number) => `${ms / 1000} s`;
    expect(text).toContain(`headers within ${seconds(SERVER_TIMEOUTS.headersTimeoutMs)}`);
    expect(text).toContain(`whole request within ${seconds(SERVER_TIMEOUTS.requestTimeoutMs)}`);
    expect(text).toContain(`idle keep-alive connection after ${seconds(SERVER_TIMEOUTS.keepAliveTimeoutMs)}`);
    expect(text).toContain(`${MAX_HEADER_BYTES / 1024} KiB`);
    expect(text).toContain(
      `Admin listener: headers within ${seconds(ADMIN_TIMEOUTS.headersTimeoutMs)}, whole request within ${seconds(ADMIN_TIMEOUTS.requestTimeoutMs)}`,
    );
  });

  it('links the configuration page and the benchmark results', () => {
    expect(text).toContain('configuration.md');
    expect(text).toContain('bench/RESULTS.md');
  });
});
