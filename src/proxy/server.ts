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
 * - an idle keep-alive connection closes after 5 s (below typical load-balancer idle timeouts is not
 *   needed for a sidecar; above Node's default would hold sockets longer).
 */
export const SERVER_TIMEOUTS = Object.freeze({
  headersTimeoutMs: 15_000,
  requestTimeoutMs: 600_000,
  keepAliveTimeoutMs: 5_000,
});

/** Largest request head accepted, in bytes; larger → 431 (RFC 6585 §5). */
export const MAX_HEADER_BYTES = 16 * 1024;

/**
 * Creates the front-door server (not listening).
 * @param handler The request pipeline (the Express app).
 */
export function createFrontServer(handler: RequestListener): http.Server {
  const server = http.createServer(
    {
      headersTimeout: SERVER_TIMEOUTS.headersTimeoutMs,
      requestTimeout: SERVER_TIMEOUTS.requestTimeoutMs,
      keepAliveTimeout: SERVER_TIMEOUTS.keepAliveTimeoutMs,
      maxHeaderSize: MAX_HEADER_BYTES,
      requireHostHeader: true,
      joinDuplicateHeaders: false,
    },
    handler,
  );
  // WebSocket and other upgrades never pass through Express middleware: refuse them here (SPEC §3).
  server.on('upgrade', (_req: IncomingMessage, socket: Duplex) => {
    writeRaw(socket, 501, 'Protocol upgrades (WebSocket, h2c) are not supported by this proxy.');
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    if (err.code === 'HPE_HEADER_OVERFLOW') {
      writeRaw(socket, 431, `Request headers are larger than ${MAX_HEADER_BYTES} bytes.`);
    } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      writeRaw(socket, 408, 'The request was not received in time.');
    } else {
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
