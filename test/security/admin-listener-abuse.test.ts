/**
 * Attacks on the admin listener (`ADMIN_PORT`: `/healthz`, `/readyz`, `/metrics`), which anything in the
 * cluster that can reach the pod can reach, as Prometheus does:
 *
 * - **Pipelined scrapes that are never read.** Node parses every request of a read and makes a
 *   response for each; responses to pipelined requests wait in memory for their turn. 20 connections
 *   of 500 pipelined `GET /metrics` that never read their answers took the shim from 72 to 524 MiB
 *   (still 524 once they closed; the container's limit is 512 MiB) and kept `/healthz` 12.4 s from its
 *   answer, a front-door request 2.0 s (they share the event loop). Now a request that arrives while
 *   its connection's previous response is under way, or while earlier bytes are still unread in the
 *   socket's buffer (its response not done), closes the connection: no admin client pipelines.
 * - **Slowloris.** The admin server was created without `connectionsCheckingInterval`, so Node's
 *   30 s default applied and its 5 s `headersTimeout` cut a slow head after 32–37 s (fix 7 is the same
 *   on the front door).
 *
 * Found by a probe of observability under abuse (2026-11-26, twenty-fifth session): docs/reliability.md
 * fix 127. The server here is the one `createAdminServer` makes, on a real socket.
 */
import { once } from 'node:events';
import type http from 'node:http';
import net from 'node:net';
import { Counter, Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { ADMIN_TIMEOUTS, createAdminServer } from '../../src/observability/admin.ts';
import { send } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';

const servers: http.Server[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** An admin server on an ephemeral port, with a registry of `series` series (200: a page of ~10 KB). */
async function startAdmin(series = 200): Promise<{
  server: http.Server;
  url: string;
  port: number;
  renders: () => number;
}> {
  const registry = new Registry();
  const counter = new Counter({ name: 'probe_total', help: 'h', labelNames: ['n'], registers: [registry] });
  for (let n = 0; n < series; n++) counter.inc({ n: String(n) });
  let renders = 0;
  const metrics = registry.metrics.bind(registry);
  registry.metrics = () => {
    renders++;
    return metrics();
  };
  const server = createAdminServer({ registry, upstreamReachable: async () => true, draining: () => false });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  return { server, url: `http://127.0.0.1:${port}`, port, renders: () => renders };
}

/** The admin server's open connections. */
const connections = (server: http.Server) =>
  new Promise<number>((resolve, reject) =>
    server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
  );

/**
 * A raw connection that never reads what it is sent (its receive side paused), and whether the admin
 * server has let it go (counted on the server: a paused client may never see the close).
 */
async function unreadConnection(server: http.Server, port: number) {
  const socket = net.connect(port, '127.0.0.1');
  sockets.push(socket);
  socket.on('error', () => {});
  await once(socket, 'connect');
  socket.pause();
  await waitFor(async () => (await connections(server)) === 1, { what: 'the connection accepted' });
  return { socket, closed: async () => (await connections(server)) === 0 };
}

describe('the admin listener', () => {
  it('closes a connection that pipelines scrapes it never reads, after making one page at most', async () => {
    const admin = await startAdmin();
    const flood = await unreadConnection(admin.server, admin.port);
    flood.socket.write('GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n'.repeat(500));
    await waitFor(flood.closed, { what: 'the pipelining connection closed' });
    expect(admin.renders()).toBeLessThanOrEqual(1);
    // Probes go on.
    const health = await send(admin.url, 'GET', '/healthz');
    expect(health.status).toBe(200);
  });

  it('closes a connection that sends a scrape while its previous answer is still unsent (the client does not read)', async () => {
    // Pages of ~1.4 MB: the kernel's buffers of a loopback connection hold a few, then the socket's.
    const admin = await startAdmin(40_000);
    const reader = await unreadConnection(admin.server, admin.port);
    // One request at a time, each once the page before it was made: never pipelined. Once the kernel's
    // buffers are full, a page stays unsent, its response not done, and the next request closes it.
    let sent = 0;
    while (!(await reader.closed()) && sent < 100) {
      reader.socket.write('GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n');
      sent++;
      await waitFor(async () => admin.renders() === sent || (await reader.closed()), {
        what: `page ${sent}`,
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(await reader.closed()).toBe(true);
    expect(sent).toBeGreaterThan(1);
    expect(sent).toBeLessThan(100);
  });

  it('a scraper that reads each answer before the next request keeps its connection', async () => {
    const admin = await startAdmin();
    const socket = net.connect(admin.port, '127.0.0.1');
    sockets.push(socket);
    await once(socket, 'connect');
    let text = '';
    socket.on('data', (d) => {
      text += d.toString('latin1');
    });
    for (let k = 1; k <= 5; k++) {
      socket.write('GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n');
      await waitFor(() => text.split('HTTP/1.1 200 ').length - 1 === k && text.endsWith('\n'), {
        what: `answer ${k}`,
      });
    }
    expect(socket.destroyed).toBe(false);
    expect(admin.renders()).toBe(5);
  });

  it('cuts a slowloris one checking interval after its headersTimeout, not 30 s later', async () => {
    const admin = await startAdmin();
    admin.server.headersTimeout = 300; // read by Node at each check
    const slow = await unreadConnection(admin.server, admin.port);
    slow.socket.write('GET /metrics HTTP/1.1\r\nHost: admin\r\n');
    const started = Date.now();
    const trickle = setInterval(() => slow.socket.write('X-A: b\r\n'), 100);
    try {
      await waitFor(slow.closed, {
        what: 'the slow head cut',
        timeoutMs: 300 + ADMIN_TIMEOUTS.connectionsCheckingIntervalMs + 3_000,
      });
    } finally {
      clearInterval(trickle);
    }
    expect(Date.now() - started).toBeLessThan(300 + ADMIN_TIMEOUTS.connectionsCheckingIntervalMs + 3_000);
    expect(ADMIN_TIMEOUTS.connectionsCheckingIntervalMs).toBeLessThanOrEqual(1_000);
  });
});
