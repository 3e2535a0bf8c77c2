/**
 * Decoding and re-encoding of a response body around a patch (RFC 9110 §8.4 Content-Encoding),
 * bounded against decompression bombs. Modelled on undici's `lib/interceptor/decompress.js`.
 */
import { promisify } from 'node:util';
import zlib from 'node:zlib';

const gunzip = promisify(zlib.gunzip);
const inflate = promisify(zlib.inflate);
const inflateRaw = promisify(zlib.inflateRaw);
const brotliDecompress = promisify(zlib.brotliDecompress);
const gzip = promisify(zlib.gzip);
const deflate = promisify(zlib.deflate);
const brotliCompress = promisify(zlib.brotliCompress);

/** Content codings the patcher can undo and redo. */
export type SupportedCoding = 'identity' | 'gzip' | 'deflate' | 'br';

/**
 * Reads a `Content-Encoding` header value.
 * @returns The single supported coding, or `undefined` for anything else (stacked codings, zstd, …),
 * in which case the body is forwarded unpatched.
 */
export function supportedCoding(value: string | undefined): SupportedCoding | undefined {
  if (value === undefined) return 'identity';
  const v = value.trim().toLowerCase();
  if (v === '' || v === 'identity') return 'identity';
  if (v === 'gzip' || v === 'x-gzip') return 'gzip';
  if (v === 'deflate' || v === 'br') return v;
  return undefined;
}

/** The decoded body would exceed the limit. */
export class DecodedTooLargeError extends Error {}

/**
 * Decodes a complete body.
 * @param body The encoded bytes.
 * @param coding The coding from {@link supportedCoding}.
 * @param maxBytes Largest decoded size allowed, in bytes.
 * @throws {DecodedTooLargeError} when the decoded body would exceed `maxBytes`.
 * @throws {Error} zlib's error when the body is not valid for its coding.
 */
export async function decodeBody(body: Buffer, coding: SupportedCoding, maxBytes: number): Promise<Buffer> {
  const opts = { maxOutputLength: maxBytes };
  try {
    switch (coding) {
      case 'identity':
        return body;
      case 'gzip':
        return await gunzip(body, opts);
      case 'br':
        return await brotliDecompress(body, opts);
      case 'deflate':
        // "deflate" is zlib-wrapped (RFC 9110 §8.4.1.2), but some servers send raw deflate.
        return await inflate(body, opts).catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'ERR_BUFFER_TOO_LARGE') throw err;
          return inflateRaw(body, opts);
        });
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw new DecodedTooLargeError();
    throw err;
  }
}

/**
 * Encodes a body with the coding it arrived in (gzip level 6, brotli quality 5 to keep the hot path cheap).
 * @returns The encoded bytes.
 */
export async function encodeBody(body: Buffer, coding: SupportedCoding): Promise<Buffer> {
  switch (coding) {
    case 'identity':
      return body;
    case 'gzip':
      return gzip(body);
    case 'deflate':
      return deflate(body);
    case 'br':
      return brotliCompress(body, {
        params: {
          [zlib.constants.BROTLI_PARAM_QUALITY]: 5,
          [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length,
        },
      });
  }
}
