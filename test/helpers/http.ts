/**
 * Small HTTP clients for tests: `send` for ordinary requests with exact headers, `sendRaw` for bytes
 * no well-behaved client would write (smuggling, absolute-form targets, bad framing).
 */
import http, { type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import net from 'node:net';

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
 */
export function send(
  base: string,
  method: string,
  path: string,
  headers: OutgoingHttpHeaders = {},
  body?: string | Buffer,
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
    if (body !== undefined) req.end(body);
    else req.end();
  });
}

/**
 * Writes raw bytes to a fresh connection and collects everything the server sends until it closes
 * the connection or `idleMs` pass without data.
 * @returns The raw response text (possibly several responses, or empty).
 */
export function sendRaw(base: string, bytes: string | Buffer, idleMs = 300): Promise<string> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname);
    let out = '';
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        socket.destroy();
        resolve(out);
      }, idleMs);
    };
    socket.on('connect', () => {
      socket.write(bytes);
      arm();
    });
    socket.on('data', (d) => {
      out += d.toString('latin1');
      arm();
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      if (out) resolve(out);
      else reject(err);
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
    http
      .get(url, { headers, agent: false }, (res) => {
        let bytes = 0;
        res.on('data', (d: Buffer) => {
          bytes += d.length;
        });
        const done = () => resolve({ status: res.statusCode ?? 0, complete: res.complete, bytes });
        res.on('end', done);
        res.on('aborted', done);
        res.on('error', done);
      })
      .on('error', () => resolve({ status: 0, complete: false, bytes: 0 }));
  });
}
