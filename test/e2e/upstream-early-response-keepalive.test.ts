/**
 * An upstream that answers a streamed upload before the body has all been sent, and keeps the
 * connection (RFC 9112 §9.5 lets it go on reading the body; a `404`, `401` or `413` with keep-alive, or a
 * `2xx` that acknowledges early). Node's `ClientRequest` stops listening to its socket's `'drain'` once
 * the response is complete, and takes its idle timer off the socket when the response ends: the shim's
 * next write that met backpressure waited for ever, the client's body unread and both connections held
 * with no timer (docs/reliability.md fix 105).
 */
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { expectUpstreamGivenUp } from '../helpers/early-answer.ts';
import { openRaw } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, startStack } from '../helpers/stack.ts';

const TIMEOUT_MS = 1_000;
const EARLY = 'HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** A raw upstream answering `/upload` at its head with {@link EARLY}; `read` false: it then reads nothing. */
async function earlyUpstream(read: boolean) {
  let bodyBytes = 0;
  let answeredAt = Number.NaN;
  const upstream = await startRawUpstream((socket, received) => {
    const s = socket as net.Socket & { answered?: boolean; headEnd?: number };
    if (s.answered) {
      bodyBytes = received.length - (s.headEnd ?? 0);
      return;
    }
    const headEnd = received.indexOf('\r\n\r\n');
    if (headEnd < 0) return;
    s.answered = true;
    s.headEnd = headEnd + 4;
    answeredAt = performance.now();
    socket.write(EARLY);
    bodyBytes = received.length - s.headEnd;
    if (!read) socket.pause();
  });
  cleanup.push(() => upstream.close());
  return { upstream, bodyBytes: () => bodyBytes, answeredAt: () => answeredAt };
}

describe('an upload the upstream answers early and keeps the connection', () => {
  it('still forwards the whole body to an upstream that reads it', async () => {
    const { upstream, bodyBytes } = await earlyUpstream(true);
    const stack = await startStack({ UPSTREAM_URL: upstream.url, UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS) });
    cleanup.push(() => stack.close());
    const length = 8 * 1024 * 1024;
    // A raw client: Node's own ClientRequest stops hearing 'drain' once its response is complete too.
    const client = openRaw(stack.url);
    cleanup.push(async () => client.socket.destroy());
    client.socket.write(
      `POST /upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: ${CURRENT['service-client-version']}\r\nx-api-key: ${CURRENT['x-api-key']}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${length}\r\n\r\n`,
    );
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let sent = 0;
    const pump = () => {
      while (sent < length) {
        sent += chunk.length;
        if (!client.socket.write(chunk)) return void client.socket.once('drain', pump);
      }
    };
    pump();
    // Without the fix the body stopped at the first backpressure after the answer (~64–130 KiB upstream).
    await waitFor(() => bodyBytes() === length, {
      timeoutMs: 5_000,
      what: 'the whole body upstream',
    });
    expect(client.text()).toMatch(/^HTTP\/1\.1 404 /);
  });

  it('cuts an upstream that stops reading after UPSTREAM_TIMEOUT_MS, and closes the client’s connection', async () => {
    const { upstream, answeredAt } = await earlyUpstream(false);
    const stack = await startStack({ UPSTREAM_URL: upstream.url, UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS) });
    cleanup.push(() => stack.close());
    const client = openRaw(stack.url);
    cleanup.push(async () => client.socket.destroy());
    client.socket.write(
      `POST /upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: ${CURRENT['service-client-version']}\r\nx-api-key: ${CURRENT['x-api-key']}\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000000\r\n\r\n`,
    );
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const drip = setInterval(() => {
      if (!client.socket.destroyed && !client.socket.writableNeedDrain) client.socket.write(chunk);
    }, 5);
    cleanup.push(async () => clearInterval(drip));
    await waitFor(() => client.text().startsWith('HTTP/1.1 404'), { what: 'the early answer' });
    await expectUpstreamGivenUp(stack, answeredAt(), TIMEOUT_MS);
    // The rest of the body is read and dropped for DISCARD_LIMIT_MS (5 s), then the connection closes.
    await waitFor(() => client.socket.destroyed, { timeoutMs: 10_000, what: 'the client connection closed' });
  });
});
