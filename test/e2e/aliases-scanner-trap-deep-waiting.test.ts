/**
 * A failure of the JSON scanner (a WebAssembly trap) while another legacy response is half scanned at
 * a nesting deeper than a fresh instance's memory holds (~35,000 levels): the trap gives up only its
 * own text, and the waiting response goes on (fix 75; docs/reliability.md). Before the fix, its next
 * chunk's restore into the fresh instance threw a RangeError out of the upstream's 'data' listener.
 *
 * Delete this file with `src/aliases/` at 1.0 (docs/removing-the-alias-layer.md).
 */
import http from 'node:http';
import type net from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { injectScanFailure } from '../../src/aliases/json-scan.ts';
import { send } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const LEVELS = 60_000;
const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;

let upstream: RawUpstream;
let stack: Stack;
let deep: net.Socket | undefined;
beforeAll(async () => {
  upstream = await startRawUpstream((socket, received) => {
    if (!received.includes('\r\n\r\n') || !received.startsWith('GET /missions/deep ')) return;
    deep = socket;
    socket.write(
      'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n' +
        chunk('['.repeat(LEVELS)),
    );
  });
  stack = await startStack({ UPSTREAM_URL: upstream.url });
});
afterAll(async () => {
  await stack.close();
  await upstream.close();
});

it('a trap while a response waits half scanned 60,000 levels deep: that response still arrives whole', async () => {
  const url = new URL(stack.url);
  const body: Buffer[] = [];
  let status = 0;
  let ended = false;
  const request = http.get({
    host: url.hostname,
    port: url.port,
    path: '/missions/deep',
    headers: LEGACY,
    agent: false,
  });
  request.on('response', (res) => {
    status = res.statusCode ?? 0;
    res.on('data', (c: Buffer) => body.push(c));
    res.on('end', () => {
      ended = true;
    });
  });
  // The head goes out with the first scanned chunk: the deep response's scanner now waits.
  await waitFor(() => status !== 0 && body.length > 0, { what: 'the first scanned chunk' });

  injectScanFailure(new Error('unreachable'));
  const trapped = await send(
    stack.url,
    'POST',
    '/missions',
    { ...LEGACY, 'content-type': 'application/json' },
    '{"tags":[]}',
  );
  expect(trapped.status).toBe(500);

  deep!.end(`${chunk(']'.repeat(LEVELS))}0\r\n\r\n`);
  await waitFor(() => ended, { what: 'the deep response' });
  expect(status).toBe(200);
  expect(Buffer.concat(body).toString('latin1')).toBe('['.repeat(LEVELS) + ']'.repeat(LEVELS));
});
