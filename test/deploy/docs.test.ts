/**
 * docs/operations.md cannot drift from the code: the operations page names every metric and the server timeouts as they are in the code.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ADMIN_TIMEOUTS } from '../../src/observability/admin.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { MAX_HEADER_BYTES, SERVER_TIMEOUTS } from '../../src/proxy/server.ts';

const read = (name: string) => readFileSync(new URL(`../../docs/${name}`, import.meta.url), 'utf8');

// docs/configuration.md is generated from the composed schema and checked (rows, defaults, staleness)
// by test/unit/config.test.ts.

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
