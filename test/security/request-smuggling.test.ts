/**
 * Attack: HTTP request smuggling (CWE-444; PortSwigger "HTTP request smuggling", RFC 9112 §6.3, §11.2).
 *
 * A front end and a back end that disagree on where a request body ends let an attacker hide a second
 * request inside the first one's body. The back end then runs the hidden request — past the shim's
 * admission gates, with no version or credential check — and its response goes to whoever sends the
 * next request on the pooled upstream connection. Classic spellings: CL.TE and TE.CL (both headers),
 * duplicate or malformed `Content-Length`, obfuscated `Transfer-Encoding`, chunked bodies on methods
 * that Node does not chunk by default (GET, HEAD, DELETE, OPTIONS), a `Connection` header that names a
 * framing header so that a hop-by-hop stripper removes it, and malformed chunks.
 *
 * Each case is sent as raw bytes to the shim, whose upstream is a raw TCP server that records every
 * byte; those bytes are then framed strictly (`frameRequests`). The invariant: the upstream sees at most
 * the one request the client sent — never a request for the hidden target — and the client gets exactly
 * one response.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { openRaw, send, sendRawUntilClose, statusesIn } from '../helpers/http.ts';
import { answerEachRequest, type FramedRequest, frameRequests } from '../helpers/http1-frames.ts';
import { waitFor } from '../helpers/poll.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

// Every test starts its own stack and upstream; the tests of each describe run concurrently, so what
// they started is closed after the file.
const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterAll(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

/** Admitted request headers (a current client with an API key). */
const AUTH = 'Host: shim.test\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n';
/** The hidden request: a target no test sends openly. */
const HIDDEN = 'GET /smuggled HTTP/1.1\r\nHost: shim.test\r\n\r\n';
const HIDDEN_HEX = HIDDEN.length.toString(16);

async function stackWithRecorder() {
  const upstream = await startRawUpstream(answerEachRequest());
  upstreams.push(upstream);
  const stack = await startStack({ UPSTREAM_URL: upstream.url });
  stacks.push(stack);
  return { upstream, stack };
}

/**
 * The last request of every attack, pipelined after it on the same connection: admitted, so that the
 * shim forwards it (after everything it made of the attack), and `Connection: close`, so that the
 * shim closes the connection once it has answered it. The close ends the exchange: whatever the shim
 * made of the attack's bytes has reached the client and the upstream by then.
 */
const SENTINEL = `GET /sentinel HTTP/1.1\r\n${AUTH}Connection: close\r\n\r\n`;

/** What the upstream received on each connection, up to the sentinel request (cut off). */
function beforeSentinel(received: readonly string[]): string[] {
  return received.map((r) => {
    const at = r.indexOf('GET /sentinel HTTP/1.1\r\n');
    return at === -1 ? r : r.slice(0, at);
  });
}

/**
 * Sends raw bytes, then the sentinel, and reads until the shim closes the connection (a rejection
 * closes it before the sentinel is read). Returns the client-side responses and what the upstream
 * received, both without the sentinel's.
 */
async function attack(bytes: string) {
  const { upstream, stack } = await stackWithRecorder();
  let raw = await sendRawUntilClose(stack.url, `${bytes}${SENTINEL}`);
  // The upstream echoes the target it framed: the sentinel's response is the one that names it.
  const echo = raw.indexOf('"target":"/sentinel"');
  if (echo !== -1) raw = raw.slice(0, raw.lastIndexOf('HTTP/1.1 ', echo));
  const received = beforeSentinel(upstream.received);
  const framings = received.map((r) => frameRequests(r));
  const requests: FramedRequest[] = framings.flatMap((f) => f.requests);
  return { stack, upstream, raw, statuses: statusesIn(raw), requests, framings, received };
}

describe.concurrent('ambiguous framing is rejected before anything reaches the upstream', () => {
  it.each([
    [
      'CL.TE',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG`,
    ],
    [
      'TE.CL',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n${HIDDEN_HEX}\r\n${HIDDEN}\r\n0\r\n\r\n`,
    ],
    [
      'duplicate Content-Length, different values',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Content-Length: 0\r\nContent-Length: ${HIDDEN.length}\r\n\r\n${HIDDEN}`,
    ],
    [
      'duplicate Content-Length, same value',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc`,
    ],
    ['Content-Length list', `POST /debug/echo HTTP/1.1\r\n${AUTH}Content-Length: 3, 3\r\n\r\nabc`],
    ['Content-Length with a sign', `POST /debug/echo HTTP/1.1\r\n${AUTH}Content-Length: +3\r\n\r\nabc`],
    ['negative Content-Length', `POST /debug/echo HTTP/1.1\r\n${AUTH}Content-Length: -1\r\n\r\n${HIDDEN}`],
    ['hexadecimal Content-Length', `POST /debug/echo HTTP/1.1\r\n${AUTH}Content-Length: 0x3\r\n\r\nabc`],
    [
      // Node's parser takes up to 2^64 − 1; JavaScript reads 2^53 + 1 as 2^53, so the upstream would
      // have been told a length one byte shorter than the shim reads (fuzzing, 2026-11-25).
      'Content-Length beyond 2^53 (forwarded rounded)',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Content-Length: 9007199254740993\r\n\r\n${HIDDEN}`,
    ],
    [
      'Content-Length beyond 2^64',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Content-Length: 99999999999999999999999\r\n\r\n${HIDDEN}`,
    ],
    [
      'Transfer-Encoding: xchunked',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n`,
    ],
    [
      'Transfer-Encoding: chunked, identity',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n`,
    ],
    [
      'Transfer-Encoding: identity, chunked',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n`,
    ],
    [
      'Transfer-Encoding: gzip, chunked',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`,
    ],
    [
      'two Transfer-Encoding headers',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n`,
    ],
    [
      'Transfer-Encoding: chunked twice',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    ],
    [
      'Transfer-Encoding with a vertical tab',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n`,
    ],
    [
      'Transfer-Encoding with a trailing NBSP',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding: chunked\xa0\r\n\r\n0\r\n\r\n`,
    ],
    [
      'space before the colon',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n`,
    ],
    [
      'obs-fold continuation line',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n`,
    ],
    [
      'bare LF line endings',
      `POST /debug/echo HTTP/1.1\n${AUTH.replaceAll('\r\n', '\n')}Content-Length: 0\n\n${HIDDEN}`,
    ],
    [
      // RFC 9112 §6.1: treat as faulty framing; a front server may read this body up to the close.
      'HTTP/1.0 with Transfer-Encoding: chunked',
      `POST /debug/echo HTTP/1.0\r\n${AUTH}Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n${HIDDEN_HEX}\r\n${HIDDEN}\r\n0\r\n\r\n`,
    ],
    [
      'bare CR inside a header',
      `POST /debug/echo HTTP/1.1\r\n${AUTH}X-A: 1\rContent-Length: 40\r\nContent-Length: 0\r\n\r\n`,
    ],
  ])('%s → one 400, the upstream sees nothing', async (_name, bytes) => {
    const { statuses, received, raw } = await attack(bytes);
    expect(statuses, raw).toEqual([400]);
    expect(received.join('')).toBe('');
  });
});

describe.concurrent('bodies whose framing is unambiguous are re-framed, so the hidden request stays body data', () => {
  it.each([
    ['chunked DELETE', 'DELETE'],
    ['chunked OPTIONS', 'OPTIONS'],
    ['chunked GET', 'GET'],
    ['chunked POST', 'POST'],
  ])('%s', async (_name, method) => {
    const { statuses, requests, framings } = await attack(
      `${method} /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding: chunked\r\n\r\n${HIDDEN_HEX}\r\n${HIDDEN}\r\n0\r\n\r\n`,
    );
    expect(statuses).toEqual([200]);
    expect(framings.every((f) => f.error === undefined && f.rest === '')).toBe(true);
    expect(requests.map((r) => [r.method, r.target, r.body])).toEqual([[method, '/debug/echo', HIDDEN]]);
  });

  it('a chunked "preflight" is no preflight: it is checked, and nothing reaches the upstream', async () => {
    const { statuses, received } = await attack(
      `OPTIONS /user/me HTTP/1.1\r\nHost: shim.test\r\nOrigin: https://app.test\r\nAccess-Control-Request-Method: GET\r\nTransfer-Encoding: chunked\r\n\r\n${HIDDEN_HEX}\r\n${HIDDEN}\r\n0\r\n\r\n`,
    );
    expect(statuses).toEqual([426]);
    expect(received.join('')).toBe('');
  });

  it('Transfer-Encoding spelled cHuNkEd or after a tab is still chunked', async () => {
    for (const te of ['cHuNkEd', '\tchunked']) {
      const { statuses, requests } = await attack(
        `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding:${te}\r\n\r\n3\r\nabc\r\n0\r\n\r\n`,
      );
      expect(statuses).toEqual([200]);
      expect(requests.map((r) => r.body)).toEqual(['abc']);
    }
  });

  it('chunk extensions are dropped, not forwarded as framing', async () => {
    const { statuses, requests, framings } = await attack(
      `POST /debug/echo HTTP/1.1\r\n${AUTH}Transfer-Encoding: chunked\r\n\r\n3;x="${HIDDEN_HEX}"\r\nabc\r\n0\r\n\r\n`,
    );
    expect(statuses).toEqual([200]);
    expect(framings[0]?.error).toBeUndefined();
    expect(requests.map((r) => r.body)).toEqual(['abc']);
  });

  it('a GET with a Content-Length body forwards its length', async () => {
    const { statuses, requests } = await attack(
      `GET /debug/echo HTTP/1.1\r\n${AUTH}Content-Length: ${HIDDEN.length}\r\n\r\n${HIDDEN}`,
    );
    expect(statuses).toEqual([200]);
    expect(requests.map((r) => [r.method, r.body])).toEqual([['GET', HIDDEN]]);
  });
});

describe.concurrent('Connection naming a framing header', () => {
  // `Connection: content-length` asks a proxy to strip Content-Length as hop-by-hop. Node's HTTP client
  // does not chunk GET, HEAD, DELETE or OPTIONS by default, so without Content-Length the body bytes
  // would follow the headers unframed and be read by the upstream as the next request.
  it.each(['GET', 'DELETE', 'OPTIONS', 'POST', 'PUT'])(
    '%s with Connection: content-length keeps its body framed',
    async (method) => {
      const { statuses, requests, framings } = await attack(
        `${method} /debug/echo HTTP/1.1\r\n${AUTH}Connection: Content-Length\r\nContent-Length: ${HIDDEN.length}\r\n\r\n${HIDDEN}`,
      );
      expect(statuses).toEqual([200]);
      expect(framings.every((f) => f.error === undefined)).toBe(true);
      expect(requests.map((r) => r.target)).not.toContain('/smuggled');
      expect(requests.map((r) => [r.method, r.target, r.body])).toEqual([[method, '/debug/echo', HIDDEN]]);
    },
  );

  it('Connection: transfer-encoding on a chunked DELETE keeps it chunked', async () => {
    const { statuses, requests } = await attack(
      `DELETE /debug/echo HTTP/1.1\r\n${AUTH}Connection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n\r\n${HIDDEN_HEX}\r\n${HIDDEN}\r\n0\r\n\r\n`,
    );
    expect(statuses).toEqual([200]);
    expect(requests.map((r) => [r.method, r.body])).toEqual([['DELETE', HIDDEN]]);
  });
});

describe.concurrent('malformed chunks after forwarding has started', () => {
  it.each([
    ['a chunk not followed by CRLF', `3\r\nabcX${HIDDEN}0\r\n\r\n`],
    ['a chunk size beyond 2^64', `fffffffffffffffff1\r\nabc\r\n0\r\n\r\n`],
    ['a chunk size with a trailing space', `3 \r\nabc\r\n0\r\n\r\n`],
    ['bare LF chunk lines', `3\nabc\n0\n\n${HIDDEN}`],
  ])('%s: one 400, the upstream connection is dropped, never reused', async (_name, body) => {
    const { stack, upstream, statuses, requests } = await attack(
      `POST /debug/sink HTTP/1.1\r\n${AUTH}Transfer-Encoding: chunked\r\n\r\n${body}`,
    );
    expect(statuses).toEqual([400]);
    expect(requests).toEqual([]); // the truncated request never completed upstream
    // The next request must not be written on the connection that carries half a chunked body.
    const next = await send(stack.url, 'GET', '/after', CURRENT);
    expect(next.json()).toMatchObject({ target: '/after' });
    for (const r of upstream.received) {
      const framing = frameRequests(r);
      if (framing.requests.some((q) => q.target === '/after')) expect(framing.requests).toHaveLength(1);
    }
    expect(upstream.received.join('')).not.toContain('/smuggled');
  });
});

describe.concurrent('a rejected request with a body', () => {
  it.each([
    ['Content-Length', `Content-Length: ${HIDDEN.length}\r\n\r\n${HIDDEN}`],
    ['chunked', `Transfer-Encoding: chunked\r\n\r\n${HIDDEN_HEX}\r\n${HIDDEN}\r\n0\r\n\r\n`],
  ])('(%s) gets one 401; its body is never read as a request', async (_name, rest) => {
    const { statuses, received } = await attack(
      `POST /missions HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\n${rest}`,
    );
    expect(statuses).toEqual([401]);
    expect(received.join('')).toBe('');
  });

  it('a pipelined request after a rejected one is judged on its own', async () => {
    const { statuses, requests } = await attack(
      `POST /missions HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nContent-Length: ${HIDDEN.length}\r\n\r\n${HIDDEN}` +
        `GET /next HTTP/1.1\r\n${AUTH}\r\n`,
    );
    expect(statuses).toEqual([401, 200]);
    expect(requests.map((r) => r.target)).toEqual(['/next']);
  });
});

describe.concurrent('an upstream that answers before the request body is complete', () => {
  it('does not get the next request on that connection until the body has ended', async () => {
    // The upstream answers as soon as it has the headers (as a 401 or 413 would), keep-alive.
    const upstream = await startRawUpstream((socket, received) => {
      const seen = (received.match(/ HTTP\/1\.1\r\n/g) ?? []).length;
      const answered = (socket as { answered?: number }).answered ?? 0;
      for (let i = answered; i < seen; i++) {
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
      }
      (socket as { answered?: number }).answered = seen;
    });
    upstreams.push(upstream);
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    const net = await import('node:net');
    const port = Number(new URL(stack.url).port);
    const client = net.connect(port, '127.0.0.1');
    client.on('error', () => {});
    const headParsed = new Promise((resolve) => stack.server.once('request', resolve));
    client.write(`POST /debug/sink HTTP/1.1\r\n${AUTH}Content-Length: ${HIDDEN.length}\r\n\r\n`);
    await headParsed; // the shim has the head and waits for the body
    const received = () => upstream.received.join('');
    // While the body is outstanding, other clients' requests go upstream.
    const others = await Promise.all([1, 2, 3].map((i) => send(stack.url, 'GET', `/other${i}`, CURRENT)));
    expect(others.map((o) => o.status)).toEqual([200, 200, 200]);
    // The body, then a sentinel request on the same client connection: once the sentinel has reached
    // the upstream, everything the shim made of the body has too.
    client.write(HIDDEN);
    client.write(`GET /sentinel HTTP/1.1\r\n${AUTH}\r\n`);
    await waitFor(() => received().includes('GET /sentinel '), {
      what: 'the sentinel to reach the upstream',
    });
    client.destroy();
    for (const r of upstream.received) {
      const framing = frameRequests(r);
      expect(framing.error, r).toBeUndefined();
      expect(framing.requests.map((q) => q.target)).not.toContain('/smuggled');
    }
    // The body reached the upstream as the body of the POST it belongs to.
    const post = upstream.received
      .flatMap((r) => frameRequests(r).requests)
      .find((q) => q.target === '/debug/sink');
    expect(post?.body).toBe(HIDDEN);
  });
});

/** Request-log paths of a stack (one line per request the pipeline handled). */
const loggedPaths = (stack: Stack) =>
  stack
    .logs()
    .map((l) => (l.req as { path?: string } | undefined)?.path)
    .filter((p): p is string => p !== undefined);

/** Waits until the stack's front server has no connection left: every request on them has logged. */
async function allClosed(stack: Stack): Promise<void> {
  const connections = () =>
    new Promise<number>((resolve, reject) =>
      stack.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
    );
  await waitFor(async () => (await connections()) === 0, { what: 'the connections to close' });
}

/** A complete, admitted request that must never run: it follows a response that closes the connection. */
const SMUGGLED = `POST /smuggled HTTP/1.1\r\n${AUTH}Content-Length: 2\r\n\r\nhi`;

describe.concurrent('requests pipelined behind a response that closes the connection (RFC 9112 §9.6)', () => {
  it.each([
    [
      'an HTTP/1.0 request with Transfer-Encoding',
      `POST /first HTTP/1.0\r\n${AUTH}Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`,
      400,
    ],
    [
      'Transfer-Encoding: identity, chunked',
      `POST /first HTTP/1.1\r\n${AUTH}Transfer-Encoding: identity, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`,
      400,
    ],
    [
      'a chunked POST without credentials',
      `POST /first HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`,
      401,
    ],
    ['an HTTP/1.1 request without Host', 'GET /first HTTP/1.1\r\nService-Client-Version: 1.0.0\r\n\r\n', 400],
    ['a request that asks to close', `GET /first HTTP/1.1\r\n${AUTH}Connection: close\r\n\r\n`, 200],
    ['an HTTP/1.0 request without keep-alive', `GET /first HTTP/1.0\r\n${AUTH}\r\n`, 200],
    ['an HTTP/0.9 request without keep-alive', `GET /first HTTP/0.9\r\n${AUTH}\r\n`, 200],
  ])('after %s: one response, and the smuggled request is never handled', async (_name, first, status) => {
    const { upstream, stack } = await stackWithRecorder();
    const raw = await sendRawUntilClose(stack.url, `${first}${SMUGGLED}`);
    expect(statusesIn(raw.replace(/^HTTP\/1\.0/gm, 'HTTP/1.1'))).toEqual([status]);
    await allClosed(stack);
    // A request on a fresh connection, handled after everything the first one brought.
    expect((await send(stack.url, 'GET', '/after', CURRENT)).status).toBe(200);
    expect(loggedPaths(stack)).not.toContain('/smuggled');
    expect(upstream.received.join('')).not.toContain('/smuggled');
  });

  it('a shim-made 400 for an HTTP/1.1 request without Host is JSON and logged', async () => {
    const { stack } = await stackWithRecorder();
    const raw = await sendRawUntilClose(stack.url, 'GET /first HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(raw).toContain('"message":"An HTTP/1.1 request must carry a Host header');
    await allClosed(stack);
    expect(stack.logs().some((l) => (l.res as { statusCode?: number })?.statusCode === 400)).toBe(true);
  });

  it('an unknown expectation gets the shim-made 417, JSON, in its turn', async () => {
    const { upstream, stack } = await stackWithRecorder();
    const raw = await sendRawUntilClose(
      stack.url,
      `GET /one HTTP/1.1\r\n${AUTH}\r\nGET /two HTTP/1.1\r\n${AUTH}Expect: foo\r\n\r\nGET /three HTTP/1.1\r\n${AUTH}Connection: close\r\n\r\n`,
    );
    expect(statusesIn(raw)).toEqual([200, 417, 200]);
    expect(raw).toContain('"statusCode":417');
    expect(frameRequests(upstream.received.join('')).requests.map((r) => r.target)).toEqual([
      '/one',
      '/three',
    ]);
  });
});

describe.concurrent('pipelined requests are handled one at a time, in order (RFC 9112 §9.3.2)', () => {
  it('a request pipelined behind another reaches the upstream only once the first is answered', async () => {
    // The upstream holds /one until /two arrives or 300 ms pass: handled in order, /two never comes first.
    let answerOne: (() => void) | undefined;
    let twoBeforeOneAnswered: boolean | undefined;
    let oneAnswered = false;
    const upstream = await startRawUpstream((socket, received) => {
      if (received.includes('GET /two ') && twoBeforeOneAnswered === undefined) {
        twoBeforeOneAnswered = !oneAnswered;
        answerOne?.();
      }
      if (received.includes('GET /one ') && answerOne === undefined) {
        const timer = setTimeout(() => answerOne?.(), 300);
        answerOne = () => {
          if (oneAnswered) return;
          oneAnswered = true;
          clearTimeout(timer);
          socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n"one"');
        };
      }
      if (received.includes('GET /two ')) {
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n"two"');
      }
    });
    upstreams.push(upstream);
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    const raw = await sendRawUntilClose(
      stack.url,
      `GET /one HTTP/1.1\r\n${AUTH}\r\nGET /two HTTP/1.1\r\n${AUTH}Connection: close\r\n\r\n`,
    );
    expect(statusesIn(raw)).toEqual([200, 200]);
    expect(twoBeforeOneAnswered).toBe(false);
  });

  it('garbage after a complete request: its response first, then the 400, in order', async () => {
    const { upstream, stack } = await stackWithRecorder();
    const raw = await sendRawUntilClose(
      stack.url,
      `POST /first HTTP/1.1\r\n${AUTH}Content-Length: 3\r\n\r\nabcGARBAGE\r\n\r\n`,
    );
    expect(statusesIn(raw)).toEqual([200, 400]);
    expect(raw.indexOf('"target":"/first"')).toBeGreaterThan(0);
    expect(raw.indexOf('"target":"/first"')).toBeLessThan(raw.indexOf('HTTP/1.1 400'));
    expect(frameRequests(upstream.received.join('')).requests.map((r) => r.target)).toEqual(['/first']);
  });
});

describe.concurrent('a parser error among pipelined requests is answered in its turn (RFC 9112 §9.3.2)', () => {
  /** An upstream that answers `/slow` only when the test says so, everything else at once. */
  async function holdingStack() {
    let release: (() => void) | undefined;
    const upstream = await startRawUpstream((socket, received) => {
      const { requests } = frameRequests(received);
      const answered = (socket as { answered?: number }).answered ?? 0;
      for (const request of requests.slice(answered)) {
        const body = JSON.stringify({ target: request.target });
        const reply = `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
        if (request.target === '/slow') {
          // The head and the first bytes now, the rest when released.
          socket.write(reply.slice(0, -5));
          release = () => socket.write(reply.slice(-5));
        } else socket.write(reply);
      }
      (socket as { answered?: number }).answered = requests.length;
    });
    upstreams.push(upstream);
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    return { upstream, stack, held: () => release !== undefined, release: () => release?.() };
  }

  const malformed = async (stack: Stack) =>
    Number(
      /shim_rejections_total\{reason="malformed"\} (\d+)/.exec(await stack.metrics.registry.metrics())?.[1] ??
        0,
    );

  it('a queued request with a broken body: the response before it first, then its 400; it never runs', async () => {
    const { upstream, stack, held, release } = await holdingStack();
    const { socket: client, text: received, closed } = openRaw(stack.url);
    client.write(
      `GET /slow HTTP/1.1\r\n${AUTH}\r\nPOST /b HTTP/1.1\r\n${AUTH}Transfer-Encoding: chunked\r\n\r\nZZZ\r\n`,
    );
    await waitFor(async () => (await malformed(stack)) === 1, { what: 'the parser error' });
    await waitFor(held, { what: 'the upstream to hold /slow' });
    release();
    await closed;
    expect(statusesIn(received())).toEqual([200, 400]);
    expect(received()).toContain('{"target":"/slow"}');
    expect(upstream.received.join('')).not.toContain('/b ');
  });

  it('complete requests before garbage are all served, then the 400', async () => {
    const { upstream, stack } = await holdingStack();
    const raw = await sendRawUntilClose(
      stack.url,
      `GET /a HTTP/1.1\r\n${AUTH}\r\nGET /b HTTP/1.1\r\n${AUTH}\r\nGARBAGE\r\n\r\n`,
    );
    expect(statusesIn(raw)).toEqual([200, 200, 400]);
    expect(raw.indexOf('"/a"')).toBeLessThan(raw.indexOf('"/b"'));
    const targets = upstream.received.flatMap((r) => frameRequests(r).requests).map((r) => r.target);
    expect(targets).toEqual(['/a', '/b']);
  });

  it('garbage while a response is streaming: that response whole, then one 400, counted once', async () => {
    const { stack, held, release } = await holdingStack();
    const { socket: client, text: received, closed } = openRaw(stack.url);
    client.write(`GET /slow HTTP/1.1\r\n${AUTH}\r\n`);
    await waitFor(() => received().includes('{"target":'), { what: 'the first body bytes' });
    client.write('GARBAGE\r\n\r\n');
    await waitFor(async () => (await malformed(stack)) === 1, { what: 'the parser error' });
    client.write('MORE GARBAGE\r\n\r\n');
    client.write('AND MORE\r\n\r\n');
    await waitFor(held, { what: 'the upstream to hold /slow' });
    release();
    await closed;
    expect(statusesIn(received())).toEqual([200, 400]);
    expect(received()).toContain('{"target":"/slow"}');
    expect(await malformed(stack)).toBe(1);
  });
});
