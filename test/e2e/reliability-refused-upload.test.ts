/**
 * A refused upload's answer reaches its client (RFC 9112 §9.6, the staged close). The shim refuses a
 * request whose body it will not read (here 401, at the credential gate) with `Connection: close`. A
 * socket closed while the client is still sending is reset, and a client busy sending fails its next
 * write and never reads the answer: ~1 % of refused 200 MB `curl -T` uploads ended with "Send failure:
 * Connection reset by peer" (an audit, 2026-11-25). Now the shim half-closes and reads and drops what
 * the client still sends until it closes its side: at most `LINGER_MS` (30 s) in all and
 * `LINGER_IDLE_MS` (5 s) without a byte, nginx's `lingering_time` and `lingering_timeout` (fix 153: a
 * total of 5 s reset an upload that took longer, and Apache httpd in front, which reads its backend only
 * once it has sent the whole body, answered its own 502 instead of the 401). Bounds the longer linger
 * must not stretch (fix 155): a drain, and the refusals the HTTP server writes itself; and the log line
 * of a body that turns malformed mid-stream (fix 156).
 */
import { once } from 'node:events';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEAD_REFUSAL_LINGER_MS } from '../../src/proxy/server.ts';
import { LINGER_IDLE_MS, LINGER_MS } from '../../src/runtime.ts';
import { openRaw } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { rejected, sendOnThenRead } from '../helpers/refused-upload.ts';
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

/** A raw client that sent `head` and reads nothing yet; `failed` is its socket error, if any. */
async function refusedClient(head: string) {
  const before = await rejected(stack, 'credentials');
  const client = net.connect(Number(new URL(stack.url).port), '127.0.0.1');
  client.pause();
  const state = { text: '', failed: undefined as Error | undefined };
  client.on('error', (err) => {
    state.failed = err;
  });
  client.on('data', (d: Buffer) => {
    state.text += d.toString('latin1');
  });
  await new Promise((resolve) => client.once('connect', resolve));
  client.write(head, 'latin1');
  await waitFor(async () => (await rejected(stack, 'credentials')) > before, { what: 'the refusal' });
  return { client, state };
}

const UPLOAD_HEAD =
  'POST /upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\n' +
  'Content-Type: application/octet-stream\r\nContent-Length: 1000000000\r\n\r\n';

describe('the linger after a refused upload (fix 153: as nginx, 30 s in all, 5 s between reads)', () => {
  it('an upload that goes on longer than LINGER_IDLE_MS, read only once sent (httpd in front, Python requests): the 401 still arrives', async () => {
    const { client, state } = await refusedClient(UPLOAD_HEAD);
    const piece = Buffer.alloc(64 * 1024, 0x61);
    const until = performance.now() + LINGER_IDLE_MS + 2_000;
    try {
      // 64 KiB every 250 ms for 7 s, each write awaited: the socket must stay open and read.
      while (performance.now() < until && state.failed === undefined) {
        await new Promise<void>((resolve) => client.write(piece, () => resolve()));
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      expect(state.failed).toBeUndefined();
      client.resume();
      await waitFor(() => state.text.includes('\r\n\r\n{'), { what: 'the 401' });
      expect(state.text).toMatch(/^HTTP\/1\.1 401 /);
    } finally {
      client.destroy();
    }
  }, 20_000);

  it(
    'a client that sends nothing more is closed LINGER_IDLE_MS after the refusal, one that never stops after LINGER_MS',
    async () => {
      const connections = () =>
        new Promise<number>((resolve, reject) =>
          stack.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
        );
      await waitFor(async () => (await connections()) === 0, { what: 'no connection left from before' });
      const quiet = await refusedClient(UPLOAD_HEAD);
      const loud = await refusedClient(UPLOAD_HEAD);
      const started = performance.now();
      const piece = Buffer.alloc(16 * 1024, 0x61);
      const sender = setInterval(() => {
        if (!loud.client.destroyed) loud.client.write(piece);
      }, 100);
      try {
        expect(await connections()).toBe(2);
        await waitFor(async () => (await connections()) === 1, {
          what: 'the quiet connection closed',
          timeoutMs: LINGER_IDLE_MS + 3_000,
        });
        expect(performance.now() - started).toBeGreaterThanOrEqual(LINGER_IDLE_MS - 500);
        await waitFor(async () => (await connections()) === 0, {
          what: 'the endless upload closed',
          timeoutMs: LINGER_MS + 5_000,
        });
        expect(performance.now() - started).toBeGreaterThanOrEqual(LINGER_MS - 500);
        expect(performance.now() - started).toBeLessThan(LINGER_MS + 3_000);
      } finally {
        clearInterval(sender);
        quiet.client.destroy();
        loud.client.destroy();
      }
    },
    LINGER_MS + 15_000,
  );
});

/** How many connections the stack's front door has open. */
const openConnections = (on: Stack) =>
  new Promise<number>((resolve, reject) =>
    on.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
  );

describe('a body that turns malformed while it streams upstream', () => {
  it("the client's 400 and the request's log line agree (the line said 200, a status never sent)", async () => {
    const client = net.connect(Number(new URL(stack.url).port), '127.0.0.1');
    client.on('error', () => {});
    let text = '';
    client.on('data', (d: Buffer) => {
      text += d.toString('latin1');
    });
    await once(client, 'connect');
    await malformMidUpload(client, () => text, raw, '/upload-malformed');
    expect(text).toMatch(/^HTTP\/1\.1 400 /);
    const line = await requestLine(stack, '/upload-malformed');
    expect((line.res as { statusCode: number }).statusCode).toBe(400);
    client.destroy();
  });
});

/** A raw client that keeps its side open after the shim's FIN (Node's would close it at once). */
function halfOpenClient(on: Stack) {
  const client = net.connect({ port: Number(new URL(on.url).port), host: '127.0.0.1', allowHalfOpen: true });
  client.on('error', () => {});
  let received = '';
  client.on('data', (d: Buffer) => {
    received += d.toString('latin1');
  });
  return { client, text: () => received };
}

/**
 * On a connected `client` (what it read: `text`), a chunked upload of `path` whose first chunk reaches
 * `upstream`, then, `pauseMs` later, a malformed chunk size (`zz`): resolves once the server's answer
 * has arrived.
 */
async function malformMidUpload(
  client: net.Socket,
  text: () => string,
  upstream: RawUpstream,
  path: string,
  pauseMs = 0,
): Promise<void> {
  client.write(
    `POST ${path} HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n` +
      'Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n',
  );
  await waitFor(() => upstream.received.some((r) => r.includes(`POST ${path}`) && r.includes('hello')), {
    what: 'the first chunk upstream',
  });
  if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
  client.write('zz\r\n');
  await waitFor(() => text().includes('\r\n\r\n{'), { what: 'the 400' });
}

/** The `request completed` line of `path`, once written (within `timeoutMs`). */
async function requestLine(on: Stack, path: string, timeoutMs?: number): Promise<Record<string, unknown>> {
  const line = () =>
    on.logs().find((l) => l.msg === 'request completed' && (l.req as { path?: string })?.path === path);
  await waitFor(() => line() !== undefined, { what: "the request's log line", timeoutMs });
  return line()!;
}

describe('a body that turns malformed while it streams upstream, the upstream answering after the 400', () => {
  it.each(['answers 201', 'resets'] as const)(
    'the upstream %s 400 ms later: the line still says 400 and blames no upstream (review of fix 156)',
    async (upstreamDoes) => {
      const scheduled = new WeakSet<net.Socket>();
      const late = await startRawUpstream((socket, received) => {
        if (!received.includes('hello') || scheduled.has(socket)) return;
        scheduled.add(socket);
        // After the client's 400: an answer of its own, or a reset.
        setTimeout(() => {
          if (upstreamDoes === 'answers 201')
            socket.write(
              'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
            );
          else socket.resetAndDestroy();
        }, 400);
      });
      const shim = await startStack({ UPSTREAM_URL: late.url });
      // The client keeps its side open after the 400 and sends nothing more (the linger ends it).
      const { client, text } = halfOpenClient(shim);
      try {
        await once(client, 'connect');
        await malformMidUpload(client, text, late, '/late');
        const line = await requestLine(shim, '/late', 10_000);
        expect(text().match(/HTTP\/1\.1 /g)).toEqual(['HTTP/1.1 ']);
        expect(text()).toMatch(/^HTTP\/1\.1 400 /);
        expect((line.res as { statusCode: number }).statusCode).toBe(400);
        expect(line.upstreamError).toBeUndefined();
        expect(line.level).toBe(30);
      } finally {
        client.destroy();
        await shim.close();
        await late.close();
      }
    },
    20_000,
  );
});

describe('a body that turns malformed while an upstream head is held (RESPONSE_HEAD_HOLD_MS)', () => {
  it('the held head is not sent after the 400, and the line says 400 (review of fix 156)', async () => {
    const sent = new WeakSet<net.Socket>();
    const early = await startRawUpstream((socket, received) => {
      if (!received.includes('hello') || sent.has(socket)) return;
      sent.add(socket);
      // An early answer whose body comes later: its head is held for it.
      socket.write('HTTP/1.1 202 Accepted\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n');
    });
    const shim = await startStack({ UPSTREAM_URL: early.url, RESPONSE_HEAD_HOLD_MS: '1000' });
    const { client, text } = halfOpenClient(shim);
    try {
      await once(client, 'connect');
      await malformMidUpload(client, text, early, '/held', 200);
      const line = await requestLine(shim, '/held', 12_000);
      expect(text().match(/HTTP\/1\.1 /g)).toEqual(['HTTP/1.1 ']);
      expect((line.res as { statusCode: number }).statusCode).toBe(400);
    } finally {
      client.destroy();
      await shim.close();
      await early.close();
    }
  }, 20_000);
});

describe('what the longer linger must not stretch (review of fix 153: fix 155)', () => {
  it('a drain: a client trickling a refused upload is closed LINGER_IDLE_MS into it, not at SHUTDOWN_TIMEOUT_MS', async () => {
    const draining = await startStack({ UPSTREAM_URL: raw.url, SHUTDOWN_TIMEOUT_MS: '20000' });
    const client = net.connect(Number(new URL(draining.url).port), '127.0.0.1');
    client.on('error', () => {});
    const piece = Buffer.alloc(1, 0x61);
    const sender = setInterval(() => {
      if (!client.destroyed) client.write(piece);
    }, 1_000);
    try {
      await once(client, 'connect');
      client.write(UPLOAD_HEAD, 'latin1');
      await waitFor(async () => (await rejected(draining, 'credentials')) === 1, { what: 'the refusal' });
      const started = performance.now();
      await draining.runtime.drain('test');
      const drainMs = performance.now() - started;
      // Before: the 30 s linger held the drain to its deadline (20 s here), which then cut everything.
      expect(drainMs).toBeLessThan(LINGER_IDLE_MS + 3_000);
      expect(
        draining.logs().some((l) => l.msg === 'shutdown timeout reached: closing remaining connections'),
      ).toBe(false);
    } finally {
      clearInterval(sender);
      client.destroy();
      await draining.close();
    }
  }, 40_000);

  it('a slowloris: the 408 for a head that never finished lingers HEAD_REFUSAL_LINGER_MS in all, however the client keeps sending', async () => {
    const slow = await startStack({ UPSTREAM_URL: raw.url });
    // A client that goes on after the shim's FIN (allowHalfOpen: Node's would close its side at once).
    const { client, text } = halfOpenClient(slow);
    // A header line every second after the head's start, as slowhttptest -H does, and on after the 408.
    const sender = setInterval(() => {
      if (!client.destroyed) client.write(`X-a${Math.random().toString(36).slice(2, 6)}: b\r\n`);
    }, 1_000);
    try {
      await once(client, 'connect');
      client.write('GET /api/health HTTP/1.1\r\nHost: shim.test\r\n');
      await waitFor(() => text().includes(' 408 '), { what: 'the 408', timeoutMs: 20_000 });
      const refusedAt = performance.now();
      await waitFor(async () => (await openConnections(slow)) === 0, {
        what: 'the connection closed',
        timeoutMs: HEAD_REFUSAL_LINGER_MS + 5_000,
      });
      // Before: each header line renewed LINGER_IDLE_MS, and the connection was held LINGER_MS (30 s).
      expect(performance.now() - refusedAt).toBeLessThan(HEAD_REFUSAL_LINGER_MS + 2_000);
    } finally {
      clearInterval(sender);
      client.destroy();
      await slow.close();
    }
  }, 45_000);
});
