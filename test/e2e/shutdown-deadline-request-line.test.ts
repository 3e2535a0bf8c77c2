/**
 * An exchange cut by the drain's deadline (`SHUTDOWN_TIMEOUT_MS`) still gets its request line, with
 * `aborted: true` (docs/reliability.md fix 141): the server counted the destroyed connections closed at
 * once, their responses' `close` came a turn later, and the process had exited by then — the drain's
 * log said `inFlight: 1`, `shutdown timeout reached`, `stopped`, and nothing said which request was cut.
 * In-process (the runtime's own drain), real sockets; the upstream never answers.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { waitFor } from '../helpers/poll.ts';
import { CURRENT, LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const servers: http.Server[] = [];
const stacks: Stack[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

it('writes the line of every exchange the drain deadline cut before the drain ends', async () => {
  let arrived = 0;
  const upstream = http.createServer(() => {
    arrived++;
  });
  servers.push(upstream);
  upstream.listen(0, '127.0.0.1');
  await new Promise((resolve) => upstream.once('listening', resolve));
  const stack = await startStack({
    UPSTREAM_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    SHUTDOWN_TIMEOUT_MS: '200',
  });
  stacks.push(stack);
  for (const [path, headers] of [
    ['/missions', CURRENT],
    ['/missions?tags=a', LEGACY],
  ] as const) {
    http.get(`${stack.url}${path}`, { headers, agent: false }).on('error', () => undefined);
  }
  await waitFor(() => arrived === 2, { what: 'both requests at the upstream' });
  await stack.runtime.drain('SIGTERM');
  // Read as soon as the drain resolves: main.ts exits then.
  const cut = stack.logs().filter((l) => l.msg === 'request completed');
  expect(cut).toHaveLength(2);
  for (const line of cut) expect(line).toMatchObject({ aborted: true, req: { method: 'GET' } });
  const messages = stack.logs().map((l) => l.msg);
  expect(messages.indexOf('shutdown timeout reached: closing remaining connections')).toBeLessThan(
    messages.indexOf('request completed'),
  );
  expect(messages.lastIndexOf('request completed')).toBeLessThan(messages.indexOf('stopped'));
});
