/**
 * A refused upload's answer reaches its client (RFC 9112 §9.6, the staged close). The shim refuses a
 * request whose body it will not read (here 401, at the credential gate) with `Connection: close`. A
 * socket closed while the client is still sending is reset, and a client busy sending fails its next
 * write and never reads the answer: ~1 % of refused 200 MB `curl -T` uploads ended with "Send failure:
 * Connection reset by peer" (an audit, 2026-11-25). Now the shim half-closes and reads and drops what
 * the client still sends until it closes its side, at most `LINGER_MS`.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
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
    const client = net.connect(Number(new URL(stack.url).port), '127.0.0.1');
    client.pause(); // busy sending: reads nothing yet
    let text = '';
    let failed: Error | undefined;
    client.on('error', (err) => {
      failed = err;
    });
    client.on('data', (d) => {
      text += d.toString('latin1');
    });
    const closed = new Promise((resolve) => client.on('close', resolve));
    await new Promise((resolve) => client.once('connect', resolve));
    client.write(
      'POST /upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\n' +
        `Content-Type: application/octet-stream\r\nContent-Length: ${64 * CHUNK.length}\r\n\r\n`,
    );
    client.write(CHUNK);
    // The shim has answered and ended the response (its log line is written then).
    await waitFor(
      () => stack.logs().some((l) => (l.res as { statusCode?: number } | undefined)?.statusCode === 401),
      { what: 'the 401' },
    );
    // More of the body: refused with a reset if the shim closed the socket with bytes unread.
    for (let i = 0; i < 4 && failed === undefined; i++) {
      await new Promise<void>((resolve) => client.write(CHUNK, () => resolve()));
    }
    expect(failed).toBeUndefined();
    client.resume();
    await waitFor(() => text.includes('\r\n\r\n{'), { what: 'the response' });
    expect(text).toMatch(/^HTTP\/1\.1 401 /);
    expect(text).toMatch(/\r\nConnection: close\r\n/i);
    client.end(); // the client stops and closes its side: the shim closes the connection
    await closed;
  });
});
