import { once } from 'node:events';
/**
 * Decoding and re-encoding around a response patch (RFC 9110 §8.4), bounded against decompression bombs.
 */
import zlib from 'node:zlib';
import { describe, expect, it, vi } from 'vitest';
import {
  CODING_CHUNK_BYTES,
  createDecoder,
  createEncoder,
  createPatchCodec,
  DECODER_WINDOW_BYTES,
  DecodedTooLargeError,
  declaredWindowBytes,
  decodeBody,
  encodeBody,
  looksLikeZlib,
  RECODE_BROTLI_QUALITY,
  RECODE_ZLIB_LEVEL,
  RECODE_ZSTD_LEVEL,
  SUPPORTED_CODINGS,
  type SupportedCoding,
  startsZstdFrame,
  supportedCoding,
} from '../../../src/proxy/content-coding.ts';

const MB = 1024 * 1024;
const JSON_BODY = Buffer.from(
  JSON.stringify({ data: [{ metadata: { a: 1 }, name: 'ü €' }], count: 1 }),
  'utf8',
);

describe('supportedCoding', () => {
  it.each<[string | undefined, SupportedCoding | undefined]>([
    [undefined, 'identity'],
    ['', 'identity'],
    ['identity', 'identity'],
    ['IDENTITY', 'identity'],
    ['gzip', 'gzip'],
    ['GZIP', 'gzip'],
    [' gzip ', 'gzip'],
    ['x-gzip', 'gzip'],
    ['X-GZIP', 'gzip'],
    ['deflate', 'deflate'],
    ['Deflate', 'deflate'],
    ['br', 'br'],
    ['BR', 'br'],
    ['zstd', 'zstd'],
    ['ZSTD', 'zstd'],
    ['gzip, br', undefined],
    ['gzip,gzip', undefined],
    ['zstd, gzip', undefined],
    ['compress', undefined],
    ['x-compress', undefined],
    ['bzip2', undefined],
    ['gzip;q=1', undefined],
  ])('%j → %s', (value, expected) => {
    expect(supportedCoding(value)).toBe(expected);
  });
});

describe('SUPPORTED_CODINGS', () => {
  it('lists exactly the codings supportedCoding accepts, each by its own name', () => {
    for (const coding of SUPPORTED_CODINGS) expect(supportedCoding(coding)).toBe(coding);
    expect([...SUPPORTED_CODINGS].sort()).toEqual(['br', 'deflate', 'gzip', 'identity', 'zstd']);
  });
});

describe('decodeBody / encodeBody', () => {
  it.each<SupportedCoding>(['identity', 'gzip', 'deflate', 'br', 'zstd'])(
    'round-trips %s',
    async (coding) => {
      const encoded = await encodeBody(JSON_BODY, coding);
      if (coding !== 'identity') expect(encoded.equals(JSON_BODY)).toBe(false);
      expect((await decodeBody(encoded, coding, MB)).equals(JSON_BODY)).toBe(true);
    },
  );

  it.each<SupportedCoding>(['identity', 'gzip', 'deflate', 'br', 'zstd'])(
    'round-trips an empty body with %s',
    async (coding) => {
      const encoded = await encodeBody(Buffer.alloc(0), coding);
      expect(await decodeBody(encoded, coding, MB)).toHaveLength(0);
    },
  );

  it.each<[SupportedCoding, (b: Buffer) => Buffer]>([
    ['gzip', zlib.gunzipSync],
    ['deflate', zlib.inflateSync],
    ['br', zlib.brotliDecompressSync],
    ['zstd', zlib.zstdDecompressSync],
  ])('encodes %s so that a standard decoder reads it', async (coding, decode) => {
    expect(decode(await encodeBody(JSON_BODY, coding)).equals(JSON_BODY)).toBe(true);
  });

  it('decodes raw deflate (no zlib wrapper), as some servers send', async () => {
    const raw = zlib.deflateRawSync(JSON_BODY);
    expect((await decodeBody(raw, 'deflate', MB)).equals(JSON_BODY)).toBe(true);
  });

  it('returns an identity body as is, whatever its size', async () => {
    const big = Buffer.alloc(2 * MB);
    expect(await decodeBody(big, 'identity', MB)).toBe(big);
  });

  it('decodes a body of exactly maxBytes', async () => {
    const body = Buffer.alloc(4096, 'a');
    expect(await decodeBody(zlib.gzipSync(body), 'gzip', 4096)).toHaveLength(4096);
  });

  describe('decompression bombs', () => {
    const zeros = Buffer.alloc(10 * MB);

    it.each<[SupportedCoding, Buffer]>([
      ['gzip', zlib.gzipSync(zeros)],
      ['deflate', zlib.deflateSync(zeros)],
      ['deflate', zlib.deflateRawSync(zeros)],
      ['br', zlib.brotliCompressSync(zeros)],
      ['zstd', zlib.zstdCompressSync(zeros)],
    ])('rejects %s of 10 MB of zeros with maxBytes 1 MB', async (coding, bomb) => {
      expect(bomb.length).toBeLessThan(64 * 1024);
      await expect(decodeBody(bomb, coding, MB)).rejects.toBeInstanceOf(DecodedTooLargeError);
    });

    it('rejects one byte over the limit', async () => {
      const body = zlib.gzipSync(Buffer.alloc(4097, 'a'));
      await expect(decodeBody(body, 'gzip', 4096)).rejects.toBeInstanceOf(DecodedTooLargeError);
    });
  });

  describe('corrupt input', () => {
    const garbage = Buffer.from([0xff, 0xff, 0xff, 0xff, 0x00, 0x01, 0x02, 0x03]);

    it.each<[SupportedCoding, Buffer]>([
      ['gzip', garbage],
      ['gzip', JSON_BODY],
      ['gzip', zlib.gzipSync(JSON_BODY).subarray(0, 12)],
      ['deflate', garbage],
      ['br', garbage],
      ['zstd', garbage],
      ['zstd', zlib.zstdCompressSync(JSON_BODY).subarray(0, 12)],
      // A tail past the end of the compressed data: refused, not dropped (fix 136).
      ['zstd', Buffer.concat([zlib.zstdCompressSync(JSON_BODY), garbage])],
      ['br', Buffer.concat([zlib.brotliCompressSync(JSON_BODY), garbage])],
      ['deflate', Buffer.concat([zlib.deflateSync(JSON_BODY), garbage])],
      ['deflate', Buffer.concat([zlib.deflateRawSync(JSON_BODY), garbage])],
    ])('rejects corrupt %s with a zlib error', async (coding, body) => {
      const result = decodeBody(body, coding, MB);
      await expect(result).rejects.toThrow();
      await expect(result).rejects.not.toBeInstanceOf(DecodedTooLargeError);
    });
  });
});

describe('streaming decoders and encoders', () => {
  const roundTrip = async (coding: Exclude<SupportedCoding, 'identity'>, input: Buffer, split = 7) => {
    const encoder = createEncoder(coding)!;
    const decoder = createDecoder(coding)!;
    const chunks: Buffer[] = [];
    const encoded = await new Promise<Buffer>((resolve, reject) => {
      const parts: Buffer[] = [];
      encoder.on('data', (d: Buffer) => parts.push(d));
      encoder.on('end', () => resolve(Buffer.concat(parts)));
      encoder.on('error', reject);
      encoder.end(input);
    });
    return new Promise<Buffer>((resolve, reject) => {
      decoder.on('data', (d: Buffer) => chunks.push(d));
      decoder.on('end', () => resolve(Buffer.concat(chunks)));
      decoder.on('error', reject);
      for (let i = 0; i < encoded.length; i += split) decoder.write(encoded.subarray(i, i + split));
      decoder.end();
    });
  };

  it.each(['gzip', 'deflate', 'br', 'zstd'] as const)(
    '%s round-trips across small chunk boundaries',
    async (coding) => {
      const input = Buffer.from(JSON.stringify({ metadata: Array.from({ length: 500 }, (_, i) => i) }));
      expect((await roundTrip(coding, input)).equals(input)).toBe(true);
    },
  );

  /** Everything `stream` emits once `input` is written to it and it ends, chunk by chunk. */
  const chunksOf = (stream: NodeJS.ReadWriteStream, input: Buffer) =>
    new Promise<Buffer[]>((resolve, reject) => {
      const parts: Buffer[] = [];
      stream.on('data', (d: Buffer) => parts.push(d));
      stream.on('end', () => resolve(parts));
      stream.on('error', reject);
      stream.end(input);
    });

  it('gzip and deflate re-encode at level 1 (RECODE_ZLIB_LEVEL): their headers say so', async () => {
    expect(RECODE_ZLIB_LEVEL).toBe(1);
    // RFC 1952 §2.3.1: XFL = 4, "compressor used fastest algorithm"; RFC 1950 §2.2: FLEVEL 0, "fastest".
    const gzip = Buffer.concat(await chunksOf(createEncoder('gzip')!, JSON_BODY));
    expect(gzip[8]).toBe(4);
    const deflate = Buffer.concat(await chunksOf(createEncoder('deflate')!, JSON_BODY));
    expect(deflate[1]! >> 6).toBe(0);
    expect((await encodeBody(JSON_BODY, 'gzip'))[8]).toBe(4);
    expect((await encodeBody(JSON_BODY, 'deflate'))[1]! >> 6).toBe(0);
  });

  it('brotli re-encodes at quality 4 (RECODE_BROTLI_QUALITY): the same bytes as a one-shot encoder at 4', async () => {
    expect(RECODE_BROTLI_QUALITY).toBe(4);
    const input = Buffer.from(
      JSON.stringify({ data: Array.from({ length: 300 }, (_, i) => ({ i, s: `v${i * 7}` })) }),
    );
    const at = (quality: number) =>
      zlib.brotliCompressSync(input, {
        params: { [zlib.constants.BROTLI_PARAM_QUALITY]: quality, [zlib.constants.BROTLI_PARAM_LGWIN]: 18 },
      });
    expect(at(4).equals(at(5))).toBe(false);
    const streamed = Buffer.concat(await chunksOf(createEncoder('br')!, input));
    expect(streamed.equals(at(4))).toBe(true);
    // A rewritten request body (encodeBody): the same quality, with the body's size as the hint.
    const whole = zlib.brotliCompressSync(input, {
      params: {
        [zlib.constants.BROTLI_PARAM_QUALITY]: 4,
        [zlib.constants.BROTLI_PARAM_SIZE_HINT]: input.length,
      },
    });
    expect((await encodeBody(input, 'br')).equals(whole)).toBe(true);
  });

  it('zstd re-encodes at level 1 (RECODE_ZSTD_LEVEL): the same bytes as zstd streams and one-shots at 1', async () => {
    expect(RECODE_ZSTD_LEVEL).toBe(1);
    const input = Buffer.from(
      JSON.stringify({ data: Array.from({ length: 3000 }, (_, i) => ({ i, s: `v${i * 7}` })) }),
    );
    const options = (level: number) => ({
      params: { [zlib.constants.ZSTD_c_compressionLevel]: level, [zlib.constants.ZSTD_c_windowLog]: 18 },
    });
    const streamedAt = async (level: number) =>
      Buffer.concat(
        await chunksOf(zlib.createZstdCompress({ ...options(level), chunkSize: CODING_CHUNK_BYTES }), input),
      );
    expect((await streamedAt(1)).equals(await streamedAt(3))).toBe(false);
    const streamed = Buffer.concat(await chunksOf(createEncoder('zstd')!, input));
    expect(streamed.equals(await streamedAt(1))).toBe(true);
    // A rewritten request body (encodeBody): zlib's one-shot zstdCompress at the same level.
    const oneShot = await new Promise<Buffer>((resolve, reject) =>
      zlib.zstdCompress(input, options(1), (err, out) => (err ? reject(err) : resolve(out))),
    );
    expect((await encodeBody(input, 'zstd')).equals(oneShot)).toBe(true);
  });

  it.each(['gzip', 'deflate', 'br', 'zstd'] as const)(
    '%s: the decoder (and the zlib encoders) emit output buffers of CODING_CHUNK_BYTES (64 KiB)',
    async (coding) => {
      // Distinct bytes that compress poorly enough for the encoder to fill a buffer too.
      const input = Buffer.alloc(400 * 1024);
      for (let i = 0; i < input.length; i++) input[i] = (i * 2654435761) >>> 24;
      const encoded = await chunksOf(createEncoder(coding)!, input);
      // brotli and zstd hand out what they have compressed so far; zlib fills its buffer first.
      if (coding === 'gzip' || coding === 'deflate') expect(encoded[0]!.length).toBe(CODING_CHUNK_BYTES);
      expect(Math.max(...encoded.map((c) => c.length))).toBeLessThanOrEqual(CODING_CHUNK_BYTES);
      const decoded = await chunksOf(createDecoder(coding)!, Buffer.concat(encoded));
      expect(decoded[0]!.length).toBe(CODING_CHUNK_BYTES);
      expect(Buffer.concat(decoded).equals(input)).toBe(true);
    },
  );

  it('identity needs no stage', () => {
    expect(createDecoder('identity')).toBeUndefined();
    expect(createEncoder('identity')).toBeUndefined();
  });

  it('deflate: raw deflate (no zlib header) is decoded too', async () => {
    const input = Buffer.from('{"metadata":{"a":1}}');
    const decoder = createDecoder('deflate')!;
    const out: Buffer[] = [];
    decoder.on('data', (d: Buffer) => out.push(d));
    const done = new Promise((r) => decoder.on('end', r));
    decoder.end(zlib.deflateRawSync(input));
    await done;
    expect(Buffer.concat(out).equals(input)).toBe(true);
  });

  it('invalid data fails the decoder stream with a zlib code', async () => {
    const decoder = createDecoder('gzip')!;
    const err = await new Promise<NodeJS.ErrnoException>((resolve) => {
      decoder.on('error', resolve);
      decoder.end(Buffer.from('not gzip at all'));
    });
    expect(err.code).toMatch(/^Z_/);
  });

  it('zstd: a frame that declares a window over 8 MiB (RFC 9659) fails the decoder, allocating nothing', async () => {
    // A streaming encoder with a 64 MiB window declares it in the frame header (the size is unknown).
    const encoder = zlib.createZstdCompress({ params: { [zlib.constants.ZSTD_c_windowLog]: 26 } });
    const parts: Buffer[] = [];
    encoder.on('data', (d: Buffer) => parts.push(d));
    const encoded = new Promise<Buffer>((resolve) => encoder.on('end', () => resolve(Buffer.concat(parts))));
    encoder.write('{"metadata":');
    await new Promise<void>((resolve) => encoder.flush(() => resolve()));
    encoder.end('1}');
    const wide = await encoded;
    expect(zlib.zstdDecompressSync(wide).toString()).toBe('{"metadata":1}'); // valid, only too wide
    const decoder = createDecoder('zstd')!;
    const err = await new Promise<NodeJS.ErrnoException>((resolve) => {
      decoder.on('error', resolve);
      decoder.end(wide);
    });
    expect(err.code).toBe('ZSTD_error_frameParameter_windowTooLarge');
    await expect(decodeBody(wide, 'zstd', MB)).rejects.toMatchObject({
      code: 'ZSTD_error_frameParameter_windowTooLarge',
    });
  });

  it.each([
    [0x78, 0x9c, true],
    [0x78, 0x01, true],
    [0x78, 0xda, true],
    [0x7b, 0x22, false], // '{"' — raw deflate or plain text
    [0x78, 0x00, false], // CM = 8, but CMF·256 + FLG is no multiple of 31
    [0x7b, 0x08, false], // a multiple of 31 (31,496), but CM = 11: not deflate
  ])('looksLikeZlib(%i, %i) → %s', (a, b, expected) => expect(looksLikeZlib(a, b)).toBe(expected));
});

describe('streaming decoders on an empty body', () => {
  it.each(['gzip', 'deflate', 'br', 'zstd'] as const)(
    '%s: an empty body decodes to nothing, without an error',
    async (coding) => {
      const decoder = createDecoder(coding)!;
      const out: Buffer[] = [];
      decoder.on('data', (d: Buffer) => out.push(d));
      const result = await new Promise<string>((resolve) => {
        decoder.on('end', () => resolve('end'));
        decoder.on('error', (err) => resolve(`error ${(err as NodeJS.ErrnoException).code}`));
        decoder.end();
      });
      expect(result).toBe('end');
      expect(Buffer.concat(out)).toHaveLength(0);
    },
  );

  it.each([
    ['gzip', 0x1f],
    ['deflate', 0x78],
    ['zstd', 0x28],
  ] as const)('%s: a single byte is truncated data, an error', async (coding, byte) => {
    const decoder = createDecoder(coding)!;
    decoder.resume();
    const err = await new Promise<NodeJS.ErrnoException>((resolve) => {
      decoder.on('error', resolve);
      decoder.end(Buffer.from([byte]));
    });
    expect(err.code).toMatch(/^Z_/); // an invalid upstream body (upstream-error.ts)
  });

  it('br: the one-byte empty stream (0x3b) decodes to an empty body', async () => {
    const decoder = createDecoder('br')!;
    const parts: Buffer[] = [];
    decoder.on('data', (d: Buffer) => parts.push(d));
    decoder.end(zlib.brotliCompressSync(Buffer.alloc(0)));
    await once(decoder, 'end');
    expect(zlib.brotliCompressSync(Buffer.alloc(0))).toHaveLength(1);
    expect(Buffer.concat(parts)).toHaveLength(0);
  });
});

describe('streaming decoders and bytes after the end of the compressed data (reliability.md fix 52)', () => {
  /** How a decoder ends when `body` is written to it in pieces of `split` bytes: its output or its error code. */
  const decodeIn = (coding: SupportedCoding, body: Buffer, split: number) =>
    new Promise<string>((resolve) => {
      const decoder = createDecoder(coding)!;
      const parts: Buffer[] = [];
      decoder.on('data', (d: Buffer) => parts.push(d));
      decoder.on('end', () => resolve(Buffer.concat(parts).toString()));
      decoder.on('error', (err: NodeJS.ErrnoException) => resolve(`error ${err.code}`));
      for (let i = 0; i < body.length; i += split) decoder.write(body.subarray(i, i + split));
      decoder.end();
    });
  const json = Buffer.from('{"metadata":[1]}');
  const encoded: Record<'deflate' | 'br' | 'zstd', Buffer> = {
    deflate: zlib.deflateSync(json),
    br: zlib.brotliCompressSync(json),
    zstd: zlib.zstdCompressSync(json),
  };

  it.each(['deflate', 'br', 'zstd'] as const)(
    '%s: a body that ends exactly decodes, in any pieces',
    async (coding) => {
      for (const split of [1, 3, 1000])
        expect(await decodeIn(coding, encoded[coding], split)).toBe(json.toString());
    },
  );

  it.each(['deflate', 'br', 'zstd'] as const)(
    '%s: a byte after the end fails (it never ended before), in one write or in pieces',
    async (coding) => {
      const body = Buffer.concat([encoded[coding], Buffer.from('x')]);
      for (const split of [1000, 3, 1]) expect(await decodeIn(coding, body, split)).toMatch(/^error /);
    },
  );

  it.each(['gzip', 'deflate', 'br', 'zstd'] as const)(
    '%s: a body cut short fails at its end, in any pieces (a truncated body never looks whole)',
    async (coding) => {
      const whole = { gzip: zlib.gzipSync(json), ...encoded }[coding];
      const cut = whole.subarray(0, whole.length - 3);
      for (const split of [1000, 3]) expect(await decodeIn(coding, cut, split)).toMatch(/^error /);
    },
  );

  it.each(['gzip', 'deflate', 'br', 'zstd'] as const)('%s: destroyed before any byte', (coding) => {
    const decoder = createDecoder(coding)!;
    expect(() => decoder.destroy()).not.toThrow();
    expect(decoder.destroyed).toBe(true);
  });

  it('gzip: zero padding after the member is what Node accepts, and still decodes', async () => {
    const body = Buffer.concat([zlib.gzipSync(json), Buffer.alloc(8)]);
    expect(await decodeIn('gzip', body, 5)).toBe(json.toString());
  });

  it('zstd of several frames decodes whole, wherever the chunks are cut (RFC 8878 §3; fix 137)', async () => {
    const body = Buffer.concat([
      zlib.zstdCompressSync(json.subarray(0, 5)),
      zlib.zstdCompressSync(json.subarray(5)),
      zlib.zstdCompressSync(Buffer.alloc(0)), // Node's streaming encoder ends with an empty frame
    ]);
    for (const split of [1000, 30, 7, 3, 2, 1])
      expect(await decodeIn('zstd', body, split)).toBe(json.toString());
  });

  it('zstd followed by bytes that begin no frame still fails', async () => {
    const body = Buffer.concat([zlib.zstdCompressSync(json), Buffer.from('garbage')]);
    // Refused whichever way: as bytes after the end, or, cut at the frame's end, as a frame of no known kind.
    for (const split of [1000, 7, 1])
      expect(await decodeIn('zstd', body, split)).toMatch(/^error (Z_DATA_ERROR|ZSTD_error_prefix_unknown)$/);
  });
});

describe('createPatchCodec', () => {
  it.each(['gzip', 'deflate', 'br', 'zstd'] as const)(
    '%s: flush makes the encoder emit all it was given, decodable, without ending its stream',
    async (coding) => {
      const codec = createPatchCodec(coding);
      const text = '{"metadata":{"a":1},"x":"ü"}';
      const flushed: Buffer[] = [];
      codec.encoder.on('data', (d: Buffer) => flushed.push(d));
      codec.encoder.write(text);
      codec.flush?.();
      // Writes are processed in order: once an empty one is done, the flush has emitted its output.
      await new Promise((resolve) => codec.encoder.write(Buffer.alloc(0), resolve));
      expect(codec.encoder.writableEnded).toBe(false);
      // What the flush emitted decodes, by the codec's own decoder, to everything written so far.
      const decoded: Buffer[] = [];
      codec.decoder.on('data', (d: Buffer) => decoded.push(d));
      await new Promise((resolve) => codec.decoder.write(Buffer.concat(flushed), resolve));
      expect(Buffer.concat(decoded).toString()).toBe(text);
      codec.encoder.destroy();
      codec.decoder.destroy();
    },
  );

  it('has no codec for identity (nothing to decode or encode)', () => {
    expect(() => createPatchCodec('identity' as never)).toThrow('no codec for identity');
  });
});

describe('streaming decoders stream', () => {
  it('gzip: decoded bytes come out before the body ends', async () => {
    const input = Buffer.from(JSON.stringify({ data: Array.from({ length: 5000 }, (_, i) => i) }));
    const encoded = zlib.gzipSync(input);
    const decoder = createDecoder('gzip')!;
    const out: Buffer[] = [];
    decoder.on('data', (d: Buffer) => out.push(d));
    // All but the trailer (CRC-32 and size, RFC 1952 §2.3): the body has not ended.
    await new Promise((resolve) => decoder.write(encoded.subarray(0, encoded.length - 8), resolve));
    await new Promise((resolve) => setImmediate(resolve));
    const early = Buffer.concat(out);
    expect(early.length).toBeGreaterThan(0);
    expect(input.subarray(0, early.length).equals(early)).toBe(true);
    decoder.destroy();
  });

  it("keeps the consumer's backpressure: the inner decoder pauses while the output waits, and resumes on read", async () => {
    const gunzip = vi.spyOn(zlib, 'createGunzip');
    try {
      // More than one output buffer of the inner decoder (64 KiB), which fills the decoder's (64 KiB).
      const input = Buffer.alloc(100 * 1024, 'a');
      const decoder = createDecoder('gzip')!;
      expect(() => decoder.read()).not.toThrow(); // a read before any byte: nothing to resume yet
      let written = false;
      decoder.write(zlib.gzipSync(input), () => {
        written = true;
      });
      const inner = gunzip.mock.results[0]!.value as zlib.Gunzip;
      await once(inner, 'data');
      expect(inner.isPaused()).toBe(true); // nobody reads: the decoder's buffer is full
      // Once the inner decoder has consumed the body, the decoder still takes no more: it waits for a read.
      await new Promise((resolve) => inner.write(Buffer.alloc(0), resolve));
      expect(written).toBe(false);
      const parts: Buffer[] = [decoder.read() as Buffer];
      expect(inner.isPaused()).toBe(false); // the read asked for more
      await new Promise((resolve) => setImmediate(resolve));
      expect(written).toBe(true);
      decoder.on('data', (d: Buffer) => parts.push(d));
      decoder.end();
      await once(decoder, 'end');
      expect(Buffer.concat(parts).equals(input)).toBe(true);
    } finally {
      gunzip.mockRestore();
    }
  });
});

describe('declaredWindowBytes (what a decoder may hold: the window its body declares)', () => {
  const text = Buffer.from('{"data":[' + '{"metadata":{"k":"v"}},'.repeat(20_000) + '{}]}');
  it.each([10, 16, 17, 18, 22, 24])('brotli with lgwin %i: 2^lgwin', (lgwin) => {
    const body = zlib.brotliCompressSync(text, { params: { [zlib.constants.BROTLI_PARAM_LGWIN]: lgwin } });
    expect(declaredWindowBytes('br', body)).toBe(2 ** lgwin);
  });

  it('zstd: the Window_Descriptor of a streamed frame, the content size of a single-segment one, at most 8 MiB', () => {
    const streamed = (windowLog: number) => {
      const encoder = zlib.createZstdCompress({ params: { [zlib.constants.ZSTD_c_windowLog]: windowLog } });
      const out: Buffer[] = [];
      encoder.on('data', (c: Buffer) => out.push(c));
      encoder.end(text);
      return new Promise<Buffer>((resolve) => encoder.on('end', () => resolve(Buffer.concat(out))));
    };
    return (async () => {
      expect(declaredWindowBytes('zstd', await streamed(20))).toBe(2 ** 20);
      expect(declaredWindowBytes('zstd', await streamed(23))).toBe(2 ** 23);
      expect(declaredWindowBytes('zstd', await streamed(25))).toBe(DECODER_WINDOW_BYTES.zstd);
      // One-shot: a single-segment frame with its content size.
      expect(declaredWindowBytes('zstd', zlib.zstdCompressSync(Buffer.from('{"a":1}')))).toBe(7);
      expect(declaredWindowBytes('zstd', zlib.zstdCompressSync(text))).toBe(Math.min(text.length, 2 ** 23));
    })();
  });

  it.each<[string, Uint8Array]>([
    ['nothing', new Uint8Array(0)],
    ['no zstd magic', Buffer.from('not zstd at all')],
    ['a cut header', Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xe0])],
  ])('the maximum when the head does not say: %s', (_what, head) => {
    expect(declaredWindowBytes('zstd', head)).toBe(DECODER_WINDOW_BYTES.zstd);
    expect(declaredWindowBytes('gzip', head)).toBe(DECODER_WINDOW_BYTES.gzip);
  });
});

describe('startsZstdFrame', () => {
  it.each<[string, number[], boolean]>([
    ['a frame', [0x28, 0xb5, 0x2f, 0xfd, 0x20], true],
    ['a frame, cut after two bytes', [0x28, 0xb5], true],
    ['a skippable frame', [0x5a, 0x2a, 0x4d, 0x18, 0], true],
    ['a skippable frame, cut', [0x50, 0x2a], true],
    ['garbage', [0x67, 0x61, 0x72], false],
    ['a wrong second byte', [0x28, 0x00], false],
  ])('%s → %s', (_what, bytes, starts) => {
    expect(startsZstdFrame(Buffer.from(bytes))).toBe(starts);
  });
});
