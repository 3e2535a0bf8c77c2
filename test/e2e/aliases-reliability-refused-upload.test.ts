/**
 * A legacy client's upload refused on the rewrite path (413 past `MAX_REWRITE_BODY`) still reads the
 * refusal while it is sending (RFC 9112 §9.6). The rewrite had started reading the body, then paused
 * it: during the staged close (runtime.ts) the shim read no more, the client's writes blocked, and the
 * linger's deadline reset it before it had read the 413 (review, 2026-11-25). Now the rest of the body
 * is read and dropped while the connection closes. Goes with `src/aliases/` at 1.0 (the core's case,
 * a 401, is in reliability-refused-upload.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { sendOnThenRead } from '../helpers/refused-upload.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

let raw: RawUpstream;
let stack: Stack;
beforeAll(async () => {
  raw = await startRawUpstream(() => {});
  stack = await startStack({ UPSTREAM_URL: raw.url, MAX_REWRITE_BODY: '1kb' });
});
afterAll(async () => {
  await stack.close();
  await raw.close();
});

/** One chunk of a chunked body: 256 KiB of a JSON string's inside. */
const CHUNK = `40000\r\n${'a'.repeat(0x40000)}\r\n`;

describe('a legacy upload refused with 413 on the rewrite path', () => {
  it('its client, still sending, can send on (the rest is read and dropped) and read the 413', async () => {
    const text = await sendOnThenRead(
      stack,
      'POST /missions HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 0.59.0\r\nX-Api-Key: k\r\n' +
        `Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n{"a":"\r\n${CHUNK}`,
      CHUNK,
      'size',
    );
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
  });
});
