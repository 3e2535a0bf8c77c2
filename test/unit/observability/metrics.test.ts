import { describe, expect, it } from 'vitest';
import { createMetrics, methodLabel, routeClass } from '../../../src/observability/metrics.ts';

describe('routeClass', () => {
  it.each([
    ['/', '/'],
    ['', '/'],
    ['/user/me', '/user/me'],
    ['/missions/', '/missions'],
    ['/Missions', '/missions'],
    ['/missions/5f0c2a64-1b1e-4c2d-9a4b-0f0e9d8c7b6a', '/missions/:id'],
    ['/missions/5F0C2A64-1B1E-4C2D-9A4B-0F0E9D8C7B6A/metadata', '/missions/:id/metadata'],
    ['/projects/42/metadata-types', '/projects/:id/metadata-types'],
    ['/files/0123456789abcdef0123', '/files/:id'],
    ['/files/a-token-that-is-longer-than-thirty-two-chars', '/files/:id'],
    ['/a/b/c/d/e/f', '/a/b/c'],
    ['//missions', '/missions'],
  ])('%s → %s', (path, cls) => {
    expect(routeClass(path)).toBe(cls);
  });

  it('maps a thousand distinct identifiers to one class', () => {
    const classes = new Set<string>();
    for (let i = 0; i < 1000; i++) classes.add(routeClass(`/missions/${crypto.randomUUID()}/metadata`));
    expect([...classes]).toEqual(['/missions/:id/metadata']);
  });

  it('reports new classes as "other" once 200 distinct classes were seen', () => {
    const classes = new Set<string>();
    for (let i = 0; i < 1000; i++) classes.add(routeClass(`/scan-${i.toString(36)}x`));
    expect(classes.size).toBeLessThanOrEqual(201);
    expect(classes.has('other')).toBe(true);
    // Classes seen before the limit keep their name.
    expect(routeClass('/user/me')).toBe('/user/me');
  });
});

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
    m.duration.observe({ route: '/user/me' }, 0.003);
    m.upstreamDuration.observe({ route: '/user/me' }, 0.002);
    const text = await m.registry.metrics();
    expect(text).toContain('shim_request_duration_seconds_bucket{le="0.005",route="/user/me"} 1');
    expect(text).toContain('shim_upstream_duration_seconds_bucket{le="0.0025",route="/user/me"} 1');
  });
});
