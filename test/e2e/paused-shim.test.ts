/**
 * The shim stopped (SIGSTOP then SIGCONT, as a VM live migration, a frozen cgroup or a node under
 * memory pressure stops it) or its event loop blocked for longer than a timeout, while its peers go on:
 * nothing whose peer made progress is cut for the shim's own pause (docs/reliability.md "Paused and
 * starved", fixes 99 and 101). Without the fixes, libuv ran the expired timers before it read the bytes
 * the kernel held: 504 for a head that had arrived, an aborted download, 408 for an upload that kept
 * coming, a reset for a keep-alive request sent in time.
 *
 * A child shim with 1 s timeouts (the flags of `npm start`), stopped until the peers (this process) have
 * made their progress into the kernel's buffers and at least 2.5 timeouts have passed, then continued.
 */
import http, { type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createFrontServer } from '../../src/proxy/server.ts';
import { responseStatus, send } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { isStopped, SHIPPED_NODE_FLAGS, type ShimProcess, spawnShim } from '../helpers/spawn-shim.ts';

const TIMEOUT_MS = 1_000;
const CLIENT = { 'service-client-version': '1.0.0', 'x-api-key': 'k' };

const shims: ShimProcess[] = [];
const servers: Server[] = [];
afterAll(async () => {
  for (const s of shims.splice(0)) {
    s.child.kill('SIGCONT');
    await s.stop();
  }
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** An upstream whose requests wait until the test answers them (`pending`), and a sink that counts a body. */
async function startUpstream() {
  const pending: { req: IncomingMessage; res: ServerResponse }[] = [];
  const received: number[] = [];
  const server = http.createServer((req, res) => {
    if (req.url === '/api/health') return void res.end('{"status":"ok"}');
    if (req.url === '/sink') {
      const at = received.push(0) - 1;
      req.on('data', (d: Buffer) => {
        received[at] = (received[at] ?? 0) + d.length;
      });
      req.on('end', () => res.writeHead(201, { 'content-type': 'application/json' }).end('{"ok":true}'));
      return;
    }
    pending.push({ req, res });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, pending, received };
}

async function startShim(upstreamUrl: string): Promise<ShimProcess> {
  const shim = await spawnShim(
    { UPSTREAM_URL: upstreamUrl, UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS) },
    [],
    SHIPPED_NODE_FLAGS,
  );
  shims.push(shim);
  return shim;
}

/**
 * Stops the shim, lets the peers make their progress (`whilePaused`), and continues it once
 * `progressed()` holds and 2.5 timeouts have passed: every timer of the exchange is due by then.
 */
async function pause(shim: ShimProcess, whilePaused: () => void, progressed: () => boolean): Promise<void> {
  shim.child.kill('SIGSTOP');
  const stoppedAt = performance.now();
  // Stopped for good (not still waking from its epoll_wait), or the peers' bytes could reach it first.
  await waitFor(() => isStopped(shim.child.pid), { what: 'the shim stopped' });
  whilePaused();
  await waitFor(() => progressed() && performance.now() - stoppedAt > 2.5 * TIMEOUT_MS, {
    what: "the peers' progress while the shim is stopped",
  });
  shim.child.kill('SIGCONT');
}

describe('a shim stopped longer than its timeouts while its peers go on', () => {
  it.concurrent('relays a response head that arrived during the stop (not 504)', async () => {
    const upstream = await startUpstream();
    const shim = await startShim(upstream.url);
    const reply = send(shim.url, 'GET', '/head', CLIENT);
    const exchange = await waitFor(() => upstream.pending[0], { what: 'the request upstream' });
    await pause(
      shim,
      () => exchange.res.writeHead(200, { 'content-type': 'text/plain' }).end('made it'),
      () => exchange.res.writableFinished,
    );
    const got = await reply;
    expect(got.status).toBe(200);
    expect(got.text).toBe('made it');
  });

  it.concurrent('delivers a download whose rest arrived during the stop (not 504, not aborted)', async () => {
    const upstream = await startUpstream();
    const shim = await startShim(upstream.url);
    const body = Buffer.alloc(80 * 1024, 'x');
    const reply = send(shim.url, 'GET', '/download', CLIENT);
    const exchange = await waitFor(() => upstream.pending[0], { what: 'the request upstream' });
    exchange.res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length });
    exchange.res.write(body.subarray(0, 16 * 1024));
    await pause(
      shim,
      () => exchange.res.end(body.subarray(16 * 1024)),
      () => exchange.res.writableFinished,
    );
    const got = await reply;
    expect(got.status).toBe(200);
    expect(got.body.equals(body)).toBe(true);
  });

  // Fix 104: the idle timer, armed again because the upstream had moved during the stop (fix 99), had
  // nobody listening (Node delegates a socket's 'timeout' to its request once): a download that stalled
  // afterwards was never cut.
  it.concurrent('still cuts a download that stalls after the stop, UPSTREAM_TIMEOUT_MS later', async () => {
    const upstream = await startUpstream();
    const shim = await startShim(upstream.url);
    const url = new URL(shim.url);
    const response = new Promise<IncomingMessage>((resolve, reject) =>
      http
        .get(
          { host: url.hostname, port: url.port, path: '/download', headers: CLIENT, agent: false },
          resolve,
        )
        .on('error', reject),
    );
    const exchange = await waitFor(() => upstream.pending[0], { what: 'the request upstream' });
    exchange.res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 64 * 1024 });
    exchange.res.write(Buffer.alloc(16 * 1024, 'x'));
    const res = await response;
    let received = 0;
    res.on('data', (d: Buffer) => {
      received += d.length;
    });
    await pause(
      shim,
      () => exchange.res.write(Buffer.alloc(16 * 1024, 'y')), // … and the other 32 KiB never come
      () => exchange.req.socket.writableLength === 0,
    );
    const resumedAt = performance.now();
    await new Promise((r) => res.once('close', r));
    const ms = performance.now() - resumedAt;
    expect(res.complete).toBe(false);
    expect(received).toBe(32 * 1024);
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(ms).toBeLessThan(3 * TIMEOUT_MS);
  });

  it.concurrent('forwards a streamed upload the client went on sending during the stop (not 408)', async () => {
    const upstream = await startUpstream();
    const shim = await startShim(upstream.url);
    const url = new URL(shim.url);
    const req = http.request({
      host: url.hostname,
      port: url.port,
      method: 'POST',
      path: '/sink',
      headers: { ...CLIENT, 'content-type': 'application/octet-stream' },
      agent: false,
    });
    const status = responseStatus(req);
    req.write(Buffer.alloc(16 * 1024, 'a'));
    await waitFor(() => upstream.received[0] === 16 * 1024, { what: 'the first piece upstream' });
    await pause(
      shim,
      () => req.end(Buffer.alloc(48 * 1024, 'b')),
      () => req.writableFinished,
    );
    expect(await status).toBe(201);
    expect(upstream.received[0]).toBe(64 * 1024);
  });
});

describe('an event loop blocked past the keep-alive timeout', () => {
  it('serves the request that arrived on the keep-alive connection meanwhile (not a reset)', async () => {
    const server = createFrontServer((_req, res) => {
      res.writeHead(200, { 'content-length': 2 }).end('ok');
    });
    servers.push(server);
    server.keepAliveTimeout = 100;
    server.keepAliveTimeoutBuffer = 0;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
    const request = 'GET / HTTP/1.1\r\nHost: x\r\n\r\n';
    let received = '';
    let sentSecond = false;
    socket.on('data', (d: Buffer) => {
      received += d.toString('latin1');
      if (sentSecond || !received.endsWith('ok')) return;
      sentSecond = true;
      // The next request reaches the kernel now; then the loop is blocked past the keep-alive timeout
      // (a long GC, a synchronous stall), so that its timer is due before the request is read.
      socket.write(request);
      const until = performance.now() + 400;
      while (performance.now() < until) {
        // blocked
      }
    });
    socket.write(request);
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.on('error', () => {});
    await waitFor(() => received.split('HTTP/1.1 200').length === 3 || socket.destroyed, {
      what: 'the second response or the close',
    });
    expect(received.split('HTTP/1.1 200').length - 1).toBe(2);
    socket.destroy();
    await closed;
  });
});

describe('a shim stopped again and again (fix 102)', () => {
  it('gives a deadline its lateness back once, not at every firing', { timeout: 20_000 }, async () => {
    // An upstream that trickles a head it never completes: the upstream socket moves (Node's idle timer
    // is armed again), so only the head's deadline (startDeadline, 1 s) can answer 504.
    //
    // The schedule is kept by this process, which a loaded machine delays too (a GC of the test worker,
    // a runner short of CPU), so each step waits for what it needs, not for a time alone. Fixed times
    // (stopped 0.3–2.5 s, then 2.8–5.5 s, 504 expected before 6.5 s) failed 5 of 20 runs with the test
    // process frozen 600 ms every 1.5 s (docs/testing.md "Runs under load"): a first SIGCONT that came
    // at 2.8 s and a SIGSTOP 5 ms after it left the shim no turn to run its deadline, which first fired
    // after the second stop, 4.9 s late, and answered 504 at 10.8 s: a shim stopped once for 5.6 s, not
    // twice. The bound is now taken from the second SIGCONT, not from the request.
    const trickles: NodeJS.Timeout[] = [];
    const sockets: net.Socket[] = [];
    let requestedAt = 0;
    let onRequest = () => {};
    const upstream = net.createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
      socket.once('data', (d: Buffer) => {
        // Not the readiness probe's GET /api/health.
        if (!d.toString('latin1').startsWith('GET /slow-head ')) return void socket.end();
        requestedAt = performance.now();
        onRequest();
        socket.write('HTTP/1.1 200 OK\r\nX-Slow: ');
        trickles.push(setInterval(() => socket.destroyed || socket.write('a'), 100));
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const shim = await startShim(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`);
    // Stopped as the request reaches the upstream, well before its deadline (due 1 s after the shim
    // sent it), however late this process runs the next steps.
    onRequest = () => shim.child.kill('SIGSTOP');
    let answeredAt = 0;
    const reply = send(shim.url, 'GET', '/slow-head', CLIENT).then((got) => {
      answeredAt = performance.now();
      return got;
    });
    /** Seconds since the request reached the upstream. */
    const since = () => (performance.now() - requestedAt) / 1000;
    const at = (s: number) => waitFor(() => since() >= s, { timeoutMs: 15_000, what: `${s} s` });
    const stopped = () => waitFor(() => isStopped(shim.child.pid), { what: 'the shim stopped' });
    try {
      await waitFor(() => requestedAt, { what: 'the request upstream' });
      await stopped();
      // Continued at 2.5 s (or later): the deadline fires 1.5 s late (or more) and is due again as
      // much later.
      await at(2.5);
      const firstContinued = since();
      shim.child.kill('SIGCONT');
      // It has run since: its loop has turned past the deadline's firing and past the setImmediate that
      // arms it again (an admin request answered, then a second one).
      for (let i = 0; i < 2; i++) expect((await send(shim.adminUrl, 'GET', '/healthz')).status).toBe(200);
      shim.child.kill('SIGSTOP');
      await stopped();
      // Continued 2 s after the deadline was due again: it fires 2 s late and acts at once. Without the
      // fix it gave those 2 s back once more (and would at every stop): 504 about 2 s after the SIGCONT
      // (2,023 ms measured), less only by this process's lateness in reading the request.
      await at(2 * firstContinued - 1 + 2);
      const continuedAt = performance.now();
      shim.child.kill('SIGCONT');
      const got = await reply;
      expect(got.status).toBe(504);
      expect(answeredAt - continuedAt).toBeLessThan(1_000);
    } finally {
      for (const t of trickles) clearInterval(t);
      for (const s of sockets) s.destroy();
      upstream.close();
    }
  });
});
