/**
 * A legacy client's body the shim rewrites (held whole, sent with `end(body)`) answered early by an
 * upstream that keeps the connection and stops reading: after the response's end, Node's `ClientRequest`
 * has no timer left on the socket, and the body sat in its queue (up to `MAX_REWRITE_BODY`, outside the
 * buffer budget, released at the head) with the upstream connection held for ever
 * (docs/reliability.md fix 106).
 *
 * Delete this file with `src/aliases/` at 1.0 (docs/removing-the-alias-layer.md).
 */
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { expectUpstreamGivenUp } from '../helpers/early-answer.ts';
import { openRaw } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { startRawUpstream } from '../helpers/raw-upstream.ts';
import { LEGACY, startStack } from '../helpers/stack.ts';

const TIMEOUT_MS = 1_000;
const EARLY = 'HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

describe('a rewritten body the upstream answers early, then stops reading', () => {
  it('gives the upstream connection up after UPSTREAM_TIMEOUT_MS; the client keeps its answer', async () => {
    let answeredAt = Number.NaN;
    const upstream = await startRawUpstream((socket, received) => {
      const s = socket as net.Socket & { answered?: boolean };
      if (s.answered || !received.includes('\r\n\r\n')) return;
      s.answered = true;
      answeredAt = performance.now();
      socket.write(EARLY);
      socket.pause();
    });
    cleanup.push(() => upstream.close());
    const stack = await startStack({
      UPSTREAM_URL: upstream.url,
      UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS),
      MAX_REWRITE_BODY: '32mb',
      MAX_BUFFERED_BYTES: '128mb',
    });
    cleanup.push(() => stack.close());
    // More than loopback's socket buffers take: most of it stays in the shim's queue.
    const body = `{"name":"n","tags":{},"pad":"${'a'.repeat(24 * 1024 * 1024)}"}`;
    const client = openRaw(stack.url);
    cleanup.push(async () => client.socket.destroy());
    client.socket.write(
      `POST /missions HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: ${LEGACY['service-client-version']}\r\nx-api-key: ${LEGACY['x-api-key']}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    await waitFor(() => client.text().startsWith('HTTP/1.1 404'), {
      timeoutMs: 10_000,
      what: 'the early answer',
    });
    await expectUpstreamGivenUp(stack, answeredAt, TIMEOUT_MS);
    // The client had its whole answer, and its connection stays usable.
    expect(client.socket.destroyed).toBe(false);
  });
});
