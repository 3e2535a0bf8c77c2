/**
 * A drain that begins while a keep-alive response is under way, to a pooled client that does not read
 * its connection while it is idle (urllib3 under `requests`, httpcore under `httpx`): the connection
 * closes in stages once the response ends, and that close must be bounded like the others while
 * draining (`LINGER_IDLE_MS` in all, fix 155). It had no bound at all: the response had said
 * `keep-alive`, so Node never asked for the staged close, and the drain's own close of idle
 * connections had already run; the drain waited for `SHUTDOWN_TIMEOUT_MS` and cut every connection
 * (15,002 ms and the timeout line; review of fix 155, 2026-11-27: fix 157). Real sockets.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { LINGER_IDLE_MS } from '../../src/runtime.ts';
import { waitFor } from '../helpers/poll.ts';
import { startRawUpstream } from '../helpers/raw-upstream.ts';
import { startStack } from '../helpers/stack.ts';

describe('a drain that begins during a keep-alive response to a pooled client', () => {
  it('closes the connection within LINGER_IDLE_MS of the response, not at SHUTDOWN_TIMEOUT_MS', async () => {
    // The upstream streams its response and ends it 1 s later, after the drain has begun.
    const sent = new WeakSet<net.Socket>();
    const raw = await startRawUpstream((socket, received) => {
      if (!received.includes('\r\n\r\n') || sent.has(socket)) return;
      sent.add(socket);
      socket.write(
        'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n',
      );
      setTimeout(() => socket.write('3\r\ndef\r\n0\r\n\r\n'), 1_000);
    });
    const stack = await startStack({ UPSTREAM_URL: raw.url, SHUTDOWN_TIMEOUT_MS: '15000' });
    const socket = net.connect({
      port: Number(new URL(stack.url).port),
      host: '127.0.0.1',
      allowHalfOpen: true,
    });
    let text = '';
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
    });
    socket.on('error', () => {});
    try {
      socket.write(
        'GET /stream HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n\r\n',
      );
      await waitFor(() => text.includes('abc'), { what: 'the head and the first chunk' });
      const started = performance.now();
      const drained = stack.runtime.drain('test');
      await waitFor(() => text.includes('0\r\n\r\n'), { what: 'the whole response' });
      socket.pause(); // pooled and idle: not read until the client next uses it
      await drained;
      expect(performance.now() - started).toBeLessThan(1_000 + LINGER_IDLE_MS + 3_000);
      expect(
        stack.logs().some((l) => l.msg === 'shutdown timeout reached: closing remaining connections'),
      ).toBe(false);
    } finally {
      socket.destroy();
      await stack.close();
      await raw.close();
    }
  }, 40_000);
});
