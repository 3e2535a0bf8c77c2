import fc from 'fast-check';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createMetrics, methodLabel, RouteHistogram } from '../../../src/observability/metrics.ts';

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
});

describe('RouteHistogram', () => {
  const BOUNDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

  it("exports exactly what prom-client's Histogram exports for the same observations", async () => {
    const route = fc.constantFrom('/user/me', '/missions/:id', 'other', '/a"b\\c\nd', '/');
    const value = fc.oneof(
      fc.constantFrom(...BOUNDS, 0, -1, 61, 1e9),
      fc.double({ min: -1, max: 100, noNaN: true, noDefaultInfinity: true }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(route, value), { maxLength: 60 }),
        fc.boolean(),
        async (obs, reset) => {
          const theirs = new Registry();
          const ours = new Registry();
          const reference = new Histogram({
            name: 'h_seconds',
            help: 'Help, with a \\ backslash.',
            labelNames: ['route'],
            buckets: BOUNDS,
            registers: [theirs],
          });
          const histogram = new RouteHistogram('h_seconds', 'Help, with a \\ backslash.', BOUNDS, ours);
          for (const [i, [r, v]] of obs.entries()) {
            reference.observe({ route: r }, v);
            histogram.observe({ route: r }, v);
            if (reset && i === obs.length >> 1) {
              theirs.resetMetrics();
              ours.resetMetrics();
            }
          }
          expect(await ours.metrics()).toBe(await theirs.metrics());
          expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON());
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses a value that is not a finite number, as prom-client does', () => {
    const histogram = new RouteHistogram('h_seconds', 'help', BOUNDS, new Registry());
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY])
      expect(() => histogram.observe({ route: '/' }, bad)).toThrow(TypeError);
  });

  it('cannot be registered twice under one name', () => {
    const registry = new Registry();
    new RouteHistogram('h_seconds', 'help', BOUNDS, registry);
    expect(() => new RouteHistogram('h_seconds', 'help', BOUNDS, registry)).toThrow(
      /already been registered/,
    );
  });
});
