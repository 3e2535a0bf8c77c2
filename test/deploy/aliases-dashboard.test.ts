/**
 * The dashboard's alias-layer row (issue 11 item 5): alias use over time by alias and by client version,
 * the top consumers, brownout refusals. (That every query names an exported metric is checked by
 * grafana-dashboard.test.ts.) Deleted with the layer, together with the row.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const dashboard = JSON.parse(
  readFileSync(new URL('../../deploy/grafana/compat-shim.json', import.meta.url), 'utf8'),
) as { panels: Array<{ type: string; title: string; targets?: Array<{ expr: string }> }> };

/** The panels after the alias layer's row, up to the next row. */
function aliasRow() {
  const start = dashboard.panels.findIndex((p) => p.type === 'row' && p.title.startsWith('Alias layer'));
  expect(start).toBeGreaterThanOrEqual(0);
  const rest = dashboard.panels.slice(start + 1);
  const end = rest.findIndex((p) => p.type === 'row');
  return end < 0 ? rest : rest.slice(0, end);
}

describe('the alias layer row of deploy/grafana/compat-shim.json', () => {
  const exprs = aliasRow()
    .flatMap((p) => p.targets!.map((t) => t.expr))
    .join('\n');

  it.each([
    ['alias use by alias', /sum by \(alias\) \(rate\(shim_alias_uses_total/],
    ['alias use by client version', /sum by \(client\) \(rate\(shim_alias_uses_total/],
    ['top consumers', /topk\(10, max by \(consumer\) \(shim_alias_consumers\)\)/],
    ['brownout requests', /shim_alias_brownout_requests_total/],
    ['brownout refusals', /shim_alias_brownout_refusals_total/],
  ])('shows %s', (_what, pattern) => {
    expect(exprs).toMatch(pattern);
  });

  it('holds every alias metric panel of the dashboard (so deleting the row removes them all)', () => {
    const row = new Set(aliasRow());
    for (const panel of dashboard.panels.filter((p) => !row.has(p))) {
      for (const t of panel.targets ?? []) expect(t.expr, panel.title).not.toContain('shim_alias_');
    }
  });

  it('draws the 30-day trend as 0, not as no data, for a direction nobody used (the switch-off signal)', () => {
    // Without alias uses in 30 days (or on replicas started since) shim_alias_uses_total has no series,
    // and sum(increase(…)) returns nothing: the panel showed "No data" exactly when the answer is 0.
    const trend = aliasRow().find((p) => p.title.startsWith('Alias uses over 30 days'));
    const expr = trend?.targets?.[0]?.expr ?? '';
    for (const direction of ['request', 'response'])
      expect(expr).toContain(`or label_replace(vector(0), "direction", "${direction}", "", "")`);
  });
});
