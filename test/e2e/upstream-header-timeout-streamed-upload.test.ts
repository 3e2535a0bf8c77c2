/**
 * A streamed upload whose first body byte is late (a chunked body from a pipe, `curl -T -` after a slow
 * command) reaches an upstream with a header timeout: Go's `ReadHeaderTimeout`, nginx's
 * `client_header_timeout`. The shim takes the upstream connection at the client's head, but Node's
 * `ClientRequest` held the request head until the body's first write, so the upstream saw a silent
 * connection, closed it, and the client got 502 (`upstream_reset`) where a direct request succeeds
 * (Go `net/http` probe, 2026-11-27; docs/reliability.md fix 154). Real sockets; the upstream is a raw
 * server that closes a connection whose head has not arrived within 300 ms, as Go's does.
 */
import { once } from 'node:events';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/poll.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

/** Go's `ReadHeaderTimeout`, scaled down. */
const HEADER_TIMEOUT_MS = 300;

let upstream: net.Server;
let stack: Stack;
/** What each upstream connection received, and whether its header timeout closed it. */
const connections: Array<{ received: string; timedOut: boolean }> = [];

beforeAll(async () => {
  upstream = net.createServer((socket) => {
    const connection = { received: '', timedOut: false };
    connections.push(connection);
    socket.on('error', () => {});
    const timer = setTimeout(() => {
      connection.timedOut = true;
      socket.destroy();
    }, HEADER_TIMEOUT_MS);
    socket.on('data', (d: Buffer) => {
      connection.received += d.toString('latin1');
      if (connection.received.includes('\r\n\r\n')) clearTimeout(timer);
      if (connection.received.endsWith('0\r\n\r\n')) {
        socket.end(
          'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}',
        );
      }
    });
    socket.on('close', () => clearTimeout(timer));
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  const { port } = upstream.address() as net.AddressInfo;
  stack = await startStack({ UPSTREAM_URL: `http://127.0.0.1:${port}` });
});
afterAll(async () => {
  await stack.close();
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
});

describe('a streamed upload whose first byte is late, to an upstream with a header timeout', () => {
  it('the upstream gets the request head at once, and the upload goes through (before: 502 upstream_reset)', async () => {
    const client = net.connect(Number(new URL(stack.url).port), '127.0.0.1');
    let text = '';
    client.on('data', (d: Buffer) => {
      text += d.toString('latin1');
    });
    await once(client, 'connect');
    client.write(
      'POST /echo HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n' +
        'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
    );
    // The upstream connection is made at the client's head; the body comes three header timeouts later.
    await waitFor(() => connections.length === 1, { what: 'the upstream connection' });
    await waitFor(() => connections[0]!.received.includes('\r\n\r\n') || connections[0]!.timedOut, {
      what: 'the request head at the upstream, or its header timeout',
    });
    await new Promise((resolve) => setTimeout(resolve, HEADER_TIMEOUT_MS * 3));
    client.write('7\r\n{"a":1}\r\n0\r\n\r\n');
    await waitFor(() => text.includes('\r\n\r\n{'), { what: 'the response' });
    client.destroy();
    expect(connections[0]!.timedOut).toBe(false);
    expect(connections[0]!.received).toMatch(/^POST \/echo HTTP\/1\.1\r\n/);
    expect(connections[0]!.received.endsWith('7\r\n{"a":1}\r\n0\r\n\r\n')).toBe(true);
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
  });
});
