/**
 * The upstream pool reads every socket into one shared buffer (src/proxy/upstream-agent.ts:
 * `SharedReadBufferAgent`, and the same for `https:`). What must hold for that to be safe, on real sockets: a body chunk handed to
 * the shim is its own memory, intact after any number of later reads on this or other connections,
 * however long it is kept; the client's backpressure still pauses the upstream; the end of a
 * connection, keep-alive reuse and a response cut short behave as with Node's own reads.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createUpstreamTransport,
  SharedReadBufferAgent,
  UPSTREAM_READ_BUFFER_BYTES,
} from '../../src/proxy/upstream-agent.ts';
import { waitFor } from '../helpers/poll.ts';

/** Byte `i` of body `seed`: distinct per body, so that a chunk read from another response shows. */
function bodyOf(seed: number, length: number): Buffer {
  const body = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) body[i] = (i * 7 + seed * 131 + (i >>> 10)) & 0xff;
  return body;
}

const servers: http.Server[] = [];
const agents: http.Agent[] = [];
afterEach(async () => {
  for (const agent of agents.splice(0)) agent.destroy();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** An upstream that answers `/body/<seed>/<length>` in 16 KiB writes, with backpressure. */
async function startUpstream(options: { close?: boolean; tls?: { key: Buffer; cert: Buffer } } = {}) {
  const stats = { paused: 0, written: 0, waiting: false };
  const handler: http.RequestListener = (req, res) => {
    const [, , seed, length] = (req.url ?? '').split('/');
    const body = bodyOf(Number(seed), Number(length));
    res.writeHead(200, {
      'content-length': body.length,
      ...(options.close && { connection: 'close' }),
    });
    let at = 0;
    const pump = (): void => {
      stats.waiting = false;
      while (at < body.length) {
        const more = res.write(body.subarray(at, at + 16384));
        at += 16384;
        stats.written = Math.min(at, body.length);
        if (!more) {
          stats.paused++;
          stats.waiting = true;
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
  };
  const server = options.tls ? https.createServer(options.tls, handler) : http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { port: (server.address() as AddressInfo).port, stats };
}

function agent(): SharedReadBufferAgent {
  const a = new SharedReadBufferAgent({ keepAlive: true, maxSockets: 64 });
  agents.push(a);
  return a;
}

/** GETs a body and keeps every chunk as received (no copy), resolving with them and the response. */
function get(
  port: number,
  path: string,
  pool: http.Agent,
  onResponse?: (res: http.IncomingMessage) => void,
  tls = false,
) {
  return new Promise<{ chunks: Buffer[]; res: http.IncomingMessage; reused: boolean; shared: boolean }>(
    (resolve, reject) => {
      const options = { host: '127.0.0.1', port, path, agent: pool, ...(tls && { servername: 'localhost' }) };
      const req = (tls ? https.get : http.get)(options, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.once('end', () =>
          resolve({ chunks, res, reused: req.reusedSocket, shared: readsIntoSharedBuffer(req.socket) }),
        );
        res.once('error', reject);
        onResponse?.(res);
      });
      req.once('error', reject);
    },
  );
}

/**
 * Whether a socket reads into a buffer of its own choosing (Node's `onread`; the buffer is kept under
 * net's internal `kBuffer` symbol): how this test sees that the agents applied the option.
 */
function readsIntoSharedBuffer(socket: unknown): boolean {
  const target = socket as Record<symbol, unknown>;
  const symbol = Object.getOwnPropertySymbols(target).find((s) => s.description === 'kBuffer');
  const buffer = symbol === undefined ? undefined : target[symbol];
  return buffer instanceof Uint8Array && buffer.length === UPSTREAM_READ_BUFFER_BYTES;
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('SharedReadBufferAgent', () => {
  it('hands out body chunks that stay intact after later reads, 16 responses at once', async () => {
    const { port } = await startUpstream();
    const pool = agent();
    const length = 6 * UPSTREAM_READ_BUFFER_BYTES + 12345;
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, seed) => get(port, `/body/${seed}/${length}`, pool)),
    );
    // Compared only now, after every response was read: a chunk that were a view of the shared
    // buffer would hold whatever was read last.
    results.forEach(({ chunks, shared }, seed) => {
      expect(shared).toBe(true);
      expect(chunks.length).toBeGreaterThan(1);
      expect(sha(Buffer.concat(chunks))).toBe(sha(bodyOf(seed, length)));
    });
  });

  it('does the same for an https: upstream (TLS sockets read their cleartext into the shared buffer)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'shim-read-buffer-'));
    try {
      const subject = ['-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost'];
      const files = ['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')];
      execFileSync(
        'openssl',
        ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', ...subject, ...files],
        {
          stdio: 'pipe',
        },
      );
      const key = readFileSync(join(dir, 'key.pem'));
      const cert = readFileSync(join(dir, 'cert.pem'));
      const { port } = await startUpstream({ tls: { key, cert } });
      // The shim's own https: pool, trusting the test certificate as UPSTREAM_CA_FILE would.
      const transport = createUpstreamTransport(new URL(`https://localhost:${port}`), {
        caPem: cert.toString(),
      });
      agents.push(transport.agent);
      const length = 4 * UPSTREAM_READ_BUFFER_BYTES + 999;
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, seed) =>
          get(port, `/body/${seed}/${length}`, transport.agent, undefined, true),
        ),
      );
      results.forEach(({ chunks, shared }, seed) => {
        expect(shared).toBe(true);
        expect(chunks.length).toBeGreaterThan(1);
        expect(sha(Buffer.concat(chunks))).toBe(sha(bodyOf(seed, length)));
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps the client’s backpressure: a paused response stops the reads, and the upstream waits', async () => {
    const { port, stats } = await startUpstream();
    const pool = agent();
    const length = 16 * 1024 * 1024;
    let response: http.IncomingMessage | undefined;
    const done = get(port, `/body/3/${length}`, pool, (res) => {
      response = res;
      res.pause();
    });
    await waitFor(() => response, { what: 'the response head' });
    // Paused, the client reads no more: the upstream waits for drain with most of the body unsent
    // (kernel buffers hold a few MiB at most), and the response holds about one read. Reads that went
    // on regardless would take the whole body into the response's buffer, and the upstream would end.
    await waitFor(() => stats.waiting, { what: 'the upstream waiting for drain' });
    expect(stats.written).toBeLessThan(length / 2);
    expect(response!.readableLength).toBeLessThanOrEqual(2 * UPSTREAM_READ_BUFFER_BYTES);
    response!.resume();
    const { chunks } = await done;
    expect(sha(Buffer.concat(chunks))).toBe(sha(bodyOf(3, length)));
  });

  it('reuses a kept-alive connection, and sees an upstream close its connection', async () => {
    const { port } = await startUpstream();
    const pool = agent();
    const first = await get(port, '/body/1/100000', pool);
    const second = await get(port, '/body/2/100000', pool);
    expect(first.reused).toBe(false);
    expect(second.reused).toBe(true);
    expect(sha(Buffer.concat(second.chunks))).toBe(sha(bodyOf(2, 100000)));

    const closing = await startUpstream({ close: true });
    const a = await get(closing.port, '/body/4/70000', pool);
    expect(sha(Buffer.concat(a.chunks))).toBe(sha(bodyOf(4, 70000)));
    // The upstream closed the connection after the response: the next request opens a new one.
    const b = await get(closing.port, '/body/5/70000', pool);
    expect(b.reused).toBe(false);
    expect(sha(Buffer.concat(b.chunks))).toBe(sha(bodyOf(5, 70000)));
  });

  it('reports a response cut short by the upstream as incomplete', async () => {
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-length': 1_000_000 });
      res.write(bodyOf(9, 300_000), () => res.socket?.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    const pool = agent();
    const outcome = await new Promise<{ complete: boolean; bytes: number }>((resolve) => {
      http.get(
        { host: '127.0.0.1', port: (server.address() as AddressInfo).port, path: '/', agent: pool },
        (res) => {
          let bytes = 0;
          res.on('data', (c: Buffer) => {
            bytes += c.length;
          });
          res.on('error', () => {});
          res.once('close', () => resolve({ complete: res.complete, bytes }));
        },
      );
    });
    expect(outcome).toEqual({ complete: false, bytes: 300_000 });
  });
});
