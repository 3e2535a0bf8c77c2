/**
 * The admin listener (SPEC §8): `/healthz`, `/readyz`, `/metrics` on `ADMIN_PORT`, never on the front
 * door.
 */
import http from 'node:http';
import type { Registry } from 'prom-client';

/** What the admin listener reports on. */
export interface AdminOptions {
  registry: Registry;
  /** Resolves `true` when the upstream is reachable (bounded by its own timeout). */
  upstreamReachable(): Promise<boolean>;
  /** `true` once shutdown has begun: readiness turns 503. */
  draining(): boolean;
}

/**
 * Creates the admin server (not listening).
 * - `GET /healthz` → 200 `{"status":"ok"}` while the process runs;
 * - `GET /readyz` → 200 when the upstream is reachable and not draining, else 503;
 * - `GET /metrics` → Prometheus text exposition.
 */
export function createAdminServer(options: AdminOptions): http.Server {
  return http.createServer(async (req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    try {
      if (req.method !== 'GET' && req.method !== 'HEAD')
        return json(res, 405, { status: 'method not allowed' });
      if (path === '/healthz') return json(res, 200, { status: 'ok' });
      if (path === '/readyz') {
        if (options.draining()) return json(res, 503, { status: 'draining' });
        const ok = await options.upstreamReachable();
        return json(res, ok ? 200 : 503, { status: ok ? 'ready' : 'upstream unreachable' });
      }
      if (path === '/metrics') {
        const text = await options.registry.metrics();
        res.writeHead(200, { 'content-type': options.registry.contentType });
        return res.end(text);
      }
      return json(res, 404, { status: 'not found' });
    } catch {
      return json(res, 500, { status: 'error' });
    }
  });
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/**
 * Probes the upstream with a TCP connection.
 * @param upstream The upstream URL.
 * @param timeoutMs Give up after this many ms.
 * @returns `true` when a connection was established in time.
 */
export async function probeUpstream(upstream: URL, timeoutMs: number): Promise<boolean> {
  const { connect } = await import('node:net');
  const port = Number(upstream.port || (upstream.protocol === 'https:' ? 443 : 80));
  const host = upstream.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const finish = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}
