/**
 * The runtime: one running shim — front-door and admin listeners, the drain, and all per-instance
 * state (metrics registry, learned route labels, service version, upstream pool, demo backend).
 * `src/main.ts` starts one from the configuration and signals; tests start their own in-process
 * (ports 0), so no test sees another's state.
 *
 * Drain ({@link Runtime.drain}, SPEC §8):
 * 1. `/readyz` answers 503 at once, so a load balancer or kubelet stops routing here;
 * 2. the front door stops accepting connections and, after {@link DRAIN_IDLE_GRACE_MS}, closes its idle
 *    keep-alive sockets (a request already on its way on one is served meanwhile), each waiting at most
 *    {@link LINGER_IDLE_MS} for the client to close its side;
 * 3. in-flight requests run to completion, answered with `Connection: close` where the response has not
 *    started (requests that arrive on an open keep-alive socket meanwhile are still served, also with
 *    `Connection: close`); each connection closes once its response has ended and the client has
 *    closed its side (see {@link trackConnections});
 * 4. after `SHUTDOWN_TIMEOUT_MS` the remaining connections are cut, and their exchanges' request lines
 *    (`aborted: true`) written before the next step;
 * 5. the upstream pool, the admin listener and the demo backend close.
 */
import { once } from 'node:events';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { DestinationStream, Logger } from 'pino';
import { createShim, type Shim, upstreamTransportOptions } from './app.ts';
import { type Config, ConfigError, UPSTREAM_URL_REQUIRED } from './config.ts';
import type { DemoBackend } from './demo.ts';
import { createAdminServer } from './observability/admin.ts';
import { createLogger } from './observability/logger.ts';
import { type CoreMetrics, createMetrics } from './observability/metrics.ts';
import { createFrontServer } from './proxy/server.ts';
import { createUpstreamTransport } from './proxy/upstream-agent.ts';
import { probeUpstream } from './proxy/upstream-probe.ts';

/** How long a readiness (and start-up) probe of the upstream may take, in ms. */
const READINESS_PROBE_TIMEOUT_MS = 1_000;

/** How a runtime is started besides its configuration. */
export interface RuntimeOptions {
  /**
   * Demo mode: when `config.upstreamUrl` is unset, start the reference backend as a child process
   * (src/demo.ts) and forward to it; `/readyz` and the start log say so. Without it, an unset
   * `UPSTREAM_URL` is a {@link ConfigError}. Ignored when `UPSTREAM_URL` is set.
   */
  demo?: boolean;
  /** Where log lines go (default stdout); tests pass a memory stream. */
  logDestination?: DestinationStream;
  /** Collect prom-client's default process metrics (default true; tests turn them off). */
  processMetrics?: boolean;
  /**
   * Probe the upstream's health route once before listening, so that the service version is known
   * from the first response (default true). Tests against upstreams that record every request turn
   * it off.
   */
  probeAtStart?: boolean;
}

/** A running shim. */
export interface Runtime {
  /** Front door, e.g. `http://127.0.0.1:8080` (the bound address and port). */
  readonly url: string;
  /** Admin listener, e.g. `http://127.0.0.1:9090`. */
  readonly adminUrl: string;
  /** The upstream forwarded to (configured, or the demo backend). */
  readonly upstream: URL;
  /** Whether the upstream is the demo backend. */
  readonly demo: boolean;
  readonly logger: Logger;
  /** This runtime's metrics (its own registry and route labels). */
  readonly metrics: CoreMetrics;
  /** The request pipeline, its upstream pool and service version. */
  readonly shim: Shim;
  /** The front-door server. */
  readonly front: Server;
  /** The admin server. */
  readonly admin: Server;
  /** `true` once the drain began. */
  readonly draining: boolean;
  /**
   * Drains (module comment) and closes everything; logs `draining` and `stopped`. Idempotent: later
   * calls return the same promise. Never rejects.
   * @param reason For the log, e.g. the signal name.
   */
  drain(reason?: string): Promise<void>;
  /** Closes everything at once, cutting open connections (tests). */
  close(): Promise<void>;
}

/**
 * Starts a runtime: demo backend (if asked and needed), one upstream probe for the service version,
 * then both listeners. Resolves once both listen.
 * @param config The validated configuration.
 * @param options Demo mode, log destination, process metrics, start probe.
 * @returns Resolves to the running runtime once both servers listen: its URLs, upstream, logger,
 *   metrics, shim, servers, and `drain`/`close`.
 * @throws {ConfigError} when `UPSTREAM_URL` is unset outside demo mode (fail closed, issue 10).
 * @throws {DemoBackendError} when demo mode cannot start the reference backend.
 * @throws the listen error (e.g. `EADDRINUSE`), after closing whatever was started.
 * @example
 * const runtime = await createRuntime(loadConfig({ UPSTREAM_URL: 'http://127.0.0.1:3000', PORT: '0', ADMIN_PORT: '0' }));
 * await fetch(`${runtime.url}/api/health`);
 * await runtime.close();
 */
export async function createRuntime(config: Config, options: RuntimeOptions = {}): Promise<Runtime> {
  const logger = createLogger(
    config.logLevel,
    [`req.headers["${config.apiKeyHeader}"]`],
    options.logDestination,
  );
  let demoBackend: DemoBackend | undefined;
  let upstream = config.upstreamUrl;
  if (!upstream) {
    if (!options.demo) {
      throw new ConfigError([UPSTREAM_URL_REQUIRED]);
    }
    // Loaded only in demo mode: a shim in front of a real upstream does not carry it.
    const { startDemoBackend } = await import('./demo.ts');
    demoBackend = await startDemoBackend();
    upstream = demoBackend.url;
    logger.warn(
      { upstream: upstream.href, pid: demoBackend.pid },
      'demo mode: UPSTREAM_URL is unset, started the reference backend as a child process (never use this in production)',
    );
  }
  const upstreamUrl = upstream;
  const demo = demoBackend !== undefined;

  for (const warning of config.warnings) logger.warn(warning);
  const metrics = createMetrics(options.processMetrics ?? true);
  const shim = createShim(config, { logger, metrics, upstream: upstreamUrl });
  const serviceVersionHeader = config.serviceVersionHeader.toLowerCase();
  // The probes' own pool, with the traffic's TLS settings: clients holding every connection of the
  // forwarder's pool (slow uploads, slow readers) must not make every replica unready at once.
  const probeTransport = createUpstreamTransport(upstreamUrl, upstreamTransportOptions(config));
  // Each probe's verdict; a change is logged once (with the cause of a failure), not every probe.
  let reachable: boolean | undefined;
  let cause = 'unknown';
  const probe = async (atStart = false): Promise<boolean> => {
    const ok = await probeUpstream(upstreamUrl, READINESS_PROBE_TIMEOUT_MS, {
      agent: probeTransport.agent,
      onHeaders: (headers) => shim.serviceVersion.observe(headers[serviceVersionHeader]),
      onUnreachable: (why) => {
        cause = why;
      },
    });
    const before = reachable;
    reachable = ok;
    if (ok && before === false) logger.info({ upstream: upstreamUrl.href }, 'upstream reachable again');
    if (!ok && before !== false) {
      const message = atStart ? 'upstream not reachable at start' : 'upstream not reachable';
      logger.warn({ upstream: upstreamUrl.href, cause }, message);
    }
    return ok;
  };

  let draining = false;
  // The connection bookkeeping sees the requests the pipeline handles (in order, one per connection at
  // a time: server.ts pipelineInOrder), before the app can answer; never the ones dropped unanswered.
  const front = createFrontServer(
    (req, res) => {
      connections.track(req, res);
      shim.app(req, res);
    },
    shim.onServerRejection,
    shim.ownHeaders,
  );
  // Declared right after the server it tracks: the handler above reads it once requests arrive.
  const connections = trackConnections(front, () => draining);
  const admin = createAdminServer({
    registry: metrics.registry,
    upstreamReachable: () => probe(),
    draining: () => draining,
    demo,
    routes: shim.adminRoutes,
    onError: (err, path) => logger.error({ err, path }, 'admin route failed'),
  });

  const closeQuietly = async () => {
    for (const server of [front, admin]) {
      server.closeAllConnections();
      if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    shim.forwarder.agent.destroy();
    probeTransport.agent.destroy();
    await demoBackend?.stop();
  };

  try {
    if (options.probeAtStart ?? true) await probe(true);
    await Promise.all([
      listen(front, config.port, config.host),
      listen(admin, config.adminPort, config.host),
    ]);
  } catch (err) {
    await closeQuietly();
    throw err;
  }
  // Once listening, a listener's 'error' is a failed accept (ENOBUFS, ENOMEM; EMFILE and ENFILE are
  // absorbed by libuv, which sheds the pending connections): one connection is lost, the listener
  // goes on. Unheard, Node would throw it and end the process with every exchange in flight.
  for (const [listener, server] of [
    ['front', front],
    ['admin', admin],
  ] as const) {
    server.on('error', (err) =>
      logger.error({ err, listener }, 'listener error: a connection was not accepted'),
    );
  }
  const address = (server: Server) => {
    const { address, port, family } = server.address() as AddressInfo;
    return `http://${family === 'IPv6' ? `[${address}]` : address}:${port}`;
  };
  logger.info(
    {
      port: (front.address() as AddressInfo).port,
      adminPort: (admin.address() as AddressInfo).port,
      upstream: upstreamUrl.href,
      demo,
      serviceVersion: shim.serviceVersion.text ?? null,
      plugins: Object.keys(config.plugins),
      shutdownTimeoutMs: config.shutdownTimeoutMs,
    },
    'compat-shim listening',
  );

  let drained: Promise<void> | undefined;
  const drain = (reason = 'drain'): Promise<void> => {
    drained ??= (async () => {
      draining = true;
      const startedAt = Date.now();
      logger.info(
        { signal: reason, inFlight: connections.inFlight(), timeoutMs: config.shutdownTimeoutMs },
        'draining',
      );
      connections.startDrain();
      let cut: Promise<void> | undefined;
      const deadline = setTimeout(() => {
        logger.warn(
          { inFlight: connections.inFlight() },
          'shutdown timeout reached: closing remaining connections',
        );
        cut = connections.destroyAll();
      }, config.shutdownTimeoutMs);
      // Stops accepting; resolves once every connection has closed.
      await new Promise<void>((resolve) => front.close(() => resolve()));
      clearTimeout(deadline);
      // The server counts a destroyed connection closed at once, its socket's 'close' (and its
      // response's, which writes the exchange's `aborted` line) comes a turn later: wait for them, or
      // the process exits first and the exchanges the deadline cut leave no line (fix 141).
      await cut;
      shim.forwarder.agent.destroy();
      admin.closeAllConnections();
      await new Promise<void>((resolve) => admin.close(() => resolve()));
      probeTransport.agent.destroy();
      await demoBackend?.stop();
      logger.info({ signal: reason, drainMs: Date.now() - startedAt }, 'stopped');
    })();
    return drained;
  };

  return {
    url: address(front),
    adminUrl: address(admin),
    upstream: upstreamUrl,
    demo,
    logger,
    metrics,
    shim,
    front,
    admin,
    get draining() {
      return draining;
    },
    drain,
    async close() {
      draining = true;
      drained ??= closeQuietly();
      await drained;
    },
  };
}

/**
 * Longest a connection closed after a response lingers in all, reading and dropping what the client
 * still sends (ms): nginx's `lingering_time`. A client that sends its whole body before it reads (Python
 * `requests`, curl without `Expect`, Apache httpd's mod_proxy_http in front) reads a refusal only when
 * the upload is done; a linger of 5 s in all reset an 8 MB upload at 1 MB/s, and httpd turned the
 * shim's 401 into its own 502 (docs/reliability.md fix 153). A client that never stops holds the
 * socket no longer than this.
 */
export const LINGER_MS = 30_000;

/**
 * Longest a lingering connection waits for the client's next bytes (ms), nginx's `lingering_timeout`:
 * a client that sends nothing more (an idle pooled connection, a client that stopped its upload) is
 * closed after this, whatever is left of {@link LINGER_MS}. Checked every {@link LINGER_CHECK_MS}.
 */
export const LINGER_IDLE_MS = 5_000;

/** How often a lingering connection's reads are looked at (ms), for {@link LINGER_IDLE_MS}. */
const LINGER_CHECK_MS = 500;

/**
 * How long a drain leaves idle keep-alive connections open before closing them (ms). A request that
 * arrives on one meanwhile is served, with `Connection: close`; closing at once read and dropped the
 * requests a pooling proxy had already written on them (nginx with upstream `keepalive`: 6 of 16
 * connections under a POST load, each a 502 to its client; docs/reliability.md fix 54). Short, since an
 * idle drain waits for it, and any client may still write a request as the close crosses it.
 */
const DRAIN_IDLE_GRACE_MS = 250;

/** Connection bookkeeping for the drain; see {@link trackConnections}. */
interface TrackedConnections {
  /**
   * Counts a request the pipeline is about to handle until its response closes; while draining, its
   * response will close the connection. Call it before the app, which may answer synchronously.
   */
  track(req: IncomingMessage, res: ServerResponse): void;
  /** Requests whose response has not ended. */
  inFlight(): number;
  /**
   * Sends `Connection: close` on every response not yet started and closes idle connections after
   * {@link DRAIN_IDLE_GRACE_MS}.
   */
  startDrain(): void;
  /**
   * Cuts every connection at once (drain deadline).
   * @returns Settles once the sockets of the requests in flight have closed and their responses' `close`
   *   listeners have run (the request log's `aborted` lines written).
   */
  destroyAll(): Promise<void>;
}

/**
 * Tracks the front door's connections so that a drain loses no byte:
 * - while draining, every response that has not started is sent with `Connection: close`;
 * - a connection is closed as soon as it is idle: by a FIN after the last byte, then the socket is
 *   released only when the client has closed its side too. Node would release it as soon as the bytes
 *   are handed to the kernel; a process (and container network namespace) that exits then can lose the
 *   tail of a response still sitting in the socket buffer on its way to a slow client;
 * - `server.close()`'s own closing of idle connections is replaced by the same graceful close: an idle
 *   connection's last response ended before the drain began, and a pooling client (urllib3, httpcore)
 *   reads an idle connection, and so closes it, only when it next uses it (RFC 9112 §9.6: until the
 *   server is "reasonably certain" its last response was received);
 * - a response that closes the connection while the client is still sending (the shim's refusal of a
 *   body it did not read: 401, 413, 408, 503) closes it in the same stages, for at most {@link LINGER_MS}
 *   while the client keeps sending: a reset would lose that response for a client busy sending (RFC
 *   9112 §9.6); the server's own refusals (server.ts `HEAD_REFUSAL_LINGER_MS`) for at most 5 s;
 * - every staged close ends {@link LINGER_IDLE_MS} after the client's last byte, and while draining
 *   lasts at most LINGER_IDLE_MS in all (fix 155), the connections of responses that ended during the
 *   drain included (fix 157).
 * - `track` counts the requests the pipeline handles (server.ts `pipelineInOrder`), not the pipelined
 *   ones it drops unanswered when the connection closes before their turn.
 * @param server The front-door server (not yet listening).
 * @param draining Whether shutdown has begun.
 */
function trackConnections(server: Server, draining: () => boolean): TrackedConnections {
  // Per connection: how many of its requests have not finished. Deliberately no per-request
  // collection: a Set of every response, added and deleted per request, cost ~20 µs/req and drove V8
  // into 12–30 ms minor GCs under load (bench/RESULTS.md).
  const busy = new Map<Socket, number>();
  let inFlight = 0;

  /**
   * FIN after the last byte, then the bytes the client still sends are read and dropped until it closes
   * its side: closing a socket with unread bytes sends a reset, which can destroy the response in the
   * client's receive buffer before the client reads it (RFC 9112 §9.6, the "staged close"). Bounded as
   * nginx bounds it: `lingerMs` in all ({@link LINGER_MS} unless the caller says less),
   * {@link LINGER_IDLE_MS} without a byte from the client; while draining, LINGER_IDLE_MS in all,
   * so that a client trickling bytes does not hold the drain to SHUTDOWN_TIMEOUT_MS (fix 60's bound).
   */
  const closeGracefully = (socket: Socket, lingerMs: number): void => {
    if (socket.destroyed) return;
    if (socket.readableEnded) {
      socket.destroySoon();
      return;
    }
    socket.once('end', () => socket.destroy());
    // Reads are counted by the socket whoever consumes them (Node's HTTP parser reads natively).
    const started = performance.now();
    let lastRead = started;
    let bytesRead = socket.bytesRead;
    const check = setInterval(() => {
      const now = performance.now();
      if (socket.bytesRead !== bytesRead) {
        bytesRead = socket.bytesRead;
        lastRead = now;
      }
      const limit = draining() ? Math.min(lingerMs, LINGER_IDLE_MS) : lingerMs;
      if (now - lastRead >= LINGER_IDLE_MS || now - started >= limit) socket.destroy();
    }, LINGER_CHECK_MS);
    check.unref();
    socket.once('close', () => clearInterval(check));
    socket.end();
    socket.resume();
  };
  server.on('connection', (socket: Socket) => {
    busy.set(socket, 0);
    socket.once('close', () => busy.delete(socket));
    // Node calls destroySoon() after a `Connection: close` response: the shim's refusal of a request
    // whose body it did not read (401, 413, 408, …) among them. While the client is still sending,
    // close in stages, so that it can read that response. The server's own refusals of a head
    // (server.ts `closeInStages`) pass a shorter bound: no upload of theirs is worth waiting for.
    const destroySoon = socket.destroySoon.bind(socket);
    socket.destroySoon = (lingerMs: number = LINGER_MS) => {
      if (socket.readableEnded) destroySoon();
      else closeGracefully(socket, lingerMs);
    };
  });
  const track = (req: IncomingMessage, res: ServerResponse): void => {
    const socket = req.socket;
    busy.set(socket, (busy.get(socket) ?? 0) + 1);
    inFlight++;
    if (draining()) res.shouldKeepAlive = false;
    res.once('close', () => {
      inFlight--;
      const count = busy.get(socket);
      if (count === undefined) return; // the connection is already gone
      busy.set(socket, count - 1);
      if (draining() && count === 1) setImmediate(() => closeGracefully(socket, LINGER_MS));
    });
  };
  // While draining, idle connections are closed only once DRAIN_IDLE_GRACE_MS has passed (Node's
  // `server.close()` calls this at once; it does nothing until then). Their staged close lingers
  // LINGER_IDLE_MS when the client sends nothing: an HTTP client's pool does not read a connection
  // while it is idle (urllib3 under requests, httpcore under httpx), so its client closes its side
  // only when it next takes the connection; waiting for that held every drain to SHUTDOWN_TIMEOUT_MS
  // (docs/reliability.md fix 60).
  let idleGraceOver = false;
  server.closeIdleConnections = () => {
    if (draining() && !idleGraceOver) return;
    for (const [socket, count] of busy) if (count === 0) closeGracefully(socket, LINGER_MS);
  };
  return {
    track,
    inFlight: () => inFlight,
    startDrain() {
      // The response in progress on each busy connection (Node keeps it as `socket._httpMessage`;
      // pipelined requests behind it get `Connection: close` from `track` when their turn comes).
      for (const [socket, count] of busy) {
        const res = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
        if (count > 0 && res && !res.headersSent) res.shouldKeepAlive = false;
      }
      // Idle keep-alive connections are closed after a grace: a request already on its way (or
      // unread in the socket's buffer: the signal came between two reads) is served with
      // `Connection: close`, not read and dropped by the close — a proxy pooling connections to the
      // shim (nginx `keepalive`) answers a POST it sent on such a connection with 502.
      setTimeout(() => {
        idleGraceOver = true;
        server.closeIdleConnections();
      }, DRAIN_IDLE_GRACE_MS).unref();
    },
    async destroyAll() {
      // Not `once(socket, 'close')`, which rejects on an 'error' the socket may still emit.
      const closed: Array<Promise<void>> = [];
      for (const socket of busy.keys()) {
        closed.push(new Promise((resolve) => socket.once('close', () => resolve())));
        socket.destroy();
      }
      server.closeAllConnections();
      await Promise.all(closed);
      // A response's 'close' is emitted on the tick after its socket's (Node's emitCloseNT).
      await new Promise<void>((resolve) => setImmediate(resolve));
    },
  };
}

/** Starts listening; rejects with the listen error (e.g. `EADDRINUSE`). */
async function listen(server: Server, port: number, host: string): Promise<void> {
  server.listen(port, host);
  await once(server, 'listening');
}
