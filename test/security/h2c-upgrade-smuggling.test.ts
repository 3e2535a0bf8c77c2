/**
 * Attack: h2c upgrade smuggling (Bishop Fox, "h2c Smuggling: Request Smuggling Via HTTP/2 Cleartext",
 * 2020; the `h2csmuggler` tool) and its neighbours: WebSocket upgrades, CONNECT, the HTTP/2
 * prior-knowledge preface (`PRI * HTTP/2.0`).
 *
 * A proxy that forwards `Upgrade: h2c` (with `HTTP2-Settings` and `Connection: Upgrade,
 * HTTP2-Settings`) and then relays the upgraded connection as opaque bytes hands the client a raw
 * tunnel to the upstream: every HTTP/2 request sent down it skips the proxy's admission checks. The
 * shim never forwards an upgrade: Node hands such a request to the server's `upgrade` (or `connect`)
 * listener with the bare socket, and the shim answers it there with its JSON error and closes.
 *
 * Two defects found by running h2csmuggler's requests and raw variants against the shim (2026-11-25):
 * - **A connection reset right after an upgrade request or a CONNECT ended the process.** Once Node
 *   hands the socket to the `upgrade`/`connect` listener it no longer listens to the socket's
 *   `'error'`; the shim's refusal then wrote to (or lingered on) a socket the client had reset, and the
 *   unheard `ECONNRESET` was thrown: every exchange in flight lost, to any client without credentials.
 * - **An upgrade request or CONNECT pipelined behind an admitted request was answered before it**, and
 *   the admitted request's response was lost: its request ran upstream, the client read the 501 as its
 *   answer (RFC 9112 §9.3.2: responses in request order), the case of fix 16 on the path that bypasses
 *   the pipeline.
 *
 * The invariants: every such request gets the shim's JSON refusal (or a parser 400) and a close; the
 * upstream — a raw TCP server that records every byte — receives nothing of it; a request pipelined
 * before it is answered first, in full; and the process outlives a client that resets.
 */
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { send, sendRawUntilClose, statusesIn } from '../helpers/http.ts';
import { answerEachRequest, frameRequests } from '../helpers/http1-frames.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterAll(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

async function stackWithRecorder(reply?: Parameters<typeof answerEachRequest>[0]) {
  const upstream = await startRawUpstream(answerEachRequest(reply));
  upstreams.push(upstream);
  const stack = await startStack({ UPSTREAM_URL: upstream.url });
  stacks.push(stack);
  return { upstream, stack };
}

const AUTH = 'Service-Client-Version: 0.59.0\r\nX-Api-Key: k\r\n';
/** What h2csmuggler sends (its `send_initial_request`), with `HTTP2-Settings` named in `Connection`. */
const H2C =
  'Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings\r\n';
/** h2csmuggler `--upgrade-only`. */
const H2C_UPGRADE_ONLY =
  'Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: Upgrade\r\n';
const WEBSOCKET =
  'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n';
/** The HTTP/2 connection preface and an empty SETTINGS frame, as a client sends after a 101. */
const H2_PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00';
/** An HTTP/1.1 request hidden behind the upgrade, as a tunnel would carry it. */
const HIDDEN = 'GET /smuggled HTTP/1.1\r\nHost: shim.test\r\n\r\n';

const refused = (raw: string, status: number) => {
  expect(statusesIn(raw)).toEqual([status]);
  const head = raw.slice(0, raw.indexOf('\r\n\r\n') + 2);
  expect(head).toContain('\r\nContent-Type: application/json; charset=utf-8\r\n');
  expect(head).toContain('\r\nConnection: close\r\n');
  expect(JSON.parse(raw.slice(head.length + 2))).toMatchObject({ statusCode: status });
};

describe.concurrent('upgrade requests are refused and nothing reaches the upstream', () => {
  it.each([
    ['h2c GET, public path', `GET /api/health HTTP/1.1\r\nHost: shim.test\r\n${H2C}\r\n`],
    ['h2c GET, private path, no credentials', `GET /user/me HTTP/1.1\r\nHost: shim.test\r\n${H2C}\r\n`],
    ['h2c GET, private path, admitted', `GET /user/me HTTP/1.1\r\nHost: shim.test\r\n${AUTH}${H2C}\r\n`],
    ['h2c --upgrade-only', `GET /api/health HTTP/1.1\r\nHost: shim.test\r\n${H2C_UPGRADE_ONLY}\r\n`],
    [
      'h2c POST with a body that is a request',
      `POST /api/health HTTP/1.1\r\nHost: shim.test\r\n${H2C}Content-Length: ${HIDDEN.length}\r\n\r\n${HIDDEN}`,
    ],
    [
      'h2c, then the HTTP/2 preface',
      `GET /api/health HTTP/1.1\r\nHost: shim.test\r\n${H2C}\r\n${H2_PREFACE}`,
    ],
    [
      'h2c, then a hidden HTTP/1.1 request',
      `GET /api/health HTTP/1.1\r\nHost: shim.test\r\n${H2C}\r\n${HIDDEN}`,
    ],
    ['WebSocket, admitted', `GET /missions HTTP/1.1\r\nHost: shim.test\r\n${AUTH}${WEBSOCKET}\r\n`],
    ['WebSocket, no credentials', `GET /missions HTTP/1.1\r\nHost: shim.test\r\n${WEBSOCKET}\r\n`],
    ['h2c in HTTP/1.0', `GET /api/health HTTP/1.0\r\n${H2C}\r\n`],
  ])('%s: 501, JSON, closed', async (_what, request) => {
    const { upstream, stack } = await stackWithRecorder();
    refused(await sendRawUntilClose(stack.url, request), 501);
    expect(upstream.received.join('')).toBe('');
  });

  it('an Upgrade without "Connection: upgrade" is refused by the hygiene gate: 501, never forwarded', async () => {
    const { upstream, stack } = await stackWithRecorder();
    const raw = await sendRawUntilClose(
      stack.url,
      `GET /api/health HTTP/1.1\r\nHost: shim.test\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: close\r\n\r\n`,
    );
    expect(statusesIn(raw)).toEqual([501]);
    expect(upstream.received.join('')).toBe('');
  });

  it('the HTTP/2 prior-knowledge preface: 400, JSON, closed', async () => {
    const { upstream, stack } = await stackWithRecorder();
    refused(await sendRawUntilClose(stack.url, H2_PREFACE), 400);
    expect(upstream.received.join('')).toBe('');
  });
});

describe.concurrent('an upgrade or CONNECT pipelined behind a request is answered in its turn (RFC 9112 §9.3.2)', () => {
  it.each([
    ['an h2c upgrade', `GET /api/health HTTP/1.1\r\nHost: shim.test\r\n${H2C}\r\n`, 501],
    ['a WebSocket upgrade', `GET /missions HTTP/1.1\r\nHost: shim.test\r\n${WEBSOCKET}\r\n`, 501],
    ['a CONNECT', 'CONNECT upstream.test:443 HTTP/1.1\r\nHost: upstream.test:443\r\n\r\n', 400],
  ])(
    '%s behind an admitted GET: the GET’s response first, then the refusal',
    async (_what, second, status) => {
      const { upstream, stack } = await stackWithRecorder();
      const raw = await sendRawUntilClose(
        stack.url,
        `GET /first HTTP/1.1\r\nHost: shim.test\r\n${AUTH}\r\n${second}`,
      );
      expect(statusesIn(raw)).toEqual([200, status]);
      expect(raw.indexOf('"target":"/first"')).toBeGreaterThan(0);
      expect(raw.indexOf('"target":"/first"')).toBeLessThan(raw.lastIndexOf('HTTP/1.1 '));
      const targets = upstream.received.flatMap((r) => frameRequests(r).requests).map((r) => r.target);
      expect(targets).toEqual(['/first']);
    },
  );

  it('behind a response larger than the socket buffers: that response whole, then the 501', async () => {
    const big = 'x'.repeat(8 * 1024 * 1024);
    const { stack } = await stackWithRecorder(
      () => `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${big.length}\r\n\r\n${big}`,
    );
    const raw = await sendRawUntilClose(
      stack.url,
      `GET /big HTTP/1.1\r\nHost: shim.test\r\n${AUTH}\r\nGET /api/health HTTP/1.1\r\nHost: shim.test\r\n${H2C}\r\n`,
      15_000,
    );
    expect(statusesIn(raw.slice(0, 200))).toEqual([200]);
    expect(raw).toContain(`\r\n\r\n${big}HTTP/1.1 501 Not Implemented\r\n`);
  });
});

describe('a client that resets after an upgrade request or a CONNECT', () => {
  it.each([
    ['an upgrade', `GET /api/health HTTP/1.1\r\nHost: shim.test\r\n${WEBSOCKET}\r\n`, 'upgrade'],
    ['a CONNECT', 'CONNECT upstream.test:443 HTTP/1.1\r\nHost: upstream.test:443\r\n\r\n', 'malformed'],
  ])('%s, then a reset: the process goes on and serves', async (_what, request, reason) => {
    const { stack } = await stackWithRecorder();
    let accepted = 0;
    stack.server.on('connection', () => accepted++);
    const refusals = async () =>
      Number(
        new RegExp(`shim_rejections_total\\{reason="${reason}"\\} (\\d+)`).exec(
          await stack.metrics.registry.metrics(),
        )?.[1] ?? 0,
      );
    // The monitor sees an uncaught exception before anything handles it, without changing what happens.
    const uncaught: Error[] = [];
    const monitor = (err: Error) => uncaught.push(err);
    process.on('uncaughtExceptionMonitor', monitor);
    try {
      const url = new URL(stack.url);
      for (let i = 1; i <= 3; i++) {
        const client = net.connect(Number(url.port), url.hostname);
        client.on('error', () => {});
        // Accepted before the request is sent, so that the shim (in this process) reads the request
        // and the reset together: both go out in one turn of the event loop.
        await waitFor(() => accepted === i, { what: `connection ${i} accepted` });
        client.write(request);
        client.resetAndDestroy();
        await waitFor(async () => (await refusals()) === i, { what: `refusal ${i}` });
      }
      // A request on a connection of its own is served after the resets.
      expect((await send(stack.url, 'GET', '/api/health', {})).status).toBe(200);
    } finally {
      process.off('uncaughtExceptionMonitor', monitor);
    }
    expect(uncaught.map((e) => (e as NodeJS.ErrnoException).code ?? e.message)).toEqual([]);
  });
});
