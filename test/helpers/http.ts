/**
 * Small HTTP clients for tests: `send` for ordinary requests with exact headers, `sendRawUntilClose`
 * for bytes no well-behaved client would write (smuggling, absolute-form targets, bad framing), read
 * until the server closes the connection (never until some silence).
 */
import http, {
  type ClientRequest,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type Server,
} from 'node:http';
import net, { type Socket } from 'node:net';
import { waitFor } from './poll.ts';

/** A complete response. */
export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
  text: string;
  json<T = Record<string, unknown>>(): T;
}

/**
 * Sends one request with `node:http` (a fresh connection, no pooling).
 * @param base Origin, e.g. `http://127.0.0.1:8080`.
 * @param path Request target as sent (origin-form), e.g. `/files?tags=a`.
 * @param body Sent whole, or, as an array, one write per element (with `Transfer-Encoding: chunked`,
 *   one chunk each).
 */
export function send(
  base: string,
  method: string,
  path: string,
  headers: OutgoingHttpHeaders = {},
  body?: string | Buffer | readonly (string | Buffer)[],
): Promise<Reply> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, method, path, headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const b = Buffer.concat(chunks);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body: b,
            text: b.toString('utf8'),
            json: <T>() => JSON.parse(b.toString('utf8')) as T,
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (typeof body === 'string' || Buffer.isBuffer(body)) req.end(body);
    else {
      for (const piece of body ?? []) req.write(piece);
      req.end();
    }
  });
}

/**
 * The status of a request's response, its body read and dropped, for a request the test drives itself
 * (`http.request`, written piece by piece).
 * @param req The request, before its response.
 * @returns The status code; rejects with the request's error.
 */
export function responseStatus(req: ClientRequest): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
  });
}

/**
 * Writes raw bytes to a fresh connection and collects everything the server sends until the server
 * closes the connection: for exchanges whose end is a close (a rejected request, or a pipelined last
 * request with `Connection: close`), so that "nothing else came" is proven by the close, not by a
 * silence of some length.
 * @returns The raw response text (possibly several responses, or empty), latin1.
 * @throws {Error} when the connection is still open after `timeoutMs` (default 5,000), with what
 *   arrived so far; or on a socket error before any byte arrived.
 */
export function sendRawUntilClose(base: string, bytes: string | Buffer, timeoutMs = 5_000): Promise<string> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname);
    let out = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(
          `the server kept the connection open for ${timeoutMs} ms; received: ${JSON.stringify(out)}`,
        ),
      );
    }, timeoutMs);
    socket.on('connect', () => socket.write(bytes));
    socket.on('data', (d) => {
      out += d.toString('latin1');
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    socket.on('error', (err) => {
      // A reset after the response (the server closing with unread bytes) still ends the exchange.
      if (out !== '') return;
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** Status codes of every response found in a raw response text. */
export function statusesIn(raw: string): number[] {
  return [...raw.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
}

/** How a GET ended: its status, whether the body arrived complete, and how many body bytes came. */
export interface Outcome {
  status: number;
  /** `false` when the connection was aborted before the framing said the body was done. */
  complete: boolean;
  bytes: number;
}

/**
 * GETs `url` on a fresh connection and reports whether the response body arrived complete, instead
 * of failing on an aborted response (status 0 when not even the head arrived).
 */
export function getOutcome(url: string, headers: OutgoingHttpHeaders): Promise<Outcome> {
  return new Promise((resolve) => {
    let status = 0;
    let bytes = 0;
    http
      .get(url, { headers, agent: false }, (res) => {
        status = res.statusCode ?? 0;
        res.on('data', (d: Buffer) => {
          bytes += d.length;
        });
        const done = () => resolve({ status, complete: res.complete, bytes });
        res.on('end', done);
        res.on('aborted', done);
        res.on('error', done);
      })
      // A reset (the shim's abort of a started response) fails the request itself, also after its head.
      .on('error', () => resolve({ status, complete: false, bytes }));
  });
}

/** Options of {@link pipelinedGets}. */
export interface PipelineOptions {
  /** Keep-alive connections to spread the requests over (default 32). */
  connections?: number;
  /** Requests written ahead of their responses on each connection (RFC 9112 §9.3.2; default 8). */
  depth?: number;
}

/**
 * GETs every path on a few keep-alive connections with up to `depth` requests pipelined on each
 * (RFC 9112 §9.3.2: responses come back in request order): many thousands of requests in a fraction
 * of the time one `http.get` each would take, for tests whose point is the number of requests.
 * Reads responses framed by `Content-Length` or `Transfer-Encoding: chunked` (what the shim sends).
 * @param base Origin, e.g. `http://127.0.0.1:8080`.
 * @param headers Header lines sent with every request (`Host` is added).
 * @returns The status of each request, in the order of `paths`.
 * @throws Error (rejects) when a connection fails or closes with requests unanswered.
 */
export function pipelinedGets(
  base: string,
  paths: readonly string[],
  headers: Record<string, string>,
  { connections = 32, depth = 8 }: PipelineOptions = {},
): Promise<number[]> {
  const url = new URL(base);
  const head = Object.entries({ host: url.host, ...headers })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  const statuses = new Array<number>(paths.length);
  let next = 0;
  const connection = () =>
    new Promise<void>((resolve, reject) => {
      const socket = net.connect(Number(url.port), url.hostname);
      /** Indexes in `paths` of the requests written and not yet answered, oldest first. */
      const pending: number[] = [];
      let buffer: Buffer = Buffer.alloc(0);
      const fill = () => {
        let out = '';
        while (pending.length < depth && next < paths.length) {
          pending.push(next);
          out += `GET ${paths[next++]} HTTP/1.1\r\n${head}\r\n`;
        }
        if (out) socket.write(out);
        if (pending.length === 0) {
          socket.end();
          resolve();
        }
      };
      /** Length of the complete response at the start of `buffer` (its status in `status`), or 0. */
      const responseLength = (): { length: number; status: number } | undefined => {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return undefined;
        const text = buffer.subarray(0, end).toString('latin1');
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
        const length = /\r\ncontent-length: *(\d+)/i.exec(text);
        if (length) {
          const total = end + 4 + Number(length[1]);
          return buffer.length >= total ? { length: total, status } : undefined;
        }
        if (!/\r\ntransfer-encoding: *chunked/i.test(text)) {
          throw new Error(`response without framing: ${text}`);
        }
        let at = end + 4;
        for (;;) {
          const line = buffer.indexOf('\r\n', at);
          if (line < 0) return undefined;
          const size = Number.parseInt(buffer.subarray(at, line).toString('latin1'), 16);
          at = line + 2 + size + 2;
          if (buffer.length < at) return undefined;
          if (size === 0) return { length: at, status };
        }
      };
      socket.on('connect', fill);
      socket.on('data', (data: Buffer) => {
        buffer = buffer.length === 0 ? data : Buffer.concat([buffer, data]);
        try {
          for (let r = responseLength(); r; r = responseLength()) {
            statuses[pending.shift() as number] = r.status;
            buffer = buffer.subarray(r.length);
          }
        } catch (err) {
          socket.destroy();
          reject(err);
          return;
        }
        fill();
      });
      socket.on('error', reject);
      socket.on('close', () => {
        if (pending.length > 0)
          reject(new Error(`connection closed with ${pending.length} requests unanswered`));
      });
    });
  return Promise.all(Array.from({ length: connections }, connection)).then(() => statuses);
}

/** Bytes a server must have queued for the client before {@link getWhenWritesQueue} starts reading. */
const QUEUED_BEFORE_READING = 16 * 1024;

/**
 * GETs `url` as a slow client: it reads nothing until the server's writes to it queue up behind full
 * socket buffers (the server-side socket's `writableLength` reaches 16 KiB, their write callbacks still
 * pending), then reads the whole body. The request must be the server's next connection.
 * @param server The server that accepts the request (to watch its side of the connection).
 * @param url Full URL of the request; a fresh connection (`agent: false`).
 * @returns The body as received.
 * @throws {Error} when the request fails or the writes never queue up (see `waitFor`).
 */
export async function getWhenWritesQueue(
  server: Server,
  url: string,
  headers: OutgoingHttpHeaders,
): Promise<Buffer> {
  const toClient: Socket[] = [];
  const onConnection = (socket: Socket) => toClient.push(socket);
  server.on('connection', onConnection);
  try {
    return await new Promise<Buffer>((resolve, reject) => {
      const req = http.get(url, { headers, agent: false }, (res) => {
        res.pause();
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve(Buffer.concat(chunks)));
        res.on('error', reject);
        waitFor(() => (toClient[0]?.writableLength ?? 0) >= QUEUED_BEFORE_READING, {
          what: "the server's writes to the paused client to queue up",
        }).then(() => res.resume(), reject);
      });
      req.on('error', reject);
    });
  } finally {
    server.off('connection', onConnection);
  }
}

/** A raw client connection (see {@link openRaw}). */
export interface RawClient {
  readonly socket: Socket;
  /** Everything received so far, latin1. */
  text(): string;
  /** Resolves when the connection has closed. */
  readonly closed: Promise<void>;
}

/**
 * Opens a raw TCP connection to a server and records what it sends, for exchanges a test drives step
 * by step (write, wait for a condition, write more); errors are swallowed (a reset shows as a close).
 * @param base The server's base URL, e.g. `http://127.0.0.1:8080`.
 * @param options `allowHalfOpen`: keep the client's side open after the server's FIN (default false).
 */
export function openRaw(base: string, options: { allowHalfOpen?: boolean } = {}): RawClient {
  const url = new URL(base);
  const socket = net.connect({
    port: Number(url.port),
    host: url.hostname,
    allowHalfOpen: options.allowHalfOpen ?? false,
  });
  socket.on('error', () => {});
  let text = '';
  socket.on('data', (d: Buffer) => {
    text += d.toString('latin1');
  });
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  return { socket, text: () => text, closed };
}

/**
 * GETs `path` as an HTTP/1.0 client on a raw socket: what arrived, and how the connection ended (`end`
 * for a close, else the socket error's code).
 */
export function rawHttp10Ending(
  base: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ received: string; end: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname, () => {
      const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
      socket.write(`GET ${path} HTTP/1.0\r\nHost: shim.test\r\n${lines.join('')}\r\n`);
    });
    let received = '';
    socket.on('data', (d: Buffer) => {
      received += d.toString('latin1');
    });
    socket.on('end', () => resolve({ received, end: 'end' }));
    socket.on('error', (err: NodeJS.ErrnoException) => resolve({ received, end: err.code ?? err.message }));
  });
}
