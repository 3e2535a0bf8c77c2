/**
 * The names a PromQL expression refers to, for the tests that keep deploy/ (dashboard, rules) and the
 * docs' queries in step with the metrics the shim exports. A reader of names, not a PromQL parser: it
 * knows the shapes those files use (selectors, `by (…)` / `without (…)`, `$labels.x`).
 */
import pino from 'pino';
import type { Registry } from 'prom-client';
import { createShim, PLUGINS } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { createMetrics } from '../../src/observability/metrics.ts';

/** Labels Prometheus adds at scrape time or that histograms carry: never the shim's own. */
const SCRAPE_LABELS = new Set(['job', 'instance', 'le']);

/** Metric names in an expression (`shim_…`; the histogram series suffixes stripped). */
export function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b(shim_[a-z0-9_]+)\b/g)].map((m) => m[1]!.replace(/_(bucket|sum|count)$/, ''));
}

/**
 * Label names an expression uses: in selectors (`{reason="version"}`) and in grouping clauses (`by (le,
 * route)`, `without (kind)`), less those Prometheus adds (`job`, `instance`) and `le`.
 */
export function labelNames(expr: string): string[] {
  const names = new Set<string>();
  for (const [, body] of expr.matchAll(/\{([^}]*)\}/g))
    for (const [, name] of body!.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)) names.add(name!);
  for (const [, list] of expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g))
    for (const name of list!.split(',')) if (name.trim() !== '') names.add(name.trim());
  return [...names].filter((name) => !SCRAPE_LABELS.has(name));
}

/**
 * What an expression names that the registry does not export: unknown metrics, and label names that
 * none of the expression's metrics has.
 * @returns Problems, e.g. `['label "reasons" is not a label of shim_rejections_total']`; empty when fine.
 */
export function unknownNames(expr: string, registry: Registry): string[] {
  const problems: string[] = [];
  const labels = new Set<string>();
  const metrics = metricNames(expr);
  if (metrics.length === 0) problems.push('names no shim metric');
  for (const name of metrics) {
    const metric = registry.getSingleMetric(name) as { labelNames?: readonly string[] } | undefined;
    if (metric === undefined) problems.push(`${name} is not exported`);
    for (const label of metric?.labelNames ?? []) labels.add(label);
  }
  for (const label of labelNames(expr))
    if (!labels.has(label)) problems.push(`label "${label}" is not a label of ${metrics.join(', ')}`);
  return problems;
}

/**
 * The registry of a shim built in-process with the registered plugins (every metric and label the
 * shim exports; nothing listens), for checking the PromQL of the dashboard and the alert rules.
 * @returns `registry`, and `close()`, which frees the shim's upstream pool.
 */
export function shimRegistry(): { registry: Registry; close: () => void } {
  const metrics = createMetrics(false);
  const shim = createShim(loadConfig({ UPSTREAM_URL: 'http://127.0.0.1:9' }, PLUGINS), {
    logger: pino({ level: 'silent' }),
    metrics,
    upstream: new URL('http://127.0.0.1:9'),
  });
  return { registry: metrics.registry, close: () => shim.forwarder.agent.destroy() };
}
