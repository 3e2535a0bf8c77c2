/**
 * An upload the client gives up on with a FIN, not a reset: the connection closes in the middle of a
 * request body. Caddy 2.6 (Go's `net/http` transport) passes its own client's aborted upload on to the
 * shim that way, and so does any client that closes its socket mid-body with nothing unread. Node's
 * parser reports the end of input inside a message as a parse error (`HPE_INVALID_EOF_STATE`), and
 * the shim took it for a malformed request: a 400 "not valid HTTP/1.1" written into the closing
 * connection, a `warn` line `request refused by the HTTP server` and
 * `shim_rejections_total{reason="malformed"}`, besides the request's own line with `aborted: true`:
 * two records of one abort, one of them a smuggling-shaped alarm (behind Caddy, 163 such warnings in
 * three rolling restarts, every one an aborted POST).
 *
 * Found with Caddy in front of the shim (2026-11-26): docs/reliability.md fix 61. Here the client is a
 * raw socket that half-closes mid-body, so Caddy need not be installed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { openRaw, type RawClient } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const open: Array<Stack | RawUpstream> = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

const HEAD = 'POST /uploads HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nx-api-key: k\r\n';

async function malformedCount(stack: Stack): Promise<number> {
  const { values } = await stack.metrics.rejections.get();
  return values.find((v) => v.labels.reason === 'malformed')?.value ?? 0;
}

/**
 * What a client's FIN in the middle of its upload must come to: nothing written back, no malformed
 * request counted or refused, and the request's line logged as an aborted exchange.
 */
async function expectAbortedExchange(client: RawClient, stack: Stack): Promise<void> {
  expect(client.text()).toBe('');
  expect(await malformedCount(stack)).toBe(0);
  expect(stack.logs().filter((l) => l.msg === 'request refused by the HTTP server')).toEqual([]);
  const line = stack.logs().find((l) => l.msg === 'request completed');
  // The client's address too, read when the request arrived (the socket is gone by the time of the line).
  expect(line).toMatchObject({
    aborted: true,
    req: { method: 'POST', path: '/uploads' },
    remoteAddress: '127.0.0.1',
  });
}

describe('an upload cut short by the client FIN', () => {
  for (const [framing, head, part] of [
    ['Content-Length', `${HEAD}Content-Length: 100\r\n\r\n`, 'x'.repeat(40)],
    ['chunked', `${HEAD}Transfer-Encoding: chunked\r\n\r\n`, `28\r\n${'x'.repeat(40)}\r\n`],
  ] as const) {
    it(`(${framing}) is an aborted exchange, not a malformed request`, async () => {
      // The upstream never answers: the body never ends.
      const upstream = await startRawUpstream(() => {});
      open.push(upstream);
      // Streamed (REQUEST_BUFFER_BYTES: 0): the body goes upstream as it comes.
      const stack = await startStack({ UPSTREAM_URL: upstream.url, REQUEST_BUFFER_BYTES: '0' });
      open.push(stack);
      // Half-open: the client could still read whatever the shim writes after its FIN.
      const client = openRaw(stack.url, { allowHalfOpen: true });
      client.socket.write(head + part);
      await waitFor(() => upstream.received[0]?.includes('x'.repeat(40)), {
        what: 'the body so far upstream',
      });
      client.socket.end();
      await client.closed;
      await waitFor(() => stack.logs().some((l) => l.msg === 'request completed'), {
        what: 'the request line',
      });

      await expectAbortedExchange(client, stack);
      // The upstream got the body as far as it came, and never its end.
      if (framing === 'chunked') expect(upstream.received[0]).not.toContain('0\r\n\r\n');
      else expect(upstream.received[0]?.split('\r\n\r\n')[1]).toBe('x'.repeat(40));
    });
  }

  it('(a small body, held whole) is an aborted exchange, and nothing reaches the upstream', async () => {
    const upstream = await startRawUpstream(() => {});
    open.push(upstream);
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    open.push(stack);
    const client = openRaw(stack.url, { allowHalfOpen: true });
    client.socket.write(`${HEAD}Content-Length: 100\r\n\r\n${'x'.repeat(40)}`);
    client.socket.end();
    await client.closed;
    await waitFor(() => stack.logs().some((l) => l.msg === 'request completed'), {
      what: 'the request line',
    });
    await expectAbortedExchange(client, stack);
    expect(upstream.connections()).toBe(0);
  });

  it('a head cut short by a FIN is still a malformed request', async () => {
    const upstream = await startRawUpstream(() => {});
    open.push(upstream);
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    open.push(stack);
    const client = openRaw(stack.url, { allowHalfOpen: true });
    client.socket.end('GET /x HTTP/1.1\r\nHost: shim.test\r\n');
    await client.closed;
    expect(client.text()).toMatch(/^HTTP\/1\.1 400 /);
    expect(await malformedCount(stack)).toBe(1);
  });
});
