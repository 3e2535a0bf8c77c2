/**
 * The upload slots (`MAX_STREAMING_UPLOADS`, src/proxy/upload-slots.ts) come back however an exchange
 * with a streamed body ends: a slot that leaked on one of these paths would, one exchange at a time,
 * turn every later chunked or large upload into a 503. Each case drives one ending over real sockets,
 * then polls `shim_streaming_uploads` back to 0 with a deadline (the bound is 1: the counter the next
 * upload would be refused on). Every request goes to the public `/api/health`, which needs no
 * credentials.
 */
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openRaw, type RawClient } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { holdRefusingPort, type RefusingPort } from '../helpers/refusing-port.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
const ports: RefusingPort[] = [];
const clients: RawClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.socket.destroy();
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
  for (const p of ports.splice(0)) await p.close();
});

/** What the upstream does with a request: given its socket and the bytes received so far. */
type UpstreamBehaviour = (socket: net.Socket, received: string) => void;

const RESPONSE_200 = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';

/** Answers 200 once the chunked body has ended. */
const answerAtEnd: UpstreamBehaviour = (socket, received) => {
  if (received.endsWith('0\r\n\r\n')) socket.write(RESPONSE_200);
};

/** Answers once, at the request's head, and keeps reading (a router's 404 for an unknown route). */
const answerAtHead =
  (response: string, then?: (socket: net.Socket) => void): UpstreamBehaviour =>
  (socket, received) => {
    const s = socket as net.Socket & { answered?: boolean };
    if (s.answered === true || !received.includes('\r\n\r\n')) return;
    s.answered = true;
    socket.write(response);
    then?.(socket);
  };

/** Resets the connection once the first chunk of the body has arrived. */
const resetMidBody: UpstreamBehaviour = (socket, received) => {
  if (received.includes('\r\n\r\n3\r\nabc\r\n')) socket.resetAndDestroy();
};

async function stackWith(upstreamUrl: string, env: Record<string, string> = {}): Promise<Stack> {
  const stack = await startStack({ UPSTREAM_URL: upstreamUrl, MAX_STREAMING_UPLOADS: '1', ...env });
  stacks.push(stack);
  return stack;
}

async function stackBefore(behaviour: UpstreamBehaviour, env: Record<string, string> = {}): Promise<Stack> {
  const upstream = await startRawUpstream(behaviour);
  upstreams.push(upstream);
  return stackWith(upstream.url, env);
}

async function streamingUploads(stack: Stack): Promise<number> {
  const text = await stack.metrics.registry.getSingleMetricAsString('shim_streaming_uploads');
  return Number(/^shim_streaming_uploads (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
}

/** A chunked POST whose head and first chunk are sent; the test sends the rest, or not. */
function chunkedUpload(stack: Stack, headers = ''): RawClient {
  const client = openRaw(stack.url);
  clients.push(client);
  client.socket.write(
    `POST /api/health HTTP/1.1\r\nHost: shim.test\r\nTransfer-Encoding: chunked\r\n${headers}\r\n3\r\nabc\r\n`,
  );
  return client;
}

/** The slot is back: the gauge, the counter the next streamed upload is admitted on, at 0. */
async function expectSlotBack(stack: Stack): Promise<void> {
  await waitFor(async () => (await streamingUploads(stack)) === 0, { what: 'the slot given back' });
}

/** Waits until the shim holds the exchange's slot. */
async function slotTaken(stack: Stack): Promise<void> {
  await waitFor(async () => (await streamingUploads(stack)) === 1, { what: 'the slot taken' });
}

describe('upload slots come back however a streamed exchange ends', () => {
  it('the body ends and the upstream answers', async () => {
    const stack = await stackBefore(answerAtEnd);
    const client = chunkedUpload(stack);
    await slotTaken(stack);
    client.socket.write('0\r\n\r\n');
    await waitFor(() => client.text().startsWith('HTTP/1.1 200 '), { what: 'the answer' });
    await expectSlotBack(stack);
  });

  it('the client goes away mid-body, before any answer', async () => {
    const stack = await stackBefore(answerAtEnd);
    const client = chunkedUpload(stack);
    await slotTaken(stack);
    client.socket.destroy();
    await expectSlotBack(stack);
  });

  it('the upstream answers early and keeps reading; the client then ends its body', async () => {
    const stack = await stackBefore(answerAtHead('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n'));
    const client = chunkedUpload(stack);
    await waitFor(() => client.text().startsWith('HTTP/1.1 404 '), { what: 'the early answer' });
    expect(await streamingUploads(stack)).toBe(1);
    client.socket.write('0\r\n\r\n');
    await expectSlotBack(stack);
  });

  it('the upstream answers early and keeps reading; the client then goes away', async () => {
    const stack = await stackBefore(answerAtHead('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n'));
    const client = chunkedUpload(stack);
    await waitFor(() => client.text().startsWith('HTTP/1.1 404 '), { what: 'the early answer' });
    client.socket.destroy();
    await expectSlotBack(stack);
  });

  it('the upstream answers early with Connection: close and closes', async () => {
    const stack = await stackBefore(
      answerAtHead('HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', (s) =>
        s.end(),
      ),
    );
    const client = chunkedUpload(stack);
    await waitFor(() => client.text().startsWith('HTTP/1.1 413 '), { what: 'the early answer' });
    client.socket.write('3\r\ndef\r\n');
    // Back with the upstream connection, while the rest of the body is still read and dropped (for up
    // to DISCARD_LIMIT_MS, 5 s, upload.ts boundDiscard) on the client's connection, still open.
    await expectSlotBack(stack);
    expect(client.socket.destroyed).toBe(false);
    expect(client.socket.readyState).toBe('open');
  });

  it('the upstream resets the connection mid-body (502)', async () => {
    const stack = await stackBefore(resetMidBody);
    const client = chunkedUpload(stack);
    await client.closed;
    expect(client.text()).toMatch(/^HTTP\/1\.1 502 /);
    await expectSlotBack(stack);
  });

  it('the upstream refuses the connection (502)', async () => {
    const port = await holdRefusingPort();
    ports.push(port);
    const stack = await stackWith(port.url);
    const client = chunkedUpload(stack);
    await client.closed;
    expect(client.text()).toMatch(/^HTTP\/1\.1 502 /);
    await waitFor(async () => (await streamingUploads(stack)) === 0, { what: 'the slot given back' });
  });

  it('the client expects 100-continue, then sends its body', async () => {
    const stack = await stackBefore(answerAtEnd);
    const client = openRaw(stack.url);
    clients.push(client);
    client.socket.write(
      'POST /api/health HTTP/1.1\r\nHost: shim.test\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n',
    );
    await waitFor(() => client.text().startsWith('HTTP/1.1 100 Continue'), { what: '100 Continue' });
    client.socket.write('3\r\nabc\r\n0\r\n\r\n');
    await waitFor(() => /HTTP\/1\.1 200 /.test(client.text()), { what: 'the answer' });
    await expectSlotBack(stack);
  });

  it('a declared body above REQUEST_BUFFER_BYTES, its client gone after the first bytes went upstream', async () => {
    const stack = await stackBefore(answerAtEnd, { REQUEST_BUFFER_BYTES: '1kb' });
    const client = openRaw(stack.url);
    clients.push(client);
    client.socket.write(
      `POST /api/health HTTP/1.1\r\nHost: shim.test\r\nContent-Length: 4096\r\n\r\n${'a'.repeat(1500)}`,
    );
    await slotTaken(stack);
    client.socket.destroy();
    await expectSlotBack(stack);
  });
});
