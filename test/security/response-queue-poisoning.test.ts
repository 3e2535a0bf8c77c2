/**
 * Attack: response queue poisoning (the upstream side of request smuggling; PortSwigger, "Response
 * queue poisoning").
 *
 * A proxy that pools upstream connections pairs responses with requests by order. If an upstream
 * connection carries one response too many — an upstream that answered a smuggled request, or a
 * compromised or buggy upstream that appends a response — a proxy that reuses the connection hands that
 * extra response to the next client, who receives somebody else's data (and that client's own response
 * goes to the one after). The shim must never pass an unsolicited response on: each client gets the
 * response to its own request.
 */
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { frameRequests } from '../helpers/http1-frames.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

const response = (target: string) => {
  const body = JSON.stringify({ target });
  return `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
};

/** An upstream that answers every request with its target, and adds a response for `/poison` after `/evil`. */
async function poisoningUpstream(delayMs: number | undefined) {
  const answered = new WeakMap<object, number>();
  let poisoned = false;
  const open = new Set<object>();
  const poison = (socket: net.Socket) => {
    socket.write(response('/poison'));
    poisoned = true;
  };
  const raw = await startRawUpstream((socket, received) => {
    if (!open.has(socket)) {
      open.add(socket);
      socket.once('close', () => open.delete(socket));
    }
    const { requests } = frameRequests(received);
    for (let i = answered.get(socket) ?? 0; i < requests.length; i++) {
      const target = requests[i]?.target ?? '';
      socket.write(response(target));
      if (target === '/evil') {
        if (delayMs === undefined) poison(socket);
        else setTimeout(() => poison(socket), delayMs);
      }
    }
    answered.set(socket, requests.length);
  });
  upstreams.push(raw);
  return { ...raw, poisoned: () => poisoned, open: () => open.size };
}

describe('an upstream connection carrying an extra response', () => {
  it.each([
    ['in the same packet as the real one', undefined],
    ['after the connection went back to the pool', 50],
  ])('%s: the next clients get their own responses', async (_name, delay) => {
    const upstream = await poisoningUpstream(delay);
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    expect((await send(stack.url, 'GET', '/evil', CURRENT)).json()).toEqual({ target: '/evil' });
    // The extra response is out, and the shim has discarded the connection that carried it (a shim that
    // kept it pooled fails here, by the deadline, or below).
    await waitFor(() => upstream.poisoned() && upstream.open() === 0, {
      what: 'the poisoned connection to close',
    });
    for (let i = 0; i < 5; i++) {
      const reply = await send(stack.url, 'GET', `/next${i}`, CURRENT);
      expect(reply.status).toBe(200);
      expect(reply.json()).toEqual({ target: `/next${i}` });
    }
    // The poisoned connection was discarded, not reused.
    expect(upstream.connections()).toBeGreaterThanOrEqual(2);
    expect(frameRequests(upstream.received[0] ?? '').requests.map((r) => r.target)).toEqual(['/evil']);
  });
});
