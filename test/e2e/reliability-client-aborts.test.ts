/**
 * Reliability: clients that go away mid-upload and mid-download (SPEC §4: a client that disconnects
 * aborts the upstream request), {@link ABORTS} times each (1,000 with `npm run test:load`, a tenth in
 * `npm test`: test/helpers/load.ts): a 50 MiB download cut at its first bytes, a streamed 10 MiB
 * upload cut after 256 KiB, and a buffered (rewritten) JSON upload cut halfway.
 *
 * After every abort the upstream request must be aborted too — the upstream stops streaming to a
 * download nobody reads and stops receiving an upload nobody finishes — and nothing may stay behind:
 * open file descriptors and libuv handles return to their level before the run, and the JS heap after
 * a full GC does not grow with the number of aborts. The shim runs in this process (logging off, so
 * the harness keeps no log text), which is what makes a heap measured after a forced GC exact; RSS is
 * reported, not asserted (it follows V8's heap sizing, not leaks).
 */
import { readdirSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DebugUpstream, startDebugUpstream } from '../helpers/debug-upstream.ts';
import { scaled } from '../helpers/load.ts';
import { waitFor, waitForStable } from '../helpers/poll.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

/** Aborts of each kind: 1,000 at full scale. */
const ABORTS = scaled(1_000, 50);
/** Warm-up aborts of each kind before the baseline. */
const WARM_UP = scaled(100, 20);
const CONCURRENCY = 50;
const MiB = 1024 * 1024;

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

let backend: DebugUpstream;
let shim: Stack;
/** Open upstream sockets, and the bytes moved by closed ones (kept as totals: sockets would be retained). */
const upstreamSockets = new Set<net.Socket>();
const closedBytes = { read: 0, written: 0 };
beforeAll(async () => {
  backend = await startDebugUpstream();
  backend.server.on('connection', (s: net.Socket) => {
    upstreamSockets.add(s);
    s.once('close', () => {
      closedBytes.read += s.bytesRead;
      closedBytes.written += s.bytesWritten;
      upstreamSockets.delete(s);
    });
  });
  shim = await startStack({ UPSTREAM_URL: backend.url, LOG_LEVEL: 'silent' });
});
afterAll(async () => {
  await shim?.close();
  await backend?.close();
});

const openFds = () => readdirSync('/proc/self/fd').length;
const handles = () => process.getActiveResourcesInfo().filter((r) => r !== 'Timeout').length;
const heapAfterGc = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};
const upstreamBytes = () => {
  let { read, written } = closedBytes;
  for (const s of upstreamSockets) {
    read += s.bytesRead;
    written += s.bytesWritten;
  }
  return { read, written };
};

/** Runs `task` `total` times, `CONCURRENCY` at a time. */
async function runMany(total: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < total) await task(next++);
    }),
  );
}

const AUTH = 'Host: shim.test\r\nX-Api-Key: k\r\n';

/** Starts a 50 MiB download and disconnects at its first body bytes. */
function abortDownload(): Promise<void> {
  return new Promise((resolve) => {
    const req = http.get(`${shim.url}/debug/bytes?n=${50 * MiB}`, {
      headers: { 'service-client-version': '1.0.0', 'x-api-key': 'k' },
      agent: false,
    });
    req.on('response', (res) => res.once('data', () => req.destroy()));
    req.on('error', () => {});
    req.on('close', resolve);
  });
}

/** Announces an upload of `size` bytes, sends `sent` of them, and disconnects. */
function abortUpload(path: string, headers: string, size: number, sent: Buffer): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(Number(new URL(shim.url).port), '127.0.0.1', () => {
      socket.write(`POST ${path} HTTP/1.1\r\n${AUTH}${headers}Content-Length: ${size}\r\n\r\n`);
      socket.write(sent, () => setTimeout(() => socket.destroy(), 2));
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve());
  });
}

const streamedUpload = () =>
  abortUpload(
    '/debug/sink',
    'Service-Client-Version: 1.0.0\r\nContent-Type: application/octet-stream\r\n',
    10 * MiB,
    Buffer.alloc(256 * 1024, 1),
  );
const bufferedUpload = () =>
  abortUpload(
    '/missions',
    'Service-Client-Version: 0.59.0\r\nContent-Type: application/json\r\n',
    512 * 1024,
    Buffer.from(`{"name":"m","tags":[${'1,'.repeat(20_000)}`),
  );

const frontConnections = () => new Promise<number>((r) => shim.server.getConnections((_e, n) => r(n)));
const busyUpstreamSockets = () => Object.values(shim.shim.forwarder.agent.sockets).flat().length;

/**
 * Sockets close asynchronously on both sides: waits until the shim holds no client connection and no
 * busy upstream socket, then until the descriptor count stops moving.
 */
async function settled(): Promise<void> {
  await waitFor(async () => (await frontConnections()) === 0 && busyUpstreamSockets() === 0, {
    timeoutMs: 10_000,
    what: 'every client and busy upstream connection to close',
  });
  await waitForStable(openFds, { timeoutMs: 10_000, what: 'a stable count of open descriptors' });
}

describe(`${ABORTS} client aborts`, () => {
  it('leave no socket, descriptor or memory behind, and abort every upstream request', async () => {
    // Warm up every path once, so lazily created state is part of the baseline.
    await runMany(WARM_UP, abortDownload);
    await runMany(WARM_UP, streamedUpload);
    await runMany(WARM_UP, bufferedUpload);
    await settled();
    const fdsBefore = openFds();
    const handlesBefore = handles();
    const heapBefore = heapAfterGc();
    const rssBefore = process.memoryUsage().rss;
    const bytesBefore = upstreamBytes();

    const started = performance.now();
    const lap: string[] = [];
    for (const task of [abortDownload, streamedUpload, bufferedUpload]) {
      const t = performance.now();
      await runMany(ABORTS, task);
      lap.push(`${task.name} ${((performance.now() - t) / 1000).toFixed(1)} s`);
    }
    const elapsed = performance.now() - started;
    await settled();

    const fdsAfter = openFds();
    const handlesAfter = handles();
    const heapAfter = heapAfterGc();
    const rssAfter = process.memoryUsage().rss;
    const moved = upstreamBytes();
    const perDownload = (moved.written - bytesBefore.written) / ABORTS;
    const perUpload = (moved.read - bytesBefore.read) / ABORTS;
    console.info(
      `${3 * ABORTS} aborts in ${(elapsed / 1000).toFixed(1)} s (${lap.join(', ')}): fds ${fdsBefore} → ${fdsAfter}, ` +
        `handles ${handlesBefore} → ${handlesAfter}, heap after GC ${(heapBefore / 1e6).toFixed(2)} → ` +
        `${(heapAfter / 1e6).toFixed(2)} MB, RSS ${(rssBefore / 1e6).toFixed(0)} → ${(rssAfter / 1e6).toFixed(0)} MB, upstream sent ` +
        `${(perDownload / MiB).toFixed(2)} MiB per aborted 50 MiB download, received ` +
        `${(perUpload / 1024).toFixed(0)} KiB per aborted upload`,
    );
    // Descriptors and handles: back to the baseline, give or take pooled idle upstream connections.
    expect(fdsAfter).toBeLessThanOrEqual(fdsBefore + 8);
    expect(handlesAfter).toBeLessThanOrEqual(handlesBefore + 8);
    expect(await frontConnections()).toBe(0);
    // Memory: no growth proportional to the aborts. One leaked exchange (request, response, sockets,
    // parser) is several KB, so a leak of each would be well over 3 × ABORTS × 3 KB; the bound allows
    // 500 B per abort for noise (code and inline caches warmed late), at least 0.5 MB.
    expect(heapAfter - heapBefore).toBeLessThan(Math.max(500_000, 3 * ABORTS * 500));
    // The upstream stopped streaming each download early (socket buffers, not 50 MiB) …
    expect(perDownload).toBeLessThan(8 * MiB);
    // … and each upload reached it only as far as the client sent it (256 KiB streamed; the buffered
    // route forwards nothing).
    expect(perUpload).toBeLessThan(300 * 1024);
    // No upstream socket is left half-used: the few still open are idle in the shim's pool.
    const pooled = Object.values(shim.shim.forwarder.agent.freeSockets).flat().length;
    expect(busyUpstreamSockets()).toBe(0);
    expect(upstreamSockets.size).toBe(pooled);
    // And the shim still serves.
    const reply = await fetch(`${shim.url}/api/health`);
    expect(reply.status).toBe(200);
  });
});
