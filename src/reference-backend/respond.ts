/**
 * Writing JSON responses the way an Express/NestJS backend does: compact `JSON.stringify` output,
 * `Content-Type: application/json; charset=utf-8`, an exact `Content-Length`, a strong `ETag` on
 * successful GET/HEAD responses (with `If-None-Match` → 304), and optional gzip.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { constants, gzip } from 'node:zlib';
import { errorPayload } from './http-error.ts';

/** `Content-Type` of every JSON response. */
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** JSON bodies larger than this many bytes are gzip-encoded when compression is on and accepted. */
export const COMPRESS_THRESHOLD_BYTES = 1024;

/**
 * A serialized JSON body with lazily computed, memoized derivatives, so a cached entity (e.g. the large
 * `/debug/json` list) is hashed and compressed once.
 */
export interface JsonEntity {
  /** UTF-8 bytes of `JSON.stringify(payload)`. */
  readonly bytes: Buffer;
  /** Strong entity tag of {@link bytes}, once computed. */
  etag?: string;
  /** gzip encoding of {@link bytes}, once computed. */
  gzipped?: Buffer;
}

/**
 * Serializes a payload.
 * @param payload Any JSON-serializable value.
 * @returns The entity (compact JSON, UTF-8).
 */
export function jsonEntity(payload: unknown): JsonEntity {
  return { bytes: Buffer.from(JSON.stringify(payload), 'utf8') };
}

/**
 * Strong entity tag of a body, in Express' format: `"<length hex>-<first 27 chars of base64 SHA-1>"`
 * (RFC 9110 §8.8.3).
 * @param bytes The body.
 */
export function computeEtag(bytes: Buffer): string {
  const hash = createHash('sha1').update(bytes).digest('base64').slice(0, 27);
  return `"${bytes.length.toString(16)}-${hash}"`;
}

/**
 * Whether an `Accept-Encoding` header allows gzip (RFC 9110 §12.5.3): `gzip` (or `x-gzip`) with a
 * non-zero q-value, or `*` with a non-zero q-value when gzip is not listed.
 * @param header The raw header value.
 */
export function acceptsGzip(header: string | undefined): boolean {
  if (header === undefined || header === '') return false;
  let wildcard = false;
  for (const part of header.split(',')) {
    const [coding = '', ...params] = part.split(';');
    const name = coding.trim().toLowerCase();
    let q = 1;
    for (const param of params) {
      const [key = '', value = ''] = param.split('=');
      if (key.trim().toLowerCase() === 'q') q = Number(value.trim());
    }
    const allowed = Number.isFinite(q) && q > 0;
    if (name === 'gzip' || name === 'x-gzip') return allowed;
    if (name === '*') wildcard = allowed;
  }
  return wildcard;
}

/** Weak comparison of `If-None-Match` against an entity tag (RFC 9110 §13.1.2). */
function etagMatches(ifNoneMatch: string, etag: string): boolean {
  const bare = etag.startsWith('W/') ? etag.slice(2) : etag;
  for (const candidate of ifNoneMatch.split(',')) {
    const tag = candidate.trim();
    if (tag === '*') return true;
    if ((tag.startsWith('W/') ? tag.slice(2) : tag) === bare) return true;
  }
  return false;
}

function gzipEntity(entity: JsonEntity): Promise<Buffer> {
  if (entity.gzipped !== undefined) return Promise.resolve(entity.gzipped);
  return new Promise((resolve, reject) => {
    gzip(entity.bytes, { level: constants.Z_BEST_SPEED }, (error, result) => {
      if (error !== null) {
        reject(error);
        return;
      }
      entity.gzipped = result;
      resolve(result);
    });
  });
}

/**
 * Sends a JSON entity. Adds a strong `ETag` to 2xx GET/HEAD responses and answers 304 when
 * `If-None-Match` matches it; with `compress`, gzip-encodes bodies over {@link COMPRESS_THRESHOLD_BYTES}
 * when `Accept-Encoding` allows it (`Content-Encoding: gzip`, `Vary: Accept-Encoding`, the ETag gets a
 * `-gzip` suffix because it names a different representation). Never throws; a failure after the
 * headers are out destroys the response.
 *
 * @param status HTTP status.
 * @param entity The body.
 * @param compress Whether compression is enabled.
 * @param extraHeaders Headers to add (e.g. `Connection: close`).
 */
export function sendJson(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  entity: JsonEntity,
  compress: boolean,
  extraHeaders?: OutgoingHttpHeaders,
): void {
  const headers: OutgoingHttpHeaders = { 'content-type': JSON_CONTENT_TYPE, ...extraHeaders };
  const cacheable = (req.method === 'GET' || req.method === 'HEAD') && status >= 200 && status < 300;
  const compressible = compress && entity.bytes.length > COMPRESS_THRESHOLD_BYTES;
  const gzipped = compressible && acceptsGzip(req.headers['accept-encoding']);
  if (compressible) headers.vary = 'Accept-Encoding';
  if (cacheable) {
    entity.etag ??= computeEtag(entity.bytes);
    const etag = gzipped ? `${entity.etag.slice(0, -1)}-gzip"` : entity.etag;
    headers.etag = etag;
    const ifNoneMatch = req.headers['if-none-match'];
    if (ifNoneMatch !== undefined && etagMatches(ifNoneMatch, etag)) {
      delete headers['content-type'];
      res.writeHead(304, headers);
      res.end();
      return;
    }
  }
  if (!gzipped) {
    headers['content-length'] = entity.bytes.length;
    res.writeHead(status, headers);
    res.end(entity.bytes);
    return;
  }
  gzipEntity(entity).then(
    (body) => {
      if (res.destroyed) return;
      headers['content-encoding'] = 'gzip';
      headers['content-length'] = body.length;
      res.writeHead(status, headers);
      res.end(body);
    },
    () => {
      sendError(res, 500, 'Internal server error');
    },
  );
}

/**
 * Sends the NestJS-style error body `{statusCode, message, error}` (uncompressed, no ETag).
 * @param extraHeaders Headers to add (e.g. `Connection: close` after a 413).
 */
export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  extraHeaders?: OutgoingHttpHeaders,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = Buffer.from(JSON.stringify(errorPayload(status, message)), 'utf8');
  res.writeHead(status, {
    'content-type': JSON_CONTENT_TYPE,
    'content-length': body.length,
    ...extraHeaders,
  });
  res.end(body);
}
