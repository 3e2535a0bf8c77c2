/**
 * A refused upload's answer reaches its client (RFC 9112 §9.6, the staged close). The shim refuses a
 * request whose body it will not read (here 401, at the credential gate) with `Connection: close`. A
 * socket closed while the client is still sending is reset, and a client busy sending fails its next
 * write and never reads the answer: ~1 % of refused 200 MB `curl -T` uploads ended with "Send failure:
 * Connection reset by peer" (an audit, 2026-11-25). Now the shim half-closes and reads and drops what
 * the client still sends until it closes its side, at most `LINGER_MS`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRaw } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { sendOnThenRead } from '../helpers/refused-upload.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

let raw: RawUpstream;
let stack: Stack;
beforeAll(async () => {
  raw = await startRawUpstream(() => {});
  stack = await startStack({ UPSTREAM_URL: raw.url });
});
afterAll(async () => {
  await stack.close();
  await raw.close();
});

const CHUNK = Buffer.alloc(256 * 1024, 0x61);

describe('a refused upload', () => {
  it('its client, still sending when the refusal was written, can send on and read the 401', async () => {
    const text = await sendOnThenRead(
      stack,
      'POST /upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\n' +
        `Content-Type: application/octet-stream\r\nContent-Length: ${64 * CHUNK.length}\r\n\r\n`,
      CHUNK.toString('latin1'),
      'credentials',
    );
    expect(text).toMatch(/^HTTP\/1\.1 401 /);
    expect(text).toMatch(/\r\nConnection: close\r\n/i);
  });

  it('a request the parser refuses (two Content-Length), its client still sending: it sends on and reads the 400', async () => {
    const text = await sendOnThenRead(
      stack,
      'POST /upload HTTP/1.1\r\nHost: shim.test\r\nContent-Length: 10\r\nContent-Length: 20\r\n\r\n',
      CHUNK.toString('latin1'),
      'malformed',
    );
    expect(text).toMatch(/^HTTP\/1\.1 400 /);
  });

  it('a refusal, then broken framing later in the same body: the client still reads the refusal', async () => {
    const text = await sendOnThenRead(
      stack,
      'POST /upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n',
      `zz\r\n${CHUNK.toString('latin1')}`,
      'credentials',
    );
    expect(text).toMatch(/^HTTP\/1\.1 401 /);
  });

  it('an upstream that fails while the body is still coming: 502 with Connection: close, and the connection closes', async () => {
    const failing = await startRawUpstream((socket, received) => {
      if (received.length > 200_000) socket.resetAndDestroy();
    });
    const shim = await startStack({ UPSTREAM_URL: failing.url });
    try {
      const client = openRaw(shim.url);
      client.socket.write(
        `POST /upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\nContent-Length: ${64 * CHUNK.length}\r\n\r\n`,
      );
      // The client sends on while it can.
      void (async () => {
        for (let i = 0; i < 64 && client.socket.writable; i++) {
          await new Promise<void>((resolve) => client.socket.write(CHUNK, () => resolve()));
        }
      })();
      await waitFor(() => client.text().includes('\r\n\r\n{'), { what: 'the 502' });
      expect(client.text()).toMatch(/^HTTP\/1\.1 502 /);
      expect(client.text()).toMatch(/\r\nConnection: close\r\n/i);
      // Before: the 502 kept the connection alive with the body paused, and the client's writes stalled.
      await client.closed;
    } finally {
      await shim.close();
      await failing.close();
    }
  });
});
