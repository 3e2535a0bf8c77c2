import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { createAdminServer } from '../../src/observability/admin.ts';
import { probeUpstream, UPSTREAM_HEALTH_PATH } from '../../src/proxy/upstream-probe.ts';
import { waitFor } from '../helpers/poll.ts';
import { holdRefusingPort } from '../helpers/refusing-port.ts';

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

async function listen(server: http.Server): Promise<string> {
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

interface State {
  reachable: boolean;
  draining: boolean;
  probes: number;
  /** Requests the admin server has received. */
  requests: number;
  /** Runs inside each upstream probe, before it answers. */
  duringProbe?: () => void;
  /** When set, each probe answers only once it settles. */
  gate?: Promise<void>;
}

async function startAdmin(overrides: Partial<State> = {}) {
  const state: State = { reachable: true, draining: false, probes: 0, requests: 0, ...overrides };
  const registry = new Registry();
  const counter = new Counter({ name: 'test_things_total', help: 'things', registers: [registry] });
  counter.inc(3);
  const server = createAdminServer({
    registry,
    upstreamReachable: async () => {
      state.probes++;
      state.duringProbe?.();
      await state.gate;
      return state.reachable;
    },
    draining: () => state.draining,
  });
  server.prependListener('request', () => {
    state.requests++;
  });
  const url = await listen(server);
  return { url, state };
}

describe('admin listener', () => {
  it('answers /healthz with 200 whatever the upstream does', async () => {
    const { url } = await startAdmin({ reachable: false, draining: true });
    const res = await fetch(`${url}/healthz`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('answers /readyz with 200 when the upstream is reachable, 503 when not', async () => {
    const { url, state } = await startAdmin();
    const ok = await fetch(`${url}/readyz`);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ status: 'ready' });
    state.reachable = false;
    const down = await fetch(`${url}/readyz`);
    expect(down.status).toBe(503);
    expect(await down.json()).toEqual({ status: 'upstream unreachable' });
  });

  it('answers /readyz with 503 while draining, without probing the upstream', async () => {
    const { url, state } = await startAdmin({ draining: true });
    const res = await fetch(`${url}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ status: 'draining' });
    expect(state.probes).toBe(0);
  });

  it('answers 503 when draining began while the probe was running', async () => {
    const { url, state } = await startAdmin();
    state.duringProbe = () => {
      state.draining = true;
    };
    expect((await fetch(`${url}/readyz`)).status).toBe(503);
    expect(state.probes).toBe(1);
  });

  it('shares one upstream probe between concurrent readiness checks', async () => {
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { url, state } = await startAdmin({ gate });
    const replies = Array.from({ length: 5 }, () => fetch(`${url}/readyz`).then((r) => r.status));
    // All five are in while the first one's probe is still running.
    await waitFor(() => state.requests === 5, { what: 'the five readiness checks to arrive' });
    release();
    const statuses = await Promise.all(replies);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    expect(state.probes).toBe(1);
    await fetch(`${url}/readyz`);
    expect(state.probes).toBe(2);
  });

  it('serves the registry in Prometheus text format on /metrics', async () => {
    const { url } = await startAdmin();
    const res = await fetch(`${url}/metrics?x=1`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(text).toContain('# TYPE test_things_total counter');
    expect(text).toContain('test_things_total 3');
  });

  it('answers HEAD without a body, other methods with 405 and unknown paths with 404', async () => {
    const { url } = await startAdmin();
    const head = await fetch(`${url}/healthz`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
    const post = await fetch(`${url}/metrics`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expect((await fetch(`${url}/`)).status).toBe(404);
    expect((await fetch(`${url}/healthz/extra`)).status).toBe(404);
  });

  it('says demo: true on /readyz in demo mode, whatever the state', async () => {
    const url = await listen(
      createAdminServer({
        registry: new Registry(),
        upstreamReachable: async () => true,
        draining: () => false,
        demo: true,
      }),
    );
    expect(await (await fetch(`${url}/readyz`)).json()).toEqual({ status: 'ready', demo: true });
  });

  it('answers 500 when the readiness callback fails, and tells onError', async () => {
    const registry = new Registry();
    const errors: Array<[unknown, string]> = [];
    const boom = new Error('boom');
    const url = await listen(
      createAdminServer({
        registry,
        upstreamReachable: () => Promise.reject(boom),
        draining: () => false,
        onError: (err, path) => errors.push([err, path]),
      }),
    );
    const res = await fetch(`${url}/readyz`);
    expect(res.status).toBe(500);
    expect(errors).toEqual([[boom, '/readyz']]);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect(errors).toHaveLength(1);
  });
});

/** An upstream answering every request with `status` and a service-version header; records paths. */
function healthServer(status = 200, paths: string[] = []): http.Server {
  return http.createServer((req, res) => {
    paths.push(req.url ?? '');
    res.writeHead(status, { 'service-version': '0.60.0' }).end('{}');
  });
}

describe('probeUpstream', () => {
  it('is true for an upstream answering its health route, and hands over the headers', async () => {
    const paths: string[] = [];
    const url = await listen(healthServer(200, paths));
    let version: unknown;
    expect(
      await probeUpstream(new URL(url), 1_000, {
        onHeaders: (h) => {
          version = h['service-version'];
        },
      }),
    ).toBe(true);
    expect(paths).toEqual([UPSTREAM_HEALTH_PATH]);
    expect(version).toBe('0.60.0');
  });

  it('asks below the path of UPSTREAM_URL', async () => {
    const paths: string[] = [];
    const url = await listen(healthServer(200, paths));
    expect(await probeUpstream(new URL(`${url}/base/`), 1_000)).toBe(true);
    expect(paths).toEqual(['/base/api/health']);
  });

  it('asks the upstream itself when the path of UPSTREAM_URL starts with // (not a host named by it)', async () => {
    // Resolved as a relative reference, `//other/p/api/health` named the host `other` (and `//[x` threw).
    const paths: string[] = [];
    const url = await listen(healthServer(200, paths));
    expect(await probeUpstream(new URL(`${url}//127.0.0.9/p?q=1#f`), 1_000)).toBe(true);
    expect(await probeUpstream(new URL(`${url}//[x`), 1_000)).toBe(true);
    expect(paths).toEqual(['//127.0.0.9/p/api/health', '//[x/api/health']);
  });

  /** Probes `url` and returns its verdict with the causes `onUnreachable` was told. */
  async function probeWithCause(url: string, timeoutMs: number) {
    const causes: string[] = [];
    const ok = await probeUpstream(new URL(url), timeoutMs, { onUnreachable: (c) => causes.push(c) });
    return { ok, causes };
  }

  it('is true for a 404 (an HTTP server is there) and false for a 5xx, naming the status', async () => {
    expect(await probeWithCause(await listen(healthServer(404)), 1_000)).toEqual({ ok: true, causes: [] });
    expect(await probeWithCause(await listen(healthServer(503)), 1_000)).toEqual({
      ok: false,
      causes: ['status 503'],
    });
  });

  it('is false when the upstream accepts but never answers within the timeout', async () => {
    const url = await listen(http.createServer(() => {}));
    expect(await probeWithCause(url, 200)).toEqual({ ok: false, causes: ['timeout'] });
  });

  it('is false for a closed port, naming the error code', async () => {
    const down = await holdRefusingPort();
    try {
      expect(await probeWithCause(down.url, 1_000)).toEqual({ ok: false, causes: ['ECONNREFUSED'] });
    } finally {
      await down.close();
    }
  });

  it('is false for a name that does not resolve', async () => {
    const { ok, causes } = await probeWithCause('http://upstream.invalid:3000', 2_000);
    expect(ok).toBe(false);
    expect(causes).toHaveLength(1); // ENOTFOUND, or EAI_AGAIN where no resolver answers
    expect(causes[0]).toMatch(/^E[A-Z_]+$/);
  });

  it('gives up after the timeout when the connection never completes', async () => {
    // TEST-NET-1 (RFC 5737): either unroutable (fails fast) or black-holed (times out).
    const started = performance.now();
    expect(await probeUpstream(new URL('http://192.0.2.1:81'), 300)).toBe(false);
    // Far below the OS's own connect timeout (minutes), with room for a loaded CI runner.
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  it('accepts bracketed IPv6 literals', async () => {
    const server = healthServer();
    servers.push(server);
    try {
      server.listen(0, '::1');
      await once(server, 'listening');
    } catch {
      return; // no IPv6 loopback on this machine
    }
    const { port } = server.address() as AddressInfo;
    expect(await probeUpstream(new URL(`http://[::1]:${port}`), 1_000)).toBe(true);
  });
});
