/**
 * Released chunks on real sockets (src/proxy/body-pump.ts): the shim frees each body chunk's memory as
 * soon as it is done with it — a pass-through chunk once the socket has written it — and the allocator
 * hands that memory to the next chunk at once. Released too early, a queued write would send another
 * chunk's bytes (or freed memory). So: several bodies of distinct bytes at once, through an in-process
 * shim, with clients and an upstream that read slowly enough for the shim's writes to queue, and every
 * byte compared. The patched side: aliases-released-chunks.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bodyOf,
  type SlowUpstream,
  sha256,
  slowGet,
  startSlowUpstream,
  upload,
} from '../helpers/slow-peers.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

const MiB = 1024 * 1024;

let upstream: SlowUpstream;
let stack: Stack;
beforeAll(async () => {
  upstream = await startSlowUpstream();
  stack = await startStack({ UPSTREAM_URL: upstream.url });
});
afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

describe('released chunks (body-pump.ts), several bodies at once under backpressure', () => {
  it('passes 8 distinct 3 MiB downloads through byte for byte', async () => {
    const seeds = [1, 2, 3, 4, 5, 6, 7, 8];
    const results = await Promise.all(
      seeds.map((s) => slowGet(`${stack.url}/bytes/${s}/${3 * MiB}`, CURRENT)),
    );
    for (const [i, r] of results.entries()) {
      expect(r.status).toBe(200);
      expect(r.body.length).toBe(3 * MiB);
      expect(sha256(r.body)).toBe(sha256(bodyOf(seeds[i] as number, 3 * MiB)));
    }
  });

  it('streams 4 distinct 6 MiB uploads to a slow upstream byte for byte, with downloads at once', async () => {
    const bodies = [21, 22, 23, 24].map((s) => bodyOf(s, 6 * MiB));
    const [uploads, downloads] = await Promise.all([
      Promise.all(bodies.map((b) => upload(`${stack.url}/sink`, b, CURRENT))),
      Promise.all([31, 32].map((s) => slowGet(`${stack.url}/bytes/${s}/${2 * MiB}`, CURRENT))),
    ]);
    for (const [i, u] of uploads.entries()) {
      expect(u.status).toBe(200);
      expect(u.bytes).toBe(6 * MiB);
      expect(u.sha).toBe(sha256(bodies[i] as Buffer));
    }
    for (const [i, d] of downloads.entries())
      expect(sha256(d.body)).toBe(sha256(bodyOf([31, 32][i] as number, 2 * MiB)));
  });
});
