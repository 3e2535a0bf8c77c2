/**
 * Attack: a connection flood past the process's file-descriptor limit — the shim must shed the
 * connections it cannot accept, stay up, and serve again as soon as descriptors are free; and a
 * failed accept (the listener's `'error'` after it listens) must be logged, not thrown: Node throws an
 * `'error'` nobody listens to, which would end the process with every exchange in flight.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { type DebugUpstream, startDebugUpstream } from '../helpers/debug-upstream.ts';
import { send } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

/** The shim's descriptor limit in the flood test: room to start, far fewer than the flood. */
const DESCRIPTOR_LIMIT = 160;
const FLOOD = 400;

const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** `node src/main.ts` under `ulimit -n`, in front of `upstream`; resolves with its front-door port. */
async function spawnLimitedShim(upstream: DebugUpstream): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(
    '/bin/sh',
    ['-c', `ulimit -n ${DESCRIPTOR_LIMIT} && exec "$@"`, 'sh', process.execPath, 'src/main.ts'],
    {
      env: { ...process.env, UPSTREAM_URL: upstream.url, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let out = '';
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const port = await waitFor(() => /"port":(\d+)/.exec(out)?.[1], {
    timeoutMs: 20_000,
    what: 'the listening line',
  });
  return { child, port: Number(port) };
}

describe('connection flood past the file-descriptor limit', () => {
  it('sheds what it cannot accept, stays up, and serves again once descriptors are free', async () => {
    const upstream = await startDebugUpstream();
    cleanups.push(() => upstream.close());
    const { child, port } = await spawnLimitedShim(upstream);

    // Each connection sends half a request head and waits: accepted ones hold a descriptor.
    const flood: net.Socket[] = [];
    let shed = 0;
    for (let k = 0; k < FLOOD; k++) {
      const socket = net.connect(port, '127.0.0.1', () =>
        socket.write('GET /api/health HTTP/1.1\r\nHost: x\r\n'),
      );
      socket.on('error', () => {});
      socket.on('close', () => shed++);
      flood.push(socket);
    }
    cleanups.push(() => {
      for (const socket of flood) socket.destroy();
    });
    // More connections than descriptors: the shim closed some itself (libuv's EMFILE shedding).
    await waitFor(() => shed > 0, { timeoutMs: 10_000, what: 'the shim to shed connections' });
    expect(child.exitCode).toBeNull();
    expect(child.signalCode).toBeNull();

    for (const socket of flood) socket.destroy();
    const reply = await waitFor(
      async () => {
        const r = await send(`http://127.0.0.1:${port}`, 'GET', '/api/health', CURRENT).catch(
          () => undefined,
        );
        return r?.status === 200 ? r : undefined;
      },
      { timeoutMs: 10_000, what: 'a request served after the flood' },
    );
    expect(reply.json()).toEqual({ status: 'ok' });
    expect(child.exitCode).toBeNull();
  });
});

describe('a failed accept after listening', () => {
  let stack: Stack;

  it('is logged with its listener, and both listeners keep serving', async () => {
    const upstream = await startDebugUpstream();
    cleanups.push(() => upstream.close());
    stack = await startStack({ UPSTREAM_URL: upstream.url });
    cleanups.push(() => stack.close());
    const acceptError = () =>
      Object.assign(new Error('accept ENOBUFS'), { code: 'ENOBUFS', syscall: 'accept' });

    // What net.Server does when libuv reports a failed accept (lib/net.js onconnection).
    expect(() => stack.server.emit('error', acceptError())).not.toThrow();
    expect(() => stack.runtime.admin.emit('error', acceptError())).not.toThrow();

    const logged = stack.logs().filter((l) => l.msg === 'listener error: a connection was not accepted');
    expect(logged.map((l) => [l.level, l.listener, (l.err as { code?: string }).code])).toEqual([
      [50, 'front', 'ENOBUFS'],
      [50, 'admin', 'ENOBUFS'],
    ]);
    expect((await send(stack.url, 'GET', '/api/health', CURRENT)).status).toBe(200);
    expect((await send(stack.adminUrl, 'GET', '/healthz')).status).toBe(200);
  });
});
