/**
 * Forwarding fidelity end to end (SPEC §4): bytes, headers, query strings, hop-by-hop headers,
 * X-Forwarded-*, keep-alive reuse, framing the shim owns.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDebugStack } from '../helpers/debug-upstream.ts';
import { openRaw, send, sendRawUntilClose, statusesIn } from '../helpers/http.ts';
import { answerEachRequest, markRequests } from '../helpers/http1-frames.ts';
import { waitFor } from '../helpers/poll.ts';
import { jsonResponse, type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

describe('through an echoing upstream', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startDebugStack();
  });
  afterAll(() => stack.close());

  it('strips hop-by-hop headers and headers named in Connection, keeps end-to-end ones', async () => {
    const reply = await send(stack.url, 'GET', '/debug/echo/x', {
      ...CURRENT,
      connection: 'keep-alive, x-hop',
      'x-hop': 'secret-hop',
      'keep-alive': 'timeout=5',
      te: 'trailers',
      'proxy-authorization': 'Basic Zm9v',
      'x-end-to-end': 'kept',
      authorization: 'Bearer kept',
    });
    const echo = reply.json<{ headers: Record<string, string> }>();
    expect(echo.headers['x-hop']).toBeUndefined();
    expect(echo.headers.te).toBeUndefined();
    expect(echo.headers['proxy-authorization']).toBeUndefined();
    expect(echo.headers['keep-alive']).toBeUndefined();
    expect(echo.headers['x-end-to-end']).toBe('kept');
    expect(echo.headers.authorization).toBe('Bearer kept');
  });

  it('appends X-Forwarded-For, -Proto and -Host', async () => {
    const reply = await send(stack.url, 'GET', '/debug/echo', {
      ...CURRENT,
      host: 'legacy.example',
      'x-forwarded-for': '203.0.113.7',
    });
    const { headers } = reply.json<{ headers: Record<string, string> }>();
    expect(headers['x-forwarded-for']).toBe('203.0.113.7, 127.0.0.1');
    expect(headers['x-forwarded-proto']).toBe('http');
    expect(headers['x-forwarded-host']).toBe('legacy.example');
  });

  it("sends an HTTP/1.0 request without Host with the upstream's authority as Host", async () => {
    const raw = await sendRawUntilClose(
      stack.url,
      'GET /debug/echo HTTP/1.0\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n\r\n',
    );
    expect(statusesIn(raw)).toEqual([200]);
    const { headers } = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as {
      headers: Record<string, string>;
    };
    expect(headers.host).toBe(new URL(stack.upstreamUrl).host);
    expect(headers['x-forwarded-host']).toBeUndefined();
  });

  it('forwards every method with its body byte for byte', async () => {
    const body = Buffer.from([0, 1, 2, 255, 13, 10, 48, 13, 10, 13, 10]);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
      const reply = await send(
        stack.url,
        method,
        '/debug/echo',
        { ...CURRENT, 'content-type': 'application/octet-stream', 'content-length': body.length },
        body,
      );
      const echo = reply.json<{ method: string; bodyBytes: number }>();
      expect(echo.method).toBe(method);
      expect(echo.bodyBytes).toBe(body.length);
    }
  });
});

describe('framing the shim owns (raw upstream)', () => {
  let upstream: RawUpstream;
  let stack: Stack;
  beforeAll(async () => {
    upstream = await startRawUpstream((socket, received) => {
      // Reply once per complete request: headers plus the chunked terminator or a declared body.
      const requests = received.split(/(?=^[A-Z]+ \/\S* HTTP\/1\.1\r\n)/m);
      const last = requests[requests.length - 1] as string;
      const headEnd = last.indexOf('\r\n\r\n');
      if (headEnd === -1) return;
      const head = last.slice(0, headEnd).toLowerCase();
      const body = last.slice(headEnd + 4);
      const cl = /content-length: (\d+)/.exec(head);
      const done = head.includes('transfer-encoding: chunked')
        ? body.endsWith('0\r\n\r\n')
        : body.length >= Number(cl?.[1] ?? 0);
      if (done) socket.write(jsonResponse('{"ok":true}'));
    });
    stack = await startStack({ UPSTREAM_URL: upstream.url });
  });
  afterAll(async () => {
    await stack.close();
    await upstream.close();
  });

  it('re-chunks a chunked DELETE body instead of sending it raw after Content-Length: 0', async () => {
    // What each upstream connection had received before: the DELETE may go out on a pooled one.
    const before = upstream.received.map((r) => r.length);
    const req = http.request(`${stack.url}/missions/1`, {
      method: 'DELETE',
      headers: { ...CURRENT, 'transfer-encoding': 'chunked' },
      agent: false,
    });
    const status = await new Promise<number>((resolve, reject) => {
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.write('GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n');
      req.end();
    });
    expect(status).toBe(200);
    const wire = upstream.received.map((r, k) => r.slice(before[k] ?? 0)).join('');
    const requestLines = wire.match(/^[A-Z]+ \/\S* HTTP\/1\.1\r\n/gm) ?? [];
    // Exactly one request line at the start of a message: the smuggled text is inside chunk data.
    expect(wire.startsWith('DELETE /missions/1 HTTP/1.1\r\n')).toBe(true);
    expect(wire.toLowerCase()).toContain('transfer-encoding: chunked');
    expect(wire.toLowerCase()).not.toContain('content-length: 0');
    expect(requestLines.filter((l) => !l.startsWith('DELETE'))).toHaveLength(1); // inside the chunk
    expect(wire).toMatch(/\r\n[0-9a-f]+\r\nGET \/smuggled HTTP\/1\.1\r\nHost: x\r\n\r\n\r\n0\r\n\r\n$/);
  });

  /** Sends `head` (request line and headers, no body) on a fresh connection; returns what the upstream got. */
  const forwarded = async (head: string) => {
    const since = markRequests(upstream.received);
    const raw = await sendRawUntilClose(
      stack.url,
      `${head}\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\nConnection: close\r\n\r\n`,
    );
    expect(statusesIn(raw)).toEqual([200]);
    const requests = since();
    expect(requests).toHaveLength(1);
    return requests[0]!;
  };
  const framingOf = (request: { headers: Array<[string, string]> }) =>
    request.headers.filter(([name]) => name === 'content-length' || name === 'transfer-encoding');

  it('sends a POST, PUT or PATCH without a body with Content-Length: 0, not an empty chunked body', async () => {
    // RFC 9110 §8.6; Node's client would chunk these methods, and an upstream that answers 411 to a
    // chunked request would refuse them.
    for (const method of ['POST', 'PUT', 'PATCH']) {
      const request = await forwarded(`${method} /x HTTP/1.1`);
      expect(request.method).toBe(method);
      expect(framingOf(request)).toEqual([['content-length', '0']]);
    }
  });

  it('sends a GET, DELETE or OPTIONS without a body with no framing header at all', async () => {
    for (const method of ['GET', 'DELETE', 'OPTIONS']) {
      const request = await forwarded(`${method} /x HTTP/1.1`);
      expect(framingOf(request)).toEqual([]);
    }
  });

  it('forwards Content-Length: 003 as 3 (the number Node parsed)', async () => {
    const since = markRequests(upstream.received);
    const raw = await sendRawUntilClose(
      stack.url,
      'POST /x HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\nContent-Length: 003\r\nConnection: close\r\n\r\nabc',
    );
    expect(statusesIn(raw)).toEqual([200]);
    const [request] = since();
    expect(framingOf(request!)).toEqual([['content-length', '3']]);
    expect(request!.body).toBe('abc');
  });

  it('reuses one upstream keep-alive connection across client connections, chunked bodies included', async () => {
    await send(stack.url, 'GET', '/warm-up', CURRENT);
    const before = upstream.connections();
    for (let i = 0; i < 10; i++) {
      const reply = await send(
        stack.url,
        'POST',
        '/x',
        { ...CURRENT, 'transfer-encoding': 'chunked' },
        'abc',
      );
      expect(reply.status).toBe(200);
    }
    expect(upstream.connections()).toBe(before);
    expect(upstream.received.join('').toLowerCase()).not.toContain('connection: close');
  });
});

describe('in front of the reference backend (NestJS)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  it('serves an HTTP/1.0 client that sends no Host (a load balancer health check)', async () => {
    // Node (the backend) answers an HTTP/1.1 request without Host with a bare 400 (RFC 9112 §3.2).
    const raw = await sendRawUntilClose(stack.url, 'GET /api/health HTTP/1.0\r\n\r\n');
    expect(statusesIn(raw)).toEqual([200]);
    expect(raw).toContain('{"status":"ok"}');
  });
});

describe('1xx responses of the upstream (RFC 9110 §15.2)', () => {
  let raw: RawUpstream;
  let stack: Stack;
  beforeAll(async () => {
    raw = await startRawUpstream((socket, received) => {
      if (!received.includes('\r\n\r\n')) return;
      socket.write(
        'HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\nKeep-Alive: timeout=5\r\nConstructor: c1\r\n\r\n',
      );
      socket.write(jsonResponse('{"ok":true}'));
    });
    stack = await startStack({ UPSTREAM_URL: raw.url });
  });
  afterAll(async () => {
    await stack.close();
    await raw.close();
  });

  const AUTH = 'Host: shim.test\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n';

  it('a 103 Early Hints goes on to an HTTP/1.1 client before the response, without hop-by-hop fields', async () => {
    const text = await sendRawUntilClose(stack.url, `GET /page HTTP/1.1\r\n${AUTH}Connection: close\r\n\r\n`);
    expect(statusesIn(text)).toEqual([103, 200]);
    const hints = text.slice(0, text.indexOf('HTTP/1.1 200'));
    expect(hints).toMatch(/^HTTP\/1\.1 103 Early Hints\r\n/);
    expect(hints.toLowerCase()).toContain('link: </style.css>; rel=preload; as=style\r\n');
    expect(hints.toLowerCase()).not.toContain('keep-alive: timeout');
    // A field named like a member of Object.prototype goes on as sent (not Object's constructor).
    expect(hints.toLowerCase()).toContain('constructor: c1\r\n');
    expect(hints).not.toContain('native code');
    expect(text).toContain('{"ok":true}');
  });

  it.each(['1.0', '0.9'])('never to an HTTP/%s client', async (version) => {
    const text = await sendRawUntilClose(stack.url, `GET /page HTTP/${version}\r\n${AUTH}\r\n`);
    expect(statusesIn(text)).toEqual([200]);
  });
});

describe('a response of unknown length to an HTTP/1.0 client (RFC 9112 §6.1)', () => {
  let raw: RawUpstream;
  let stack: Stack;
  beforeAll(async () => {
    // The upstream answers chunked: the shim relays the body with no length of its own.
    raw = await startRawUpstream((socket, received) => {
      if (!received.includes('\r\n\r\n')) return;
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n');
      socket.write('5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n');
    });
    stack = await startStack({ UPSTREAM_URL: raw.url });
  });
  afterAll(async () => {
    await stack.close();
    await raw.close();
  });

  // A client that sends `TE: chunked` (an HTTP/1.0 proxy passing on an HTTP/1.1 client's TE, or a load
  // tool's header): Node chunked the response and kept the connection open for it; the server MUST NOT
  // send Transfer-Encoding to an HTTP/1.0 request. Its end is the close, whatever TE and keep-alive say.
  it.each([
    ['with TE: chunked and keep-alive', 'TE: chunked\r\nConnection: keep-alive, TE\r\n'],
    ['with TE: chunked', 'TE: chunked\r\n'],
    ['with keep-alive', 'Connection: keep-alive\r\n'],
  ])('is delimited by the close, never chunked (%s)', async (_name, headers) => {
    const text = await sendRawUntilClose(
      stack.url,
      `GET /stream HTTP/1.0\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n${headers}\r\n`,
    );
    const bodyAt = text.indexOf('\r\n\r\n') + 4;
    const head = text.slice(0, bodyAt).toLowerCase();
    expect(statusesIn(text)).toEqual([200]);
    expect(head).not.toContain('transfer-encoding');
    expect(head).toContain('connection: close\r\n');
    expect(text.slice(bodyAt)).toBe('hello world');
  });
});

describe('a 103 whose Link Node will not write', () => {
  it('is dropped; the response and the shim go on', async () => {
    const raw = await startRawUpstream((socket, received) => {
      if (!received.includes('\r\n\r\n')) return;
      socket.write('HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload; title="a b"\r\n\r\n');
      socket.write(jsonResponse('{"ok":true}'));
    });
    const stack = await startStack({ UPSTREAM_URL: raw.url });
    try {
      const first = await send(stack.url, 'GET', '/page', CURRENT);
      expect(first.status).toBe(200);
      expect(first.text).toBe('{"ok":true}');
      expect((await send(stack.url, 'GET', '/page', CURRENT)).status).toBe(200);
    } finally {
      await stack.close();
      await raw.close();
    }
  });
});

describe('Expect: 100-continue (RFC 9110 §10.1.1)', () => {
  let raw: RawUpstream;
  let stack: Stack;
  beforeAll(async () => {
    raw = await startRawUpstream(answerEachRequest());
    stack = await startStack({ UPSTREAM_URL: raw.url });
  });
  afterAll(async () => {
    await stack.close();
    await raw.close();
  });

  it('a request the gates refuse gets its final status, no 100 Continue, before it sends its body', async () => {
    const text = await sendRawUntilClose(
      stack.url,
      'POST /upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nContent-Length: 10\r\n' +
        'Expect: 100-continue\r\nConnection: close\r\n\r\n',
    );
    expect(statusesIn(text)).toEqual([401]);
  });

  it('an admitted request gets 100 Continue, then sends its body, which reaches the upstream', async () => {
    const { socket: client, text, closed } = openRaw(stack.url);
    client.write(
      'POST /upload HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n' +
        'Content-Length: 10\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n',
    );
    await waitFor(() => text().includes('100 Continue'), { what: 'the 100 Continue' });
    client.write('0123456789');
    await closed;
    expect(statusesIn(text())).toEqual([100, 200]);
    expect(raw.received.join('')).toContain('\r\n\r\n0123456789');
  });
});
