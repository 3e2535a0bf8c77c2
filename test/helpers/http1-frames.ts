/**
 * A strict HTTP/1.1 request-framing reader for tests (RFC 9112 §6): splits the bytes a raw upstream
 * received into requests, the way a careful server would. The security tests use it to count how many
 * requests the upstream would see — a smuggled request shows up as one request too many.
 */

/** One request as framed on the wire. */
export interface FramedRequest {
  method: string;
  target: string;
  /** Header fields in order, names lower-cased. */
  headers: Array<[name: string, value: string]>;
  /** The decoded body (chunked framing removed), latin1. */
  body: string;
}

/** Result of {@link frameRequests}. */
export interface Framing {
  /** Every complete request. */
  requests: FramedRequest[];
  /** Bytes after the last complete request (an incomplete request, or `''`). */
  rest: string;
  /** Set when the bytes cannot be framed unambiguously (e.g. both Content-Length and Transfer-Encoding). */
  error?: string;
}

const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/1\.[01]$/;

/**
 * Splits `bytes` (latin1) into HTTP/1.1 requests. Strict: CRLF line endings only, one framing per
 * request (`Content-Length` digits only, or `Transfer-Encoding: chunked` alone), no duplicate
 * `Content-Length`; anything else stops with `error`.
 * @param bytes Everything received on one connection, as latin1 text.
 * @example
 * frameRequests('GET / HTTP/1.1\r\nHost: a\r\n\r\n').requests.length; // 1
 */
export function frameRequests(bytes: string): Framing {
  const requests: FramedRequest[] = [];
  let at = 0;
  const fail = (error: string): Framing => ({ requests, rest: bytes.slice(at), error });
  while (at < bytes.length) {
    const headEnd = bytes.indexOf('\r\n\r\n', at);
    if (headEnd === -1) return { requests, rest: bytes.slice(at) };
    const lines = bytes.slice(at, headEnd).split('\r\n');
    const line = REQUEST_LINE.exec(lines[0] ?? '');
    if (!line) return fail(`bad request line ${JSON.stringify(lines[0])}`);
    const headers: Array<[string, string]> = [];
    for (const l of lines.slice(1)) {
      const colon = l.indexOf(':');
      if (colon <= 0 || /[\s]/.test(l.slice(0, colon)) || /[\r\n]/.test(l)) {
        return fail(`bad header line ${JSON.stringify(l)}`);
      }
      headers.push([l.slice(0, colon).toLowerCase(), l.slice(colon + 1).trim()]);
    }
    const lengths = headers.filter(([n]) => n === 'content-length');
    const codings = headers.filter(([n]) => n === 'transfer-encoding');
    if (lengths.length > 1) return fail('duplicate Content-Length');
    if (lengths.length > 0 && codings.length > 0) return fail('both Content-Length and Transfer-Encoding');
    if (codings.length > 1 || (codings[0] && codings[0][1].toLowerCase() !== 'chunked')) {
      return fail(`unsupported Transfer-Encoding ${JSON.stringify(codings.map(([, v]) => v))}`);
    }
    let p = headEnd + 4;
    let body = '';
    if (codings.length === 1) {
      for (;;) {
        const eol = bytes.indexOf('\r\n', p);
        if (eol === -1) return { requests, rest: bytes.slice(at) };
        const sizeText = bytes.slice(p, eol).split(';')[0] as string;
        if (!/^[0-9a-fA-F]{1,8}$/.test(sizeText)) return fail(`bad chunk size ${JSON.stringify(sizeText)}`);
        const size = Number.parseInt(sizeText, 16);
        p = eol + 2;
        if (size === 0) {
          // Trailer section, then the final CRLF.
          const end = bytes.indexOf('\r\n\r\n', p - 2);
          if (end === -1) return { requests, rest: bytes.slice(at) };
          p = end + 4;
          break;
        }
        if (bytes.length < p + size + 2) return { requests, rest: bytes.slice(at) };
        body += bytes.slice(p, p + size);
        if (bytes.slice(p + size, p + size + 2) !== '\r\n') return fail('chunk not followed by CRLF');
        p += size + 2;
      }
    } else if (lengths.length === 1) {
      const text = (lengths[0] as [string, string])[1];
      if (!/^\d{1,15}$/.test(text)) return fail(`bad Content-Length ${JSON.stringify(text)}`);
      const n = Number(text);
      if (bytes.length < p + n) return { requests, rest: bytes.slice(at) };
      body = bytes.slice(p, p + n);
      p += n;
    }
    requests.push({ method: line[1] as string, target: line[2] as string, headers, body });
    at = p;
  }
  return { requests, rest: '' };
}

/**
 * A raw-upstream `onData` callback that answers every complete request on a connection exactly once
 * with `reply(request)` (default: a small JSON body naming the request), keep-alive.
 */
export function answerEachRequest(
  reply: (request: FramedRequest) => string = (r) => {
    const body = JSON.stringify({ method: r.method, target: r.target, bodyBytes: r.body.length });
    return `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  },
): (socket: import('node:net').Socket, received: string) => void {
  // Per connection: the bytes already framed into answered requests, and the length the received
  // bytes must reach before the pending request (head seen, Content-Length body incomplete) can be
  // complete — so that a large body is framed once when it has arrived, not once per packet.
  const state = new WeakMap<object, { framed: number; needed: number }>();
  return (socket, received) => {
    const s = state.get(socket) ?? { framed: 0, needed: 0 };
    state.set(socket, s);
    if (received.length < s.needed) return;
    const { requests, rest } = frameRequests(received.slice(s.framed));
    for (const request of requests) socket.write(reply(request));
    s.framed = received.length - rest.length;
    s.needed = 0;
    const headEnd = rest.indexOf('\r\n\r\n');
    const length = /\r\ncontent-length: *(\d{1,15})\r\n/i.exec(rest.slice(0, headEnd + 2));
    if (headEnd !== -1 && length) s.needed = s.framed + headEnd + 4 + Number(length[1]);
  };
}

/**
 * Marks how many requests each connection of a raw upstream has carried so far.
 * @param received The raw upstream's per-connection byte log (`RawUpstream.received`).
 * @returns A function that returns the requests completed since the mark, on any connection (a
 * flat list over connections in connection order would misplace a request on an older, reused one).
 * @example
 * const since = markRequests(upstream.received);
 * await send(url, 'GET', '/x');
 * since().map((r) => r.target); // ['/x']
 */
export function markRequests(received: readonly string[]): () => FramedRequest[] {
  const counts = received.map((r) => frameRequests(r).requests.length);
  return () => received.flatMap((r, i) => frameRequests(r).requests.slice(counts[i] ?? 0));
}
