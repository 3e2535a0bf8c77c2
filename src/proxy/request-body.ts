/**
 * Bounded buffering of a request body for a rewrite (SPEC §4, §5: `MAX_REWRITE_BODY` → 413).
 */
import type { IncomingMessage } from 'node:http';
import { ShimError } from './errors.ts';

/** The client went away while the body was being read; nothing is sent back. */
export class ClientAbortedError extends Error {
  constructor() {
    super('client aborted the request body');
    this.name = 'ClientAbortedError';
  }
}

/**
 * Reads a whole request body into memory, never holding more than `limit` bytes.
 * A declared `Content-Length` above the limit fails before any byte is read.
 * @param req The request; must not have been read yet.
 * @param limit Maximum body size in bytes.
 * @returns The body (an empty Buffer when there is none).
 * @throws {ShimError} `size` (413) when the body exceeds `limit`.
 * @throws {ClientAbortedError} when the client disconnects or the stream fails mid-body.
 */
export function readBoundedBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    return Promise.reject(tooLarge(limit));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    };
    const onError = () => {
      cleanup();
      reject(new ClientAbortedError());
    };
    const onClose = () => {
      if (!req.complete) onError();
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

function tooLarge(limit: number): ShimError {
  return new ShimError(
    'size',
    `The request body is larger than the ${limit} bytes this proxy rewrites (MAX_REWRITE_BODY); send a smaller body.`,
  );
}
