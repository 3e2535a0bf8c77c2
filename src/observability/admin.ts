/**
 * The admin listener (SPEC §8): `/healthz`, `/readyz`, `/metrics` on `ADMIN_PORT`, never on the front
 * door. Plain `node:http`, no Express: it must answer even when the request pipeline is wedged.
 */
import http from 'node:http';
import { connect } from 'node:net';
import type { Registry } from 'prom-client';
import type { AdminRoute } from '../proxy/types.ts';

/** What the admin listener reports on. */
export interface AdminOptions {
  registry: Registry;
  /** Resolves `true` when the upstream is reachable (bounded by its own timeout); must not reject. */
  upstreamReachable(): Promise<boolean>;
  /** `true` once shutdown has begun: readiness turns 503. */
  draining(): boolean;
  /** Routes plugins add (`ProxyPlugin.adminRoutes`), matched before the built-in ones. */
  routes?: readonly AdminRoute[];
}

/**
 * Admin server timeouts, in ms: probes and scrapes are small and fast; a slow client is cut early.
 */
export const ADMIN_TIMEOUTS = Object.freeze({
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
});

/**
 * Creates the admin server (not listening).
 * - `GET /healthz` → 200 `{"status":"ok"}` while the process runs (liveness: no dependency checked);
 * - `GET /readyz` → 200 `{"status":"ready"}` when the upstream is reachable and the shim is not
 *   draining; 503 `{"status":"draining"}` or `{"status":"upstream unreachable"}` otherwise.
 *   Concurrent probes share one upstream check;
 * - `GET /metrics` → Prometheus text exposition of `registry`;
 * - `options.routes` (plugins' admin routes) on their exact method and path;
 * - `HEAD` is answered like `GET` without a body; other methods → 405; other paths → 404.
 * @param options The registry and the two state callbacks.
 * @example
 * const admin = createAdminServer({ registry, upstreamReachable: () => probeUpstream(url, 1000), draining: () => false });
 * admin.listen(9090);
 */
export function createAdminServer(options: AdminOptions): http.Server {
  let pendingProbe: Promise<boolean> | undefined;
  const ready = (): Promise<boolean> => {
    pendingProbe ??= options.upstreamReachable().finally(() => {
      pendingProbe = undefined;
    });
    return pendingProbe;
  };

  return http.createServer(
    {
      headersTimeout: ADMIN_TIMEOUTS.headersTimeoutMs,
      requestTimeout: ADMIN_TIMEOUTS.requestTimeoutMs,
      keepAliveTimeout: ADMIN_TIMEOUTS.keepAliveTimeoutMs,
    },
    async (req, res) => {
      const path = (req.url ?? '/').split('?', 1)[0];
      try {
        const routes = options.routes?.filter((r) => r.path === path) ?? [];
        const route = routes.find(
          (r) => r.method === req.method || (r.method === 'GET' && req.method === 'HEAD'),
        );
        if (route) return await route.handle(req, res);
        if (routes.length > 0) {
          res.setHeader('allow', routes.map((r) => r.method).join(', '));
          return json(res, 405, { status: 'method not allowed' });
        }
        if (req.method !== 'GET' && req.method !== 'HEAD') {
          res.setHeader('allow', 'GET, HEAD');
          return json(res, 405, { status: 'method not allowed' });
        }
        if (path === '/healthz') return json(res, 200, { status: 'ok' });
        if (path === '/readyz') {
          if (options.draining()) return json(res, 503, { status: 'draining' });
          const ok = await ready();
          if (options.draining()) return json(res, 503, { status: 'draining' });
          return json(res, ok ? 200 : 503, { status: ok ? 'ready' : 'upstream unreachable' });
        }
        if (path === '/metrics') {
          const text = await options.registry.metrics();
          res.writeHead(200, {
            'content-type': options.registry.contentType,
            'content-length': Buffer.byteLength(text),
            'cache-control': 'no-store',
          });
          return res.end(text);
        }
        return json(res, 404, { status: 'not found' });
      } catch {
        if (!res.headersSent) json(res, 500, { status: 'error' });
        else res.destroy();
      }
    },
  );
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}

/**
 * Probes the upstream with a TCP connection (no HTTP request: the upstream's own health route may need
 * credentials, and a listening socket is what the shim needs to forward).
 * @param upstream The upstream URL; the port defaults to 80 (`http:`) or 443 (`https:`).
 * @param timeoutMs Give up after this many ms (name resolution included).
 * @returns `true` when a connection was established in time; never rejects.
 */
export function probeUpstream(upstream: URL, timeoutMs: number): Promise<boolean> {
  const port = Number(upstream.port || (upstream.protocol === 'https:' ? 443 : 80));
  const host = upstream.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const timer = setTimeout(() => finish(false), timeoutMs);
    function finish(ok: boolean): void {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    }
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}
