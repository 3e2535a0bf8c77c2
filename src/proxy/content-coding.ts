/**
 * Decoding and re-encoding of bodies around a rewrite or patch (RFC 9110 §8.4 Content-Encoding):
 * whole request bodies (bounded against decompression bombs) and response bodies as streams. Modelled on undici's `lib/interceptor/decompress.js`.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { PatchCodec } from './response-patch.ts';

const gzip = promisify(zlib.gzip);
const deflate = promisify(zlib.deflate);
const brotliCompress = promisify(zlib.brotliCompress);
const zstdCompress = promisify(zlib.zstdCompress);

/**
 * Largest zstd window the shim decodes, as a power of two: 8 MiB (RFC 9659 §3: a zstd content coding's
 * window is at most 8 MB, what browsers decode). A frame that declares a larger one is refused as
 * invalid instead of allocating up to zstd's default 128 MiB per body.
 */
const ZSTD_WINDOW_LOG_MAX = 23;
/**
 * The memory a decoder holds besides its output, per coding, in bytes: its window at most (RFC 1951:
 * 32 KiB for gzip and deflate, with zlib's state; RFC 7932 §9.1: up to 16 MiB for brotli, the largest
 * window without the large-window extension, which Node's decoder leaves off; zstd: the 8 MiB of
 * {@link ZSTD_WINDOW_LOG_MAX}). The bound of {@link declaredWindowBytes}, which a request body's decode
 * (request-body.ts, fix 134) and a patched response's decoder (relay-response.ts, fix 135) reserve from the
 * budget (docs/reliability.md).
 */
export const DECODER_WINDOW_BYTES: Readonly<Record<SupportedCoding, number>> = Object.freeze({
  identity: 0,
  gzip: 64 * 1024,
  deflate: 64 * 1024,
  br: 16 * 1024 * 1024,
  zstd: 2 ** ZSTD_WINDOW_LOG_MAX,
});

/**
 * The window a coded body declares in its first bytes, in bytes, at most {@link DECODER_WINDOW_BYTES}
 * of its coding (that maximum when the head does not say, or says more): what its decoder may hold.
 * brotli: `WBITS` of the stream header (RFC 7932 §9.1), a window of 2^WBITS − 16 bytes. zstd: the first
 * frame's `Window_Descriptor`, or its `Frame_Content_Size` for a single-segment frame (RFC 8878
 * §3.1.1.1). gzip and deflate: their fixed maximum.
 * @param coding The body's coding.
 * @param head The body's first bytes (14 are enough for every coding).
 * @returns Bytes.
 * @throws Nothing (missing bytes count as "not said").
 * @example declaredWindowBytes('br', zlib.brotliCompressSync('{}')) // → 4194304 (WBITS 22, Node's default)
 */
export function declaredWindowBytes(coding: SupportedCoding, head: Uint8Array): number {
  const max = DECODER_WINDOW_BYTES[coding];
  if (coding === 'br') {
    const b = head[0];
    if (b === undefined) return max;
    let bits = 16;
    if ((b & 1) === 1) {
      const n = (b >> 1) & 7;
      const m = (b >> 4) & 7;
      bits = n !== 0 ? 17 + n : m === 0 ? 17 : m === 1 ? 0 : 8 + m;
    }
    return bits === 0 ? max : Math.min(max, 2 ** bits);
  }
  if (coding !== 'zstd') return max;
  // Magic 0xFD2FB528 (little-endian), then the frame header descriptor.
  if (head.length < 6 || head[0] !== 0x28 || head[1] !== 0xb5 || head[2] !== 0x2f || head[3] !== 0xfd)
    return max;
  const descriptor = head[4]!;
  const singleSegment = (descriptor & 0x20) !== 0;
  if (!singleSegment) {
    const w = head[5]!;
    const base = 2 ** (10 + (w >> 3));
    return Math.min(max, base + (base / 8) * (w & 7));
  }
  const at = 5 + [0, 1, 2, 4][descriptor & 3]!;
  const size = [1, 2, 4, 8][descriptor >> 6]!;
  if (head.length < at + size) return max;
  let content = 0;
  for (let k = size - 1; k >= 0; k--) content = content * 256 + head[at + k]!;
  return Math.min(max, size === 2 ? content + 256 : content);
}

/**
 * Output buffer of a response's decoder and encoder, in bytes (64 KiB; zlib's default is 16 KiB). Each
 * buffer zlib fills is a thread-pool round trip and a chunk through the steps after it: measured on a
 * gzip upstream's 1.4 MB list patched for 32 concurrent legacy clients, 80 → 114 requests/s
 * (bench/RESULTS.md, ninth session), for 96 KiB more per response.
 */
export const CODING_CHUNK_BYTES = 64 * 1024;
/** zstd's parameters for decoding a content coding. */
const ZSTD_DECODE = {
  chunkSize: CODING_CHUNK_BYTES,
  params: { [zlib.constants.ZSTD_d_windowLogMax]: ZSTD_WINDOW_LOG_MAX },
};
/**
 * zstd re-encodes a response at level 1, with a 256 KiB window (as brotli's below): with that window,
 * level 3 (zstd's default) was slower, larger and held three times the memory. Measured
 * (`zlib.zstdCompressSync`, one core): the bench's patched 2,100-mission list (2.48 MB) 1.42 ms and
 * 69 KB at level 3, 1.24 ms and 59 KB at 1; the unpatched 3,600-mission list 1.71 ms and 104 KB, 1.19 ms
 * and 78 KB; 32 encoders open at once, each fed a 215 KB list, RSS +33 and +11 MiB.
 */
export const RECODE_ZSTD_LEVEL = 1;
/** zstd's parameters for re-encoding. */
const ZSTD_ENCODE = {
  params: {
    [zlib.constants.ZSTD_c_compressionLevel]: RECODE_ZSTD_LEVEL,
    [zlib.constants.ZSTD_c_windowLog]: 18,
  },
};
/** The same for a response's streaming encoder, with {@link CODING_CHUNK_BYTES} output buffers. */
const ZSTD_STREAM_ENCODE = { ...ZSTD_ENCODE, chunkSize: CODING_CHUNK_BYTES };
/**
 * gzip and deflate re-encode a response at level 1 (nginx's default `gzip_comp_level`): zlib's levels
 * 4 to 9 search lazily, and level 6 costs 3.2× level 1 of CPU. Measured on the bench's patched 2,100-
 * mission list (2.48 MB): level 6 8.5 ms and 71 KB, level 1 2.7 ms and 96 KB (`zlib.gzipSync`, one core).
 */
export const RECODE_ZLIB_LEVEL = 1;
/**
 * Brotli re-encodes a response at quality 4 (.NET's `BrotliCompressionOptions` default): quality 5 took
 * 1.9× the CPU and twice the memory per encoder. Measured (`zlib.brotliCompressSync`, 256 KiB window,
 * one core): the bench's patched 2,100-mission list (2.48 MB) 8.7 ms and 53 KB at quality 5, 4.6 ms and
 * 65 KB at 4; 32 encoders open at once, each fed a 215 KB list, RSS +52 and +27 MiB.
 */
export const RECODE_BROTLI_QUALITY = 4;
/** Options of a response's zlib encoder (gzip, deflate). */
const ZLIB_ENCODE = { level: RECODE_ZLIB_LEVEL, chunkSize: CODING_CHUNK_BYTES };
/** Options of a response's zlib decoders (gzip, deflate, brotli). */
const DECODE = { chunkSize: CODING_CHUNK_BYTES };

/**
 * Content codings the shim can undo and redo (RFC 9110 §8.4.1; `zstd`: RFC 8878 §7.2), in the order
 * messages name them; {@link supportedCoding} maps a header value onto one of them.
 */
export const SUPPORTED_CODINGS = ['identity', 'gzip', 'deflate', 'br', 'zstd'] as const;

/** Content codings the patcher can undo and redo. */
export type SupportedCoding = (typeof SUPPORTED_CODINGS)[number];

/**
 * Reads a `Content-Encoding` header value.
 * @param value The header value, or `undefined` when absent (identity).
 * @returns The single supported coding (RFC 9110 §8.4.1; `zstd`: RFC 8878 §7.2), or `undefined` for
 * anything else (stacked codings, `compress`, …), in which case the body is forwarded unpatched.
 * @throws Nothing.
 * @example supportedCoding('x-gzip') // → 'gzip'
 */
export function supportedCoding(value: string | undefined): SupportedCoding | undefined {
  if (value === undefined) return 'identity';
  const v = value.trim().toLowerCase();
  if (v === '' || v === 'identity') return 'identity';
  if (v === 'gzip' || v === 'x-gzip') return 'gzip';
  if (v === 'deflate' || v === 'br' || v === 'zstd') return v;
  return undefined;
}

/** The decoded body would exceed the limit. */
export class DecodedTooLargeError extends Error {}

/**
 * Decodes a complete body, with the streaming decoder of a response ({@link createDecoder}): the same
 * verdicts, bytes after the end of the compressed data (a second zstd frame, trailing garbage) refused
 * rather than dropped. Node's one-shot functions, used before, stopped after the first zstd frame and
 * ignored what followed brotli, zstd or deflate data: a legacy client's rewritten body reached the
 * upstream without its tail (docs/reliability.md fix 136).
 * @param body The encoded bytes.
 * @param coding The coding from {@link supportedCoding}.
 * @param maxBytes Largest decoded size allowed, in bytes.
 * @returns The decoded bytes (`body` itself for `identity`).
 * @throws {DecodedTooLargeError} when the decoded body would exceed `maxBytes` (decoding stops there).
 * @throws {Error} the decoder's error (`Z_DATA_ERROR` and the like) when the body is not valid, whole,
 *   for its coding.
 */
export function decodeBody(body: Buffer, coding: SupportedCoding, maxBytes: number): Promise<Buffer> {
  const decoder = createDecoder(coding);
  if (decoder === undefined) return Promise.resolve(body);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    decoder.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        decoder.destroy();
        reject(new DecodedTooLargeError());
        return;
      }
      chunks.push(chunk);
    });
    decoder.once('error', reject);
    decoder.once('end', () => resolve(Buffer.concat(chunks, size)));
    decoder.end(body);
  });
}

/**
 * Encodes a body with the coding it arrived in, at the levels of {@link createEncoder} (gzip and
 * deflate level 1, brotli quality 4, zstd level 1), in one piece (a rewritten request body).
 * @param body The decoded bytes.
 * @param coding The coding from {@link supportedCoding}; `identity` returns `body` itself.
 * @returns The encoded bytes.
 * @throws {Error} zlib's error when it cannot allocate its state (it never rejects valid input).
 */
export async function encodeBody(body: Buffer, coding: SupportedCoding): Promise<Buffer> {
  switch (coding) {
    case 'identity':
      return body;
    case 'gzip':
      return gzip(body, { level: RECODE_ZLIB_LEVEL });
    case 'deflate':
      return deflate(body, { level: RECODE_ZLIB_LEVEL });
    case 'br':
      return brotliCompress(body, {
        params: {
          [zlib.constants.BROTLI_PARAM_QUALITY]: RECODE_BROTLI_QUALITY,
          [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length,
        },
      });
    case 'zstd':
      return zstdCompress(body, ZSTD_ENCODE);
  }
}

/**
 * A streaming decoder for a response body (RFC 9110 §8.4), or `undefined` for identity.
 * "deflate" is zlib-wrapped (RFC 9110 §8.4.1.2), but some servers send raw deflate: the first two
 * bytes decide. An empty body decodes to an empty body (zlib alone calls that an error).
 * @param coding The coding from {@link supportedCoding}.
 * @returns A Transform (encoded bytes in, decoded bytes out); it emits `error` (zlib's `Z_*`,
 *   brotli's `ERR__*` or zstd's `ZSTD_error_*` code) for invalid data, and for a zstd window over
 *   {@link ZSTD_WINDOW_LOG_MAX}.
 * @throws Nothing itself: the zlib decoder is created at the body's first two bytes, so zlib's
 *   `ERR_ZLIB_INITIALIZATION_FAILED` (no memory for its state) would be thrown from within that write.
 */
export function createDecoder(coding: SupportedCoding): Transform | undefined {
  switch (coding) {
    case 'identity':
      return undefined;
    case 'gzip':
      // Node's gunzip reads what follows a member itself: another member, zero padding, or an error.
      return new LazyDecoder(() => zlib.createGunzip(DECODE), false);
    case 'br':
      return new LazyDecoder(() => zlib.createBrotliDecompress(DECODE));
    case 'deflate':
      return new LazyDecoder((cmf, flg) =>
        looksLikeZlib(cmf, flg) ? zlib.createInflate(DECODE) : zlib.createInflateRaw(DECODE),
      );
    case 'zstd':
      // Node's zstd stream ends after the first frame of several (RFC 8878 §3 allows more): a new one
      // decodes each next frame (docs/reliability.md fix 137).
      return new LazyDecoder(() => zlib.createZstdDecompress(ZSTD_DECODE), true, startsZstdFrame);
  }
}

/**
 * A streaming encoder with the coding the body arrived in, cheap for the hot path and small per
 * response: gzip and deflate at level 1 ({@link RECODE_ZLIB_LEVEL}), brotli at quality 4
 * ({@link RECODE_BROTLI_QUALITY}) and zstd at level 1 ({@link RECODE_ZSTD_LEVEL}), both with a 256 KiB window;
 * {@link CODING_CHUNK_BYTES} output buffers. `undefined` for identity.
 * @param coding The coding from {@link supportedCoding}.
 * @returns A Transform (decoded bytes in, encoded bytes out), or `undefined` for identity.
 * @throws {Error} zlib's `ERR_ZLIB_INITIALIZATION_FAILED` when it cannot allocate its state.
 */
export function createEncoder(coding: SupportedCoding): Transform | undefined {
  switch (coding) {
    case 'identity':
      return undefined;
    case 'gzip':
      return zlib.createGzip(ZLIB_ENCODE);
    case 'deflate':
      return zlib.createDeflate(ZLIB_ENCODE);
    case 'br':
      return zlib.createBrotliCompress({
        chunkSize: CODING_CHUNK_BYTES,
        params: {
          [zlib.constants.BROTLI_PARAM_QUALITY]: RECODE_BROTLI_QUALITY,
          [zlib.constants.BROTLI_PARAM_LGWIN]: 18,
        },
      });
    case 'zstd':
      return zlib.createZstdCompress(ZSTD_STREAM_ENCODE);
  }
}

/**
 * The decoder, encoder and flush of a patched response body with a content coding (RFC 9110 §8.4):
 * {@link createDecoder} and {@link createEncoder}, and a flush that makes the encoder emit what it
 * holds without ending its stream: `Z_SYNC_FLUSH` for gzip and deflate (not `Z_FULL_FLUSH`, zlib's
 * default, which also forgets the window and costs ratio), brotli's `BROTLI_OPERATION_FLUSH`, zstd's
 * `ZSTD_e_flush`. For response-patch.ts `pumpCodedPatch`, which flushes when the upstream pauses.
 * @param coding A coding from {@link supportedCoding} other than identity.
 * @returns The codec; its streams are new.
 * @throws {Error} For identity, which has no codec.
 */
export function createPatchCodec(coding: Exclude<SupportedCoding, 'identity'>): PatchCodec {
  const decoder = createDecoder(coding);
  const encoder = createEncoder(coding) as zlib.Gzip | zlib.BrotliCompress | zlib.ZstdCompress | undefined;
  if (decoder === undefined || encoder === undefined) throw new Error(`no codec for ${coding}`);
  const kind = FLUSH_KIND[coding];
  return { decoder, encoder, flush: () => encoder.flush(kind) };
}

/** The flush operation of each coding's encoder ({@link createPatchCodec}). */
const FLUSH_KIND = {
  gzip: zlib.constants.Z_SYNC_FLUSH,
  deflate: zlib.constants.Z_SYNC_FLUSH,
  br: zlib.constants.BROTLI_OPERATION_FLUSH,
  zstd: zlib.constants.ZSTD_e_flush,
} as const;

/**
 * Whether two bytes start a zlib stream (RFC 1950 §2.2: CM = 8, and CMF·256 + FLG a multiple of 31).
 * @param cmf The first byte (0–255).
 * @param flg The second byte (0–255).
 * @returns `true` for a zlib header; `false` means raw deflate.
 * @throws Nothing.
 * @example looksLikeZlib(0x78, 0x9c) // → true
 */
export function looksLikeZlib(cmf: number, flg: number): boolean {
  return (cmf & 0x0f) === 8 && (cmf * 256 + flg) % 31 === 0;
}

/** The magic number of a zstd frame (RFC 8878 §3.1.1: 0xFD2FB528, little-endian). */
const ZSTD_MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);
/** The last three bytes of a skippable frame's magic number (RFC 8878 §3.1.2: 0x184D2A5?, little-endian). */
const SKIPPABLE_MAGIC_TAIL = Buffer.from([0x2a, 0x4d, 0x18]);

/**
 * Whether bytes left over after a zstd frame begin another one (RFC 8878 §3): a frame's magic number, or
 * a skippable frame's (0x184D2A50–0x184D2A5F), or the beginning of either when the chunk ended inside it.
 * @param rest The bytes after the end of a frame, at least one.
 * @returns `true` when they (may) begin a frame: the decoder goes on with a new inner decoder.
 * @throws Nothing.
 * @example startsZstdFrame(Buffer.from([0x28, 0xb5])) // → true: a frame's magic, cut by the chunk
 */
export function startsZstdFrame(rest: Buffer): boolean {
  const n = Math.min(rest.length, 4);
  if (rest.subarray(0, n).equals(ZSTD_MAGIC.subarray(0, n))) return true;
  return (rest[0]! & 0xf0) === 0x50 && rest.subarray(1, n).equals(SKIPPABLE_MAGIC_TAIL.subarray(0, n - 1));
}

/**
 * Bytes after the end of the compressed data: the inner decoder (zlib, brotli, zstd) ended on its own
 * and consumed less than it was given. Node's inflate, brotli and zstd streams then drop the rest in
 * silence (gunzip decodes further members, or fails), and Node's zstd stream ends after the first
 * frame of several (RFC 8878 §3 allows more): passed on, the client got a response that looked whole
 * with part of the body missing. Refused as a body that does not decode instead (`Z_DATA_ERROR`).
 * Called once a write's callback ran, when the inner decoder has processed the whole chunk or reached
 * the end of its stream: it consumed less only in the second case (whether its `'end'` was emitted yet
 * or not: a paused consumer holds it back).
 * @returns The error for the decoder, or `undefined` while nothing was left over.
 */
function trailingBytes(inner: Transform, written: number): Error | undefined {
  const consumed = (inner as Transform & { bytesWritten?: number }).bytesWritten;
  if (consumed === undefined || consumed >= written) return undefined;
  return Object.assign(new Error('bytes after the end of the compressed data'), { code: 'Z_DATA_ERROR' });
}

/**
 * A zlib decoder created from the body's first two bytes (or never, for an empty body); keeps the
 * consumer's backpressure (the inner stream pauses while this one's buffer is full).
 */
class LazyDecoder extends Transform {
  private inner: Transform | undefined;
  private first: Buffer | undefined;
  private readonly create: (b0: number, b1: number) => Transform;
  /** Whether bytes after the end of the compressed data are refused ({@link trailingBytes}). */
  private readonly strictEnd: boolean;
  /** Bytes written to the inner decoder so far (compared with what it consumed, `bytesWritten`). */
  private written = 0;
  /**
   * Whether bytes left over when the inner decoder ended begin another frame, which a new inner decoder
   * decodes (zstd: {@link startsZstdFrame}); absent: they are refused ({@link trailingBytes}).
   */
  private readonly nextFrame: ((rest: Buffer) => boolean) | undefined;

  constructor(
    create: (b0: number, b1: number) => Transform,
    strictEnd = true,
    nextFrame?: (rest: Buffer) => boolean,
  ) {
    super();
    this.create = create;
    this.strictEnd = strictEnd;
    this.nextFrame = nextFrame;
  }

  /** The inner decoder's verdict on what it consumed, for a write's callback or the end. */
  private leftOver(inner: Transform): Error | undefined {
    return this.strictEnd ? trailingBytes(inner, this.written) : undefined;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, callback: TransformCallback): void {
    if (this.inner === undefined) {
      const head = this.first === undefined ? chunk : Buffer.concat([this.first, chunk]);
      if (head.length < 2) {
        this.first = head;
        callback();
        return;
      }
      this.first = undefined;
      this.start(head);
      chunk = head;
    }
    this.feed(chunk, callback);
  }

  /**
   * Writes `chunk` to the inner decoder; when it ended with bytes of `chunk` left over that begin
   * another frame, a new inner decoder takes them, once the first has given all of its output.
   */
  private feed(chunk: Buffer, callback: TransformCallback): void {
    const inner = this.inner as Transform;
    this.written += chunk.length;
    inner.write(chunk, () => {
      const error = this.leftOver(inner);
      if (error === undefined || this.nextFrame === undefined) {
        callback(error);
        return;
      }
      const consumed = (inner as Transform & { bytesWritten?: number }).bytesWritten ?? this.written;
      const rest = chunk.subarray(chunk.length - (this.written - consumed));
      if (!this.nextFrame(rest)) {
        callback(error);
        return;
      }
      const next = () => {
        this.written = 0;
        this.start(rest);
        this.feed(rest, callback);
      };
      if (inner.readableEnded) next();
      else inner.once('end', next);
    });
  }

  /** Creates the inner decoder from the body's first bytes (one, for a one-byte body). */
  private start(head: Buffer): Transform {
    const inner = this.create(head[0] as number, head[1] ?? -1);
    inner.on('data', (d: Buffer) => {
      if (!this.push(d)) this.inner?.pause();
    });
    inner.on('error', (err) => this.destroy(err));
    this.inner = inner;
    return inner;
  }

  override _read(size: number): void {
    this.inner?.resume();
    super._read(size);
  }

  override _flush(callback: TransformCallback): void {
    if (this.inner === undefined && this.first === undefined) {
      callback(); // an empty body
      return;
    }
    if (this.inner === undefined) {
      // A one-byte body: the decoder decides (brotli's empty stream is the one byte 0x3b; for the
      // others it is truncated, and the inner decoder's error says so).
      const first = this.first as Buffer;
      this.first = undefined;
      this.start(first);
      this.written = first.length;
      (this.inner as unknown as Transform).write(first);
    }
    const inner = this.inner as unknown as Transform;
    // Ended on its own at the end of the compressed data (checked for bytes after it as they came):
    // its 'end' has passed, and waiting for another left the response hanging.
    if (inner.readableEnded) {
      callback(this.leftOver(inner));
      return;
    }
    inner.once('end', () => callback(this.leftOver(inner)));
    inner.end();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.inner?.destroy();
    callback(err);
  }
}
