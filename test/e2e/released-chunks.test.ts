/**
 * Released chunks on real sockets (src/proxy/body-pump.ts): the shim frees each body chunk's memory as
 * soon as it is done with it — a pass-through chunk once the socket has written it, an upstream chunk
 * of a patched response once the patch has copied it — and the allocator hands that memory to the
 * next chunk at once. Released too early, a queued write would send another chunk's bytes (or freed
 * memory). So: several bodies of distinct bytes at once, through an in-process shim, with clients and
 * an upstream that read slowly enough for the shim's writes to queue, and every byte compared.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { patchJson } from '../../src/aliases/patch-json.ts';
import { responsePairs } from '../../src/aliases/table.ts';
import { CURRENT, LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const MiB = 1024 * 1024;

/** Byte `i` of body `seed`: distinct per body and per position, so that a chunk from elsewhere shows. */
function bodyOf(seed: number, length: number): Buffer {
  const body = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) body[i] = (i * 7 + seed * 131 + (i >>> 10)) & 0xff;
  return body;
}

/**
 * A mission list whose every value depends on `seed` (~300 bytes per item), after a ~200 KB `note`
 * without canonical members: its chunks pass through the patch as they came (not copied).
 */
function listOf(seed: number, items: number): Buffer {
  const note = bodyOf(seed, 200_000 + seed * 1000).toString('base64');
  const data = Array.from({ length: items }, (_, i) => ({
    uuid: `${seed}-${i}`,
    name: `mission ${seed}/${i} ${'x'.repeat((seed * 7 + i) % 50)}`,
    metadata: [
      { uuid: `m-${seed}-${i}`, value: (seed * 1000 + i) / 7, metadataType: { name: `type-${i % 13}` } },
    ],
    createdAt: '2025-01-01T00:00:00.000Z',
  }));
  return Buffer.from(JSON.stringify({ note, data, count: items }));
}

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

let upstream: http.Server;
let stack: Stack;
beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    const [, kind, seed, size] = (req.url ?? '').split('/');
    if (kind === 'sink') {
      // Reads slowly: a pause after every 256 KiB, so that the shim's writes to it queue.
      const hash = createHash('sha256');
      let bytes = 0;
      let sincePause = 0;
      req.on('data', (d: Buffer) => {
        hash.update(d);
        bytes += d.length;
        sincePause += d.length;
        if (sincePause >= 256 * 1024) {
          sincePause = 0;
          req.pause();
          setTimeout(() => req.resume(), 2);
        }
      });
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ bytes, sha: hash.digest('hex') }));
      });
      return;
    }
    const body = kind === 'list' ? listOf(Number(seed), Number(size)) : bodyOf(Number(seed), Number(size));
    res.writeHead(200, {
      'content-type': kind === 'list' ? 'application/json' : 'application/octet-stream',
    });
    let at = 0;
    const pump = (): void => {
      while (at < body.length) {
        const more = res.write(body.subarray(at, at + 16384));
        at += 16384;
        if (!more) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  stack = await startStack({ UPSTREAM_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}` });
});
afterAll(async () => {
  await stack?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
});

/** GETs `path` with a client that pauses after every 128 KiB; resolves with the whole body. */
function slowGet(path: string, headers: Record<string, string>) {
  return new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
    http
      .get(`${stack.url}${path}`, { headers, agent: false }, (res) => {
        const parts: Buffer[] = [];
        let sincePause = 0;
        res.on('data', (d: Buffer) => {
          parts.push(d);
          sincePause += d.length;
          if (sincePause >= 128 * 1024) {
            sincePause = 0;
            res.pause();
            setTimeout(() => res.resume(), 2);
          }
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/** POSTs `body` in 64 KiB writes; resolves with what the upstream's sink counted. */
function upload(body: Buffer) {
  return new Promise<{ status: number; bytes: number; sha: string }>((resolve, reject) => {
    const req = http.request(
      `${stack.url}/sink`,
      { method: 'POST', headers: { ...CURRENT, 'content-type': 'application/octet-stream' }, agent: false },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => {
          text += d.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ...JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    let at = 0;
    const pump = (): void => {
      while (at < body.length) {
        const more = req.write(body.subarray(at, at + 65536));
        at += 65536;
        if (!more) return void req.once('drain', pump);
      }
      req.end();
    };
    pump();
  });
}

describe('released chunks (body-pump.ts), several bodies at once under backpressure', () => {
  it('passes 8 distinct 3 MiB downloads through byte for byte', async () => {
    const seeds = [1, 2, 3, 4, 5, 6, 7, 8];
    const results = await Promise.all(seeds.map((s) => slowGet(`/bytes/${s}/${3 * MiB}`, CURRENT)));
    for (const [i, r] of results.entries()) {
      expect(r.status).toBe(200);
      expect(r.body.length).toBe(3 * MiB);
      expect(sha(r.body)).toBe(sha(bodyOf(seeds[i] as number, 3 * MiB)));
    }
  });

  it('patches 8 distinct ~1 MB lists for legacy clients exactly as the whole-body patch does', async () => {
    const seeds = [11, 12, 13, 14, 15, 16, 17, 18];
    const results = await Promise.all(seeds.map((s) => slowGet(`/list/${s}/4000`, LEGACY)));
    for (const [i, r] of results.entries()) {
      const expected = patchJson(responsePairs(), listOf(seeds[i] as number, 4000));
      expect(expected.outcome.kind).toBe('patched');
      expect(r.status).toBe(200);
      expect(sha(r.body)).toBe(sha(expected.body));
    }
  });

  it('streams 4 distinct 6 MiB uploads to a slow upstream byte for byte, with downloads at once', async () => {
    const bodies = [21, 22, 23, 24].map((s) => bodyOf(s, 6 * MiB));
    const [uploads, downloads] = await Promise.all([
      Promise.all(bodies.map((b) => upload(b))),
      Promise.all([31, 32].map((s) => slowGet(`/bytes/${s}/${2 * MiB}`, CURRENT))),
    ]);
    for (const [i, u] of uploads.entries()) {
      expect(u.status).toBe(200);
      expect(u.bytes).toBe(6 * MiB);
      expect(u.sha).toBe(sha(bodies[i] as Buffer));
    }
    for (const [i, d] of downloads.entries())
      expect(sha(d.body)).toBe(sha(bodyOf([31, 32][i] as number, 2 * MiB)));
  });
});
