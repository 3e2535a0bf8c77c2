/**
 * Drain with a proxy that pools keep-alive connections to the shim (nginx `upstream { keepalive 32; }`
 * with `proxy_http_version 1.1`): such a proxy writes its next request on an idle connection at any
 * moment, so at the signal some idle connections already hold a request the shim has not read yet.
 * The drain closed idle connections at once — a FIN, then what arrived read and dropped — and nginx
 * answered each POST it had sent that way with 502 (`upstream prematurely closed connection while
 * reading response header`; it retries only idempotent requests): 6 of 16 connections under a POST
 * load, with SIGTERM to one of two shims behind nginx.
 *
 * Found with nginx in front of the shim (2026-11-26): docs/reliability.md fix 54. Here the proxy is a
 * raw socket that writes its request in the same turn as the drain starts, so nginx need not be
 * installed.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startDebugStack } from '../helpers/debug-upstream.ts';
import { waitFor } from '../helpers/poll.ts';
import type { Stack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
});

const POST =
  'POST /debug/sink HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nx-api-key: k\r\n' +
  'Content-Type: application/octet-stream\r\nContent-Length: 5\r\n\r\nhello';

/** Complete HTTP/1.1 responses (Content-Length framed, as the debug upstream's) in `text`. */
function responsesIn(text: string): string[] {
  const out: string[] = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) return out;
    const head = rest.slice(0, end);
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    if (rest.length < end + 4 + length) return out;
    out.push(head);
    rest = rest.slice(end + 4 + length);
  }
}

describe('drain with a pooled keep-alive connection', () => {
  it('a request written on an idle connection as the drain starts is served, with Connection: close', async () => {
    const stack = await startDebugStack();
    stacks.push(stack);
    const { port } = new URL(stack.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    let received = '';
    let closed = false;
    socket.on('data', (d) => {
      received += d.toString('latin1');
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      closed = true;
    });
    socket.write(POST);
    await waitFor(() => responsesIn(received).length === 1, { timeoutMs: 5_000 });
    // The connection is idle and pooled; the proxy reuses it just as the shim is signalled.
    socket.write(POST);
    const drained = stack.runtime.drain('test');
    await waitFor(() => closed, { timeoutMs: 5_000 });
    await drained;
    const responses = responsesIn(received);
    expect(responses).toHaveLength(2);
    expect(responses[1]).toMatch(/^HTTP\/1\.1 200 /);
    expect(responses[1]).toMatch(/\r\nConnection: close/i);
  });
});
