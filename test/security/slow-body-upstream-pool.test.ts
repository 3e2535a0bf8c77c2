/**
 * Attack: slow request bodies that hold the upstream's connections (slowhttptest -B, R.U.D.Y.).
 *
 * A client declares a body (slowhttptest's default `Content-Length: 4096`, R.U.D.Y.'s a large one) and
 * sends it a few bytes at a time. The shim streamed every body not rewritten: each such request took an
 * upstream connection at its head and held it while the body trickled, up to the server's request
 * timeout (10 min) — on the public `/api/health` without any credential, on any other route with any
 * non-empty API key. 1,024 of them held the whole pool (`maxSockets`), and every other client waited
 * for a connection, then got 504; the upstream's own workers were held as long. nginx buffers request
 * bodies before it contacts the upstream (`proxy_request_buffering on`) for this reason.
 *
 * Defence (src/proxy/forward.ts, `REQUEST_BUFFER_BYTES`, default 64 KiB): a body of a declared length is
 * read up to that many bytes before the upstream is contacted, within `BODY_TIMEOUT_MS` (408 after)
 * and `MAX_BUFFERED_BYTES` (reserved as its bytes arrive: a head that declares a body and sends
 * nothing holds nothing). A body up to the limit is forwarded whole; a larger one from there, its first
 * bytes then the rest as it comes. A slow client holds its own connection and at most that many bytes,
 * never an upstream connection, until it has sent them (fix 119 for lengths up to the limit, fix 120
 * above it). A chunked body — a stream of unknown length, which a client may send as it goes (SPEC §4:
 * streamed both ways) — streams from its first byte, and so does a chunked trickle: the describe block
 * at the end ("chunked R.U.D.Y.") bounds the upstream connections those hold (fix 122).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { openRaw, type RawClient, send } from '../helpers/http.ts';
import { answerEachRequest, frameRequests } from '../helpers/http1-frames.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
const clients: RawClient[] = [];
const drips: NodeJS.Timeout[] = [];
afterEach(async () => {
  for (const d of drips.splice(0)) clearInterval(d);
  for (const c of clients.splice(0)) c.socket.destroy();
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

/** An upstream that answers every complete request (answerEachRequest), keep-alive. */
async function answeringUpstream(): Promise<RawUpstream> {
  const upstream = await startRawUpstream(answerEachRequest());
  upstreams.push(upstream);
  return upstream;
}

/** How a slow client frames its body: slowhttptest -B's default, R.U.D.Y.'s large length, or chunked. */
type SlowFraming = 'content-length: 4096' | 'content-length: 10000000' | 'chunked';

/**
 * Opens `count` slow-body clients: a POST whose body starts `foo=` and goes on a byte every 50 ms (a
 * one-byte chunk when chunked), as slowhttptest -B (its default `Content-Length: 4096`) and R.U.D.Y.
 * (a large declared length) send theirs.
 */
function slowBodies(
  stack: Stack,
  count: number,
  path = '/api/health',
  framing: SlowFraming = 'content-length: 4096',
): RawClient[] {
  const opened: RawClient[] = [];
  const chunked = framing === 'chunked';
  for (let i = 0; i < count; i++) {
    const client = openRaw(stack.url);
    client.socket.write(
      `POST ${path} HTTP/1.1\r\nHost: shim.test\r\nContent-Type: application/x-www-form-urlencoded\r\n` +
        (chunked ? 'Transfer-Encoding: chunked\r\n\r\n4\r\nfoo=\r\n' : `${framing}\r\n\r\nfoo=`),
    );
    drips.push(
      setInterval(() => {
        if (!client.socket.destroyed) client.socket.write(chunked ? '1\r\na\r\n' : 'a');
      }, 50),
    );
    opened.push(client);
  }
  clients.push(...opened);
  return opened;
}

/** `shim_buffered_bytes`: what the shim holds for request bodies and patches now. */
async function bufferedBytes(stack: Stack): Promise<number> {
  const text = await stack.metrics.registry.getSingleMetricAsString('shim_buffered_bytes');
  return Number(/^shim_buffered_bytes (\d+)$/m.exec(text)?.[1] ?? 0);
}

async function bodyTimeouts(stack: Stack): Promise<number> {
  const { values } = await stack.metrics.rejections.get();
  return values.find((v) => v.labels.reason === 'body_timeout')?.value ?? 0;
}

describe('slow request bodies (slowhttptest -B, R.U.D.Y.)', () => {
  it.each<SlowFraming>(['content-length: 4096', 'content-length: 10000000'])(
    'with %s: hold no upstream connection; a well-behaved client is served; each gets 408 after BODY_TIMEOUT_MS',
    async (framing) => {
      const upstream = await answeringUpstream();
      const stack = await startStack({ UPSTREAM_URL: upstream.url, BODY_TIMEOUT_MS: '1500' });
      stacks.push(stack);
      const slow = slowBodies(stack, 40, '/api/health', framing);
      // The shim holds what the slow bodies sent so far (reserved as their bytes arrive).
      await waitFor(async () => (await bufferedBytes(stack)) >= 40 * 4, { what: 'the slow bodies held' });
      const served = await send(stack.url, 'GET', '/api/health');
      expect(served.status).toBe(200);
      // The one connection of the well-behaved request: streamed, the slow bodies would hold 40 more.
      expect(upstream.connections()).toBe(1);

      await Promise.all(slow.map((c) => c.closed));
      for (const client of slow) {
        expect(client.text()).toMatch(/^HTTP\/1\.1 408 /);
        expect(JSON.parse(client.text().split('\r\n\r\n')[1]!)).toMatchObject({ statusCode: 408 });
      }
      expect(await bodyTimeouts(stack)).toBe(40);
      // The upstream saw the well-behaved request alone.
      expect(upstream.received.flatMap((r) => frameRequests(r).requests.map((q) => q.target))).toEqual([
        '/api/health',
      ]);
    },
  );

  it('with REQUEST_BUFFER_BYTES=0 (every body streamed, as before), each holds an upstream connection', async () => {
    const upstream = await answeringUpstream();
    const stack = await startStack({ UPSTREAM_URL: upstream.url, REQUEST_BUFFER_BYTES: '0' });
    stacks.push(stack);
    slowBodies(stack, 10);
    await waitFor(() => upstream.connections() === 10, { what: 'ten upstream connections held' });
  });

  it('a small body sent in pieces reaches the upstream whole, with its length', async () => {
    const upstream = await answeringUpstream();
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    const client = openRaw(stack.url);
    clients.push(client);
    client.socket.write(
      'POST /missions HTTP/1.1\r\nHost: shim.test\r\nx-api-key: k\r\nService-Client-Version: 1.0.0\r\n' +
        'Content-Type: text/plain\r\nContent-Length: 10\r\nConnection: close\r\n\r\n01234',
    );
    // The first piece is held (reserved as it arrived), and nothing went upstream.
    await waitFor(async () => (await bufferedBytes(stack)) >= 5, { what: 'the first piece held' });
    expect(upstream.connections()).toBe(0);
    client.socket.write('56789');
    await client.closed;
    expect(client.text()).toMatch(/^HTTP\/1\.1 200 /);
    const [request] = frameRequests(upstream.received[0] ?? '').requests;
    expect(request?.body).toBe('0123456789');
    expect(request?.headers).toContainEqual(['content-length', '10']);
  });

  it('a body above REQUEST_BUFFER_BYTES: its first bytes held, then all of it streamed with its declared length', async () => {
    const upstream = await answeringUpstream();
    const stack = await startStack({ UPSTREAM_URL: upstream.url, REQUEST_BUFFER_BYTES: '1kb' });
    stacks.push(stack);
    const client = openRaw(stack.url);
    clients.push(client);
    client.socket.write(
      `POST /missions HTTP/1.1\r\nHost: shim.test\r\n${Object.entries(CURRENT)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('')}Content-Length: 2048\r\nConnection: close\r\n\r\n${'a'.repeat(1000)}`,
    );
    // Below the limit: held, nothing upstream yet.
    await waitFor(async () => (await bufferedBytes(stack)) >= 1000, { what: 'the first 1,000 bytes held' });
    expect(upstream.connections()).toBe(0);
    // At the limit the upstream is contacted, the held bytes go first, the rest follows as it comes.
    client.socket.write('b'.repeat(48));
    await waitFor(() => upstream.received[0]?.includes('b'.repeat(48)), { what: 'the start upstream' });
    await waitFor(async () => (await bufferedBytes(stack)) === 0, {
      what: 'the start released once written',
    });
    client.socket.write('c'.repeat(1000));
    await client.closed;
    expect(client.text()).toMatch(/^HTTP\/1\.1 200 /);
    const [request] = frameRequests(upstream.received[0] ?? '').requests;
    expect(request?.body).toBe(`${'a'.repeat(1000)}${'b'.repeat(48)}${'c'.repeat(1000)}`);
    expect(request?.headers).toContainEqual(['content-length', '2048']);
  });

  it('a chunked body streams from its first byte (a stream of unknown length, SPEC §4)', async () => {
    const upstream = await answeringUpstream();
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    const [client] = slowBodies(stack, 1, '/api/health', 'chunked');
    // Its first chunk reaches the upstream while the client is still sending, nothing held.
    await waitFor(() => upstream.received[0]?.includes('\r\n\r\n4\r\nfoo=\r\n'), {
      what: 'the first chunk upstream',
    });
    expect(await bufferedBytes(stack)).toBe(0);
    expect(client?.text()).toBe('');
  });
});

/** `shim_streaming_uploads`: request bodies streaming to the upstream now, each holding a connection. */
async function streamingUploads(stack: Stack): Promise<number> {
  const text = await stack.metrics.registry.getSingleMetricAsString('shim_streaming_uploads');
  return Number(/^shim_streaming_uploads (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
}

async function slotRefusals(stack: Stack): Promise<number> {
  const { values } = await stack.metrics.rejections.get();
  return values.find((v) => v.labels.reason === 'streaming_uploads')?.value ?? 0;
}

/** The 503 of a streamed body beyond MAX_STREAMING_UPLOADS, as a client reads it. */
function expectSlotRefusal(client: RawClient): void {
  const [head, body] = client.text().split('\r\n\r\n');
  expect(head).toMatch(/^HTTP\/1\.1 503 /);
  expect(head).toMatch(/\r\nRetry-After: 1\r\n/i);
  expect(head).toMatch(/\r\nConnection: close\r\n/i);
  expect(JSON.parse(body ?? '')).toMatchObject({
    statusCode: 503,
    message: expect.stringContaining('MAX_STREAMING_UPLOADS'),
  });
}

/**
 * Attack: a chunked R.U.D.Y. — slow bodies framed `Transfer-Encoding: chunked`, which stream from their
 * first byte (SPEC §4), so that fixes 119 and 120 (bodies of a declared length read up to
 * `REQUEST_BUFFER_BYTES` first) do not apply. Before fix 122, 1,100 of them on the public `/api/health`
 * (no credential needed) held all 1,024 upstream connections, and a well-behaved GET waited 60 s for
 * one, then got 504. Defence (src/proxy/upload-slots.ts, `MAX_STREAMING_UPLOADS`): at most that many
 * bodies stream at once; a streamed body beyond it gets 503 with `Retry-After` before any of it is read.
 */
describe('chunked R.U.D.Y. (slow chunked bodies) against the upstream pool', () => {
  it('holds at most MAX_STREAMING_UPLOADS upstream connections; the rest get 503 at once; a well-behaved client is served', async () => {
    const upstream = await answeringUpstream();
    const stack = await startStack({ UPSTREAM_URL: upstream.url, MAX_STREAMING_UPLOADS: '4' });
    stacks.push(stack);
    const slow = slowBodies(stack, 10, '/api/health', 'chunked');
    await waitFor(async () => (await slotRefusals(stack)) === 6, { what: 'six bodies refused' });
    await waitFor(() => upstream.connections() === 4, { what: 'four upstream connections' });
    expect(await streamingUploads(stack)).toBe(4);

    const served = await send(stack.url, 'GET', '/api/health');
    expect(served.status).toBe(200);
    // Counted when the 503 is written: its bytes reach each client a moment later.
    await waitFor(() => slow.filter((c) => c.text() !== '').length === 6, { what: 'six 503s received' });
    const refused = slow.filter((c) => c.text() !== '');
    await Promise.all(refused.map((c) => c.closed));
    for (const client of refused) expectSlotRefusal(client);
    // The four still trickling reach the upstream; none of the refused ones does.
    expect(upstream.received.filter((r) => r.startsWith('POST /api/health '))).toHaveLength(4);

    // Once the held bodies end, their slots are free for the next streamed body.
    for (const d of drips.splice(0)) clearInterval(d);
    for (const client of slow.filter((c) => c.text() === '')) client.socket.write('0\r\n\r\n');
    await waitFor(async () => (await streamingUploads(stack)) === 0, { what: 'the slots given back' });
    const next = await send(stack.url, 'POST', '/api/health', { 'transfer-encoding': 'chunked' }, 'a body');
    expect(next.status).toBe(200);
  });

  it('a client gone gives its slot back; a body of a declared length up to REQUEST_BUFFER_BYTES needs none', async () => {
    const upstream = await answeringUpstream();
    const stack = await startStack({ UPSTREAM_URL: upstream.url, MAX_STREAMING_UPLOADS: '1' });
    stacks.push(stack);
    const [holder] = slowBodies(stack, 1, '/api/health', 'chunked');
    await waitFor(async () => (await streamingUploads(stack)) === 1, { what: 'the one slot held' });

    const small = await send(stack.url, 'POST', '/api/health', {}, 'hello');
    expect(small.status).toBe(200);
    const [second] = slowBodies(stack, 1, '/api/health', 'chunked');
    await second?.closed;
    expectSlotRefusal(second as RawClient);

    holder?.socket.destroy();
    await waitFor(async () => (await streamingUploads(stack)) === 0, { what: 'the slot given back' });
    const [third] = slowBodies(stack, 1, '/api/health', 'chunked');
    await waitFor(async () => (await streamingUploads(stack)) === 1, { what: 'the slot taken again' });
    expect(third?.text()).toBe('');
  });

  it('an early answer does not give the slot back while the body still arrives (the upload goes on upstream)', async () => {
    // An upstream that answers every request at its head (a 404 before reading the body, as a router
    // does for an unknown route) and keeps reading on the same connection, as Node's server does.
    const upstream = await startRawUpstream((socket, received) => {
      const s = socket as typeof socket & { answered?: boolean };
      if (s.answered !== true && received.includes('\r\n\r\n')) {
        s.answered = true;
        socket.write(
          'HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
        );
      }
    });
    upstreams.push(upstream);
    const stack = await startStack({ UPSTREAM_URL: upstream.url, MAX_STREAMING_UPLOADS: '2' });
    stacks.push(stack);
    const first = slowBodies(stack, 2, '/api/health', 'chunked');
    await waitFor(() => first.every((c) => c.text().startsWith('HTTP/1.1 404 ')), {
      what: 'the early answers relayed',
    });
    // Their bodies still trickle upstream on the two connections: the slots stay held.
    expect(await streamingUploads(stack)).toBe(2);
    const later = slowBodies(stack, 3, '/api/health', 'chunked');
    await Promise.all(later.map((c) => c.closed));
    for (const client of later) expectSlotRefusal(client);
    expect(upstream.connections()).toBe(2);
    // Clients gone after their answers give their slots back (Node's request hears nothing of it).
    for (const client of first) client.socket.destroy();
    await waitFor(async () => (await streamingUploads(stack)) === 0, { what: 'the slots given back' });
  });

  it('the rest of a body above REQUEST_BUFFER_BYTES takes a slot: beyond the bound, 503 after its first bytes', async () => {
    const upstream = await answeringUpstream();
    const stack = await startStack({
      UPSTREAM_URL: upstream.url,
      REQUEST_BUFFER_BYTES: '1kb',
      MAX_STREAMING_UPLOADS: '1',
    });
    stacks.push(stack);
    const large = () => {
      const client = openRaw(stack.url);
      clients.push(client);
      client.socket.write(
        `POST /api/health HTTP/1.1\r\nHost: shim.test\r\nContent-Length: 4096\r\n\r\n${'a'.repeat(1500)}`,
      );
      return client;
    };
    const first = large();
    await waitFor(() => upstream.received[0]?.includes('a'.repeat(1500)), {
      what: 'the first body upstream',
    });
    const second = large();
    await second.closed;
    expectSlotRefusal(second);
    expect(upstream.connections()).toBe(1);
    expect(first.text()).toBe('');
  });

  it('a streamed body beyond the bound that expects 100-continue gets the 503 instead of 100 Continue', async () => {
    const upstream = await answeringUpstream();
    const stack = await startStack({ UPSTREAM_URL: upstream.url, MAX_STREAMING_UPLOADS: '1' });
    stacks.push(stack);
    slowBodies(stack, 1, '/api/health', 'chunked');
    await waitFor(async () => (await streamingUploads(stack)) === 1, { what: 'the one slot held' });
    const client = openRaw(stack.url);
    clients.push(client);
    client.socket.write(
      'POST /api/health HTTP/1.1\r\nHost: shim.test\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n',
    );
    await client.closed;
    expect(client.text()).not.toMatch(/100 Continue/);
    expectSlotRefusal(client);
  });
});
