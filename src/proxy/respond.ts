/**
 * Writing the responses the shim makes itself (SPEC §7).
 */
import type { ServerResponse } from 'node:http';
import { errorHead, JSON_CONTENT_TYPE } from '../core/errors.ts';
import { isAnsweredByServer } from '../core/exchange.ts';
import { abortResponse } from './client-reset.ts';
import { exposedNames } from './response-writer.ts';

/**
 * Sends a shim-made JSON error, or, when the response has already started, aborts the connection so
 * that a partial body is never presented as complete.
 * @param res The response.
 * @param statusCode HTTP status.
 * @param message What is wrong and how to fix it.
 * @param extraHeaders Headers to add (service version, warnings), flat: `[name, value, name, value, …]`.
 * @param closeConnection Close the connection after the response (an unread request body remains).
 * @throws {TypeError} from `res.writeHead` when a name or value of `extraHeaders` is not a valid field
 *   (`ERR_INVALID_HTTP_TOKEN`, `ERR_INVALID_CHAR`); `RangeError` for a status outside 100–999.
 */
export function sendError(
  res: ServerResponse,
  statusCode: number,
  message: string,
  extraHeaders: readonly string[],
  closeConnection = false,
): void {
  // The HTTP server answered this request itself (fix 156): its answer stands, its socket lingers.
  if (isAnsweredByServer(res)) return;
  if (res.headersSent || res.writableEnded) {
    abortResponse(res);
    return;
  }
  const { headers, body } = errorHead(statusCode, message, extraHeaders);
  if (closeConnection) headers.push('Connection', 'close');
  res.writeHead(statusCode, headers);
  res.end(body);
}

/**
 * Sends a small JSON document the shim makes itself (admin and report routes): `Content-Type:
 * application/json; charset=utf-8` ({@link JSON_CONTENT_TYPE}), an exact `Content-Length` and
 * `Cache-Control: no-store` (it describes this process now, RFC 9111 §5.2.2.5).
 * @param res The response (not started).
 * @param status HTTP status.
 * @param body Any JSON-serialisable value.
 * @throws {TypeError} from `JSON.stringify` for a cyclic value or a BigInt, and from
 *   `Buffer.byteLength` for a `body` that serialises to nothing (`undefined`, a function).
 * @throws {Error} `ERR_HTTP_HEADERS_SENT` when the response has started; `RangeError` for a
 *   status outside 100–999.
 */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': JSON_CONTENT_TYPE,
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}

/**
 * The CORS headers of a response the shim makes itself (`CORS_ALLOWED_ORIGINS`; Fetch standard, CORS
 * protocol): for a listed `Origin`, `Access-Control-Allow-Origin` with it, `Access-Control-Allow-Credentials:
 * true` (the shim's credentials are cookies or an API key) and `Access-Control-Expose-Headers` naming the
 * response's other headers; `Vary: Origin` whatever the origin, since the answer depends on it (RFC 9110
 * §12.5.5).
 * @param allowed The configured origins.
 * @param origin The request's `Origin`, if any.
 * @param headers The response's other headers, flat `[name, value, …]`.
 * @returns Headers to add, flat.
 * @throws Nothing.
 * @example
 * ownCorsHeaders(new Set(['https://app.example']), 'https://app.example', ['Service-Version', '0.60.0'])
 * // → ['Vary', 'Origin', 'Access-Control-Allow-Origin', 'https://app.example',
 * //    'Access-Control-Allow-Credentials', 'true', 'Access-Control-Expose-Headers', 'Service-Version']
 */
export function ownCorsHeaders(
  allowed: ReadonlySet<string>,
  origin: string | undefined,
  headers: readonly string[],
): string[] {
  const cors = ['Vary', 'Origin'];
  if (origin === undefined || !allowed.has(origin)) return cors;
  const exposed = exposedNames(['Access-Control-Allow-Origin', origin], headers);
  cors.push('Access-Control-Allow-Origin', origin, 'Access-Control-Allow-Credentials', 'true');
  if (exposed !== undefined) cors.push('Access-Control-Expose-Headers', exposed);
  return cors;
}
