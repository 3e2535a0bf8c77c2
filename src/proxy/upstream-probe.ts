/**
 * The upstream's readiness probe: `GET /api/health` through the forwarder's pool, for the admin
 * listener's `/readyz` (SPEC §8) and for reading the service version at start (runtime.ts).
 */
import type { Agent, IncomingHttpHeaders } from 'node:http';
import { startDeadline } from './own-pause.ts';
import { upstreamRequest } from './upstream-agent.ts';

/**
 * The upstream's health route (service document part 3: `GET /api/health` needs neither credentials
 * nor the client-version header), relative to the path of `UPSTREAM_URL`.
 */
export const UPSTREAM_HEALTH_PATH = '/api/health';

/** Options of {@link probeUpstream}. */
export interface ProbeOptions {
  /** The forwarder's agent, so that the probe uses the same pool and TLS settings as the traffic. */
  agent?: Agent;
  /** Told the response headers of every answered probe (the service version is read from them). */
  onHeaders?(headers: IncomingHttpHeaders): void;
  /**
   * Told why a probe found the upstream unreachable, before it resolves `false`: `timeout`, the
   * error's code (`ECONNREFUSED`, `ENOTFOUND`, `CERT_HAS_EXPIRED`, …; its message when it has none),
   * or `status <n>` for a 5xx.
   */
  onUnreachable?(cause: string): void;
}

/**
 * Probes the upstream with `GET <UPSTREAM_URL path>/api/health` ({@link UPSTREAM_HEALTH_PATH}).
 * Reachable means: any response below 500 in time (a 404 still proves a listening HTTP server the shim
 * can forward to; a 5xx does not). The headers go to `onHeaders` whatever the status.
 * The health URL is the upstream's with its path extended (its query and fragment dropped): on the
 * upstream's host whatever the path (`http://h//other/p` → `http://h//other/p/api/health`).
 * @param upstream The upstream URL (`http:` or `https:`).
 * @param timeoutMs Give up after this many ms (name resolution, connection and response headers).
 * @param options Agent, header callback and the cause of a failure.
 * @returns `true` when reachable; never rejects.
 * @throws {Error} for an `upstream` neither `http:` nor `https:` ({@link upstreamRequest}).
 */
export function probeUpstream(
  upstream: URL,
  timeoutMs: number,
  options: ProbeOptions = {},
): Promise<boolean> {
  // The path set on a copy of the upstream's URL, never resolved against it: a path that starts with
  // `//` (`http://h//other/p`) is a path of `h` for the forwarded requests (outgoing-request.ts
  // `upstreamTarget`), and resolved as a relative reference it named another host (`other`).
  const target = new URL(upstream.href);
  target.pathname = upstream.pathname.replace(/\/+$/, '') + UPSTREAM_HEALTH_PATH;
  target.search = '';
  target.hash = '';
  const request = upstreamRequest(target.protocol);
  return new Promise((resolve) => {
    let done = false;
    const finish = (ok: boolean, cause?: string) => {
      if (done) return;
      done = true;
      timer.clear();
      if (!ok) options.onUnreachable?.(cause ?? 'unknown');
      resolve(ok);
    };
    // An answer that came while the shim was stopped or blocked is read before the probe gives up
    // (docs/reliability.md fix 99).
    const timer = startDeadline(() => {
      req.destroy();
      finish(false, 'timeout');
    }, timeoutMs);
    const req = request(target, {
      method: 'GET',
      headers: { accept: 'application/json', 'user-agent': 'compat-shim-probe' },
      ...(options.agent && { agent: options.agent }),
    });
    req.once('response', (res) => {
      try {
        options.onHeaders?.(res.headers);
      } finally {
        res.resume();
        const status = res.statusCode ?? 500;
        finish(status < 500, `status ${status}`);
      }
    });
    req.once('error', (err: NodeJS.ErrnoException) => finish(false, err.code ?? err.message));
    req.end();
  });
}
