/**
 * The upstream pool. Its gauges on the admin listener's /metrics (observability/metrics.ts
 * registerUpstreamPoolGauges): connections carrying a request count as active while it is in flight,
 * and as idle once the pool keeps them for the next; nothing waits while the pool is below its limit.
 *
 * A full pool (`UPSTREAM_MAX_CONNECTIONS`): long-lived responses (server-sent events, long
 * polls), slow readers or a slow upstream hold every connection. A request that finds none waits at most
 * `UPSTREAM_CONNECT_TIMEOUT_MS`, then gets 503 with `Retry-After` (docs/reliability.md fix 142) — it used
 * to wait `UPSTREAM_TIMEOUT_MS` for a 504 (1,100 event streams: a plain GET answered after 60 s), and a
 * waiting request whose client went away stayed in the pool's queue and its gauge (fix 143). Real
 * sockets; the upstream holds every request until the test lets it answer.
 */
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openRaw, type Reply, send } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

/** The admin listener's value of a sample, e.g. `shim_upstream_requests_waiting`. */
async function sample(stack: Stack, name: string): Promise<number> {
  const text = await (await fetch(`${stack.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.slice(name.length + 1) ?? Number.NaN);
}

/** An upstream that holds every request it receives until `answerAll()`. */
async function holdingUpstream() {
  const held: net.Socket[] = [];
  const upstream = await startRawUpstream((socket, received) => {
    if (received.endsWith('\r\n\r\n') && !held.includes(socket)) held.push(socket);
  });
  upstreams.push(upstream);
  const answerAll = () => {
    for (const socket of held.splice(0)) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}');
  };
  return { upstream, held, answerAll };
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

describe('a full upstream pool', () => {
  it('answers 503 with Retry-After after UPSTREAM_CONNECT_TIMEOUT_MS; the request is never sent', async () => {
    const { upstream, held, answerAll } = await holdingUpstream();
    const stack = await startStack({
      UPSTREAM_URL: upstream.url,
      UPSTREAM_MAX_CONNECTIONS: '2',
      // Also the holding connections' connect timeout: generous for a loaded machine.
      UPSTREAM_CONNECT_TIMEOUT_MS: '1000',
    });
    stacks.push(stack);
    expect(await sample(stack, 'shim_upstream_connections_limit')).toBe(2);
    const holding: Promise<Reply>[] = [
      send(stack.url, 'GET', '/events', CURRENT),
      send(stack.url, 'GET', '/events', CURRENT),
    ];
    await waitFor(() => held.length === 2, { what: 'both connections of the pool held' });

    const refused = await send(stack.url, 'GET', '/missions', CURRENT);
    expect(refused.status).toBe(503);
    // One field line: Node's parser keeps the first of two, but fetch and browsers read `1, 1`, and
    // urllib3's Retry raised InvalidHeader instead of retrying (the real-clients check of fix 142).
    expect(refused.rawHeaders.filter((h) => h.toLowerCase() === 'retry-after')).toEqual(['Retry-After']);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.json()).toMatchObject({
      statusCode: 503,
      message: expect.stringMatching(/UPSTREAM_MAX_CONNECTIONS/),
    });
    expect(await stack.metrics.registry.metrics()).toMatch(/shim_rejections_total\{reason="pool_full"\} 1/);
    expect(upstream.connections()).toBe(2);
    expect(await sample(stack, 'shim_upstream_requests_waiting')).toBe(0);
    const line = await waitFor(
      () => stack.logs().find((l) => l.msg === 'request completed' && l.rejection === 'pool_full'),
      { what: 'the refused request line' },
    );
    expect(line).toMatchObject({ waitedForConnection: true, res: { statusCode: 503 } });

    answerAll();
    for (const reply of await Promise.all(holding)) expect(reply.status).toBe(200);
    // The pool serves again at once.
    const next = send(stack.url, 'GET', '/missions', CURRENT);
    await waitFor(() => held.length === 1, { what: 'the next request upstream' });
    answerAll();
    expect((await next).status).toBe(200);
  });

  it('takes a waiting request whose client went away out of the queue and its gauge', async () => {
    const { upstream, held, answerAll } = await holdingUpstream();
    const stack = await startStack({
      UPSTREAM_URL: upstream.url,
      UPSTREAM_MAX_CONNECTIONS: '1',
      // Far beyond the test: only the client's going away ends the wait.
      UPSTREAM_CONNECT_TIMEOUT_MS: '60000',
    });
    stacks.push(stack);
    const holding = send(stack.url, 'GET', '/events', CURRENT);
    await waitFor(() => held.length === 1, { what: 'the pool held' });
    const client = openRaw(stack.url);
    client.socket.write(
      'GET /missions HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nx-api-key: k\r\n\r\n',
    );
    await waitFor(async () => (await sample(stack, 'shim_upstream_requests_waiting')) === 1, {
      what: 'the request waiting for a connection',
    });
    client.socket.destroy();
    await waitFor(async () => (await sample(stack, 'shim_upstream_requests_waiting')) === 0, {
      what: 'the abandoned request out of the queue',
    });
    answerAll();
    expect((await holding).status).toBe(200);
    // Never sent: the freed connection carried no request of a client that was gone.
    expect(upstream.received.join('').match(/GET \/missions/g)).toBeNull();
  });
});
