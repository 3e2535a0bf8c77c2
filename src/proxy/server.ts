/**
 * The front-door HTTP server: deliberate timeouts, protocol upgrades refused, and parser errors
 * answered in the shim's JSON error shape.
 */
import http, { type IncomingMessage, type RequestListener } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorBody } from './errors.ts';

/**
 * Server timeouts, in ms (documented in docs/operations.md):
 * - headers must arrive within 15 s (slowloris),
 * - a whole request within 10 min (slow bodies; long enough for gigabyte uploads on a fast link),
 * - an idle keep-alive connection closes after 65 s: longer than the idle timeout of the load balancers
 *   and ingress proxies that pool connections to the shim (60 s for AWS ALB and nginx), so that they,
 *   not the shim, close an idle connection, and never reuse one the shim is closing (a 502 at the LB).
 */
export const SERVER_TIMEOUTS = Object.freeze({
  headersTimeoutMs: 15_000,
  requestTimeoutMs: 600_000,
  keepAliveTimeoutMs: 65_000,
  /**
   * How often Node checks the two timeouts above. Node's default (30 s) would let a slowloris hold a
   * connection up to 45 s instead of 15 s (test/security/slow-clients.test.ts).
   */
  connectionsCheckingIntervalMs: 1_000,
});

/** Largest request head accepted, in bytes; larger → 431 (RFC 6585 §5). */
export const MAX_HEADER_BYTES = 16 * 1024;

/** Why the server itself refused a request before the pipeline saw it (a metric label). */
export type ParserRejection = 'malformed' | 'header_size' | 'request_timeout' | 'upgrade';

/**
 * Creates the front-door server (not listening).
 * @param handler The request pipeline (the Express app).
 * @param onRejected Told of every request the server refuses itself (parser errors, oversized heads,
 *   timeouts, upgrades), which never reach the pipeline's metrics and log.
 */
export function createFrontServer(
  handler: RequestListener,
  onRejected: (reason: ParserRejection, status: number) => void = () => {},
): http.Server {
  const server = http.createServer(
    {
      headersTimeout: SERVER_TIMEOUTS.headersTimeoutMs,
      requestTimeout: SERVER_TIMEOUTS.requestTimeoutMs,
      keepAliveTimeout: SERVER_TIMEOUTS.keepAliveTimeoutMs,
      connectionsCheckingInterval: SERVER_TIMEOUTS.connectionsCheckingIntervalMs,
      maxHeaderSize: MAX_HEADER_BYTES,
      requireHostHeader: true,
      joinDuplicateHeaders: false,
    },
    handler,
  );
  // WebSocket and other upgrades never pass through Express middleware: refuse them here (SPEC §3).
  server.on('upgrade', (_req: IncomingMessage, socket: Duplex) => {
    onRejected('upgrade', 501);
    writeRaw(socket, 501, 'Protocol upgrades (WebSocket, h2c) are not supported by this proxy.');
  });
  // CONNECT (authority-form) never reaches Express either; without a listener Node drops the
  // connection without a word. Answer as hygiene does (SPEC §3; test/security/admission-bypass-by-path.test.ts).
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    onRejected('malformed', 400);
    writeRaw(
      socket,
      400,
      'The request target must be in origin-form (a path starting with "/"); CONNECT is not supported.',
    );
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A response already started on this socket (the shim's own 400 for the same request, when the
    // parser fails later in its body): a second response would desynchronize a front proxy's
    // response queue. Close instead, as Node's default handler does (lib/_http_server.js
    // socketOnError); test/security/request-smuggling.test.ts.
    const started = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || started?.headersSent) {
      socket.destroy();
      return;
    }
    if (err.code === 'HPE_HEADER_OVERFLOW') {
      onRejected('header_size', 431);
      writeRaw(socket, 431, `Request headers are larger than ${MAX_HEADER_BYTES} bytes.`);
    } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      onRejected('request_timeout', 408);
      writeRaw(socket, 408, 'The request was not received in time.');
    } else {
      onRejected('malformed', 400);
      writeRaw(socket, 400, 'The request is not valid HTTP/1.1.');
    }
  });
  return server;
}

function writeRaw(socket: Duplex, status: number, message: string): void {
  const body = errorBody(status, message);
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.toString('utf8')}`,
  );
}
