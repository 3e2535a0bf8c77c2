/**
 * A client that pipelines behind a response that closes the connection, without knowing it would:
 * an HTTP/1.0 client asking for keep-alive gets a response of unknown length, which only the close can
 * delimit (a legacy client's patched body, an upstream's chunked one), so `Connection: close`. httperf
 * (`--http-version=1.0 --burst-length 5`) writes its next requests while that response arrives. The
 * shim cut the connection on the first request parsed while it closed in stages, and the client's next
 * write met a reset: httperf stops at `EPIPE` without reading what it received, and lost 2 to 33 of
 * every 100 replies (load-tool audit, 2026-11-26). RFC 9112 §9.6: a server closing a connection reads
 * and drops what the client still sends, so that a reset cannot take the response with it; the
 * requests are never handled, and a flood of them is still cut (test/security/pipeline-flood.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRaw } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const REQUEST =
  'GET /stream HTTP/1.0\r\nConnection: keep-alive\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n\r\n';

let raw: RawUpstream;
let stack: Stack;
let parsed = 0;
beforeAll(async () => {
  // A body of unknown length (chunked): to an HTTP/1.0 client it is delimited by the close.
  raw = await startRawUpstream((socket, received) => {
    if (!received.endsWith('\r\n\r\n')) return;
    if (received.slice(received.lastIndexOf('GET ')).startsWith('GET /fixed ')) {
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nfixed!');
      return;
    }
    socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n');
    socket.write('5\r\nhello\r\n0\r\n\r\n');
  });
  stack = await startStack({ UPSTREAM_URL: raw.url });
  stack.server.on('request', () => {
    parsed++;
  });
});
afterAll(async () => {
  await stack.close();
  await raw.close();
});

describe('an HTTP/1.0 keep-alive client pipelining behind a close-delimited response', () => {
  it('may go on writing: its requests are read and dropped, never handled, and nothing resets it', async () => {
    const client = openRaw(stack.url, { allowHalfOpen: true });
    let failed: Error | undefined;
    client.socket.on('error', (err) => {
      failed = err;
    });
    const ended = new Promise<void>((resolve) => client.socket.once('end', () => resolve()));
    const before = parsed;
    // What the upstream received before this test (the file's other tests share it).
    const forwardedBefore = raw.received.join('').match(/GET \/stream /g)?.length ?? 0;
    client.socket.write(REQUEST);
    await ended; // the whole response, then the shim's FIN
    expect(client.text()).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(client.text().toLowerCase()).toContain('\r\nconnection: close\r\n');
    expect(client.text().endsWith('\r\n\r\nhello')).toBe(true);

    // Two more requests, written as a pipelining client writes them: each once the one before was read.
    for (const n of [2, 3]) {
      client.socket.write(REQUEST);
      await waitFor(() => parsed - before === n || failed !== undefined || client.socket.destroyed, {
        what: `request ${n} read by the shim, or the connection reset`,
      });
      expect(failed).toBeUndefined();
      expect(client.socket.destroyed).toBe(false);
    }
    // Only the first went upstream; the client ends its side and the shim closes without a reset.
    expect(raw.received.join('').match(/GET \/stream /g)?.length ?? 0).toBe(forwardedBefore + 1);
    client.socket.end();
    await client.closed;
    expect(failed).toBeUndefined();
  });

  it('reads and drops the body of a request that was already waiting when the response closed', async () => {
    // The POST's head is parsed with the GET (one write), so it waits its turn behind the GET; when
    // the GET's close-delimited response ends, the POST will never be handled. Its body must still be
    // read: left unread, it stopped the socket's reads, and the client blocked mid-upload until the
    // linger's reset (5 s), its response at risk (review of fixes 79–83, fix 84).
    const body = Buffer.alloc(16 * 1024 * 1024, 0x20);
    const client = openRaw(stack.url, { allowHalfOpen: true });
    let failed: Error | undefined;
    client.socket.on('error', (err) => {
      failed = err;
    });
    const post =
      'POST /stream HTTP/1.0\r\nConnection: keep-alive\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n' +
      `Content-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n`;
    const before = raw.received.join('').match(/ \/stream /g)?.length ?? 0;
    let written = false;
    client.socket.write(REQUEST + post);
    client.socket.write(body, () => {
      written = true;
    });
    await waitFor(() => written || failed !== undefined, {
      timeoutMs: 3_000,
      what: 'the whole pipelined body taken by the shim (the linger would reset it at 5 s)',
    });
    expect(failed).toBeUndefined();
    await waitFor(() => client.socket.readableEnded, { what: 'the response and the FIN' });
    expect(client.text().endsWith('\r\n\r\nhello')).toBe(true);
    client.socket.end();
    await client.closed;
    expect(failed).toBeUndefined();
    // The GET alone reached the upstream; the POST, never handled, sent nothing.
    expect(raw.received.join('').match(/ \/stream /g)?.length ?? 0).toBe(before + 1);
  });
});

// Node's parser takes an HTTP/1.0 request's `Proxy-Connection: keep-alive` for `Connection: keep-alive`
// and keeps the connection; the shim read `Connection` alone, took the connection for closing, and
// never answered the client's next request, nor closed the connection (review of fix 164).
describe('an HTTP/1.0 client asking for keep-alive with Proxy-Connection', () => {
  it('gets an answer to each request on the connection', async () => {
    const client = openRaw(stack.url);
    const request = (path: string) =>
      `GET ${path} HTTP/1.0\r\nProxy-Connection: keep-alive\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n\r\n`;
    // A body of known length keeps the connection: `/fixed` answers with a Content-Length.
    client.socket.write(request('/fixed'));
    await waitFor(() => client.text().includes('fixed!'), { what: 'the first answer' });
    client.socket.write(request('/fixed'));
    await waitFor(() => client.text().split('fixed!').length === 3, { what: 'the second answer' });
    client.socket.destroy();
  });
});
