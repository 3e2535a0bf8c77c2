/**
 * The admin listener of a real runtime in front of the reference backend: probes, and label
 * boundedness of every metric on the runtime's registry (core metrics and whatever plugins register,
 * e.g. alias uses) after a thousand distinct identifiers and client versions went through the front
 * door. Garbage paths against route labels: test/e2e/route-labels.test.ts.
 */
import { once } from 'node:events';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminServer } from '../../src/observability/admin.ts';
import { probeUpstream } from '../../src/proxy/upstream-probe.ts';
import { holdRefusingPort } from '../helpers/refusing-port.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
/** A full version (major.minor.patch); `major.minor` alone is allowed. */
const FULL_VERSION = /\d+\.\d+\.\d+/;

/** A second admin server on the stack's registry and upstream, with a draining flag the test sets. */
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

/**
 * A shim (probed at start) in front of a plain upstream that answers `{}` to everything; `close` stops
 * both, whether or not the upstream still listens.
 */
async function stackOnHealthyUpstream() {
  const upstream = http.createServer((_req, res) => res.end('{}'));
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  const { port } = upstream.address() as AddressInfo;
  const stack = await startStack({ UPSTREAM_URL: `http://127.0.0.1:${port}` }, {}, { probeAtStart: true });
  const close = async () => {
    await stack.close();
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
  };
  return { upstream, port, stack, close };
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
  let admin: { url: string };

  beforeAll(async () => {
    stack = await startStack();
    admin = { url: stack.adminUrl };
  });
  afterAll(async () => {
    await stack.close();
  });

  it('is ready while the upstream listens, and says nothing of demo mode outside it', async () => {
    expect((await fetch(`${admin.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${admin.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
  });

  it('is not ready while draining', async () => {
    const other = await startStack();
    const second = await startAdmin(other, () => true);
    try {
      expect((await fetch(`${second.url}/readyz`)).status).toBe(503);
      expect((await fetch(`${second.url}/healthz`)).status).toBe(200);
    } finally {
      await closeServer(second.server);
      await other.close();
    }
  });

  it('knows the service version before the first request (start probe)', async () => {
    const fresh = await startStack();
    try {
      expect(fresh.shim.serviceVersion.text).toBe('0.60.0');
      const res = await fetch(`${fresh.url}/user/me`);
      expect(res.status).toBe(426);
      expect(res.headers.get('service-version')).toBe('0.60.0');
    } finally {
      await fresh.close();
    }
  });

  it('learns the service version from a readiness probe when the start probe did not run', async () => {
    const fresh = await startStack({}, {}, { probeAtStart: false });
    try {
      expect(fresh.shim.serviceVersion.text).toBeUndefined();
      expect((await fetch(`${fresh.adminUrl}/readyz`)).status).toBe(200);
      expect(fresh.shim.serviceVersion.text).toBe('0.60.0');
    } finally {
      await fresh.close();
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
    // Only a 2xx/3xx from the upstream teaches a class: the unknown UUIDs (404, or 400 for a bad
    // body or query) and the shim's own rejections share `other`, so a scanner cannot use up the labels.
    const labelled = (requestsTotal?.values ?? []).filter((v) => v.labels.route !== 'other');
    for (const v of labelled) expect(Number(v.labels.status), String(v.labels.route)).toBeLessThan(400);
    expect(routes.has('/:id/:id/:id')).toBe(false);
    expect(routes.has('other')).toBe(true);
    expect(routes.size).toBeLessThanOrEqual(6); // other, /files and the earlier tests' paths
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
    const down = await holdRefusingPort(); // nothing listens there, and no other test can take it
    const stack = await startStack({ UPSTREAM_URL: down.url }, {}, { probeAtStart: true });
    const admin = { url: stack.adminUrl };
    try {
      expect((await fetch(`${admin.url}/readyz`)).status).toBe(503);
      expect((await fetch(`${admin.url}/healthz`)).status).toBe(200);
      const res = await fetch(`${stack.url}/user/me`, { headers: LEGACY });
      expect(res.status).toBe(502);
      const text = await (await fetch(`${admin.url}/metrics`)).text();
      expect(text).toContain('shim_upstream_errors_total{kind="refused"} 1');
      // Said once, with the cause: the probe at start; the failing /readyz after it adds no line.
      const warned = stack.logs().filter((l) => String(l.msg).startsWith('upstream not reachable'));
      expect(warned).toEqual([
        expect.objectContaining({ msg: 'upstream not reachable at start', cause: 'ECONNREFUSED' }),
      ]);
    } finally {
      await stack.close();
      await down.close();
    }
  });

  it('probes on a pool of its own: clients holding every connection of the traffic’s pool cannot make it unready', async () => {
    const { stack, close } = await stackOnHealthyUpstream();
    try {
      expect((await fetch(`${stack.adminUrl}/readyz`)).status).toBe(200);
      const pool = stack.shim.forwarder.agent;
      expect([...Object.values(pool.sockets), ...Object.values(pool.freeSockets)].flat()).toEqual([]);
    } finally {
      await close();
    }
  });

  it('logs a change of readiness once each way, with the cause of the failure', async () => {
    const { upstream, port, stack, close } = await stackOnHealthyUpstream();
    const readiness = () => stack.logs().filter((l) => /^upstream (not )?reachable/.test(String(l.msg)));
    try {
      expect((await fetch(`${stack.adminUrl}/readyz`)).status).toBe(200);
      expect(readiness()).toEqual([]);

      upstream.closeAllConnections();
      await new Promise((r) => upstream.close(r));
      expect((await fetch(`${stack.adminUrl}/readyz`)).status).toBe(503);
      expect((await fetch(`${stack.adminUrl}/readyz`)).status).toBe(503);
      expect(readiness()).toEqual([
        expect.objectContaining({ level: 40, msg: 'upstream not reachable', cause: 'ECONNREFUSED' }),
      ]);

      upstream.listen(port, '127.0.0.1');
      await once(upstream, 'listening');
      expect((await fetch(`${stack.adminUrl}/readyz`)).status).toBe(200);
      expect((await fetch(`${stack.adminUrl}/readyz`)).status).toBe(200);
      expect(readiness().map((l) => l.msg)).toEqual(['upstream not reachable', 'upstream reachable again']);
    } finally {
      await close();
    }
  });
});
