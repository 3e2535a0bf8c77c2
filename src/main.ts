/**
 * Process entry: configuration → listeners → graceful shutdown. Nothing else.
 *
 * Shutdown (SPEC §8), on SIGTERM or SIGINT:
 * 1. `/readyz` answers 503 at once, so a load balancer or kubelet stops routing here;
 * 2. the front door stops accepting connections and closes its idle keep-alive sockets;
 * 3. in-flight requests run to completion, answered with `Connection: close` where the response has not
 *    started (requests that arrive on an open keep-alive socket meanwhile are still served, also with
 *    `Connection: close`); each connection closes once its response has ended and the client has
 *    closed its side (see {@link trackConnections});
 * 4. after `SHUTDOWN_TIMEOUT_MS` the remaining connections are cut;
 * 5. the upstream pool, the admin listener and the embedded reference backend close; exit code 0.
 * A second signal during the drain exits at once with code 1.
 */
import { once } from 'node:events';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createShim, PLUGINS } from './app.ts';
import { ConfigError, loadConfig } from './config.ts';
import { createAdminServer, probeUpstream } from './observability/admin.ts';
import { createLogger } from './observability/logger.ts';
import { createMetrics } from './observability/metrics.ts';
import { createFrontServer } from './proxy/server.ts';

/** How long `/readyz` waits for a TCP connection to the upstream, in ms. */
const READINESS_PROBE_TIMEOUT_MS = 1_000;

let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig(process.env, PLUGINS);
} catch (err) {
  if (err instanceof ConfigError) {
    for (const problem of err.problems) process.stderr.write(`config error: ${problem}\n`);
    process.exit(1);
  }
  throw err;
}

const logger = createLogger(config.logLevel, [`req.headers["${config.apiKeyHeader}"]`]);
const metrics = createMetrics();
for (const warning of config.warnings) logger.warn(warning);

let upstream = config.upstreamUrl;
let referenceBackend: { url: string; close(): Promise<void> } | undefined;
if (!upstream) {
  // Loaded only when needed, so a shim in front of a real upstream does not carry it in memory.
  const { startReferenceBackend } = await import('@compat-shim/reference-backend');
  referenceBackend = await startReferenceBackend({ port: 0, host: '127.0.0.1' });
  upstream = new URL(referenceBackend.url);
  logger.info({ upstream: upstream.href }, 'UPSTREAM_URL is unset: started the embedded reference backend');
}
const upstreamUrl = upstream;

const shim = createShim(config, { logger, metrics, upstream: upstreamUrl });
const front = createFrontServer(shim.app, shim.onServerRejection);
let draining = false;
const admin = createAdminServer({
  registry: metrics.registry,
  upstreamReachable: () => probeUpstream(upstreamUrl, READINESS_PROBE_TIMEOUT_MS),
  draining: () => draining,
  routes: shim.adminRoutes,
});

const connections = trackConnections(front, () => draining);

process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));

try {
  await Promise.all([listen(front, config.port, config.host), listen(admin, config.adminPort, config.host)]);
} catch (err) {
  process.stderr.write(`listen error: ${(err as Error).message}\n`);
  process.exit(1);
}
logger.info(
  {
    port: (front.address() as AddressInfo).port,
    adminPort: (admin.address() as AddressInfo).port,
    upstream: upstreamUrl.href,
    plugins: Object.keys(config.plugins),
    shutdownTimeoutMs: config.shutdownTimeoutMs,
  },
  'compat-shim listening',
);

/** Connection bookkeeping for the drain; see {@link trackConnections}. */
interface TrackedConnections {
  /** Requests whose response has not ended. */
  inFlight(): number;
  /** Sends `Connection: close` on every response not yet started and closes idle connections. */
  startDrain(): void;
  /** Cuts every connection at once (drain deadline). */
  destroyAll(): void;
}

/**
 * Tracks the front door's connections so that a drain loses no byte:
 * - while draining, every response that has not started is sent with `Connection: close`;
 * - a connection is closed as soon as it is idle: by a FIN after the last byte, then the socket is
 *   released only when the client has closed its side too. Node would release it as soon as the bytes
 *   are handed to the kernel; a process (and container network namespace) that exits then can lose the
 *   tail of a response still sitting in the socket buffer on its way to a slow client;
 * - `server.close()`'s own closing of idle connections is replaced by the same graceful close.
 * @param server The front-door server (not yet listening).
 * @param draining Whether shutdown has begun.
 */
function trackConnections(server: Server, draining: () => boolean): TrackedConnections {
  // Per connection: how many of its requests have not finished. Deliberately no per-request
  // collection: a Set of every response, added and deleted per request, cost ~20 µs/req and drove V8
  // into 12–30 ms minor GCs under load (bench/RESULTS.md).
  const busy = new Map<Socket, number>();
  let inFlight = 0;

  const closeGracefully = (socket: Socket): void => {
    if (socket.destroyed) return;
    if (socket.readableEnded) {
      socket.destroySoon();
      return;
    }
    socket.once('end', () => socket.destroy());
    socket.end();
    socket.resume();
  };
  server.on('connection', (socket: Socket) => {
    busy.set(socket, 0);
    socket.once('close', () => busy.delete(socket));
    // Node calls destroySoon() after a `Connection: close` response.
    const destroySoon = socket.destroySoon.bind(socket);
    socket.destroySoon = () => {
      if (draining() && !socket.readableEnded) closeGracefully(socket);
      else destroySoon();
    };
  });
  // Prepended, so it runs before the app can answer synchronously.
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    busy.set(socket, (busy.get(socket) ?? 0) + 1);
    inFlight++;
    if (draining()) res.shouldKeepAlive = false;
    res.once('close', () => {
      inFlight--;
      const count = busy.get(socket);
      if (count === undefined) return; // the connection is already gone
      busy.set(socket, count - 1);
      if (draining() && count === 1) setImmediate(() => closeGracefully(socket));
    });
  });
  server.closeIdleConnections = () => {
    for (const [socket, count] of busy) if (count === 0) closeGracefully(socket);
  };
  return {
    inFlight: () => inFlight,
    startDrain() {
      // The response in progress on each busy connection (Node keeps it as `socket._httpMessage`;
      // pipelined requests behind it get `Connection: close` from the request listener above).
      for (const [socket, count] of busy) {
        const res = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
        if (count > 0 && res && !res.headersSent) res.shouldKeepAlive = false;
      }
      server.closeIdleConnections();
    },
    destroyAll() {
      for (const socket of busy.keys()) socket.destroy();
      server.closeAllConnections();
    },
  };
}

/** Starts listening; rejects with the listen error (e.g. `EADDRINUSE`). */
async function listen(server: Server, port: number, host: string): Promise<void> {
  server.listen(port, host);
  await once(server, 'listening');
}

/** Drains and exits (see the module comment). Runs once; a second call exits at once. */
async function shutdown(signal: NodeJS.Signals): Promise<void> {
  if (draining) {
    logger.warn({ signal }, 'second signal: exiting now');
    process.exit(1);
  }
  draining = true;
  const startedAt = Date.now();
  logger.info({ signal, inFlight: connections.inFlight(), timeoutMs: config.shutdownTimeoutMs }, 'draining');
  connections.startDrain();

  const deadline = setTimeout(() => {
    logger.warn(
      { inFlight: connections.inFlight() },
      'shutdown timeout reached: closing remaining connections',
    );
    connections.destroyAll();
  }, config.shutdownTimeoutMs);
  // Backstop: whatever still hangs (a close callback that never comes), the process ends.
  setTimeout(() => {
    logger.error('shutdown did not complete: exiting');
    process.exit(1);
  }, config.shutdownTimeoutMs + 5_000).unref();
  // Stops accepting; resolves once every connection has closed.
  await new Promise<void>((resolve) => front.close(() => resolve()));
  clearTimeout(deadline);

  shim.forwarder.agent.destroy();
  admin.closeAllConnections();
  await new Promise<void>((resolve) => admin.close(() => resolve()));
  await referenceBackend?.close();
  logger.info({ signal, drainMs: Date.now() - startedAt }, 'stopped');
  process.exit(0);
}
