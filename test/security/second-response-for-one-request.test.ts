/**
 * Attack: a second response for one request (a client-side response desync). A response that is whole
 * before its request's body has all arrived — the shim's own refusal kept alive while a small declared
 * body drains, or an upstream's early answer relayed on a kept-alive connection — was dropped from the
 * connection's bookkeeping at its `close` (Node emits it at finish). Node reads and drops the rest of
 * that body, and a parser error in it (an invalid chunk size, a bad trailer, or the client's FIN) then
 * found nothing unanswered and was answered as a new malformed request: a 400 after the 401, 426 or 200
 * on the same connection, counted `malformed` and logged at `warn` even for a FIN (fix 61 says an
 * aborted upload is neither). No credential is needed: a refusal or a public path will do. A client or
 * proxy that pairs responses with requests by order reads that 400 as the answer to its next request.
 *
 * Found by a raw-socket probe of the shim (2026-11-26, twenty-fifth session): docs/reliability.md fix 124.
 * Each case fails without the fix.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { openRaw } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const open: Array<Stack | RawUpstream> = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

/** An upstream that answers each request at its head, before reading its body, and keeps the connection. */
async function earlyAnswering(): Promise<RawUpstream> {
  const answered = new WeakSet<object>();
  const upstream = await startRawUpstream((socket, received) => {
    if (answered.has(socket) || !received.includes('\r\n\r\n')) return;
    answered.add(socket);
    socket.write(
      'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}',
    );
  });
  open.push(upstream);
  return upstream;
}

async function malformedCount(stack: Stack): Promise<number> {
  const { values } = await stack.metrics.rejections.get();
  return values.find((v) => v.labels.reason === 'malformed')?.value ?? 0;
}

/** The status codes of every response head a client received, in order. */
const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

const CURRENT_HEADERS = 'Service-Client-Version: 1.0.0\r\nx-api-key: k\r\n';

/**
 * Sends `head + first`, waits until the first response is whole, then sends `rest` (or a FIN for
 * `undefined`) and reads until the connection is closed (the client closes its side after the shim's).
 */
async function exchange(stack: Stack, head: string, first: string, rest: string | undefined) {
  const client = openRaw(stack.url, { allowHalfOpen: true });
  client.socket.write(head + first);
  await waitFor(() => /\r\n\r\n\{[\s\S]*\}$/.test(client.text()), { what: 'the first response, whole' });
  if (rest === undefined) client.socket.end();
  else client.socket.write(rest);
  // A client closes its side once it has read the shim's FIN.
  client.socket.on('end', () => client.socket.end());
  await client.closed;
  return client.text();
}

describe('a request whose response is whole before its body has arrived gets that one response', () => {
  it.each([
    ['a 401 (no credentials)', 'Service-Client-Version: 1.0.0\r\n', 401],
    ['a 426 (no client version)', 'x-api-key: k\r\n', 426],
  ])(
    '%s kept alive while a declared body drains, then the client FIN: no 400, nothing counted',
    async (_what, headers, status) => {
      const upstream = await startRawUpstream(() => {});
      open.push(upstream);
      const stack = await startStack({ UPSTREAM_URL: upstream.url });
      open.push(stack);
      const head = `POST /uploads HTTP/1.1\r\nHost: shim.test\r\n${headers}Content-Length: 100\r\n\r\n`;
      const text = await exchange(stack, head, 'x'.repeat(10), undefined);
      expect(statuses(text)).toEqual([status]);
      expect(await malformedCount(stack)).toBe(0);
      expect(stack.logs().filter((l) => l.msg === 'request refused by the HTTP server')).toEqual([]);
      expect(upstream.connections()).toBe(0);
    },
  );

  it.each([
    ['an invalid chunk size', 'zz\r\n\r\n', 1],
    ['a bad trailer', '0\r\nX : a\r\n\r\n', 1],
    ['the client FIN', undefined, 0],
  ])(
    "an upstream's early answer, then %s in the chunked body: no second response",
    async (_what, rest, counted) => {
      const upstream = await earlyAnswering();
      const stack = await startStack({ UPSTREAM_URL: upstream.url });
      open.push(stack);
      const head = `POST /uploads HTTP/1.1\r\nHost: shim.test\r\n${CURRENT_HEADERS}Transfer-Encoding: chunked\r\n\r\n`;
      const text = await exchange(stack, head, '5\r\nhello\r\n', rest);
      expect(statuses(text)).toEqual([200]);
      // A broken body is still a malformed request (counted once); an aborted upload is not (fix 61).
      expect(await malformedCount(stack)).toBe(counted);
    },
  );

  it('on a public path, without credentials: the early answer alone', async () => {
    const upstream = await earlyAnswering();
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    open.push(stack);
    const head = 'POST /api/health HTTP/1.1\r\nHost: shim.test\r\nTransfer-Encoding: chunked\r\n\r\n';
    const text = await exchange(stack, head, '5\r\nhello\r\n', '0\r\nX : a\r\n\r\n');
    expect(statuses(text)).toEqual([200]);
  });

  it('a body that ends well after an early answer leaves the connection to the next request', async () => {
    const upstream = await earlyAnswering();
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    open.push(stack);
    const client = openRaw(stack.url);
    const head = `POST /uploads HTTP/1.1\r\nHost: shim.test\r\n${CURRENT_HEADERS}Transfer-Encoding: chunked\r\n\r\n`;
    client.socket.write(`${head}5\r\nhello\r\n`);
    await waitFor(() => statuses(client.text()).length === 1, { what: 'the early answer' });
    // The body's end, then a malformed request of its own: answered 400, as any.
    client.socket.write('0\r\n\r\nGET /x HTTP/1.1\r\nHost: shim.test\r\nBad Name: 1\r\n\r\n');
    await client.closed;
    expect(statuses(client.text())).toEqual([200, 400]);
    expect(await malformedCount(stack)).toBe(1);
  });
});
