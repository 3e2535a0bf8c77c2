/**
 * The upstream connection pool (SPEC §4: keep-alive connections reused), for `http:` and `https:`
 * upstreams (issue 10 item 2): TLS always verified, extra CAs from `UPSTREAM_CA_FILE`, SNI from the
 * upstream URL's host — never from the client's `Host`, which the shim forwards unchanged. Every
 * upstream socket reads into one shared buffer (issue 9: no buffer allocated per read).
 */
import http from 'node:http';
import type * as HttpsModule from 'node:https';
import { createRequire } from 'node:module';
import { isIP, type OnReadOpts } from 'node:net';
import type { Duplex } from 'node:stream';
import type * as TlsModule from 'node:tls';
import { type Deadline, startDeadline } from './own-pause.ts';
import { CONNECT_TIMEOUT_CODE } from './upstream-error.ts';

/**
 * Node's TLS modules, loaded by the first `https:` transport only: `node:https` and `node:tls` cost
 * ~3 MiB of idle RSS (docs/operations.md "Footprint") that an `http:` upstream never needs.
 */
const load = createRequire(import.meta.url);

/** How to reach the upstream: the pool and the per-request options that address it. */
export interface UpstreamTransport {
  /** Keep-alive pool (`https.Agent` for `https:`). */
  readonly agent: http.Agent;
  /** `http.request` or `https.request`. */
  readonly request: typeof http.request;
  /** Options every upstream request carries: protocol, hostname, port, and for TLS the server name. */
  readonly target: Readonly<{ protocol: string; hostname: string; port: number; servername?: string }>;
  /**
   * A new connection must be ready within this many ms (`UPSTREAM_CONNECT_TIMEOUT_MS`, resolved); it
   * also bounds a request's wait for a connection of a full pool (upstream-attempt.ts).
   */
  readonly connectTimeoutMs: number;
}

/**
 * How long an idle pooled upstream connection is kept by default, in ms (`UPSTREAM_IDLE_TIMEOUT_MS`):
 * undici's default, below the 5 s idle timeout of Node's, uvicorn's and most frameworks' servers; an
 * upstream that closes sooner without saying so (nginx's `keepalive_timeout 3s` sends no hint) needs a
 * smaller value. A response's `Keep-Alive: timeout=N` hint
 * (RFC 9112 §9.3, the `Keep-Alive` header of RFC 2068 §19.7.1) shortens it to N − 1 s (Node's agent:
 * `agentKeepAliveTimeoutBuffer`), and a hint of 1 s or less keeps no connection. Without this timeout
 * Node's agent ignores the hint and keeps a connection until the upstream closes it, and a request sent
 * on it in that moment fails: replayed when idempotent, a 502 for a POST (docs/reliability.md fix 37).
 * Idle connections only: Node's agent would also give it to a socket while it connects, so every
 * upstream request sets its own `timeout` (upstream-attempt.ts, `UPSTREAM_TIMEOUT_MS`; fix 44).
 */
export const UPSTREAM_IDLE_TIMEOUT_MS = 4_000;

/**
 * How long a new upstream connection may take to be ready for its request by default, in ms
 * (`UPSTREAM_CONNECT_TIMEOUT_MS`): Envoy's `connect_timeout` (HAProxy's usual `timeout connect`, Caddy's
 * `dial_timeout` is 3 s). Two SYN retransmissions (Linux sends them 1 s and 3 s after the first) fit in
 * it; a host that answers none of them is as good as unreachable.
 */
export const UPSTREAM_CONNECT_TIMEOUT_MS = 5_000;

/**
 * Most connections of the pool to the upstream at once by default (Node's `maxSockets`;
 * `UPSTREAM_MAX_CONNECTIONS`): a request beyond them waits for one to be freed, at most
 * `UPSTREAM_CONNECT_TIMEOUT_MS` (upstream-attempt.ts; then 503). `MAX_STREAMING_UPLOADS`
 * (upload-slots.ts) keeps part of them from bodies that clients are still sending.
 */
export const UPSTREAM_POOL_SOCKETS = 1024;

/** Most idle connections the pool keeps (Node's `maxFreeSockets`), or all of them in a smaller pool. */
export const UPSTREAM_POOL_IDLE_SOCKETS = 256;

/**
 * The pool's options: `maxSockets` connections at most, few idle ones kept, the most recent reused
 * first, idle ones closed after `idleTimeoutMs` (or the upstream's hint).
 */
const pool = (idleTimeoutMs: number, maxSockets: number) =>
  ({
    keepAlive: true,
    maxSockets,
    maxFreeSockets: Math.min(UPSTREAM_POOL_IDLE_SOCKETS, maxSockets),
    scheduling: 'lifo',
    timeout: idleTimeoutMs,
  }) as const;

/** Size of the one buffer every upstream socket reads into, in bytes (as Node's own reads). */
export const UPSTREAM_READ_BUFFER_BYTES = 64 * 1024;

/** The read buffer, made at the first upstream connection. */
let readBuffer: Buffer | undefined;

/**
 * The buffer every upstream socket reads into, made on first use.
 * @returns The same {@link UPSTREAM_READ_BUFFER_BYTES}-byte buffer on every call, with memory of its own.
 * @throws {RangeError} only when the first call cannot allocate the 64 KiB (out of memory).
 */
export function upstreamReadBuffer(): Buffer {
  readBuffer ??= Buffer.allocUnsafeSlow(UPSTREAM_READ_BUFFER_BYTES);
  return readBuffer;
}

/**
 * Whether `memory` is the buffer every upstream socket reads into: memory that must never be released
 * (body-pump.ts `releaseChunk` checks, in case a Node version hands out views of it instead of copies).
 * @param memory A chunk's `buffer`.
 * @returns True when it is that buffer's memory. Never throws.
 */
export function isUpstreamReadBuffer(memory: ArrayBufferLike): boolean {
  return readBuffer !== undefined && memory === readBuffer.buffer;
}

/**
 * Creates an upstream connection (with `create`, the agent's own `createConnection`, so that an
 * `https.Agent` keeps its TLS session cache) whose reads go into one buffer shared by every upstream
 * socket (Node's `onread` socket option, which TLS sockets honour too, with the cleartext) instead of a
 * fresh 64 KiB buffer per read, and reach the HTTP client as `data` events. Node's HTTP parser copies
 * every body piece out of what it is given before returning (`parser.execute`), so the buffer is free
 * again as soon as the event returns, and reads run one at a time on the event loop; nothing keeps a
 * view of it but a parse error's `rawPacket` and an upgrade's head, neither of which the shim reads (it
 * forwards no upgrade). `pause`/`resume` (the client's backpressure) stop and restart the reads in
 * this mode, and the end of the stream is as usual.
 *
 * Why: each fresh read buffer lives outside the V8 heap until a collection frees it, so the bytes read
 * between two collections were held twice (the read, the parser's copy). Measured on a bare pipe under
 * 32 concurrent 1.4 MB responses: peak +131 to +167 MiB with fresh buffers, +85 to +88 with the shared
 * one, and 8–10 % less CPU per request (bench/RESULTS.md; docs/reliability.md "Memory while streaming").
 */
function withSharedReadBuffer(create: (options: object) => Duplex, options: http.ClientRequestArgs): Duplex {
  const onread: OnReadOpts = {
    buffer: upstreamReadBuffer(),
    // Flow control is the HTTP client's: it pauses the socket (a read stop in this mode) when the
    // response is paused.
    callback: (bytes, buffer) => socket.emit('data', (buffer as Buffer).subarray(0, bytes)) || true,
  };
  const socket = create({ ...(options as object), onread });
  readsOnAfterRefusedWrite(socket);
  return socket;
}

/** Upstream connections never to be reused ({@link retireConnection}). */
const retired = new WeakSet<Duplex>();

/**
 * Marks an upstream connection as not to be reused once its exchange is done: the upstream refused a
 * write on it ({@link readsOnAfterRefusedWrite}: it closed or reset it), or answered before the request
 * body was all sent (upload.ts `keepUploadGoing`: an upstream that answers early often closes or resets
 * once it stops reading — hyper 0.14 without saying `Connection: close` — and nginx keeps no such
 * connection either). RFC 9112 §9.3 keeps only a persistent connection. The pool closes it on its
 * `free` event ({@link closeRetiredOnFree}).
 * @param socket The connection.
 * @throws Nothing.
 */
export function retireConnection(socket: Duplex): void {
  retired.add(socket);
}

/**
 * Makes a pool close, instead of reusing, a retired connection ({@link retireConnection}). Node's agent
 * hands a connection whose exchange is done (its `free` event) to a request waiting in its queue, or
 * keeps it idle (`keepSocketAlive`), unless it is no longer writable: a listener before the agent's own
 * destroys a retired connection first, which covers both (an override of `keepSocketAlive` alone missed
 * the queue); the agent then opens a new connection for a waiting request.
 * @param agent The pool, as it is made.
 */
function closeRetiredOnFree(agent: http.Agent): void {
  agent.prependListener('free', (socket: Duplex) => {
    if (retired.has(socket)) socket.destroy();
  });
}

/** `net.Socket`'s internal write step, which every write of the HTTP client goes through. */
type WriteGeneric = (
  writev: boolean,
  data: unknown,
  encoding: string,
  cb: (err?: Error | null) => void,
) => unknown;

/**
 * A write the upstream refused (`EPIPE`, `ECONNRESET`: it closed or reset the connection while the shim
 * was still sending a request body) no longer destroys the socket at once: the write is dropped as if
 * done, and the socket goes on reading. An upstream that answers early (a 401, 404 or 413 to an upload
 * it will not read) and closes at once, without the staged close RFC 9112 §9.6 asks for (gunicorn's
 * workers), has its response in the socket's receive buffer, before its reset; Node's HTTP client
 * destroyed the socket on the first failed write, and the response with it: the client got 502 where the
 * upstream had answered (docs/reliability.md fix 59). The read then ends the socket as usual: the
 * response is relayed, or the reset (`ECONNRESET`) fails the request as before — a 502, or a replay of an
 * idempotent request on a stale pooled connection (fix 8), the same decisions. Other write errors destroy
 * the socket as before, and so does a refused write while the socket is paused (its response waits for
 * a client slow to take it): such a socket reads nothing, so the reset would reach the shim only once
 * the client read on, or never while the client kept uploading (fix 71). A connection with a refused
 * write is never pooled again ({@link retireConnection}): the upstream has closed or reset it, and an
 * answer early enough to be relayed (hyper 0.14 answers so, without `Connection: close`) let its
 * request finish, and Node's agent pooled it for the next request, which failed with 502 (fix 169).
 * @param socket An upstream connection, before its first write.
 */
function readsOnAfterRefusedWrite(socket: Duplex): void {
  const s = socket as Duplex & { _writeGeneric?: WriteGeneric };
  const writeGeneric = s._writeGeneric;
  if (typeof writeGeneric !== 'function') return;
  s._writeGeneric = function (this: Duplex, writev, data, encoding, cb) {
    return writeGeneric.call(this, writev, data, encoding, (err) => {
      const code = (err as NodeJS.ErrnoException | null | undefined)?.code;
      // Dropped only while the socket reads on, which brings the reset (fix 71).
      const refused = (code === 'EPIPE' || code === 'ECONNRESET') && !this.isPaused();
      if (refused) retireConnection(this);
      cb(refused ? null : err);
    });
  };
}

/**
 * Takes a request that waits for a pooled connection out of the pool's queue (`Agent.requests`): Node
 * keeps a destroyed request there until a connection frees, and only then reports its error, so a
 * request the shim gave up on (its timeout, upstream-attempt.ts) held its exchange (request, response,
 * state: about 10 KiB) for as long as slow clients held the pool. Requests time out in the order they
 * were queued, so it is usually the first one. Nothing happens to a request that has a socket or is
 * being given one; the request so taken out emits neither `error` nor `close` afterwards.
 * @param agent The upstream pool.
 * @param req A request of that pool, destroyed or about to be.
 * @returns Whether it was queued (and is no longer).
 * @throws Nothing.
 */
export function dropQueuedRequest(agent: http.Agent, req: http.ClientRequest): boolean {
  // Typed `IncomingMessage[]` by @types/node; Node queues the `ClientRequest`s.
  const queues = agent.requests as unknown as Record<string, http.ClientRequest[] | undefined>;
  for (const name in queues) {
    const queue = queues[name];
    const index = queue?.indexOf(req) ?? -1;
    if (queue === undefined || index < 0) continue;
    queue.splice(index, 1);
    // As Node's agent does once a queue is empty.
    if (queue.length === 0) delete queues[name];
    return true;
  }
  return false;
}

/**
 * Whether a request the pool was just given waits for a connection: every one of the pool's
 * `maxSockets` is in use, and Node's agent queued it (`Agent.requests`) until one is freed. Call it
 * right after `http.request`: the agent queues synchronously, at the end of the queue. Cheap when
 * nothing waits (no queue to look at).
 * @param agent The upstream pool.
 * @param req The request just made with it.
 * @returns `true` when `req` is the last request of one of the pool's queues. Never throws.
 */
export function isQueuedRequest(agent: http.Agent, req: http.ClientRequest): boolean {
  const queues = agent.requests as unknown as Record<string, http.ClientRequest[] | undefined>;
  for (const name in queues) if (queues[name]?.at(-1) === req) return true;
  return false;
}

/**
 * Makes a request of the pool on a connection of its own: the pool's idle connections are hidden from
 * it while `make` runs (Node's agent hands a request its socket, or starts connecting one, inside
 * `http.request`) and put back afterwards. For the replay of a request that failed on a reused
 * connection the upstream had closed (RFC 9110 §9.2.2; docs/reliability.md fix 8): the other idle
 * connections may be closed too (an upstream that closes after every response without
 * `Connection: close`, contrary to RFC 9112 §9.3; a restart), and the one replay must not land on one
 * of them (docs/reliability.md fix 58). When the pool is at `maxSockets`, the request waits for the
 * next connection freed, as any other.
 * @param agent The upstream pool.
 * @param make Creates the request (`transport.request(…)`) with `agent`.
 * @returns What `make` returns.
 * @throws What `make` throws, the idle connections put back; nothing of its own.
 */
export function onNewConnection<T>(agent: http.Agent, make: () => T): T {
  // Typed read-only by @types/node; Node's agent keeps a plain (null-prototype) object of arrays.
  const free = agent.freeSockets as unknown as Record<string, unknown[] | undefined>;
  const hidden: Record<string, unknown[]> = {};
  for (const name in free) {
    const sockets = free[name];
    if (sockets !== undefined) hidden[name] = sockets;
    delete free[name];
  }
  try {
    return make();
  } finally {
    for (const [name, sockets] of Object.entries(hidden)) {
      const now = free[name];
      free[name] = now === undefined ? sockets : [...sockets, ...now];
    }
  }
}

/**
 * Whether an upstream connection is established: its TCP connection made and, for `https:`, its TLS
 * handshake done. Until then the request's head and body wait in the shim (Node's `net.Socket` holds a
 * write while it connects, a TLS socket its clear text until the handshake), so the upstream socket is
 * idle whatever the client does: an upstream that does not accept the connection or does not answer
 * the ClientHello, not a client that stopped sending (docs/reliability.md fix 76).
 * @param socket The upstream request's socket (`ClientRequest.socket`), `null` while it waits for one.
 * @returns `false` for `null`, a socket still connecting, or a TLS socket before its handshake's end.
 * @throws Nothing.
 */
export function isEstablished(socket: Duplex | null): boolean {
  if (socket === null) return false;
  const s = socket as Duplex & { connecting?: boolean; _secureEstablished?: boolean };
  // `_secureEstablished`: Node's TLSSocket's own flag (set on 'secure'); absent on a plain socket.
  return s.connecting !== true && s._secureEstablished !== false;
}

/**
 * Arms an upstream request's idle timer (`socket.setTimeout`) again from inside its own firing, with
 * `onIdle` listening. Node's `ClientRequest.setTimeout` delegates the socket's `'timeout'` to the
 * request once (`listenSocketTimeout`: `socket.once('timeout', …)`, skipped while `req.timeoutCb` is
 * set, which the first arming leaves set): a second call re-armed the socket's timer with nobody
 * listening, and the exchange had no idle bound left (docs/reliability.md fix 104). Clearing
 * `timeoutCb` makes the call delegate again; Node's own clean-up, which removes the delegate by that
 * field when the response ends, is unchanged.
 * @param req The upstream request, its socket assigned.
 * @param ms The idle timeout, in ms (`UPSTREAM_TIMEOUT_MS`).
 * @param onIdle Called once when the socket has been idle for `ms`.
 * @throws {TypeError} or `RangeError` from `ClientRequest.setTimeout` when `ms` is not a
 *   non-negative number (`ERR_INVALID_ARG_TYPE`, `ERR_OUT_OF_RANGE`); never for the configured value.
 */
export function rearmIdleTimer(req: http.ClientRequest, ms: number, onIdle: () => void): void {
  (req as http.ClientRequest & { timeoutCb: unknown }).timeoutCb = null;
  req.setTimeout(ms, onIdle);
}

/**
 * How far a socket's writes have got: the bytes its kernel has taken (Node's `_bytesDispatched`, the
 * bytes handed to libuv, less the handle's `writeQueueSize`, those libuv still holds), and whether
 * libuv still holds some. The bytes taken grow whenever the peer's TCP window lets a queued write move,
 * also in the middle of one write, which no event reports. For the write watchdogs of
 * upstream-attempt.ts: Node's own idle timer (`socket.setTimeout`) lets a socket whose write queue
 * changed since the last write (`kLastWriteQueueSize`, `net.Socket._onTimeout`) run one more full
 * period, and a stuck write always looks changed there: a peer that vanished in the middle of an upload
 * was cut after twice `UPSTREAM_TIMEOUT_MS` (docs/reliability.md fix 85).
 * @param socket A socket: an upstream request's, or a client's.
 * @returns `sent`, compared between two looks (a TLS socket counts its clear text, its queue the
 *   encrypted bytes: a change is progress, the figure itself means nothing), and `queued`: libuv holds
 *   bytes of a write (false while the socket connects: Node holds the writes then).
 * @throws Nothing.
 */
export function writeProgress(socket: Duplex): { sent: number; queued: boolean } {
  // Node's own fields (net.js); absent on a socket that is not a net.Socket: then no progress is seen
  // and nothing is queued, and the watchdog never fires.
  const s = socket as Duplex & { _bytesDispatched?: number; _handle?: { writeQueueSize?: number } | null };
  const queue = s._handle?.writeQueueSize ?? 0;
  return { sent: (s._bytesDispatched ?? 0) - queue, queued: queue > 0 };
}

/**
 * Gives a new upstream connection `timeoutMs` to be ready for its request — TCP's handshake
 * (`connect`), and for TLS its handshake too (`secureConnect`) — and destroys it with
 * {@link CONNECT_TIMEOUT_CODE} after that: the request fails with 502 (`refused`, upstream-error.ts) at
 * once instead of waiting `UPSTREAM_TIMEOUT_MS` for a host that drops its SYNs (a partition, a dead
 * node, a firewall), as a proxy's connect timeout does (nginx `proxy_connect_timeout`, Envoy
 * `connect_timeout`). For a host name the deadline starts once it is resolved (the socket's `lookup`),
 * as nginx's, Envoy's and HAProxy's do (they resolve apart from connecting): a slow resolver (glibc
 * waits 5 s for a nameserver that does not answer before asking the next one) is the upstream request's
 * own timeout's to bound (`UPSTREAM_TIMEOUT_MS`), not a reason to give up a connection that had not
 * started. A timer and three listeners per new connection; reused ones cost nothing.
 * @param socket A connection just made by the agent, still connecting (or resolving).
 * @param timeoutMs `UPSTREAM_CONNECT_TIMEOUT_MS`.
 * @param resolves Whether the socket first resolves a host name (the agent's `host` is no IP address:
 *   Node's `net` emits `lookup` then, and only then).
 * @returns `socket`.
 */
function withConnectDeadline(socket: Duplex, timeoutMs: number, resolves: boolean): Duplex {
  const s = socket as Duplex & { encrypted?: boolean };
  let deadline: Deadline | undefined;
  const start = () => {
    if (s.destroyed) return;
    // A connect the kernel completed while the shim was stopped or blocked is seen before the deadline
    // acts (own-pause.ts; docs/reliability.md fix 99).
    deadline = startDeadline(() => {
      const err: NodeJS.ErrnoException = new Error(
        `upstream connection not established within ${timeoutMs} ms`,
      );
      err.code = CONNECT_TIMEOUT_CODE;
      s.destroy(err);
    }, timeoutMs);
  };
  const clear = () => {
    deadline?.clear();
    s.off('lookup', start);
  };
  if (resolves) s.once('lookup', start);
  else start();
  s.once(s.encrypted === true ? 'secureConnect' : 'connect', clear);
  s.once('close', clear);
  return socket;
}

/** Whether a connection to the agent's `host` starts with a name resolution ({@link withConnectDeadline}). */
function resolvesName(options: http.ClientRequestArgs): boolean {
  const host = options.host ?? options.hostname ?? 'localhost';
  return isIP(host) === 0;
}

/**
 * A new connection of an upstream pool, `http:` or `https:`: made by the agent's own
 * `createConnection` (`create`), reading into the shared buffer ({@link withSharedReadBuffer}) and
 * ready for its request within `connectTimeoutMs` ({@link withConnectDeadline}).
 * @param create The agent's own `createConnection` (a TCP or a TLS socket).
 * @param options The connection's options, as the agent passes them.
 * @param connectTimeoutMs `UPSTREAM_CONNECT_TIMEOUT_MS`.
 * @returns The socket, still connecting.
 */
function upstreamConnection(
  create: (options: http.ClientRequestArgs) => Duplex,
  options: http.ClientRequestArgs,
  connectTimeoutMs: number,
): Duplex {
  const socket = withSharedReadBuffer((o) => create(o as http.ClientRequestArgs), options);
  return withConnectDeadline(socket, connectTimeoutMs, resolvesName(options));
}

/**
 * The `http:` upstream pool: its sockets read into the shared buffer ({@link withSharedReadBuffer}) and
 * must connect within a deadline ({@link withConnectDeadline}).
 */
export class SharedReadBufferAgent extends http.Agent {
  readonly #connectTimeoutMs: number;
  /**
   * An empty pool.
   * @param options Node's agent options (its `timeout`, the idle timeout, in ms).
   * @param connectTimeoutMs In ms; see {@link withConnectDeadline} (default
   *   {@link UPSTREAM_CONNECT_TIMEOUT_MS}).
   * @throws {RangeError} from `http.Agent` for an option out of range (e.g. `maxTotalSockets: 0`,
   *   `ERR_OUT_OF_RANGE`); never for the shim's pool options.
   */
  constructor(options?: http.AgentOptions, connectTimeoutMs = UPSTREAM_CONNECT_TIMEOUT_MS) {
    super(options);
    this.#connectTimeoutMs = connectTimeoutMs;
    closeRetiredOnFree(this);
  }
  /**
   * A new connection for the agent ({@link upstreamConnection}): Node's own, reading into the shared
   * buffer and bounded by the connect deadline.
   * @param options The connection's options, as the agent passes them.
   * @returns The socket, still connecting (or resolving its host).
   * @throws What `net.createConnection` throws synchronously for invalid options (e.g. a bad port,
   *   `ERR_SOCKET_BAD_PORT`); a failure to connect is the socket's `error` event instead.
   */
  override createConnection(options: http.ClientRequestArgs): Duplex {
    return upstreamConnection((o) => super.createConnection(o)!, options, this.#connectTimeoutMs);
  }
}

/** The `https:` upstream pool, made on first use (`node:https` is loaded for an `https:` upstream only). */
function sharedReadBufferHttpsAgent(
  https: typeof HttpsModule,
  options: HttpsModule.AgentOptions,
  connectTimeoutMs: number,
): http.Agent {
  class SharedReadBufferHttpsAgent extends https.Agent {
    override createConnection(connection: http.ClientRequestArgs): Duplex {
      return upstreamConnection((o) => super.createConnection(o)!, connection, connectTimeoutMs);
    }
  }
  const agent = new SharedReadBufferHttpsAgent(options);
  closeRetiredOnFree(agent);
  return agent;
}

/**
 * The TLS server name (SNI, RFC 6066 §3) for an upstream host: the DNS name itself, without the
 * trailing dot of a fully qualified spelling (`api.ns.svc.cluster.local.`, which skips the resolver's
 * search list; RFC 6066 §3: "without a trailing dot" — Go's TLS servers, Caddy and Traefik among them,
 * refuse a ClientHello that has one); `''` (no SNI) for an IP address, which RFC 6066 forbids as a
 * server name — the certificate is then checked against the IP. Setting it explicitly matters: left
 * unset, Node derives it from the request's `Host` header, which is the client's.
 * @param hostname `URL.hostname` (IPv6 in brackets).
 * @returns The server name, or `''` for an IP address.
 * @throws Nothing.
 * @example tlsServerName('api.internal') // → 'api.internal'
 * @example tlsServerName('api.internal.') // → 'api.internal'
 * @example tlsServerName('[::1]') // → ''
 */
export function tlsServerName(hostname: string): string {
  const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  if (isIP(bare) !== 0) return '';
  return bare.endsWith('.') ? bare.slice(0, -1) : bare;
}

/**
 * The request function for an upstream protocol: `http.request`, or `https.request` (loading
 * `node:https` on first use).
 * @param protocol `URL.protocol` of the upstream: `http:` or `https:`.
 * @returns `http.request` or `https.request`.
 * @throws {Error} for another protocol.
 */
export function upstreamRequest(protocol: string): typeof http.request {
  if (protocol === 'http:') return http.request;
  if (protocol === 'https:') return (load('node:https') as typeof HttpsModule).request as typeof http.request;
  throw new Error(`unsupported upstream protocol ${protocol}`);
}

/** Options of {@link createUpstreamTransport}. */
export interface UpstreamTransportOptions {
  /** For `https:`: PEM certificates trusted in addition to Node's root store (`UPSTREAM_CA_FILE`). */
  readonly caPem?: string;
  /**
   * Idle pooled connections are closed after this many ms, or 1 s before the upstream's
   * `Keep-Alive: timeout` hint when that is sooner (`UPSTREAM_IDLE_TIMEOUT_MS`; default
   * {@link UPSTREAM_IDLE_TIMEOUT_MS}).
   */
  readonly idleTimeoutMs?: number;
  /**
   * A new connection not ready for its request within this many ms is destroyed: 502
   * (`UPSTREAM_CONNECT_TIMEOUT_MS`; default {@link UPSTREAM_CONNECT_TIMEOUT_MS}; {@link withConnectDeadline}).
   */
  readonly connectTimeoutMs?: number;
  /**
   * Most connections to the upstream at once (`UPSTREAM_MAX_CONNECTIONS`; default
   * {@link UPSTREAM_POOL_SOCKETS}).
   */
  readonly maxConnections?: number;
}

/**
 * Creates the transport for an upstream URL.
 * @param upstream `http://…` or `https://…`.
 * @param options The TLS trust, the idle and the connect timeouts, the pool's size
 *   ({@link UpstreamTransportOptions}).
 * @returns The pool (`agent`), the request function and the `target` every request carries
 *   (protocol, hostname without brackets, port, and for `https:` the SNI server name).
 * @throws {Error} for another protocol (the configuration accepts only these two).
 */
export function createUpstreamTransport(
  upstream: URL,
  options: UpstreamTransportOptions = {},
): UpstreamTransport {
  const {
    caPem,
    idleTimeoutMs = UPSTREAM_IDLE_TIMEOUT_MS,
    connectTimeoutMs = UPSTREAM_CONNECT_TIMEOUT_MS,
    maxConnections = UPSTREAM_POOL_SOCKETS,
  } = options;
  const hostname = upstream.hostname.startsWith('[') ? upstream.hostname.slice(1, -1) : upstream.hostname;
  if (upstream.protocol === 'http:') {
    return {
      agent: new SharedReadBufferAgent(pool(idleTimeoutMs, maxConnections), connectTimeoutMs),
      request: http.request,
      target: { protocol: 'http:', hostname, port: Number(upstream.port || 80) },
      connectTimeoutMs,
    };
  }
  if (upstream.protocol === 'https:') {
    const https = load('node:https') as typeof HttpsModule;
    const { createSecureContext, rootCertificates } = load('node:tls') as typeof TlsModule;
    const agent = sharedReadBufferHttpsAgent(
      https,
      {
        ...pool(idleTimeoutMs, maxConnections),
        rejectUnauthorized: true,
        // Announce HTTP/1.1 (ALPN, RFC 7301), the only protocol the pool speaks: an upstream that serves
        // only h2 (Node's `http2.createSecureServer` without `allowHTTP1`) then fails the handshake
        // (`no_application_protocol`: 502, `/readyz` 503) instead of answering with its own HTTP/1.0 403
        // "Missing ALPN Protocol", which the shim relayed to clients and the probe took for ready (fix 55).
        ALPNProtocols: ['http/1.1'],
        // The trust store built once, not per connection: from `ca`, Node builds a context of the 120-odd
        // root certificates and the CA file for every new connection, 12 ms of the event loop each
        // (docs/reliability.md fix 131).
        ...(caPem !== undefined && {
          secureContext: createSecureContext({ ca: [...rootCertificates, caPem] }),
        }),
      },
      connectTimeoutMs,
    );
    return {
      agent,
      request: upstreamRequest('https:'),
      target: {
        protocol: 'https:',
        hostname,
        port: Number(upstream.port || 443),
        servername: tlsServerName(upstream.hostname),
      },
      connectTimeoutMs,
    };
  }
  throw new Error(`unsupported upstream protocol ${upstream.protocol}`);
}
