/**
 * A legacy client's rewritten body answered early (at its head) by an upstream that has not read it
 * yet: the body, sent whole with `end(body)`, sits in the shim's upstream socket until the upstream
 * reads it. Its reservation of `MAX_BUFFERED_BYTES` was released at the head, so the budget read 0
 * while the bodies sat in memory, and took more: four 24 MiB bodies queued at once (100.7 MB) with a
 * 67 MiB budget, `shim_buffered_bytes 0` (docs/reliability.md fix 111). The reservation now lasts
 * until the body has left the shim.
 *
 * Delete this file with `src/aliases/` at 1.0 (docs/removing-the-alias-layer.md).
 */
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openRaw } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { startRawUpstream } from '../helpers/raw-upstream.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const EARLY = 'HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';

const cleanup: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function bufferedBytes(stack: Stack): Promise<number> {
  return Number(/^shim_buffered_bytes (\d+)/m.exec(await stack.metrics.registry.metrics())?.[1]);
}

describe('a rewritten body the upstream answers before reading it', () => {
  it('stays in MAX_BUFFERED_BYTES until the upstream has read it', async () => {
    // Answers at the head, then reads nothing until the test lets it.
    const held = new Set<net.Socket>();
    const upstream = await startRawUpstream((socket, received) => {
      const s = socket as net.Socket & { answered?: boolean };
      if (s.answered || !received.includes('\r\n\r\n')) return;
      s.answered = true;
      socket.write(EARLY);
      socket.pause();
      held.add(socket);
    });
    cleanup.push(() => upstream.close());
    // 20 MiB bodies: more than loopback's socket buffers take. Bodies may hold 42 MiB together (three
    // quarters of 56 MiB, the least MAX_BUFFERED_BYTES that 21 MiB bodies allow): two, not three.
    const stack = await startStack({
      UPSTREAM_URL: upstream.url,
      MAX_REWRITE_BODY: '21mb',
      MAX_BUFFERED_BYTES: '56mb',
    });
    cleanup.push(() => stack.close());
    const body = `{"name":"n","tags":{},"pad":"${'a'.repeat(20 * 1024 * 1024)}"}`;
    const post = async () => {
      const client = openRaw(stack.url);
      cleanup.push(() => client.socket.destroy());
      client.socket.write(
        `POST /missions HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: ${LEGACY['service-client-version']}\r\nx-api-key: ${LEGACY['x-api-key']}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
      await waitFor(() => client.text().includes('\r\n\r\n'), { timeoutMs: 10_000, what: 'an answer' });
      return client.text().slice(9, 12);
    };
    const agent = stack.shim.forwarder.agent;
    const inUse = () => Object.values(agent.sockets).flat().length;

    expect(await post()).toBe('404');
    // The body is still being sent (its upstream connection in use), and still counted.
    expect(inUse()).toBe(1);
    expect(await bufferedBytes(stack)).toBe(body.length);
    expect(await post()).toBe('404');
    expect(inUse()).toBe(2);
    // Two bodies in the shim's upstream sockets: a third does not fit (without the fix: 404, the
    // budget at 0 with 40 MiB held).
    expect(await post()).toBe('503');

    // The upstream reads: the bodies leave the shim, their reservations go back.
    for (const socket of held) socket.resume();
    await waitFor(() => inUse() === 0, { timeoutMs: 10_000, what: 'the bodies sent' });
    await waitFor(async () => (await bufferedBytes(stack)) === 0, { what: 'shim_buffered_bytes back to 0' });
  });
});
