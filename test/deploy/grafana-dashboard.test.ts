/**
 * deploy/grafana/compat-shim.json cannot drift from the code (issue 11 item 5): every panel's PromQL
 * names only metrics (and labels of theirs) the shim exports, as built in-process with the registered plugins. Survives the
 * removal of a plugin: the plugin's dashboard row goes with it (docs/removing-the-alias-layer.md).
 */
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { metricNames, shimRegistry, unknownNames } from '../helpers/promql.ts';

interface Panel {
  type: string;
  title: string;
  targets?: Array<{ expr: string }>;
}

const dashboard = JSON.parse(
  readFileSync(new URL('../../deploy/grafana/compat-shim.json', import.meta.url), 'utf8'),
) as { uid: string; panels: Panel[] };

const { registry, close } = shimRegistry();
afterAll(close);

describe('deploy/grafana/compat-shim.json', () => {
  const panels = dashboard.panels.filter((p) => p.type !== 'row');

  it('is a dashboard with panels', () => {
    expect(dashboard.uid).toBe('compat-shim');
    expect(panels.length).toBeGreaterThan(3);
  });

  it('names in every panel query only metrics the shim exports', async () => {
    const exported = new Set((await registry.getMetricsAsJSON()).map((m) => m.name));
    for (const panel of panels) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const { expr } of panel.targets!) {
        const names = metricNames(expr);
        expect(names.length, `${panel.title}: ${expr}`).toBeGreaterThan(0);
        for (const name of names) expect(exported, `${panel.title}: ${name}`).toContain(name);
      }
    }
  });

  it('names in every panel query only labels those metrics have', () => {
    for (const panel of panels)
      for (const { expr } of panel.targets!)
        expect(unknownNames(expr, registry), `${panel.title}: ${expr}`).toEqual([]);
  });

  it('would notice a metric the shim does not export', () => {
    expect(metricNames('sum(rate(shim_nonexistent_total[5m])) / sum(shim_x_bucket)')).toEqual([
      'shim_nonexistent_total',
      'shim_x',
    ]);
  });

  it('shows rejections by reason and latency', () => {
    const exprs = panels.flatMap((p) => p.targets!.map((t) => t.expr)).join('\n');
    expect(exprs).toMatch(/sum by \(reason\) \(rate\(shim_rejections_total/);
    expect(exprs).toMatch(
      /histogram_quantile\(0\.99, sum by \(le\) \(rate\(shim_request_duration_seconds_bucket/,
    );
  });
});
