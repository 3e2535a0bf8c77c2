/**
 * The upstream pool's gauges on the admin listener's /metrics (observability/metrics.ts
 * registerUpstreamPoolGauges): connections carrying a request count as active while it is in flight,
 * and as idle once the pool keeps them for the next; nothing waits while the pool is below its limit.
 */
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type Reply, send } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

/** The admin listener's value of a sample, e.g. `shim_upstream_connections{state="active"}`. */
async function sample(stack: Stack, name: string): Promise<number> {
  const text = await (await fetch(`${stack.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.slice(name.length + 1) ?? Number.NaN);
}

describe('upstream pool gauges', () => {
  it('count active connections while requests are in flight, idle ones after', async () => {
    // An upstream that holds every request until the test lets it answer.
    const held: net.Socket[] = [];
    const upstream = await startRawUpstream((socket, received) => {
      if (received.endsWith('\r\n\r\n') && !held.includes(socket)) held.push(socket);
    });
    upstreams.push(upstream);
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    expect(await sample(stack, 'shim_upstream_connections_limit')).toBe(1024);

    const replies: Promise<Reply>[] = [
      send(stack.url, 'GET', '/api/health'),
      send(stack.url, 'GET', '/api/health'),
    ];
    await waitFor(() => held.length === 2, { what: 'two requests upstream' });
    expect(await sample(stack, 'shim_upstream_connections{state="active"}')).toBe(2);
    expect(await sample(stack, 'shim_upstream_requests_waiting')).toBe(0);

    for (const socket of held) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}');
    for (const reply of await Promise.all(replies)) expect(reply.status).toBe(200);
    await waitFor(async () => (await sample(stack, 'shim_upstream_connections{state="idle"}')) === 2, {
      what: 'both connections kept idle',
    });
    expect(await sample(stack, 'shim_upstream_connections{state="active"}')).toBe(0);
  });
});
