/**
 * Node's one-shot encoders and decoders by content coding (RFC 9110 §8.4.1), for tests that build coded
 * bodies or read what the shim sent. `deflate` is the zlib-wrapped form (RFC 9110 §8.4.1.2).
 */
import zlib from 'node:zlib';

/** The codings the shim decodes and re-encodes (content-coding.ts `SUPPORTED_CODINGS` without identity). */
export type Coding = 'gzip' | 'deflate' | 'br' | 'zstd';

/** Encodes `input` in a coding, at zlib's defaults. */
export const ENCODE_SYNC: Readonly<Record<Coding, (input: zlib.InputType) => Buffer>> = Object.freeze({
  gzip: zlib.gzipSync,
  deflate: zlib.deflateSync,
  br: zlib.brotliCompressSync,
  zstd: zlib.zstdCompressSync,
});

/** Decodes a whole body of a coding. */
export const DECODE_SYNC: Readonly<Record<Coding, (input: zlib.InputType) => Buffer>> = Object.freeze({
  gzip: zlib.gunzipSync,
  deflate: zlib.inflateSync,
  br: zlib.brotliDecompressSync,
  zstd: zlib.zstdDecompressSync,
});
