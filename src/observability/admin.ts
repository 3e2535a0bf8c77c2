/**
 * The admin listener (SPEC §8): `/healthz`, `/readyz`, `/metrics` on `ADMIN_PORT`, never on the front
 * door. Plain `node:http`, no Express: it must answer even when the request pipeline is wedged.
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import type { Registry } from 'prom-client';
import { sendJson } from '../core/json-response.ts';
import type { AdminRoute } from '../core/types.ts';

/** What the admin listener reports on. */
export interface AdminOptions {
  registry: Registry;
  /** Resolves `true` when the upstream is reachable (bounded by its own timeout); must not reject. */
  upstreamReachable(): Promise<boolean>;
  /** `true` once shutdown has begun: readiness turns 503. */
  draining(): boolean;
  /** Routes plugins add (`ProxyPlugin.adminRoutes`), matched before the built-in ones. */
  routes?: readonly AdminRoute[];
  /** Demo mode (the embedded reference backend is the upstream): `/readyz` says `"demo": true`. */
  demo?: boolean;
  /**
   * Told of a failure inside a route (a plugin's handler that throws, a readiness callback that
   * rejects, a registry that cannot render) after the client got its 500; for the log.
   */
  onError?(err: unknown, path: string): void;
}

/**
 * Admin server timeouts, in ms: probes and scrapes are small and fast; a slow client is cut early, at
 * most one checking interval after its timeout (Node's default interval is 30 s: docs/reliability.md
 * fixes 7 and 127).
 */
export const ADMIN_TIMEOUTS = Object.freeze({
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  connectionsCheckingIntervalMs: 1_000,
});

/**
 * Creates the admin server (not listening).
 * - `GET /healthz` → 200 `{"status":"ok"}` while the process runs (liveness: no dependency checked);
 * - `GET /readyz` → 200 `{"status":"ready"}` when the upstream is reachable and the shim is not
 *   draining; 503 `{"status":"draining"}` or `{"status":"upstream unreachable"}` otherwise; in demo
 *   mode every body also carries `"demo": true`. Concurrent probes share one upstream check;
 * - `GET /metrics` → Prometheus text exposition of `registry`;
 * - `options.routes` (plugins' admin routes) on their exact method and path;
 * - `HEAD` is answered like `GET` without a body; other methods → 405; other paths → 404.
 *
 * One request at a time per connection: a request that arrives while the connection's previous response
 * is still under way closes the connection unanswered — a pipelined request, or one sent while the
 * previous answer is still unsent because the client does not read it (a response `close`s only once
 * its last byte is in the kernel's buffer). No admin client pipelines (Prometheus, a kubelet, curl), and
 * Node makes a response for every request it parses: 20 connections of 500 pipelined `GET /metrics`
 * that never read took the shim over 500 MiB and kept `/healthz` 12 s from its answer
 * (docs/reliability.md fix 127). Memory per connection: one response.
 * @param options The registry and the two state callbacks.
 * @returns The server, not yet listening. A route's or callback's error is caught per request (500,
 *   or the connection destroyed once the head is sent) and told to `options.onError`.
 * @throws Nothing.
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

  /** Connections with a response under way (from its request to its `close`). */
  const busy = new WeakSet<Socket>();
  const done = (socket: Socket) => busy.delete(socket);

  return http.createServer(
    {
      headersTimeout: ADMIN_TIMEOUTS.headersTimeoutMs,
      requestTimeout: ADMIN_TIMEOUTS.requestTimeoutMs,
      keepAliveTimeout: ADMIN_TIMEOUTS.keepAliveTimeoutMs,
      connectionsCheckingInterval: ADMIN_TIMEOUTS.connectionsCheckingIntervalMs,
    },
    async (req, res) => {
      const socket = req.socket;
      if (busy.has(socket)) {
        socket.destroy();
        return;
      }
      busy.add(socket);
      res.once('close', () => done(socket));
      const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
      try {
        const routes = options.routes?.filter((r) => r.path === path) ?? [];
        const route = routes.find(
          (r) => r.method === req.method || (r.method === 'GET' && req.method === 'HEAD'),
        );
        if (route) return await route.handle(req, res);
        if (routes.length > 0) {
          res.setHeader('allow', routes.map((r) => r.method).join(', '));
          return sendJson(res, 405, { status: 'method not allowed' });
        }
        if (req.method !== 'GET' && req.method !== 'HEAD') {
          res.setHeader('allow', 'GET, HEAD');
          return sendJson(res, 405, { status: 'method not allowed' });
        }
        if (path === '/healthz') return sendJson(res, 200, { status: 'ok' });
        if (path === '/readyz') {
          const demo = options.demo ? { demo: true } : {};
          if (options.draining()) return sendJson(res, 503, { status: 'draining', ...demo });
          const ok = await ready();
          if (options.draining()) return sendJson(res, 503, { status: 'draining', ...demo });
          return sendJson(res, ok ? 200 : 503, { status: ok ? 'ready' : 'upstream unreachable', ...demo });
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
        return sendJson(res, 404, { status: 'not found' });
      } catch (err) {
        if (!res.headersSent) sendJson(res, 500, { status: 'error' });
        else res.destroy();
        options.onError?.(err, path);
      }
    },
  );
}
