/**
 * A streaming decoder (src/proxy/content-coding.ts `createDecoder`) read late, as a slow client reads:
 * bytes after the end of the compressed data must still fail the body (docs/reliability.md fix 52).
 * In the system tier: the consumer is paced by a timer (a read pass every millisecond; nothing here
 * measures time), since a late reader is what holds the inner decoder's 'end' back.
 */
import { once } from 'node:events';
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { createDecoder } from '../../src/proxy/content-coding.ts';

describe('streaming decoders read late', () => {
  it.each(['deflate', 'br', 'zstd'] as const)(
    '%s: a byte after the end fails with a slow consumer too (the decoder paused, its end held back)',
    async (coding) => {
      // A large body read late: the inner decoder reaches the end of its
      // stream while its output still waits, so its 'end' comes only after the last write's callback.
      const raw = Buffer.from('abcdefghij{"x":1},'.repeat(120_000));
      const compress = {
        deflate: zlib.deflateSync,
        br: zlib.brotliCompressSync,
        zstd: zlib.zstdCompressSync,
      };
      const body = Buffer.concat([compress[coding](raw), Buffer.from('garbage!')]);
      const decoder = createDecoder(coding)!;
      decoder.pause();
      let settled: string | undefined;
      decoder.on('error', (err: NodeJS.ErrnoException) => {
        settled = `error ${err.code}`;
      });
      decoder.on('end', () => {
        settled = 'ended';
      });
      const writing = (async () => {
        for (let i = 0; i < body.length; i += 5_000) {
          if (!decoder.write(body.subarray(i, i + 5_000))) await once(decoder, 'drain');
        }
        decoder.end();
      })().catch(() => undefined);
      // Read late: a pass every millisecond (pacing only; nothing here measures time).
      while (settled === undefined) {
        while (decoder.read() !== null);
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      await writing;
      expect(settled).toMatch(/^error Z_/);
    },
  );
});
