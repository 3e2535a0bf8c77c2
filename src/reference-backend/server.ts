/**
 * The embedded reference backend (SPEC §9): a strict, canonical-only, in-memory stand-in for the real
 * NestJS service, served with plain `node:http`. The shim is put in front of it when `UPSTREAM_URL` is
 * unset, in the end-to-end tests and in the benchmarks.
 *
 * Per request: route match (404 `Cannot <METHOD> <url>`) → credentials (401) → query whitelist →
 * body (415/413/400, whitelist) → handler → JSON reply. Every response carries `Service-Version`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { ClientAbortError, discardBody, readBody, readJsonBody } from './body.ts';
import { hasCredentials } from './credentials.ts';
import { DEBUG_ROUTES, type RawRoute } from './debug.ts';
import { HttpError } from './http-error.ts';
import { jsonEntity, sendError, sendJson } from './respond.ts';
import { createRouter } from './router.ts';
import { API_ROUTES, type ApiRoute } from './routes.ts';
import { Store } from './store.ts';
import { assertKnownFields, assertKnownParams, type JsonObject, parseQuery } from './validation.ts';

/** Service version announced when none is configured. */
export const DEFAULT_SERVICE_VERSION = '0.60.0';

/** Options of {@link createReferenceBackend}. */
export interface ReferenceBackendOptions {
  /** Value of the `Service-Version` response header; default {@link DEFAULT_SERVICE_VERSION}. */
  serviceVersion?: string;
  /** gzip JSON responses over 1 KiB when the client accepts it; default `false`. */
  compress?: boolean;
  /** Load the deterministic seed (`SEED_IDS`); default `true`. */
  seed?: boolean;
}

/** Options of {@link startReferenceBackend}. */
export interface StartOptions extends ReferenceBackendOptions {
  /** TCP port; default `0` (any free port). */
  port?: number;
  /** Interface to bind; default `127.0.0.1`. */
  host?: string;
}

/** A listening reference backend. */
export interface RunningReferenceBackend {
  readonly server: Server;
  /** Base URL, e.g. `http://127.0.0.1:41234` (no trailing slash). */
  readonly url: string;
  /** Stops listening and closes every connection, idle keep-alive ones included. Idempotent. */
  close(): Promise<void>;
}

type Route = ApiRoute | RawRoute;

const router = createRouter<Route>([...API_ROUTES, ...DEBUG_ROUTES]);

// Longer than any sane proxy's idle-socket timeout, so the shim's pooled upstream sockets are not closed
// under it mid-reuse (a race that shows up as ECONNRESET on the proxy).
const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** Most bytes of an oversized upload read off before a 413 (16 MiB). */
const MAX_DISCARD_BYTES = 16 * 1024 * 1024;

function noop(): void {}

function clientErrorStatus(code: string | undefined): number {
  if (code === 'HPE_HEADER_OVERFLOW') return 431;
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 408;
  return 400;
}

/**
 * Creates the reference backend's HTTP server (not listening).
 *
 * @param options See {@link ReferenceBackendOptions}; each instance has its own store.
 * @returns A `node:http` server; call `listen` on it, or use {@link startReferenceBackend}.
 * @example
 * const server = createReferenceBackend({ serviceVersion: '0.60.0', compress: true });
 * server.listen(3000, '127.0.0.1');
 */
export function createReferenceBackend(options: ReferenceBackendOptions = {}): Server {
  const serviceVersion = options.serviceVersion ?? DEFAULT_SERVICE_VERSION;
  const compress = options.compress === true;
  const store = new Store(options.seed !== false);

  async function runApi(
    req: IncomingMessage,
    res: ServerResponse,
    route: ApiRoute,
    params: readonly string[],
    rawQuery: string,
  ): Promise<void> {
    const query = parseQuery(rawQuery);
    if (route.query !== null) assertKnownParams(query, route.query);
    let body: JsonObject = {};
    if (route.body !== null) {
      body = await readJsonBody(req);
      assertKnownFields(body, route.body);
    } else if (
      req.headers['content-length'] !== undefined ||
      req.headers['transfer-encoding'] !== undefined
    ) {
      // A route without a body ignores one, but reads it so the connection stays usable (bounded).
      await readBody(req, 1024 * 1024);
    }
    const reply = route.handle({ store, params, query, body });
    sendJson(req, res, reply.status, jsonEntity(reply.payload), compress);
  }

  function fail(req: IncomingMessage, res: ServerResponse, error: unknown): void {
    if (error instanceof ClientAbortError || res.destroyed) return;
    if (error instanceof HttpError) {
      if (req.complete || error.statusCode !== 413) {
        sendError(res, error.statusCode, error.message);
        return;
      }
      // Read off a bounded rest of the upload first; beyond that, answer and close the connection.
      discardBody(req, MAX_DISCARD_BYTES).then((complete) => {
        if (!res.destroyed)
          sendError(res, 413, error.message, complete ? undefined : { connection: 'close' });
      }, noop);
      return;
    }
    sendError(res, 500, 'Internal server error');
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    req.on('error', noop);
    res.on('error', noop);
    res.setHeader('Service-Version', serviceVersion);
    const url = req.url ?? '/';
    const method = req.method ?? 'GET';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const match = router.match(method, path);
    if (match === undefined) {
      sendError(res, 404, `Cannot ${method} ${url}`);
      return;
    }
    const { route, params } = match;
    if (!(route.kind === 'api' && route.public === true) && !hasCredentials(req.headers)) {
      sendError(res, 401, 'Unauthorized');
      return;
    }
    const rawQuery = q === -1 ? '' : url.slice(q + 1);
    try {
      const pending =
        route.kind === 'api'
          ? runApi(req, res, route, params, rawQuery)
          : route.handle(req, res, { query: parseQuery(rawQuery), compress });
      if (pending !== undefined) pending.catch((error: unknown) => fail(req, res, error));
    } catch (error) {
      fail(req, res, error);
    }
  }

  const server = createServer(handle);
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000;
  // Streaming diagnostics move gigabytes; a whole-request deadline would cut them off.
  server.requestTimeout = 0;
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
    if (error.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent === true) {
      socket.destroy();
      return;
    }
    const status = clientErrorStatus(error.code);
    socket.end(
      `HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request'}\r\n` +
        `Service-Version: ${serviceVersion}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`,
    );
  });
  return server;
}

/**
 * Creates the reference backend and starts listening.
 *
 * @param options {@link StartOptions}: port (default `0`), host (default `127.0.0.1`), and the
 *   {@link ReferenceBackendOptions}.
 * @returns The server, its base URL and a `close()` that also drops idle keep-alive sockets.
 * @throws The `listen` error (e.g. `EADDRINUSE`) as a rejection.
 * @example
 * const backend = await startReferenceBackend();
 * await fetch(`${backend.url}/api/health`);
 * await backend.close();
 */
export function startReferenceBackend(options: StartOptions = {}): Promise<RunningReferenceBackend> {
  const { port = 0, host = '127.0.0.1', ...backendOptions } = options;
  const server = createReferenceBackend(backendOptions);
  return new Promise((resolve, reject) => {
    const onError = (error: Error): void => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      const address = server.address() as AddressInfo;
      const hostPart = address.address.includes(':') ? `[${address.address}]` : address.address;
      resolve({
        server,
        url: `http://${hostPart}:${address.port}`,
        close: () =>
          new Promise<void>((done, fail) => {
            server.close((error?: NodeJS.ErrnoException) => {
              if (error !== undefined && error.code !== 'ERR_SERVER_NOT_RUNNING') fail(error);
              else done();
            });
            server.closeAllConnections();
          }),
      });
    });
  });
}
