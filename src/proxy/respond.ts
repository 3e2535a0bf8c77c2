/**
 * Writing the responses the shim makes itself (SPEC §7).
 */
import type { ServerResponse } from 'node:http';
import { errorBody } from './errors.ts';

/**
 * Sends a shim-made JSON error, or, when the response has already started, aborts the connection so
 * that a partial body is never presented as complete.
 * @param res The response.
 * @param statusCode HTTP status.
 * @param message What is wrong and how to fix it.
 * @param extraHeaders Headers to add (service version, warnings), flat: `[name, value, name, value, …]`.
 * @param closeConnection Close the connection after the response (an unread request body remains).
 */
export function sendError(
  res: ServerResponse,
  statusCode: number,
  message: string,
  extraHeaders: readonly string[],
  closeConnection = false,
): void {
  if (res.headersSent || res.writableEnded) {
    res.destroy();
    return;
  }
  const body = errorBody(statusCode, message);
  const headers: string[] = [
    'Content-Type',
    'application/json; charset=utf-8',
    'Content-Length',
    String(body.length),
    'Cache-Control',
    'no-store',
    ...extraHeaders,
  ];
  if (closeConnection) headers.push('Connection', 'close');
  res.writeHead(statusCode, headers);
  res.end(body);
}

/**
 * Sends a small JSON document the shim makes itself (admin and report routes): `Content-Type:
 * application/json; charset=utf-8`, an exact `Content-Length` and `Cache-Control: no-store` (it
 * describes this process now, RFC 9111 §5.2.2.5).
 * @param res The response (not started).
 * @param status HTTP status.
 * @param body Any JSON-serialisable value.
 */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}
