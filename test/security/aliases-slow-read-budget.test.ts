/**
 * Slow read (slowhttptest -X) of patched responses against the process-wide buffer budget
 * (`MAX_BUFFERED_BYTES`, issue 9 item 2; docs/reliability.md fix 89).
 *
 * Attack: many connections ask for a long JSON list as a legacy client (any API key) and never read
 * it. Each such response stalls with its patch alive. Before the fix the patch kept its spare output
 * buffer (up to 256 KiB, for reuse by its next chunk) reserved from the budget for as long as the
 * response lasted, so a few hundred stalled readers (1,000 against the default 64 MiB in the container
 * audit) held the whole budget, and every other legacy client's response went out without its aliases
 * (`budget_exhausted`). Spare and pooled output buffers are a cache: they are now kept only while the
 * budget's total use stays within a quarter of it (`reusableOutputCeiling`), so the values that
 * patches must hold always find room.
 */
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor, waitForStable } from '../helpers/poll.ts';
import { type ShimProcess, spawnShim } from '../helpers/spawn-shim.ts';

const LEGACY = { 'service-client-version': '0.59.0', 'x-api-key': 'k' };
/** One list item as the canonical upstream sends it (~100 bytes, one insertion each for a legacy client). */
const ITEM = '{"uuid":"00000000-0000-0000-0000-000000000000","name":"m","metadata":["a","b","c"]}';
/** Items per write of the endless list: ~64 KiB, a socket read's worth. */
const BATCH = `,${ITEM}`.repeat(640);

let upstream: http.Server;
/** Requests for the endless list the upstream received, and the bytes it has written for them. */
let endless = 0;
let endlessBytes = 0;
let shim: ShimProcess | undefined;
const stalled: net.Socket[] = [];

afterAll(async () => {
  for (const socket of stalled) socket.destroy();
  await shim?.stop();
  upstream?.closeAllConnections();
  await new Promise<void>((resolve) => (upstream ? upstream.close(() => resolve()) : resolve()));
});

/**
 * A canonical upstream: `GET /endless` writes a JSON list for as long as its reader takes it (with
 * backpressure), `GET /missions` a short list.
 */
async function listUpstream(): Promise<string> {
  upstream = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    if (req.url !== '/endless') {
      res.end(`[${ITEM}]`);
      return;
    }
    endless++;
    res.write(`[${ITEM}`);
    const more = () => {
      do endlessBytes += BATCH.length;
      while (!res.destroyed && res.write(BATCH));
    };
    res.on('drain', more);
    more();
  });
  upstream.listen(0, '127.0.0.1', 1024);
  await once(upstream, 'listening');
  return `http://127.0.0.1:${(upstream.address() as net.AddressInfo).port}`;
}

/** A legacy client that asks for the endless list and never reads (its window closes, the response stalls). */
function stalledReader(url: string): net.Socket {
  const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
  socket.on('error', () => {});
  socket.write(
    'GET /endless HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 0.59.0\r\nX-Api-Key: k\r\n\r\n',
  );
  socket.pause();
  return socket;
}

async function metric(adminUrl: string, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  return Number(pattern.exec(text)?.[1] ?? 0);
}

describe('slowhttptest -X: slow readers of patched lists against the buffer budget (MAX_BUFFERED_BYTES=4mb)', () => {
  it('stalled legacy readers never take the aliases out of another legacy response', async () => {
    const upstreamUrl = await listUpstream();
    // 4 MiB: 32 spare output buffers of 128 KiB would fill it; 60 stalled responses each had one.
    shim = await spawnShim({
      UPSTREAM_URL: upstreamUrl,
      MAX_BUFFERED_BYTES: '4mb',
      UPSTREAM_TIMEOUT_MS: '120000',
    });
    for (let i = 0; i < 60; i++) stalled.push(stalledReader(shim.url));
    // Every stalled response was patched until its client's window closed and backpressure stopped it.
    await waitFor(() => endless === 60, { timeoutMs: 30_000, what: 'the 60 requests upstream' });
    await waitForStable(() => endlessBytes, { what: 'the stalled responses to stop' });
    const probes: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${shim.url}/missions`, { headers: LEGACY });
      probes.push(await res.text());
    }
    expect(probes).toEqual(Array(5).fill(`[${ITEM.slice(0, -1)},"tags":["a","b","c"]}]`));
    expect(
      await metric(shim.adminUrl, /shim_response_patches_skipped_total\{reason="budget_exhausted"\} (\d+)/),
    ).toBe(0);
  }, 60_000);
});
