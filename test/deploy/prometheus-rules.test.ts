/**
 * deploy/prometheus/compat-shim-rules.yaml, the alerting rules of docs/operations.md "Metrics": valid
 * rule groups, every expression naming only metrics and labels the shim exports (as built in-process
 * with the registered plugins), and the six alerts the docs list. (`promtool check rules` checked the
 * PromQL itself, with Prometheus 2.42; docs/operations.md "Checked with Prometheus".)
 */
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { labelNames, shimRegistry, unknownNames } from '../helpers/promql.ts';

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const file = parse(
  readFileSync(new URL('../../deploy/prometheus/compat-shim-rules.yaml', import.meta.url), 'utf8'),
) as { groups: Array<{ name: string; rules: Rule[] }> };
const rules = file.groups.flatMap((g) => g.rules);

const { registry, close } = shimRegistry();
afterAll(close);

describe('deploy/prometheus/compat-shim-rules.yaml', () => {
  it('is one group of alerting rules, each with an expression, a severity and a summary', () => {
    expect(file.groups.map((g) => g.name)).toEqual(['compat-shim']);
    for (const rule of rules) {
      expect(rule.alert, rule.expr).toMatch(/^CompatShim[A-Za-z]+$/);
      expect(rule.labels?.severity, rule.alert).toBeDefined();
      expect(rule.annotations?.summary, rule.alert).toBeDefined();
    }
  });

  it('names only metrics and labels the shim exports', () => {
    for (const rule of rules) expect(unknownNames(rule.expr, registry), rule.alert).toEqual([]);
    for (const rule of rules)
      for (const [, label] of Object.values(rule.annotations ?? {})
        .join(' ')
        .matchAll(/\$labels\.([a-z_]+)/g))
        expect(labelNames(rule.expr), `${rule.alert}: $labels.${label}`).toContain(label);
  });

  it('would notice a label the metric does not have', () => {
    expect(unknownNames('sum by (reasons) (rate(shim_rejections_total[5m]))', registry)).toEqual([
      'label "reasons" is not a label of shim_rejections_total',
    ]);
    expect(unknownNames('rate(shim_upstream_errors_total{reason="x"}[5m])', registry)).toHaveLength(1);
    expect(unknownNames('rate(shim_nope_total[5m])', registry)).toEqual(['shim_nope_total is not exported']);
  });

  it.each([
    ['upstream errors rising', 'CompatShimUpstreamErrors', /shim_upstream_errors_total/],
    ['a high share of 426', 'CompatShimClientVersionRefusals', /shim_rejections_total\{reason="version"\}/],
    ['skipped patches rising', 'CompatShimPatchesSkipped', /shim_response_patches_skipped_total/],
    [
      'the buffer budget nearly full',
      'CompatShimBufferBudgetHigh',
      /shim_buffered_bytes \/ shim_buffered_bytes_limit/,
    ],
    [
      'the upload slots nearly all held',
      'CompatShimStreamingUploadsFull',
      /shim_streaming_uploads \/ shim_streaming_uploads_limit/,
    ],
    [
      'requests waiting for an upstream connection',
      'CompatShimUpstreamPoolSaturated',
      /shim_upstream_requests_waiting/,
    ],
  ])('alerts on %s (docs/operations.md "Alert on")', (_what, alert, pattern) => {
    expect(rules.find((r) => r.alert === alert)?.expr).toMatch(pattern);
  });
});
