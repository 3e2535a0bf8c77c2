/**
 * Attack: decompression bombs against the process-wide memory bound. A legacy client's coded body on a
 * rewritten route is decoded to be rewritten; the decoder's window (brotli up to 16 MiB, zstd up to
 * 8 MiB) and its output (up to `MAX_REWRITE_BODY`) were held outside `MAX_BUFFERED_BYTES`: 200
 * concurrent 204-byte brotli bodies, each 100 MB of whitespace, took the shim past 1 GB before their
 * 413s (any non-empty API key will do). Now the decode's working memory, the window its body declares
 * and the output limit, is reserved before it starts; without room, 503 with `Retry-After` and no
 * decoding. docs/reliability.md fix 134.
 *
 * Deterministic here: a budget whose request share (three quarters of `MAX_BUFFERED_BYTES`, 2 MiB) is
 * smaller than the 4 MiB window Node's brotli encoder declares, so one request shows it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENCODE_SYNC } from '../helpers/codings.ts';
import { send } from '../helpers/http.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    MAX_REWRITE_BODY: '1mb',
    MAX_BUFFERED_BYTES: '2800000',
  });
});
afterAll(() => stack.close());

/** 20 MB of spaces in a coding: a few dozen bytes (brotli) to some 20 KB (gzip). */
const bomb = (coding: 'br' | 'gzip') => ENCODE_SYNC[coding](Buffer.alloc(20_000_000, 0x20));

describe('a decompression bomb to a rewritten route', () => {
  it('whose decoder cannot be given room in the budget is refused 503 before it is decoded', async () => {
    const body = bomb('br');
    expect(body.length).toBeLessThan(100);
    const reply = await send(
      stack.url,
      'POST',
      '/missions',
      { ...LEGACY, 'content-type': 'application/json', 'content-encoding': 'br' },
      body,
    );
    expect(reply.status).toBe(503);
    expect(reply.headers['retry-after']).toBe('1');
    const { values } = await stack.metrics.rejections.get();
    expect(values.find((v) => v.labels.reason === 'buffer_budget')?.value).toBe(1);
  });

  it('whose decoder fits (gzip: 64 KiB and the output limit) is decoded up to the limit and refused 413', async () => {
    const reply = await send(
      stack.url,
      'POST',
      '/missions',
      { ...LEGACY, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      bomb('gzip'),
    );
    expect(reply.status).toBe(413);
  });
});
