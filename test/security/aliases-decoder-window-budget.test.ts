/**
 * Attack: many legacy clients reading coded (brotli, zstd) responses slowly, to exhaust the shim's memory.
 * To patch a coded response the shim decodes it, and the decoder holds the window the upstream's encoder
 * chose (brotli up to 16 MiB, zstd up to 8 MiB) for as long as the response lasts; it was outside
 * `MAX_BUFFERED_BYTES`: 50 legacy clients reading a 22 MB brotli list (16 MiB window) at 1 KB/s took
 * +481 MiB, while `shim_buffered_bytes` read 4 MB. Now the window the body declares is reserved from
 * the budget once its first bytes arrive; without room the response goes out as the upstream sent it
 * (unpatched, `budget_exhausted`), as when a patch cannot hold a value. docs/reliability.md fix 135.
 *
 * Deterministic here: a budget (1 MiB) smaller than the 4 MiB window Node's brotli encoder declares and
 * larger than gzip's 64 KiB; an upstream that sends the same list in the coding asked for.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Coding, DECODE_SYNC, ENCODE_SYNC } from '../helpers/codings.ts';
import { send } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const LIST = Buffer.from(
  `{"data":[${Array.from({ length: 50 }, (_v, k) => `{"id":${k},"metadata":{"k":"v"}}`).join(',')}]}`,
);

let upstream: Server;
let stack: Stack;
beforeAll(async () => {
  upstream = createServer((req, res) => {
    req.resume();
    const coding = new URL(req.url ?? '/', 'http://u').searchParams.get('coding') as Coding;
    const body = ENCODE_SYNC[coding](LIST);
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-encoding': coding,
      'content-length': body.length,
    });
    res.end(body);
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  stack = await startStack({
    UPSTREAM_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    MAX_REWRITE_BODY: '64kb',
    MAX_BUFFERED_BYTES: '1mb',
  });
});
afterAll(async () => {
  await stack.close();
  upstream.closeAllConnections();
  await new Promise((resolve) => upstream.close(resolve));
});

const skipped = async () => {
  const { values } = await stack.metrics.patchesSkipped.get();
  return values.find((v) => v.labels.reason === 'budget_exhausted')?.value ?? 0;
};
const buffered = async () => {
  const text = (await send(stack.adminUrl, 'GET', '/metrics')).text;
  return Number(/^shim_buffered_bytes (\d+)/m.exec(text)?.[1]);
};

describe("a coded response's decoder window is reserved from MAX_BUFFERED_BYTES", () => {
  it('brotli declaring a 4 MiB window, in a 1 MiB budget: sent unpatched as the upstream sent it, counted', async () => {
    const before = await skipped();
    const reply = await send(stack.url, 'GET', '/list?coding=br', { ...LEGACY, 'accept-encoding': 'br' });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-encoding']).toBe('br');
    expect(Buffer.from(reply.body).equals(ENCODE_SYNC.br(LIST))).toBe(true);
    expect(await skipped()).toBe(before + 1);
  });

  it.each(['gzip', 'zstd'] as const)(
    '%s declaring a window that fits: patched, and the window given back after',
    async (coding) => {
      const reply = await send(stack.url, 'GET', `/list?coding=${coding}`, {
        ...LEGACY,
        'accept-encoding': coding,
      });
      expect(reply.status).toBe(200);
      const text = DECODE_SYNC[coding](Buffer.from(reply.body)).toString();
      expect(text.match(/"tags":\{"k":"v"\}/g)).toHaveLength(50);
      await waitFor(async () => (await buffered()) < 64 * 1024, { what: 'the window given back' });
    },
  );
});
