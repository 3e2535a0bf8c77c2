/**
 * An upstream that answers an upload before reading it (a 401, 404 or 413) and closes the connection at
 * once, without the staged close RFC 9112 §9.6 asks for: gunicorn's workers do (`socket.close()` with
 * the body unread, which resets the connection). Its response reaches the shim before its reset; the
 * shim must relay it, not fail the request with 502 on its next write of the body (docs/reliability.md
 * fix 59). Go's `net/http`, uvicorn and aiohttp close in stages, and were relayed before too.
 */
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openRaw } from '../helpers/http.ts';
import { closeAll, closeLater, stackOn } from '../helpers/one-shot-upstream.ts';
import { waitFor } from '../helpers/poll.ts';
import { startRawUpstream } from '../helpers/raw-upstream.ts';
import { spawnShim } from '../helpers/spawn-shim.ts';
import { CURRENT } from '../helpers/stack.ts';

afterEach(closeAll);

const HEALTH = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';
const EARLY_BODY = '{"error":"not found"}';
const EARLY = `HTTP/1.1 404 NOT FOUND\r\nContent-Type: application/json\r\nContent-Length: ${EARLY_BODY.length}\r\nConnection: close\r\n\r\n${EARLY_BODY}`;

describe('an upload the upstream answers early, then resets', () => {
  it('the client gets the upstream’s answer, not 502', async () => {
    let client: net.Socket | undefined;
    const upstream = await startRawUpstream((socket, received) => {
      const s = socket as net.Socket & { answered?: boolean };
      if (s.answered || !received.includes('\r\n\r\n')) return;
      s.answered = true;
      if (received.startsWith('GET /api/health ')) {
        socket.write(HEALTH);
        return;
      }
      // gunicorn's order: the answer, then close() with the body unread (a reset). The client's next
      // body bytes are sent first, so that the shim reads them, and writes them upstream, before it
      // reads the answer: the write fails on the reset connection.
      client?.write(Buffer.alloc(64 * 1024, 0x61));
      socket.write(EARLY);
      socket.resetAndDestroy();
    });
    closeLater(upstream);
    const stack = await stackOn(upstream);
    const raw = openRaw(stack.url);
    client = raw.socket;
    await once(client, 'connect');
    client.write(
      'POST /files/upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nx-api-key: k\r\n' +
        `Content-Type: application/octet-stream\r\nContent-Length: ${8 * 1024 * 1024}\r\n\r\n`,
    );
    client.write(Buffer.alloc(64 * 1024, 0x61));
    // A whole response: the upstream's (its JSON body) or the shim's 502 (a JSON body too).
    await waitFor(() => /\r\n\r\n[\s\S]*\}/.test(raw.text()), {
      timeoutMs: 10_000,
      what: 'the response to the upload',
    });
    client.destroy();
    expect(raw.text().split('\r\n')[0]).toBe('HTTP/1.1 404 NOT FOUND');
    expect(raw.text()).toContain(`\r\n\r\n${EARLY_BODY}`);
  });
});

// hyper 0.14 answers a body it will not read without `Connection: close`, then closes the connection
// with the body unread (a reset). Fix 59 dropped the refused writes, so the request finished and Node's
// agent pooled the dead connection: the next request took it, and a POST (never replayed) got 502 in
// 18 of 30 tries (docs/reliability.md fix 169).
describe('an upload the upstream answers early without Connection: close, then resets', () => {
  it('the connection is not pooled: the next POST goes on a connection of its own and is answered', async () => {
    const DENIED =
      'HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';
    const OK =
      'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}';
    const upstream = await startRawUpstream((socket, received) => {
      const s = socket as net.Socket & { answered?: boolean };
      if (s.answered || !received.includes('\r\n\r\n')) return;
      s.answered = true;
      if (received.startsWith('POST /deny ')) {
        socket.write(DENIED);
        socket.resetAndDestroy();
      } else {
        socket.end(OK);
      }
    });
    closeLater(upstream);
    // The shim in a process of its own: in this one, the upstream's reset and the shim's reads share an
    // event loop, and the dead connection was never pooled in time to be taken (the race did not show).
    const shim = await spawnShim({ UPSTREAM_URL: upstream.url });
    const stack = { url: shim.url };
    // One client connection, as a client's keep-alive pool with one socket: each request goes once the
    // one before it has sent its whole body and read its whole response.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const post = (path: string, body: Buffer) =>
      new Promise<number | string>((resolve) => {
        const req = http.request(
          `${stack.url}${path}`,
          { method: 'POST', agent, headers: { ...CURRENT, 'content-length': body.length } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
        req.end(body);
      });
    const upload = Buffer.alloc(4 * 1024 * 1024, 0x61);
    const statuses: Array<number | string> = [];
    try {
      for (let round = 0; round < 10; round++) {
        statuses.push(await post('/deny', upload));
        statuses.push(await post('/next', Buffer.from('{}')));
      }
    } finally {
      agent.destroy();
      await shim.stop();
    }
    expect(statuses).toEqual(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? 401 : 200)));
  });
});

// Fix 59 drops a refused write only while the socket reads on, which is what brings the reset to the
// shim. A socket paused by backpressure (its response waits for a client that is slow to take it)
// reads nothing until the client does: a dropped write there left the exchange open on a dead
// connection, and the reset was never reported — until UPSTREAM_TIMEOUT_MS cut it as a stalled
// client, or for as long as the client went on sending (docs/reliability.md fix 71).
describe('an upload whose upstream resets mid-response while the client is not reading', () => {
  it('is cut at the next write, and counted as an upstream reset', async () => {
    let upstreamSocket: net.Socket | undefined;
    const upstream = await startRawUpstream((socket, received) => {
      const s = socket as net.Socket & { answered?: boolean };
      if (s.answered || !received.includes('\r\n\r\n')) return;
      s.answered = true;
      upstreamSocket = socket;
      // A response the size of which no socket buffer holds: the shim's client never reads it.
      socket.write(
        'HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n',
      );
      const piece = Buffer.alloc(1024 * 1024, 0x62);
      for (let i = 0; i < 16; i++)
        socket.write(`${piece.length.toString(16)}\r\n${piece.toString('latin1')}\r\n`);
    });
    closeLater(upstream);
    const stack = await stackOn(upstream, { UPSTREAM_TIMEOUT_MS: '30000' });
    const { port } = new URL(stack.url);
    const client = net.connect(Number(port), '127.0.0.1');
    client.on('error', () => {});
    await once(client, 'connect');
    client.pause();
    client.write(
      'POST /files/upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nx-api-key: k\r\n' +
        `Content-Type: application/octet-stream\r\nContent-Length: ${8 * 1024 * 1024}\r\n\r\n`,
    );
    // REQUEST_BUFFER_BYTES (64 KiB): read before the upstream is contacted, then the upload streams.
    client.write(Buffer.alloc(64 * 1024, 0x61));
    // The shim's upstream socket paused: the client's response is full.
    const pooled = () => Object.values(stack.shim.forwarder.agent.sockets).flat() as net.Socket[];
    await waitFor(() => pooled()[0]?.isPaused() === true, {
      timeoutMs: 10_000,
      what: 'backpressure upstream',
    });
    upstreamSocket?.resetAndDestroy();
    await waitFor(() => upstream.connections() === 1 && upstreamSocket?.destroyed, { what: 'the reset' });
    // The client's next body bytes: written upstream, refused.
    client.write(Buffer.alloc(1024, 0x61));
    const line = await waitFor(() => stack.logs().find((l) => l.msg === 'request completed'), {
      timeoutMs: 10_000,
      what: 'the request line',
    });
    client.destroy();
    expect(line).toMatchObject({ aborted: true, upstreamError: 'ECONNRESET' });
    expect(line).not.toHaveProperty('clientStalled');
  });
});
