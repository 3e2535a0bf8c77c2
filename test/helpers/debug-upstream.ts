/**
 * A diagnostics upstream for the end-to-end tests: what the reference backend served under `/debug/*`
 * before it became a NestJS service (issue 12 item 5) — those routes were never part of the service.
 * A small `node:http` server; no credentials are checked (the shim checks them), every response
 * carries `Service-Version: 0.60.0`.
 *
 * - `ANY /debug/echo[/…]` → `{method, url, headers, rawHeaders, bodyBytes, bodySha256}`: what arrived;
 * - `POST|PUT /debug/sink` → `{bodyBytes, bodySha256}`, the body consumed as a stream;
 * - `GET /debug/bytes?n=N` → N deterministic bytes (`PATTERN_CHUNK` of bench/lib/upstream.ts);
 * - `GET /debug/json?items=N` → a generated mission list (strong ETag, `If-None-Match` → 304; with
 *   `compress`, gzip above 1 KiB when accepted, `Vary: Accept-Encoding`, ETag suffixed `-gzip"`);
 * - `GET /api/health` → `{"status":"ok"}`; anything else → 404 in Nest's shape.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { digestBody, generateMissionList, streamPattern } from '../../bench/lib/upstream.ts';
import { type Stack, startStack } from './stack.ts';

/** Options of {@link startDebugUpstream}. */
export interface DebugUpstreamOptions {
  /** gzip `/debug/json` bodies over 1 KiB when the client accepts gzip; default `false`. */
  compress?: boolean;
}

/** A listening diagnostics upstream (same shape as a running reference backend). */
export interface DebugUpstream {
  readonly url: string;
  readonly server: Server;
  close(): Promise<void>;
}

const SERVICE_VERSION = '0.60.0';

function etagOf(bytes: Buffer): string {
  return `"${bytes.length.toString(16)}-${createHash('sha1').update(bytes).digest('base64').slice(0, 27)}"`;
}

function sendJson(req: IncomingMessage, res: ServerResponse, status: number, payload: unknown, gzip = false) {
  const bytes = Buffer.from(JSON.stringify(payload), 'utf8');
  const headers: Record<string, string | number> = { 'content-type': 'application/json; charset=utf-8' };
  const zipped = gzip && bytes.length > 1024 && /\bgzip\b/.test(String(req.headers['accept-encoding']));
  if (gzip && bytes.length > 1024) headers.vary = 'Accept-Encoding';
  if ((req.method === 'GET' || req.method === 'HEAD') && status === 200) {
    const etag = zipped ? `${etagOf(bytes).slice(0, -1)}-gzip"` : etagOf(bytes);
    headers.etag = etag;
    if (req.headers['if-none-match'] === etag) {
      delete headers['content-type'];
      res.writeHead(304, headers).end();
      return;
    }
  }
  const body = zipped ? gzipSync(bytes) : bytes;
  if (zipped) headers['content-encoding'] = 'gzip';
  headers['content-length'] = body.length;
  res.writeHead(status, headers);
  res.end(req.method === 'HEAD' ? undefined : body);
}

function notFound(req: IncomingMessage, res: ServerResponse): void {
  sendJson(req, res, 404, {
    message: `Cannot ${req.method} ${req.url}`,
    error: 'Not Found',
    statusCode: 404,
  });
}

function intParam(url: URL, name: string, fallback: number): number {
  const text = url.searchParams.get(name);
  return text !== null && /^\d{1,12}$/.test(text) ? Number(text) : fallback;
}

/**
 * Starts the diagnostics upstream on 127.0.0.1, port 0.
 * @param options {@link DebugUpstreamOptions}.
 * @returns Its URL, the server, and `close()` (drops keep-alive sockets too).
 */
export function startDebugUpstream(options: DebugUpstreamOptions = {}): Promise<DebugUpstream> {
  let listCache: { items: number; payload: unknown } | undefined;
  const server = createServer((req, res) => {
    req.on('error', () => {});
    res.on('error', () => {});
    res.setHeader('Service-Version', SERVICE_VERSION);
    const url = new URL(req.url ?? '/', 'http://upstream');
    const path = url.pathname;
    const get = req.method === 'GET' || req.method === 'HEAD';
    const aborted = (): void => {
      if (!res.headersSent) res.destroy();
    };
    if (path === '/debug/echo' || path.startsWith('/debug/echo/')) {
      digestBody(req).then(
        (digest) =>
          sendJson(req, res, 200, {
            method: req.method,
            url: req.url,
            headers: req.headers,
            rawHeaders: req.rawHeaders,
            ...digest,
          }),
        aborted,
      );
    } else if (path === '/debug/sink' && (req.method === 'POST' || req.method === 'PUT')) {
      digestBody(req).then((digest) => sendJson(req, res, 200, digest), aborted);
    } else if (path === '/debug/bytes' && get) {
      const n = intParam(url, 'n', 0);
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': n });
      if (req.method === 'HEAD' || n === 0) res.end();
      else streamPattern(res, n);
    } else if (path === '/debug/json' && get) {
      const items = Math.min(intParam(url, 'items', 100), 100_000);
      if (listCache?.items !== items) listCache = { items, payload: generateMissionList(items) };
      sendJson(req, res, 200, listCache.payload, options.compress === true);
    } else if (path === '/api/health' && get) {
      sendJson(req, res, 200, { status: 'ok' });
    } else {
      req.resume();
      notFound(req, res);
    }
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 0;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        server,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}

/**
 * The shim (via `startStack`) in front of a fresh diagnostics upstream; `close()` stops both.
 * @param env Environment overrides for the shim (`UPSTREAM_URL` is set to the diagnostics upstream).
 * @param options {@link DebugUpstreamOptions}.
 */
export async function startDebugStack(
  env: Record<string, string> = {},
  options: DebugUpstreamOptions = {},
): Promise<Stack> {
  const upstream = await startDebugUpstream(options);
  const stack = await startStack({ ...env, UPSTREAM_URL: upstream.url });
  const closeStack = stack.close.bind(stack);
  stack.close = async () => {
    await closeStack();
    await upstream.close();
  };
  return stack;
}
