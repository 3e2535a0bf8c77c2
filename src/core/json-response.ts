/**
 * The small JSON documents the shim makes itself outside the request pipeline: the admin listener's
 * answers and the routes plugins add to it (SPEC §8).
 */
import type { ServerResponse } from 'node:http';
import { JSON_CONTENT_TYPE } from './errors.ts';

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
