/**
 * An upload the upstream answered early and reset (gunicorn's order: the answer, then `close()` with
 * the body unread), relayed since fix 59: the rest of the client's body must still be read (and
 * dropped), so that the client can finish sending and its keep-alive connection serves the next
 * request. Before fix 77 the shim's read of that body waited, paused, for a `drain` of the destroyed
 * upstream request: the connection held its exchange, unread, until the keep-alive timeout reset it
 * (66 s), and a client that sends its whole body before reading (Python `requests`) never saw the answer.
 */
import { once } from 'node:events';
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DISCARD_LIMIT_MS } from '../../src/proxy/upload.ts';
import { LINGER_MS } from '../../src/runtime.ts';
import { openRaw } from '../helpers/http.ts';
import { closeAll, closeLater, stackOn } from '../helpers/one-shot-upstream.ts';
import { waitFor } from '../helpers/poll.ts';
import { startRawUpstream } from '../helpers/raw-upstream.ts';

afterEach(closeAll);

const HEALTH = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';
const EARLY_BODY = '{"error":"not found"}';
const EARLY = `HTTP/1.1 404 NOT FOUND\r\nContent-Type: application/json\r\nContent-Length: ${EARLY_BODY.length}\r\n\r\n${EARLY_BODY}`;
const BODY_BYTES = 4 * 1024 * 1024;
const ROUNDS = 3;

/**
 * A shim in front of an upstream that answers every request but `GET /api/health` early (the 404,
 * then a reset, as gunicorn does), and a raw client connected to it; `response()` is everything the
 * client has read so far (latin1).
 */
async function earlyAnsweringStack(): Promise<{ client: net.Socket; response: () => string }> {
  const upstream = await startRawUpstream((socket, received) => {
    const s = socket as net.Socket & { answered?: boolean };
    if (s.answered || !received.includes('\r\n\r\n')) return;
    s.answered = true;
    if (received.startsWith('GET /api/health ')) {
      socket.write(HEALTH);
      return;
    }
    socket.write(EARLY);
    socket.resetAndDestroy();
  });
  closeLater(upstream);
  const stack = await stackOn(upstream);
  const raw = openRaw(stack.url);
  await once(raw.socket, 'connect');
  return { client: raw.socket, response: raw.text };
}

describe('an upload the upstream answers early, then resets', () => {
  it('the rest of the client’s body is read, and its connection serves the next request', async () => {
    const { client, response } = await earlyAnsweringStack();
    const head = 'Host: shim.test\r\nService-Client-Version: 1.0.0\r\nx-api-key: k\r\n';
    // Several uploads on one connection, each sent whole before its answer is read (as `requests`
    // does), then a GET on the same connection.
    for (let round = 1; round <= ROUNDS; round++) {
      client.write(
        `POST /files/upload HTTP/1.1\r\n${head}Content-Type: application/octet-stream\r\n` +
          `Content-Length: ${BODY_BYTES}\r\n\r\n`,
      );
      let sent = false;
      client.write(Buffer.alloc(BODY_BYTES, 0x61), () => {
        sent = true;
      });
      await waitFor(() => sent && response().split(EARLY_BODY).length > round, {
        timeoutMs: 10_000,
        what: `upload ${round}: its body sent and the upstream's answer relayed`,
      });
    }
    client.write(`GET /api/health HTTP/1.1\r\n${head}\r\n`);
    await waitFor(() => response().endsWith('{}'), {
      timeoutMs: 10_000,
      what: 'the next request on the same connection',
    });
    client.destroy();
    const statuses = response().match(/HTTP\/1\.1 \d{3}/g);
    expect(statuses).toEqual([...Array(ROUNDS).fill('HTTP/1.1 404'), 'HTTP/1.1 200']);
  });

  it(
    'a body that keeps coming after the answer: read and dropped for a bounded time, then the connection closes',
    async () => {
      const { client, response } = await earlyAnsweringStack();
      let closed = false;
      client.once('close', () => {
        closed = true;
      });
      // A 1 GB body announced, sent steadily (64 KiB every 10 ms): never idle, so only a bound on the
      // discard ends it (before fix 78: requestTimeout, 600 s).
      client.write(
        'POST /files/upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nx-api-key: k\r\n' +
          'Content-Type: application/octet-stream\r\nContent-Length: 1000000000\r\n\r\n',
      );
      const piece = Buffer.alloc(64 * 1024, 0x61);
      const sender = setInterval(() => {
        if (!client.destroyed) client.write(piece);
      }, 10);
      try {
        await waitFor(() => response().includes(EARLY_BODY), { timeoutMs: 5_000, what: 'the early answer' });
        const answeredAt = performance.now();
        await waitFor(() => closed || client.readableEnded, {
          timeoutMs: DISCARD_LIMIT_MS + LINGER_MS + 5_000,
          what: 'the shim closing the connection',
        });
        expect(performance.now() - answeredAt).toBeLessThan(DISCARD_LIMIT_MS + LINGER_MS + 3_000);
      } finally {
        clearInterval(sender);
        client.destroy();
      }
      expect(response().startsWith('HTTP/1.1 404')).toBe(true);
    },
    DISCARD_LIMIT_MS + LINGER_MS + 15_000,
  );
});
