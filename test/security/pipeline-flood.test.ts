/**
 * Attack: request floods on one connection. Node parses pipelined requests as fast as their bytes come,
 * with a request and a response object each, whether or not anything will answer them:
 * - behind a slow request (the pipeline answers one at a time), a flood of small requests grew the
 *   heap by 1.6 GB in 4.5 s (review, 2026-11-25) — now one more than `MAX_PIPELINED` cuts the
 *   connection;
 * - after a refusal that closes the connection (which lingers, reading and dropping what the client
 *   still sends, runtime.ts), each request parsed during the linger was kept until the close: +2 GB
 *   from one connection — now one more than `MAX_PIPELINED` of them cuts it (the first one did until
 *   the load-tool audit: a client pipelining in good faith behind a close-delimited response was
 *   reset, test/e2e/pipelined-behind-close.test.ts);
 * - a parser error's response waited forever for a client that kept its side open — now the staged
 *   close ends it after `LINGER_IDLE_MS` without a byte from the client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PIPELINED } from '../../src/proxy/server.ts';
import { LINGER_IDLE_MS } from '../../src/runtime.ts';
import { openRaw } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const AUTH = 'Host: shim.test\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n';
const FLOOD = 20_000;
const SMALL = 'GET / HTTP/1.1\r\nHost: x\r\n\r\n';

let raw: RawUpstream;
let stack: Stack;
let parsed = 0;
beforeAll(async () => {
  // Answers nothing: the first request of a connection stays unanswered.
  raw = await startRawUpstream(() => {});
  stack = await startStack({ UPSTREAM_URL: raw.url });
  stack.server.on('request', () => {
    parsed++;
  });
});
afterAll(async () => {
  await stack.close();
  await raw.close();
});

/** A client that keeps its side open (it never ends), and what it received. */
function connect() {
  const { socket: client, text: received, closed } = openRaw(stack.url, { allowHalfOpen: true });
  return { client, received, closed };
}

const openConnections = () =>
  new Promise<number>((resolve, reject) =>
    stack.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
  );

describe('one connection', () => {
  it(`a flood behind an unanswered request: one more than ${MAX_PIPELINED} waiting cuts the connection`, async () => {
    const { client, closed } = connect();
    const before = parsed;
    client.write(`GET /slow HTTP/1.1\r\n${AUTH}\r\n`);
    await waitFor(() => raw.received.some((r) => r.includes('GET /slow ')), {
      what: 'the first request upstream',
    });
    client.write(SMALL.repeat(FLOOD));
    await closed;
    // Cut at the first request over the bound: what was parsed after it, of the same read, is dropped.
    expect(parsed - before).toBeLessThan(FLOOD / 4);
    expect(raw.received.join('')).not.toContain('GET / HTTP');
  });

  it(`a flood after a refusal that closes the connection: one more than ${MAX_PIPELINED} requests of it cuts the connection`, async () => {
    const { client, received } = connect();
    const before = parsed;
    // No credentials and a chunked body: 401, and the connection closes (the body is not drained).
    client.write(
      'POST /upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n',
    );
    await waitFor(() => received().includes('\r\n\r\n{'), { what: 'the 401' });
    expect(received()).toMatch(/^HTTP\/1\.1 401 /);
    client.write(`0\r\n\r\n${SMALL.repeat(FLOOD)}`);
    await waitFor(async () => (await openConnections()) === 0, { what: 'the shim to close the connection' });
    expect(parsed - before).toBeLessThan(FLOOD / 4);
    client.destroy();
  });

  it(`a parser error's response: the shim closes within LINGER_IDLE_MS (${LINGER_IDLE_MS} ms) a connection its client keeps open and sends nothing on`, async () => {
    const { client, received } = connect();
    const started = performance.now();
    client.write('GARBAGE\r\n\r\n');
    await waitFor(() => received().includes('\r\n\r\n{'), { what: 'the 400' });
    expect(received()).toMatch(/^HTTP\/1\.1 400 /);
    await waitFor(async () => (await openConnections()) === 0, {
      what: 'the shim to close the connection',
      timeoutMs: LINGER_IDLE_MS + 3_000,
    });
    expect(performance.now() - started).toBeLessThan(LINGER_IDLE_MS + 3_000);
    client.destroy();
  });
});
