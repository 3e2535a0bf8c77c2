/**
 * Attack: slow clients (slowloris, slow POST / R.U.D.Y., slow read) — denial of service by holding
 * connections open with as few bytes as possible, so that the shim runs out of sockets, file
 * descriptors, upstream connections or memory.
 *
 * - Slowloris: a request head sent a byte at a time, never finished → 408 after `headersTimeout`.
 * - Slow body: a body trickled a byte at a time, or stalled after the head → 408 after
 *   `requestTimeout` (or 504 from the upstream idle timer, whichever is first); the upstream request is
 *   aborted.
 * - Slow read: a client that never reads its response → the upstream socket goes idle under
 *   backpressure and is cut after `UPSTREAM_TIMEOUT_MS`, and the client connection with it; nothing
 *   is buffered beyond the socket buffers.
 * - Idle keep-alive connections close after `keepAliveTimeout` (plus Node's 1 s keep-alive buffer).
 *
 * Production values are `SERVER_TIMEOUTS` (15 s head, 10 min request, 65 s keep-alive, checked every
 * 1 s; docs/operations.md, docs/reliability.md). Here the same server runs with shorter ones so the
 * test takes seconds; the checking interval is the production one, so a server that checked only every
 * 30 s (Node's default) fails these tests. The elapsed-time bounds guard that the cut comes from the
 * configured timeout (not earlier, not from some other timer much later): at least the timeout, at most
 * the timeout plus one checking interval plus a second of scheduling slack for a busy machine.
 */
import type http from 'node:http';
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createFrontServer, SERVER_TIMEOUTS } from '../../src/proxy/server.ts';
import { startDebugUpstream } from '../helpers/debug-upstream.ts';
import { send } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const HEAD_MS = 500;
const REQUEST_MS = 1_000;
/** The upstream idle timer where a test sets one, in ms. */
const UPSTREAM_MS = 500;
const KEEP_ALIVE_MS = 300;
/** Node's keep-alive buffer (`keepAliveTimeoutBuffer`) plus scheduling slack. */
const SLACK_MS = SERVER_TIMEOUTS.connectionsCheckingIntervalMs + 1_000;

const stacks: Stack[] = [];
const servers: net.Server[] = [];
const upstreams: RawUpstream[] = [];
// The tests run concurrently (each waits on timers, not on the CPU), each on its own stack; all are
// closed at the end, the raw upstreams with their connections (a failed test's would hold a plain
// `server.close` for ever).
afterAll(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

async function shortTimeoutStack(env: Record<string, string> = {}): Promise<Stack> {
  const stack = await startStack(env);
  stacks.push(stack);
  // Node reads these at every check / response, so they may change after listen.
  stack.server.headersTimeout = HEAD_MS;
  stack.server.requestTimeout = REQUEST_MS;
  stack.server.keepAliveTimeout = KEEP_ALIVE_MS;
  return stack;
}

/** A raw upstream ({@link startRawUpstream}) closed at the end. */
async function rawUpstream(onData: Parameters<typeof startRawUpstream>[0]): Promise<RawUpstream> {
  const upstream = await startRawUpstream(onData);
  upstreams.push(upstream);
  return upstream;
}

/** An upstream that accepts anything and never answers; counts its open sockets. */
async function silentUpstream(): Promise<{ url: string; open: () => number; bytes: () => number }> {
  const upstream = await rawUpstream(() => {});
  return {
    url: upstream.url,
    open: upstream.open,
    bytes: () => upstream.received.reduce((sum, r) => sum + r.length, 0), // latin1: a char a byte
  };
}

/** Opens a raw connection, runs `script`, resolves when the shim closes it. */
function connection(
  stack: Stack,
  script: (socket: net.Socket) => void,
): Promise<{ ms: number; response: string }> {
  return new Promise((resolve) => {
    const started = performance.now();
    let response = '';
    const socket = net.connect(Number(new URL(stack.url).port), '127.0.0.1', () => script(socket));
    socket.on('data', (d) => {
      response += d.toString('latin1');
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve({ ms: performance.now() - started, response }));
  });
}

/** Writes `text` one byte every `everyMs` until the socket closes. */
function drip(socket: net.Socket, text: string, everyMs: number): void {
  let i = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || i >= text.length) clearInterval(timer);
    else socket.write(text.charAt(i++));
  }, everyMs);
}

const serverConnections = (server: http.Server) =>
  new Promise<number>((resolve, reject) =>
    server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
  );

const AUTH = 'Host: shim.test\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n';

describe.concurrent('slowloris', () => {
  it('50 heads dripped a byte at a time are cut with 408 after headersTimeout; others are served meanwhile', async ({
    expect,
  }) => {
    const stack = await shortTimeoutStack();
    const head = `GET /api/health HTTP/1.1\r\nHost: shim.test\r\nX-Slow: ${'a'.repeat(10_000)}`;
    let cut = 0;
    const slow = Array.from({ length: 50 }, () =>
      connection(stack, (s) => drip(s, head, 50)).finally(() => {
        cut++;
      }),
    );
    await waitFor(async () => (await serverConnections(stack.server)) === 50, {
      what: '50 slow connections',
    });
    const normal = await send(stack.url, 'GET', '/api/health');
    expect(normal.status).toBe(200);
    // Served while every slow head was still being dripped, not after they were cut.
    expect(cut).toBe(0);
    const results = await Promise.all(slow);
    for (const { ms, response } of results) {
      expect(response).toMatch(/^HTTP\/1\.1 408 /);
      expect(ms).toBeGreaterThanOrEqual(HEAD_MS - 50);
      expect(ms).toBeLessThan(HEAD_MS + SLACK_MS);
    }
    await expect.poll(() => serverConnections(stack.server), { timeout: 1_000 }).toBe(0);
  });
});

describe.concurrent('slow bodies', () => {
  it('a body trickled a byte at a time is cut after requestTimeout, and the upstream request aborted', async ({
    expect,
  }) => {
    const upstream = await silentUpstream();
    // Streamed from its first byte (REQUEST_BUFFER_BYTES: 0): a streamed body's bound is requestTimeout.
    // By default its first 64 KiB are read before the upstream is contacted, within BODY_TIMEOUT_MS
    // (slow-body-upstream-pool.test.ts).
    const stack = await shortTimeoutStack({
      UPSTREAM_URL: upstream.url,
      UPSTREAM_TIMEOUT_MS: '30000',
      REQUEST_BUFFER_BYTES: '0',
    });
    const { ms, response } = await connection(stack, (s) => {
      s.write(
        `POST /debug/sink HTTP/1.1\r\n${AUTH}Content-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n`,
      );
      drip(s, 'b'.repeat(100_000), 20);
    });
    expect(response).toMatch(/^HTTP\/1\.1 408 /);
    expect(ms).toBeGreaterThanOrEqual(REQUEST_MS - 50);
    expect(ms).toBeLessThan(REQUEST_MS + SLACK_MS);
    await expect.poll(() => upstream.open(), { timeout: 2_000 }).toBe(0);
    expect(upstream.bytes()).toBeGreaterThan(0); // it was being streamed, not buffered
  });

  it('a body that never comes is cut by whichever is first: requestTimeout or the upstream idle timer', async ({
    expect,
  }) => {
    const upstream = await silentUpstream();
    const stack = await shortTimeoutStack({
      UPSTREAM_URL: upstream.url,
      UPSTREAM_TIMEOUT_MS: String(UPSTREAM_MS),
    });
    const { ms, response } = await connection(stack, (s) => {
      s.write(
        `POST /debug/sink HTTP/1.1\r\n${AUTH}Content-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\n`,
      );
    });
    expect(response).toMatch(/^HTTP\/1\.1 (408|504) /);
    expect(ms).toBeLessThan(REQUEST_MS + SLACK_MS);
    await expect.poll(() => upstream.open(), { timeout: 2_000 }).toBe(0);
  });
});

describe.concurrent('slow bodies holding every pooled upstream connection', () => {
  it('a request queued for a connection gets 504 after UPSTREAM_TIMEOUT_MS, not once the slow bodies end', async ({
    expect,
  }) => {
    // slowhttptest -B against a public path (2026-11-25): 1,100 trickled POST bodies held the pool's
    // 1,024 upstream connections (each kept busy by its trickle), and a request waiting for one of them
    // had no timer at all: it waited past UPSTREAM_TIMEOUT_MS, for as long as the slow bodies lasted
    // (up to requestTimeout, 10 min). The same with a pool of 2.
    const upstream = await silentUpstream();
    // Streamed from their first byte (REQUEST_BUFFER_BYTES: 0), as the rest of a body above it is; by
    // default slow bodies hold no upstream connection until 64 KiB arrived (slow-body-upstream-pool).
    const stack = await shortTimeoutStack({
      UPSTREAM_URL: upstream.url,
      UPSTREAM_TIMEOUT_MS: String(UPSTREAM_MS),
      REQUEST_BUFFER_BYTES: '0',
    });
    stack.server.requestTimeout = 60_000; // the slow bodies outlast the test
    stack.shim.forwarder.agent.maxSockets = 2;
    const holders: net.Socket[] = [];
    let holdersClosed = 0;
    for (let i = 0; i < 2; i++) {
      void connection(stack, (s) => {
        holders.push(s);
        s.write(
          `POST /api/health HTTP/1.1\r\nHost: shim.test\r\nContent-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n`,
        );
        // A byte well within the upstream idle timer: the upstream socket is never idle.
        drip(s, 'b'.repeat(100_000), UPSTREAM_MS / 5);
      }).then(() => holdersClosed++);
    }
    await waitFor(() => upstream.open() === 2, { what: 'both pooled connections held' });
    const replies: Array<{ status: number; text: string }> = [];
    const queued = [
      send(stack.url, 'GET', '/user/me', { 'service-client-version': '1.0.0', 'x-api-key': 'k' }),
      send(stack.url, 'POST', '/user/me', { 'service-client-version': '1.0.0', 'x-api-key': 'k' }, 'hello'),
    ];
    for (const reply of queued)
      void reply.then(
        (r) => replies.push(r),
        () => {},
      );
    try {
      await waitFor(() => replies.length === 2, { what: 'the queued requests’ answers', timeoutMs: 10_000 });
      expect(replies.map((r) => r.status)).toEqual([504, 504]);
      for (const r of replies) expect(JSON.parse(r.text)).toMatchObject({ statusCode: 504 });
      // Their log lines say why: no upstream connection was free, the upstream itself was not slow.
      await waitFor(() => stack.logs().filter((l) => l.waitedForConnection === true).length === 2, {
        what: 'two lines with waitedForConnection',
      });
      // Answered while the slow bodies still held the pool.
      expect(holdersClosed).toBe(0);
      expect(upstream.open()).toBe(2);
      // And no longer queued: Node's agent keeps a destroyed request in its queue until a pooled
      // connection frees (here, as long as the slow bodies last), with the exchange it belongs to
      // (about 10 KiB each); a client answered 504 could send the next one at once.
      expect(Object.values(stack.shim.forwarder.agent.requests).map((queue) => queue?.length)).toEqual([]);
    } finally {
      for (const h of holders) h.destroy();
    }
  });
});

/** A shim with {@link UPSTREAM_MS} as `UPSTREAM_TIMEOUT_MS` in front of the diagnostics upstream. */
async function slowReadStack(): Promise<Stack> {
  const diagnostics = await startDebugUpstream();
  servers.push(diagnostics.server);
  return shortTimeoutStack({ UPSTREAM_URL: diagnostics.url, UPSTREAM_TIMEOUT_MS: String(UPSTREAM_MS) });
}

/**
 * A client that asks `stack` for 1 GiB and never reads: the kernel buffers fill, then backpressure
 * reaches the upstream. Its errors are ignored unless the caller listens too (events come after this
 * returns).
 */
function neverReadingClient(stack: Stack): net.Socket {
  const socket = net.connect(Number(new URL(stack.url).port), '127.0.0.1');
  socket.on('error', () => {});
  socket.write(`GET /debug/bytes?n=${1024 ** 3} HTTP/1.1\r\n${AUTH}\r\n`);
  socket.pause();
  return socket;
}

describe.concurrent('slow read', () => {
  it('a client that never reads is cut with its upstream after UPSTREAM_TIMEOUT_MS of backpressure', async ({
    expect,
  }) => {
    const stack = await slowReadStack();
    const rssBefore = process.memoryUsage().rss;
    const socket = neverReadingClient(stack);
    await waitFor(async () => (await serverConnections(stack.server)) === 1, { what: 'the connection' });
    const started = performance.now();
    await expect.poll(() => serverConnections(stack.server), { timeout: 5_000, interval: 20 }).toBe(0);
    expect(performance.now() - started).toBeLessThan(UPSTREAM_MS + SLACK_MS);
    // The upstream socket was cut with it: it leaves the agent on its own 'close', which can come a
    // moment after the client connection's (a busy machine), so polled rather than read once.
    await expect
      .poll(() => Object.values(stack.shim.forwarder.agent.sockets).flat().length, {
        timeout: 1_000,
        interval: 10,
      })
      .toBe(0);
    // Backpressure held: nothing near the 1 GiB was buffered (socket buffers only).
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(100 * 1024 * 1024);
    socket.destroy();
  });

  // Slow-read attack against the container's memory: a close (FIN) left everything the shim had written
  // in the kernel's send buffer, charged to the container on cgroup v2 (up to the whole response, ~1.5 MiB
  // for a 1.4 MB list; 1,000 such clients 1.4–1.7 GiB against a 512 MiB limit), for as long as the client
  // kept its window shut after the cut. The cut is an abort now: RST, the queued bytes discarded
  // (docs/reliability.md fix 88). Seen from the client: reading after the cut ends in ECONNRESET, not
  // in the rest of the queued bytes and a clean end.
  it('a slow-read attack is cut with a reset, so the bytes queued for it are dropped', async ({ expect }) => {
    const stack = await slowReadStack();
    const socket = neverReadingClient(stack);
    const ended = new Promise<string>((resolve) => {
      socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
      socket.on('end', () => resolve('end'));
    });
    await waitFor(() => stack.logs().find((l) => l.msg === 'request completed'), { what: 'the cut' });
    await waitFor(async () => (await serverConnections(stack.server)) === 0, { what: 'the close' });
    socket.resume(); // read now: what the kernel still held for it, then how the connection ended
    await expect(ended).resolves.toBe('ECONNRESET');
    socket.destroy();
  });

  // A slow reader is the client's doing, not the upstream's: counted as an upstream timeout, any
  // client that stops reading for UPSTREAM_TIMEOUT_MS (a stalled mobile client behind a proxy with no
  // send timeout, such as Caddy; an attacker with slowhttptest -X) raised the upstream-error alert
  // while the upstream was healthy (found with Caddy in front, 2026-11-26; docs/reliability.md fix 62).
  it('a client that never reads is not counted as an upstream failure', async ({ expect }) => {
    const stack = await slowReadStack();
    const socket = neverReadingClient(stack);
    const line = await waitFor(() => stack.logs().find((l) => l.msg === 'request completed'), {
      what: 'the request line',
    });
    expect(line).toMatchObject({ aborted: true, clientStalled: true });
    expect(line).not.toHaveProperty('upstreamError');
    const { values } = await stack.metrics.upstreamErrors.get();
    expect(values.filter((v) => v.value > 0)).toEqual([]);
    socket.destroy();
  });
});

// The same on the way up: a client that stops sending its streamed body leaves the upstream socket idle
// (the upstream took every byte and waits for the rest), and the upstream's timer cut it as a 504
// counted in shim_upstream_errors_total{kind="timeout"} with an error line — any client, without
// credentials on the public path, raised the upstream-error alert at will (slowhttptest -B with a long
// interval; docs/reliability.md fix 72). It is the client's request timing out: 408, a rejection.
describe.concurrent('a streamed upload the client stops sending', () => {
  it('is answered 408 and not counted as an upstream failure', async ({ expect }) => {
    const upstream = await silentUpstream();
    // Streamed, not held whole (REQUEST_BUFFER_BYTES: 0; a held body has BODY_TIMEOUT_MS instead).
    const stack = await startStack({
      UPSTREAM_URL: upstream.url,
      UPSTREAM_TIMEOUT_MS: String(UPSTREAM_MS),
      REQUEST_BUFFER_BYTES: '0',
    });
    stacks.push(stack);
    const { response } = await connection(stack, (s) =>
      s.write(
        'POST /api/health HTTP/1.1\r\nHost: shim.test\r\nContent-Type: application/octet-stream\r\n' +
          'Content-Length: 1000\r\n\r\n0123456789',
      ),
    );
    expect(response).toMatch(/^HTTP\/1\.1 408 /);
    const line = await waitFor(() => stack.logs().find((l) => l.msg === 'request completed'), {
      what: 'the request line',
    });
    expect(line).toMatchObject({
      rejection: 'body_timeout',
      clientStalled: true,
      refusal: expect.stringMatching(/^The request body stopped arriving/),
    });
    expect(line).not.toHaveProperty('upstreamError');
    const { values } = await stack.metrics.upstreamErrors.get();
    expect(values.filter((v) => v.value > 0)).toEqual([]);
  });

  // Fix 76: while the upstream connection is still being made (a TLS upstream that never answers the
  // ClientHello; or a full accept queue, a SYN dropped), the body waits in the shim and the upstream
  // socket is idle however the client sends: a client sending steadily got the 408 "stopped arriving",
  // and the unreachable upstream was counted nowhere.
  it('an upstream whose connection is never established is an upstream timeout, the client sending steadily', async ({
    expect,
  }) => {
    const upstream = await rawUpstream(() => {}); // takes the TCP connection, never answers the TLS ClientHello
    const stack = await startStack({
      UPSTREAM_URL: upstream.url.replace('http:', 'https:'),
      UPSTREAM_TIMEOUT_MS: String(UPSTREAM_MS),
      // Streamed from its first byte: at 1 KB/s its first 64 KiB (REQUEST_BUFFER_BYTES) would take 64 s.
      REQUEST_BUFFER_BYTES: '0',
    });
    stacks.push(stack);
    const { response } = await connection(stack, (s) => {
      s.write(
        'POST /api/health HTTP/1.1\r\nHost: shim.test\r\nContent-Type: application/octet-stream\r\n' +
          'Content-Length: 100000\r\n\r\n',
      );
      drip(s, 'a'.repeat(100_000), 1); // a byte every 1 ms: never idle for UPSTREAM_MS
    });
    expect(response).toMatch(/^HTTP\/1\.1 504 /);
    const line = await waitFor(() => stack.logs().find((l) => l.msg === 'request completed'), {
      what: 'the request line',
    });
    expect(line).toMatchObject({ upstreamError: 'ESHIMTIMEDOUT' });
    expect(line).not.toHaveProperty('clientStalled');
  });

  it('an upstream that stops reading the body is still an upstream timeout', async ({ expect }) => {
    // Reads nothing after the first bytes: the shim's writes of the body back up (nor the shim's close).
    const upstream = await rawUpstream((s) => s.pause());
    const stack = await startStack({
      UPSTREAM_URL: upstream.url,
      UPSTREAM_TIMEOUT_MS: String(UPSTREAM_MS),
    });
    stacks.push(stack);
    const size = 64 * 1024 * 1024;
    const { response } = await connection(stack, (s) => {
      s.write(
        `POST /api/health HTTP/1.1\r\nHost: shim.test\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n\r\n`,
      );
      s.write(Buffer.alloc(size, 0x61));
    });
    expect(response).toMatch(/^HTTP\/1\.1 504 /);
    const line = await waitFor(() => stack.logs().find((l) => l.msg === 'request completed'), {
      what: 'the request line',
    });
    expect(line).toMatchObject({ upstreamError: 'ESHIMTIMEDOUT' });
  });
});

// Fix 103: the bytes a client sends while its download is stalled are no progress of the upstream. The
// idle timer counted the client's reads as the exchange's progress (fix 99), so a client trickling
// bytes behind its request (a pipelined request it never finishes) kept a stalled upstream's exchange,
// and its pooled connection, open for as long as it trickled.
describe.concurrent('a download the upstream stalls', () => {
  it('is cut after UPSTREAM_TIMEOUT_MS, the client trickling bytes behind its request', async ({
    expect,
  }) => {
    // Answers the request's first bytes with the head and 10 of 1,000 bytes; the other 990 never come.
    const upstream = await rawUpstream((s) => {
      if (s.bytesWritten === 0)
        s.write(
          'HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\n0123456789',
        );
    });
    const stack = await startStack({
      UPSTREAM_URL: upstream.url,
      UPSTREAM_TIMEOUT_MS: String(UPSTREAM_MS),
    });
    stacks.push(stack);
    const { ms, response } = await connection(stack, (s) => {
      s.write('GET /api/health HTTP/1.1\r\nHost: shim.test\r\n\r\n');
      drip(s, `GET /api/health HTTP/1.1\r\nX-Slow: ${'a'.repeat(4_000)}`, 1); // a byte every 1 ms for 4 s or more
    });
    expect(response).toMatch(/^HTTP\/1\.1 200 /);
    expect(response.endsWith('0123456789')).toBe(true); // cut: the 990 bytes are not made up
    expect(ms).toBeGreaterThanOrEqual(UPSTREAM_MS - 50);
    expect(ms).toBeLessThan(UPSTREAM_MS + SLACK_MS);
    const line = await waitFor(() => stack.logs().find((l) => l.msg === 'request completed'), {
      what: 'the request line',
    });
    expect(line).toMatchObject({ upstreamError: 'ESHIMTIMEDOUT' });
  });
});

describe.concurrent('idle keep-alive connections', () => {
  it("are closed after keepAliveTimeout (plus Node's keep-alive buffer)", async ({ expect }) => {
    const stack = await shortTimeoutStack();
    const { ms, response } = await connection(stack, (s) =>
      s.write('GET /api/health HTTP/1.1\r\nHost: shim.test\r\n\r\n'),
    );
    expect(response).toMatch(/^HTTP\/1\.1 200 /);
    expect(ms).toBeGreaterThanOrEqual(KEEP_ALIVE_MS - 50);
    expect(ms).toBeLessThan(KEEP_ALIVE_MS + SLACK_MS);
  });
});

describe('production values', () => {
  it('the front-door server is created with the documented timeouts', () => {
    const server = createFrontServer(() => {});
    expect(server.headersTimeout).toBe(SERVER_TIMEOUTS.headersTimeoutMs);
    expect(server.requestTimeout).toBe(SERVER_TIMEOUTS.requestTimeoutMs);
    expect(server.keepAliveTimeout).toBe(SERVER_TIMEOUTS.keepAliveTimeoutMs);
    // A slowloris is cut at most one checking interval after headersTimeout (Node's default is 30 s).
    expect(SERVER_TIMEOUTS.connectionsCheckingIntervalMs).toBeLessThanOrEqual(1_000);
    expect(SERVER_TIMEOUTS.headersTimeoutMs).toBeLessThanOrEqual(30_000);
    expect(SERVER_TIMEOUTS.headersTimeoutMs).toBeLessThan(SERVER_TIMEOUTS.requestTimeoutMs);
  });
});
