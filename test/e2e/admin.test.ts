/**
 * The admin listener in front of a real shim and reference backend: probes, and label boundedness of
 * every metric on the shared registry (core metrics and whatever plugins register, e.g. alias uses)
 * after a thousand distinct identifiers and client versions went through the front door.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminServer, probeUpstream } from '../../src/observability/admin.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
/** A full version (major.minor.patch); `major.minor` alone is allowed. */
const FULL_VERSION = /\d+\.\d+\.\d+/;

async function startAdmin(stack: Stack, draining: () => boolean): Promise<{ server: Server; url: string }> {
  const server = createAdminServer({
    registry: stack.metrics.registry,
    upstreamReachable: () => probeUpstream(new URL(stack.upstreamUrl), 500),
    draining,
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function requestCount(stack: Stack): Promise<number> {
  const json = await stack.metrics.requests.get();
  return json.values.reduce((sum, v) => sum + v.value, 0);
}

async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}

describe('admin listener beside a real shim', () => {
  let stack: Stack;
  let admin: { server: Server; url: string };
  let draining = false;

  beforeAll(async () => {
    stack = await startStack();
    admin = await startAdmin(stack, () => draining);
  });
  afterAll(async () => {
    await closeServer(admin.server);
    await stack.close();
  });

  it('is ready while the upstream listens, and not while draining', async () => {
    expect((await fetch(`${admin.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${admin.url}/readyz`)).status).toBe(200);
    draining = true;
    try {
      expect((await fetch(`${admin.url}/readyz`)).status).toBe(503);
      expect((await fetch(`${admin.url}/healthz`)).status).toBe(200);
    } finally {
      draining = false;
    }
  });

  it('is not reachable through the front door', async () => {
    for (const path of ['/metrics', '/healthz', '/readyz']) {
      const res = await fetch(`${stack.url}${path}`, { headers: LEGACY });
      const text = await res.text();
      expect(text).not.toContain('# TYPE');
      expect(res.status).not.toBe(200);
    }
  });

  it('keeps every label bounded after a thousand distinct UUID paths and client versions', async () => {
    const before = await requestCount(stack);
    const requests: Array<Promise<unknown>> = [];
    for (let i = 0; i < 1000; i++) {
      const uuid = crypto.randomUUID();
      const headers = { ...LEGACY, 'service-client-version': `0.${50 + (i % 10)}.${i}` };
      const kind = i % 5;
      let req: Promise<Response>;
      if (kind === 0) req = fetch(`${stack.url}/missions/${uuid}`, { headers });
      else if (kind === 1)
        req = fetch(`${stack.url}/missions/${uuid}/metadata`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify({ tags: { [uuid]: 'v' } }),
        });
      else if (kind === 2)
        req = fetch(`${stack.url}/projects/${uuid}/metadata-types?tagTypeUUID=${uuid}`, {
          method: 'POST',
          headers,
        });
      else if (kind === 3) req = fetch(`${stack.url}/${uuid}/${uuid}/${uuid}/${uuid}`, { headers });
      else
        req = fetch(`${stack.url}/files?tags[${uuid}]=x`, {
          headers: { 'service-client-version': `1.0.${i}` },
        });
      requests.push(req.then((r) => r.arrayBuffer()));
      if (requests.length >= 50) await Promise.all(requests.splice(0));
    }
    await Promise.all(requests);

    const text = await (await fetch(`${admin.url}/metrics`)).text();
    expect(text).not.toMatch(UUID);

    const metrics = (await stack.metrics.registry.getMetricsAsJSON()) as MetricObjectWithValues<
      MetricValue<string>
    >[];
    const requestsTotal = metrics.find((m) => m.name === 'shim_requests_total');
    expect((await requestCount(stack)) - before).toBe(1000);

    for (const metric of metrics) {
      const series = new Set<string>();
      for (const value of metric.values) {
        for (const [label, labelValue] of Object.entries(value.labels)) {
          if (label === 'le' || label === 'quantile') continue;
          const v = String(labelValue);
          expect(v, `${metric.name}{${label}}`).not.toMatch(UUID);
          expect(v, `${metric.name}{${label}}`).not.toMatch(FULL_VERSION);
          expect(v.length, `${metric.name}{${label}}`).toBeLessThanOrEqual(64);
        }
        series.add(JSON.stringify(value.labels));
      }
      // Five shapes of path, a handful of statuses: a few dozen series at most per metric.
      expect(series.size, metric.name).toBeLessThan(200);
    }
    // The alias layer's metric (absent once the layer is deleted, SPEC §10): clients as major.minor.
    const aliasUses = metrics.find((m) => m.name === 'shim_alias_uses_total');
    if (aliasUses) {
      expect(aliasUses.values.reduce((sum, v) => sum + v.value, 0)).toBeGreaterThan(0);
      const clients = new Set(aliasUses.values.map((v) => String(v.labels.client)));
      for (const c of clients) expect(c).toMatch(/^\d+\.\d+$|^other$/);
      expect(clients.size).toBeLessThanOrEqual(10); // 0.50 … 0.59
    }
    const routes = new Set(requestsTotal?.values.map((v) => String(v.labels.route)));
    // Paths the upstream answered (400 for the unknown UUIDs) earn their class; the ones it did not
    // know (404) and the ones the shim rejected share `other`, so a scanner cannot use up the labels.
    const shapes = ['/missions/:id', '/missions/:id/metadata', '/projects/:id/metadata-types', '/files'];
    for (const shape of shapes) {
      const seen = requestsTotal?.values.some((v) => v.labels.route === shape && v.labels.status !== '404');
      const missing = requestsTotal?.values.some(
        (v) => v.labels.route === shape && v.labels.status === '404',
      );
      expect(seen || !missing, shape).toBe(true);
    }
    expect(routes.has('/:id/:id/:id')).toBe(false);
    expect(routes.has('other')).toBe(true);
    expect(routes.size).toBeLessThanOrEqual(shapes.length + 4); // + other and the front-door test's paths
  });

  it('counts shim-made rejections by reason', async () => {
    await fetch(`${stack.url}/user/me`);
    await fetch(`${stack.url}/user/me`, { headers: { 'service-client-version': '0.59.0' } });
    const text = await (await fetch(`${admin.url}/metrics`)).text();
    expect(text).toMatch(/shim_rejections_total\{reason="version"\} [1-9]/);
    expect(text).toMatch(/shim_rejections_total\{reason="credentials"\} [1-9]/);
  });
});

describe('admin listener when the upstream is down', () => {
  it('reports not ready, counts the upstream error, and stays alive', async () => {
    const probe = await startStack();
    const deadUrl = probe.upstreamUrl;
    await probe.close(); // the port is free now: nothing listens there
    const stack = await startStack({ UPSTREAM_URL: deadUrl });
    const admin = await startAdmin(stack, () => false);
    try {
      expect((await fetch(`${admin.url}/readyz`)).status).toBe(503);
      expect((await fetch(`${admin.url}/healthz`)).status).toBe(200);
      const res = await fetch(`${stack.url}/user/me`, { headers: LEGACY });
      expect(res.status).toBe(502);
      const text = await (await fetch(`${admin.url}/metrics`)).text();
      expect(text).toContain('shim_upstream_errors_total{kind="refused"} 1');
    } finally {
      await closeServer(admin.server);
      await stack.close();
    }
  });
});
