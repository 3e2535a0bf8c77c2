import { describe, expect, it } from 'vitest';
import {
  createMetrics,
  methodLabel,
  registerUpstreamPoolGauges,
} from '../../../src/observability/metrics.ts';

describe('methodLabel', () => {
  it('keeps the standard methods and folds the rest into OTHER', () => {
    for (const m of ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])
      expect(methodLabel(m)).toBe(m);
    expect(methodLabel('PROPFIND')).toBe('OTHER');
    expect(methodLabel('get')).toBe('OTHER');
    expect(methodLabel('X'.repeat(100))).toBe('OTHER');
  });
});

describe('createMetrics', () => {
  const CORE = [
    'shim_requests_total',
    'shim_request_duration_seconds',
    'shim_upstream_duration_seconds',
    'shim_upstream_errors_total',
    'shim_rejections_total',
    'shim_response_patches_skipped_total',
  ];

  it('registers the core metrics on its own registry', async () => {
    const a = createMetrics(false);
    const b = createMetrics(false);
    a.requests.inc({ route: '/user/me', method: 'GET', status: '200' });
    const names = (await a.registry.getMetricsAsJSON()).map((m) => m.name);
    expect(names.sort()).toEqual([...CORE].sort());
    expect(await b.registry.metrics()).not.toContain('route="/user/me"');
  });

  it('adds the default process metrics when asked', async () => {
    const text = await createMetrics(true).registry.metrics();
    for (const name of [
      'process_cpu_user_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_heap_size_used_bytes',
      'nodejs_eventloop_lag_seconds',
    ]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
    expect(await createMetrics(false).registry.metrics()).not.toContain('process_cpu_user_seconds_total');
  });

  it('observes both latency histograms in seconds', async () => {
    const m = createMetrics(false);
    m.routes.label('/user/me', { status: 200, rejected: false }, () => 'key:k');
    m.duration.observe({ route: '/user/me' }, 0.003);
    m.upstreamDuration.observe({ route: '/user/me' }, 0.002);
    const text = await m.registry.metrics();
    expect(text).toContain('shim_request_duration_seconds_bucket{le="0.005",route="/user/me"} 1');
    expect(text).toContain('shim_upstream_duration_seconds_bucket{le="0.0025",route="/user/me"} 1');
  });

  it('labels the upstream histogram only with routes this instance learned', async () => {
    const m = createMetrics(false);
    m.upstreamDuration.observe({ route: '/never-learned' }, 0.002);
    const text = await m.registry.metrics();
    expect(text).toContain('shim_upstream_duration_seconds_count{route="other"} 1');
    expect(text).not.toContain('/never-learned');
    // Another instance's labels are its own.
    const other = createMetrics(false);
    other.routes.label('/learned', { status: 200, rejected: false }, () => 'key:k');
    expect(m.routes.known('/learned')).toBe('other');
  });

  it('exports every value of its enum labels at 0 before the first event (rate() needs a prior sample)', async () => {
    // A series that first appears with 1 has no earlier sample: Prometheus' rate() and increase() miss
    // that first increase (checked with Prometheus 2.42: 5 refused upstream requests in the first
    // scrape of a new process read increase() = 3.2, one 426 read 0).
    const text = await createMetrics(false).registry.metrics();
    const zero = (name: string, label: string, values: string[]) => {
      for (const value of values) expect(text).toContain(`${name}{${label}="${value}"} 0\n`);
      expect(text.match(new RegExp(`^${name}\\{`, 'gm'))).toHaveLength(values.length);
    };
    zero('shim_upstream_errors_total', 'kind', ['refused', 'reset', 'timeout', 'invalid']);
    zero('shim_rejections_total', 'reason', [
      'http_version',
      'hygiene',
      'expectation',
      'upgrade',
      'malformed',
      'header_size',
      'request_timeout',
      'version',
      'credentials',
      'size',
      'body',
      'encoding',
      'buffer_budget',
      'body_timeout',
      'streaming_uploads',
      'pool_full',
    ]);
    zero('shim_response_patches_skipped_total', 'reason', [
      'invalid_json',
      'too_deep',
      'value_too_large',
      'budget_exhausted',
      'scanner_failed',
      'unsupported_encoding',
    ]);
    // Labels with values not known in advance get no series until they are used.
    expect(text).not.toMatch(/^shim_requests_total\{/m);
  });

  it('counts from 0 once a series was started at 0', async () => {
    const m = createMetrics(false);
    m.upstreamErrors.inc({ kind: 'refused' });
    m.rejections.inc({ reason: 'version' });
    const text = await m.registry.metrics();
    expect(text).toContain('shim_upstream_errors_total{kind="refused"} 1\n');
    expect(text).toContain('shim_rejections_total{reason="version"} 1\n');
  });
});

describe('registerUpstreamPoolGauges', () => {
  it("reads the pool's active, idle and waiting counts over every origin at scrape time", async () => {
    const { registry } = createMetrics(false);
    const pool = {
      sockets: { 'a:80:': [1, 2], 'b:80:': [3] } as Record<string, unknown[]>,
      freeSockets: { 'a:80:': [4] } as Record<string, unknown[]>,
      requests: {} as Record<string, unknown[]>,
    };
    registerUpstreamPoolGauges(registry, pool, 1024);
    pool.requests['a:80:'] = [5, 6];
    const text = await registry.metrics();
    expect(text).toContain('shim_upstream_connections{state="active"} 3');
    expect(text).toContain('shim_upstream_connections{state="idle"} 1');
    expect(text).toContain('shim_upstream_requests_waiting 2');
    expect(text).toContain('shim_upstream_connections_limit 1024');
  });
});
