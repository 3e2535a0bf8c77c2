/**
 * Writing the responses the shim makes itself (SPEC §7) on the front door: its JSON errors and their
 * CORS headers. Admin and report documents: core/json-response.ts.
 */
import type { ServerResponse } from 'node:http';
import { errorHead } from '../core/errors.ts';
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
