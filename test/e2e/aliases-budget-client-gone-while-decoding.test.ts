/**
 * A legacy client's coded body (`Content-Encoding: gzip`) that goes away while the shim decodes it, the
 * body then refused (not JSON): the exchange's end (the response's `close`) had released the
 * reservation, and the decoded copy, reserved after it, was never given back. Each such request took
 * up to `MAX_REWRITE_BODY` out of `MAX_BUFFERED_BYTES` for the life of the process; a few dozen made
 * every later rewrite a 503 and every patch `budget_exhausted` (docs/reliability.md fix 109).
 *
 * The decode runs in libuv's thread pool: the test holds every thread of it (an `open` of a FIFO that
 * has no writer yet blocks its thread) so that the client is gone before the decode can finish, as a
 * pool busy with other work (compression, DNS, file I/O) leaves it.
 *
 * The refusal, decided after the exchange's line was written (aborted), is counted and says so in a
 * line of its own (fix 172): every count has a line.
 *
 * Delete this file with `src/aliases/` at 1.0 (docs/removing-the-alias-layer.md).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { declaredWindowBytes } from '../../src/proxy/content-coding.ts';
import { openRaw } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { startRawUpstream } from '../helpers/raw-upstream.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const cleanup: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** `shim_buffered_bytes` and a rejection count, read from the stack's registry. */
async function metric(stack: Stack, pattern: RegExp): Promise<number> {
  const match = pattern.exec(await stack.metrics.registry.metrics());
  return Number(match?.[1] ?? Number.NaN);
}

/**
 * Holds every thread of libuv's pool (`UV_THREADPOOL_SIZE`, 4 by default) in an `open` of a FIFO
 * without a writer, until the returned function opens the writers.
 * @returns Lets the threads go, once their opens have returned.
 */
async function holdThreadPool(): Promise<() => Promise<void>> {
  const dir = fs.mkdtempSync(path.join(tmpdir(), 'pool-'));
  const threads = Number(process.env.UV_THREADPOOL_SIZE) || 4;
  const opened: Array<Promise<void>> = [];
  const fifos: string[] = [];
  for (let i = 0; i < threads; i++) {
    const fifo = path.join(dir, `f${i}`);
    execFileSync('mkfifo', [fifo]);
    fifos.push(fifo);
    opened.push(fs.promises.open(fifo, 'r').then((handle) => handle.close()));
  }
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    // Opening the writing end returns at once: each FIFO's reader is waiting.
    for (const fifo of fifos) fs.closeSync(fs.openSync(fifo, 'w'));
    await Promise.all(opened);
    fs.rmSync(dir, { recursive: true, force: true });
  };
  cleanup.push(release);
  return release;
}

describe('a coded body whose client goes away while it is decoded, then refused', () => {
  it('gives its reservation back: shim_buffered_bytes returns to 0', async () => {
    const upstream = await startRawUpstream(() => {});
    cleanup.push(() => upstream.close());
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    cleanup.push(() => stack.close());
    // 512 KiB decoded, not JSON (the rewrite refuses it with 400); a few hundred bytes sent.
    const decoded = Buffer.concat([
      Buffer.from('{"tags":'),
      Buffer.alloc(512 * 1024, 0x20),
      Buffer.from('x'),
    ]);
    const gz = gzipSync(decoded);
    const release = await holdThreadPool();
    const client = openRaw(stack.url);
    cleanup.push(() => client.socket.destroy());
    client.socket.write(
      `POST /missions HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: ${LEGACY['service-client-version']}\r\nx-api-key: ${LEGACY['x-api-key']}\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nX-Request-Id: gone-while-decoding\r\nContent-Length: ${gz.length}\r\n\r\n`,
    );
    client.socket.write(gz);
    // The whole body read and reserved, with its decoder's window and output (fix 134): its decode waits
    // for a thread.
    const reserved = gz.length + declaredWindowBytes('gzip', gz) + 1024 * 1024; // MAX_REWRITE_BODY's default
    await waitFor(async () => (await metric(stack, /^shim_buffered_bytes (\d+)/m)) === reserved, {
      what: 'the coded body read',
    });
    client.socket.destroy();
    await waitFor(() => stack.logs().some((l) => l.msg === 'request completed' && l.aborted === true), {
      what: 'the exchange ended (the client gone)',
    });
    expect(await metric(stack, /^shim_buffered_bytes (\d+)/m)).toBe(0);
    await release();
    // The decode done, the rewrite refused the body.
    await waitFor(async () => (await metric(stack, /shim_rejections_total\{reason="body"\} (\d+)/)) === 1, {
      what: 'the body refused',
    });
    // Without the fix: the decoded 524,297 bytes stay reserved for good.
    expect(await metric(stack, /^shim_buffered_bytes (\d+)/m)).toBe(0);
    expect(upstream.connections()).toBe(0);
    // The count has a line (fix 172): the exchange's own line was written at the close, aborted and
    // without a rejection; the refusal decided after it says so in a line of its own.
    const lines = stack.logs();
    const exchange = lines.filter((l) => l.msg === 'request completed');
    expect(exchange).toHaveLength(1);
    expect(exchange[0]).toMatchObject({ aborted: true });
    expect(exchange[0]?.rejection).toBeUndefined();
    const refused = lines.filter((l) => l.msg === 'request refused after its connection closed');
    expect(refused).toEqual([
      expect.objectContaining({
        level: 40,
        req: { method: 'POST', path: '/missions' },
        requestId: 'gone-while-decoding',
        rejection: 'body',
      }),
    ]);
  });
});
