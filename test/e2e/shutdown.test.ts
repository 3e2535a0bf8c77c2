/**
 * Graceful shutdown, end to end: `node src/main.ts` as a child process in front of a slow upstream of
 * our own, a request in flight, then SIGTERM / SIGINT (SPEC §8); and the start: fail closed without
 * `UPSTREAM_URL`, demo mode with `--demo` (issue 10).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import http, { type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const CLIENT = { 'service-client-version': '1.2.0', 'x-api-key': 'k' };
/** Size of the upstream's `/big` response: far more than the socket buffers between shim and client. */
const BIG = 24 * 1024 * 1024;

interface Running {
  child: ChildProcess;
  port: number;
  adminPort: number;
  lines(): Array<Record<string, unknown>>;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

const children: ChildProcess[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** Spawns the shim and resolves once it logged that it listens (or rejects with its output). */
async function spawnShim(env: Record<string, string>, args: string[] = []): Promise<Running> {
  const child = spawn(process.execPath, [MAIN, ...args], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', ADMIN_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
    at: performance.now(),
  }));
  const lines = () =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  const listening = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const check = () => {
      const line = lines().find((l) => l.msg === 'compat-shim listening');
      if (line) {
        clearInterval(timer);
        resolve(line);
      }
    };
    const timer = setInterval(check, 20);
    void exited.then(() => {
      clearInterval(timer);
      reject(new Error(`shim exited before listening:\n${out}\n${err}`));
    });
  });
  return {
    child,
    port: Number(listening.port),
    adminPort: Number(listening.adminPort),
    lines,
    stderr: () => err,
    exited,
  };
}

/** Runs the shim to completion (for start-up failures). */
async function runToExit(
  env: Record<string, string>,
  args: string[] = [],
): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [MAIN, ...args], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const [code] = await once(child, 'exit');
  return { code: code as number | null, stderr };
}

/**
 * An upstream whose `/slow` answers after `headerDelayMs` and streams `chunks` chunks of 1 KiB every
 * 100 ms, whose `/big` sends {@link BIG} bytes at once, and whose `/hang` never answers. `arrived` resolves when a request reached it.
 */
async function startSlowUpstream(headerDelayMs = 500, chunks = 5) {
  let notify: () => void = () => {};
  let arrived = new Promise<void>((r) => {
    notify = r;
  });
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    // The shim's start and readiness probes (GET /api/health) are not the test's requests.
    if (req.url === '/api/health') {
      res.end('{"status":"ok"}');
      return;
    }
    notify();
    if (req.url?.startsWith('/hang')) return;
    if (req.url?.startsWith('/big')) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': BIG });
      res.end(Buffer.alloc(BIG, 0x62));
      return;
    }
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': chunks * 1024 });
      let sent = 0;
      const timer = setInterval(() => {
        res.write(Buffer.alloc(1024, 0x61));
        if (++sent === chunks) {
          clearInterval(timer);
          res.end();
        }
      }, 100);
    }, headerDelayMs);
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    arrived: () => arrived,
    reset: () => {
      arrived = new Promise<void>((r) => {
        notify = r;
      });
    },
  };
}

interface Completed {
  status: number;
  headers: http.IncomingHttpHeaders;
  bytes: number;
  at: number;
}

/** Sends a GET through the shim on `agent`; resolves with the complete response or rejects. */
function get(port: number, path: string, agent: http.Agent): Promise<Completed> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent, headers: CLIENT }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
      });
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes, at: performance.now() }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/** Whether a process with this pid exists (signal 0 checks without sending anything). */
function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function readyStatus(adminPort: number): Promise<number> {
  return (await fetch(`http://127.0.0.1:${adminPort}/readyz`)).status;
}

async function waitFor(predicate: () => Promise<boolean> | boolean, timeoutMs = 3_000): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (!(await predicate())) {
    if (performance.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

function connectError(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.once('error', (e: NodeJS.ErrnoException) => resolve(e.code));
  });
}

describe('graceful shutdown', () => {
  it('on SIGTERM turns unready, refuses new connections, finishes the in-flight request and exits 0', async () => {
    const upstream = await startSlowUpstream(500, 5);
    const shim = await spawnShim({ UPSTREAM_URL: upstream.url, SHUTDOWN_TIMEOUT_MS: '5000' });
    expect(await readyStatus(shim.adminPort)).toBe(200);
    const agent = new http.Agent({ keepAlive: true });

    const inFlight = get(shim.port, '/slow', agent);
    await upstream.arrived();
    const signalledAt = performance.now();
    shim.child.kill('SIGTERM');

    await waitFor(async () => (await readyStatus(shim.adminPort)) === 503);
    expect(await connectError(shim.port)).toBe('ECONNREFUSED');

    const response = await inFlight;
    expect(response.status).toBe(200);
    expect(response.bytes).toBe(5 * 1024);
    // The socket is not kept for another request: the client learns it from the response.
    expect(response.headers.connection).toBe('close');

    const exit = await shim.exited;
    expect(exit.code).toBe(0);
    expect(exit.at - signalledAt).toBeLessThan(5_000);
    // The finished keep-alive socket was closed at once, not after the 5 s keep-alive timeout.
    expect(exit.at - response.at).toBeLessThan(1_000);
    const messages = shim.lines().map((l) => l.msg);
    expect(messages).toEqual(expect.arrayContaining(['draining', 'request completed', 'stopped']));
    expect(shim.lines().find((l) => l.msg === 'draining')).toMatchObject({ signal: 'SIGTERM', inFlight: 1 });
    agent.destroy();
  });

  it('does not exit before a slow client has read the last byte of its response', async () => {
    const upstream = await startSlowUpstream();
    const shim = await spawnShim({ UPSTREAM_URL: upstream.url, SHUTDOWN_TIMEOUT_MS: '20000' });
    // A client reading at about 8 MiB/s: the socket buffers hold the response's tail for a while
    // after the shim has written its last byte.
    let received = 0;
    let closedAt = 0;
    const done = new Promise<void>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port: shim.port, path: '/big', headers: CLIENT }, (res) => {
        shim.child.kill('SIGTERM');
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          res.pause();
          setTimeout(() => res.resume(), chunk.length / (8 * 1024));
        });
        res.on('end', () => {
          closedAt = performance.now();
          resolve();
        });
        res.on('error', reject);
      });
      req.on('error', reject);
    });
    let receivedAtExit = -1;
    void shim.exited.then(() => {
      receivedAtExit = received;
    });
    await done;
    const exit = await shim.exited;
    expect(received).toBe(BIG);
    expect(exit.code).toBe(0);
    // The shim released the connection only after the client had read everything: not while the
    // tail was still in the socket buffers (lost if a container's network goes away with the process).
    expect(receivedAtExit).toBe(BIG);
    expect(exit.at).toBeGreaterThanOrEqual(closedAt);
  });

  it('closes idle keep-alive connections at once instead of waiting for their timeout', async () => {
    const upstream = await startSlowUpstream(0, 1);
    const shim = await spawnShim({ UPSTREAM_URL: upstream.url });
    const agent = new http.Agent({ keepAlive: true });
    const first = await get(shim.port, '/slow', agent);
    expect(first.headers.connection).toBe('keep-alive');
    const sockets = Object.values(agent.freeSockets).flat();
    expect(sockets).toHaveLength(1);
    const socketClosed = once(sockets[0] as net.Socket, 'close');

    const signalledAt = performance.now();
    shim.child.kill('SIGTERM');
    const exit = await shim.exited;
    await socketClosed;
    expect(exit.code).toBe(0);
    expect(exit.at - signalledAt).toBeLessThan(1_500);
    agent.destroy();
  });

  it('cuts what is still running after SHUTDOWN_TIMEOUT_MS and still exits 0', async () => {
    const upstream = await startSlowUpstream();
    const shim = await spawnShim({ UPSTREAM_URL: upstream.url, SHUTDOWN_TIMEOUT_MS: '800' });
    const agent = new http.Agent({ keepAlive: true });
    const hanging = get(shim.port, '/hang', agent);
    await upstream.arrived();
    const signalledAt = performance.now();
    shim.child.kill('SIGTERM');
    await expect(hanging).rejects.toThrow(/socket hang up|ECONNRESET/);
    const exit = await shim.exited;
    expect(exit.code).toBe(0);
    expect(exit.at - signalledAt).toBeGreaterThanOrEqual(750);
    expect(exit.at - signalledAt).toBeLessThan(3_000);
    expect(shim.lines().map((l) => l.msg)).toContain(
      'shutdown timeout reached: closing remaining connections',
    );
    agent.destroy();
  });

  it('exits at once on a second signal during the drain', async () => {
    const upstream = await startSlowUpstream();
    const shim = await spawnShim({ UPSTREAM_URL: upstream.url, SHUTDOWN_TIMEOUT_MS: '20000' });
    const agent = new http.Agent({ keepAlive: true });
    const hanging = get(shim.port, '/hang', agent).catch((e: Error) => e);
    await upstream.arrived();
    shim.child.kill('SIGTERM');
    await waitFor(async () => (await readyStatus(shim.adminPort)) === 503);
    const secondAt = performance.now();
    shim.child.kill('SIGINT');
    const exit = await shim.exited;
    expect(exit.code).toBe(1);
    expect(exit.at - secondAt).toBeLessThan(1_000);
    expect(await hanging).toBeInstanceOf(Error);
    expect(shim.lines().map((l) => l.msg)).toContain('second signal: exiting now');
    agent.destroy();
  });

  it('drains on SIGINT as on SIGTERM', async () => {
    const upstream = await startSlowUpstream(300, 2);
    const shim = await spawnShim({ UPSTREAM_URL: upstream.url });
    const agent = new http.Agent({ keepAlive: true });
    const inFlight = get(shim.port, '/slow', agent);
    await upstream.arrived();
    shim.child.kill('SIGINT');
    expect((await inFlight).bytes).toBe(2 * 1024);
    expect((await shim.exited).code).toBe(0);
    agent.destroy();
  });

  it('in demo mode, starts the reference backend as a child process, says so, and stops it', async () => {
    const shim = await spawnShim({}, ['--demo']);
    const started = shim.lines().find((l) => String(l.msg).startsWith('demo mode:'));
    expect(started?.msg).toContain('UPSTREAM_URL is unset, started the reference backend as a child process');
    const pid = Number(started?.pid);
    expect(pid).toBeGreaterThan(0);
    expect(pid).not.toBe(shim.child.pid);
    const listening = shim.lines().find((l) => l.msg === 'compat-shim listening');
    expect(listening).toMatchObject({ demo: true, serviceVersion: '0.60.0' });
    const ready = await fetch(`http://127.0.0.1:${shim.adminPort}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', demo: true });
    const res = await fetch(`http://127.0.0.1:${shim.port}/user/me`, {
      headers: { 'service-client-version': '0.59.0', 'x-api-key': 'k' },
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    shim.child.kill('SIGTERM');
    expect((await shim.exited).code).toBe(0);
    // The demo backend is gone with the shim.
    await waitFor(async () => !processExists(pid));
  });

  it('in demo mode with UPSTREAM_URL set, forwards there and is no demo', async () => {
    const upstream = await startSlowUpstream(0, 1);
    const shim = await spawnShim({ UPSTREAM_URL: upstream.url }, ['--demo']);
    expect(shim.lines().some((l) => String(l.msg).startsWith('demo mode:'))).toBe(false);
    expect(await (await fetch(`http://127.0.0.1:${shim.adminPort}/readyz`)).json()).toEqual({
      status: 'ready',
    });
    shim.child.kill('SIGTERM');
    expect((await shim.exited).code).toBe(0);
  });
});

describe('start-up failures', () => {
  it('fails closed: without UPSTREAM_URL and without --demo, a config error and exit 1', async () => {
    const { code, stderr } = await runToExit({ PORT: '0', ADMIN_PORT: '0' });
    expect(code).toBe(1);
    expect(stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^config error: UPSTREAM_URL: required/),
    ]);
  });

  it('reports the missing UPSTREAM_URL together with the other problems', async () => {
    const { code, stderr } = await runToExit({ PORT: 'eighty' });
    expect(code).toBe(1);
    const lines = stderr.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(stderr).toContain('config error: PORT');
    expect(stderr).toContain('config error: UPSTREAM_URL');
  });

  it('rejects an unknown flag with the usage line and exit 1', async () => {
    const { code, stderr } = await runToExit({ UPSTREAM_URL: 'http://127.0.0.1:9' }, ['--demo-mode']);
    expect(code).toBe(1);
    expect(stderr).toContain('usage: node dist/main.js [--demo]');
  });

  it('reports every configuration problem on its own line and exits 1', async () => {
    const { code, stderr } = await runToExit({
      PORT: 'eighty',
      LOG_LEVEL: 'loud',
      UPSTREAM_URL: 'http://127.0.0.1:9',
    });
    expect(code).toBe(1);
    const lines = stderr.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines.every((l) => l.startsWith('config error: '))).toBe(true);
    expect(stderr).toContain('PORT');
    expect(stderr).toContain('LOG_LEVEL');
  });

  it('reports a port in use in one line and exits 1', async () => {
    const taken = http.createServer();
    servers.push(taken);
    taken.listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const { port } = taken.address() as AddressInfo;
    const { code, stderr } = await runToExit({
      PORT: String(port),
      ADMIN_PORT: '0',
      UPSTREAM_URL: 'http://127.0.0.1:9',
    });
    expect(code).toBe(1);
    expect(stderr.trim()).toMatch(/^listen error: .*EADDRINUSE/);
  });
});
