/**
 * Reading request bodies: bounded buffering for JSON routes, and streaming length + SHA-256 for the
 * diagnostics routes (constant memory whatever the size).
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { HttpError } from './http-error.ts';
import { isJsonMediaType, type JsonObject, parseJsonObject } from './validation.ts';

/** Largest JSON request body accepted, in bytes (1 MiB); larger → 413. */
export const MAX_JSON_BODY_BYTES = 1024 * 1024;

/** Thrown when the client went away before the body was complete; nothing is answered then. */
export class ClientAbortError extends Error {
  constructor() {
    super('client aborted the request');
    this.name = 'ClientAbortError';
  }
}

/**
 * Buffers a request body up to `limit` bytes.
 * @param limit Maximum size in bytes.
 * @returns The complete body.
 * @throws {HttpError} 413 `request entity too large` when `Content-Length` or the bytes received exceed
 *   `limit` (the rest of the body is left unread: see {@link discardBody}); {@link ClientAbortError} when the
 *   client aborts.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    return Promise.reject(new HttpError(413, 'request entity too large'));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        reject(new HttpError(413, 'request entity too large'));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onAbort = (): void => {
      cleanup();
      reject(new ClientAbortError());
    };
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onAbort);
      req.off('close', onClose);
    };
    const onClose = (): void => {
      if (!req.complete) onAbort();
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onAbort);
    req.on('close', onClose);
  });
}

/**
 * Reads a JSON request body (NestJS `@Body()` behind Express' JSON parser, 1 MiB limit).
 * A non-empty body must have a JSON media type (`application/json`, `application/*+json`).
 * @returns The parsed object (`{}` for an empty body).
 * @throws {HttpError} 415 for a non-empty body of another type; 413 above {@link MAX_JSON_BODY_BYTES};
 *   400 for malformed JSON or a non-object; {@link ClientAbortError} when the client aborts.
 */
export async function readJsonBody(req: IncomingMessage): Promise<JsonObject> {
  const body = await readBody(req, MAX_JSON_BODY_BYTES);
  if (body.length === 0) return {};
  if (!isJsonMediaType(req.headers['content-type'])) {
    throw new HttpError(415, 'Content-Type must be application/json');
  }
  return parseJsonObject(body.toString('utf8'));
}

/**
 * Reads and drops the rest of a request body, so an early error reply (413) is not lost to a TCP reset
 * when the connection closes with unread upload bytes (body-parser does the same before answering).
 * @param limit Most further bytes to read, in bytes.
 * @returns `true` once the request is complete; `false` beyond `limit` or when the client aborts (the
 *   caller should then close the connection).
 */
export function discardBody(req: IncomingMessage, limit: number): Promise<boolean> {
  if (req.complete) return Promise.resolve(true);
  return new Promise((resolve) => {
    let seen = 0;
    const finish = (complete: boolean): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      if (!complete) req.pause();
      resolve(complete);
    };
    const onData = (chunk: Buffer): void => {
      seen += chunk.length;
      if (seen > limit) finish(false);
    };
    const onEnd = (): void => finish(true);
    const onClose = (): void => finish(req.complete);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onClose);
    req.resume();
  });
}

/** Length and digest of a streamed body. */
export interface BodyDigest {
  /** Number of body bytes received. */
  readonly bodyBytes: number;
  /** Lower-case hex SHA-256 of the body. */
  readonly bodySha256: string;
}

/**
 * Consumes a request body as a stream, hashing it chunk by chunk (memory stays flat for any size).
 * @returns Its length in bytes and SHA-256.
 * @throws {ClientAbortError} when the client aborts.
 */
export function digestBody(req: IncomingMessage): Promise<BodyDigest> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    let bodyBytes = 0;
    req.on('data', (chunk: Buffer) => {
      bodyBytes += chunk.length;
      hash.update(chunk);
    });
    req.once('end', () => resolve({ bodyBytes, bodySha256: hash.digest('hex') }));
    req.once('error', () => reject(new ClientAbortError()));
    req.once('close', () => {
      if (!req.complete) reject(new ClientAbortError());
    });
  });
}
