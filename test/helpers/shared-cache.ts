/**
 * What a shared cache in front of the shim acts on (RFC 9111), as a model over real responses, so
 * that the cache tests need neither Varnish, Squid nor nginx installed (docs/operations.md, "Shared
 * caches in front", has the runs against those): whether a response may be stored (§3), which stored
 * response a later request may be served (§4.1, `Vary`), and how a 304 updates a stored response's
 * header fields (§3.2, §4.3.4). And a small upstream that is cacheable the way an Express service with
 * `compression` is, once it sends `Cache-Control`.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type OutgoingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';

/** A response as a cache stores it: status and header fields (names lower-cased, as Node gives them). */
export interface StoredResponse {
  status: number;
  headers: IncomingHttpHeaders;
}

/**
 * Whether a shared cache may store the response at all (RFC 9111 §3, §5.2.2): not with `no-store` or
 * `private`, never a 1xx or a 304 as a response of its own.
 */
export function storable(response: StoredResponse): boolean {
  const cc = String(response.headers['cache-control'] ?? '').toLowerCase();
  if (/(^|,)\s*(no-store|private)\s*(,|=|$)/.test(cc)) return false;
  return response.status >= 200 && response.status !== 304;
}

/** The `Vary` members of a stored response, lower-cased (`*` kept). */
export function varyMembers(headers: IncomingHttpHeaders): string[] {
  return String(headers.vary ?? '')
    .split(',')
    .map((m) => m.trim().toLowerCase())
    .filter((m) => m !== '');
}

/**
 * Whether a stored response may answer a request (RFC 9111 §4.1): every header `Vary` names has the
 * same value in the request as in the one that fetched it (absent in both counts as equal); `*` never
 * matches.
 * @param stored The stored response.
 * @param storedFor The headers of the request that fetched it (lower-cased names).
 * @param request The new request's headers (lower-cased names).
 */
export function servable(
  stored: StoredResponse,
  storedFor: OutgoingHttpHeaders,
  request: OutgoingHttpHeaders,
): boolean {
  for (const name of varyMembers(stored.headers)) {
    if (name === '*') return false;
    if (String(storedFor[name] ?? '') !== String(request[name] ?? '')) return false;
  }
  return true;
}

/**
 * A stored response updated with a 304 (RFC 9111 §3.2, §4.3.4): every header field the 304 carries
 * replaces the stored field of that name; the others are kept. (`Content-Length` is the one field a
 * cache does not take from a 304; none of the shim's 304s has one.)
 */
export function updatedBy304(stored: StoredResponse, notModified: StoredResponse): StoredResponse {
  const headers: IncomingHttpHeaders = { ...stored.headers };
  for (const [name, value] of Object.entries(notModified.headers)) {
    if (name === 'content-length' || name === 'connection' || name === 'keep-alive') continue;
    headers[name] = value;
  }
  return { status: stored.status, headers };
}

/** A running {@link startCacheableUpstream}. */
export interface CacheableUpstream {
  readonly url: string;
  /** Every request received: method, target, headers. */
  readonly requests: Array<{ method: string; url: string; headers: IncomingHttpHeaders }>;
  close(): Promise<void>;
}

/** Options of {@link startCacheableUpstream}. */
export interface CacheableUpstreamOptions {
  /** Send `Vary: Accept-Encoding` on 304s as well (default `false`: as Express' `compression`). */
  varyOn304?: boolean;
}

/**
 * A cacheable JSON upstream as NestJS on Express with `compression` answers once the service sends
 * `Cache-Control`: `GET /missions` → `{"data":[{"uuid":"m1","metadata":{…}}]}` with `Cache-Control:
 * public, max-age=60`, a strong `ETag`, `Service-Version: 0.60.0`, `Vary: Accept-Encoding`, gzip when
 * accepted; an `If-None-Match` naming its tag (weak comparison, RFC 9110 §13.1.2) → 304 with `ETag`
 * and `Cache-Control`, and no `Vary` (compression's filter skips a response without `Content-Type`).
 * @param options {@link CacheableUpstreamOptions}.
 */
export function startCacheableUpstream(options: CacheableUpstreamOptions = {}): Promise<CacheableUpstream> {
  const requests: CacheableUpstream['requests'] = [];
  const server: Server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    req.resume();
    const body = Buffer.from('{"data":[{"uuid":"m1","metadata":{"color":"red"}}],"count":1}');
    const etag = `"${createHash('sha1').update(body).digest('base64url').slice(0, 12)}"`;
    const common = { 'Cache-Control': 'public, max-age=60', ETag: etag, 'Service-Version': '0.60.0' };
    const inm = String(req.headers['if-none-match'] ?? '');
    if (inm.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag)) {
      res.writeHead(304, options.varyOn304 ? { ...common, Vary: 'Accept-Encoding' } : common);
      res.end();
      return;
    }
    const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
    const bytes = gzip ? gzipSync(body) : body;
    res.writeHead(200, {
      ...common,
      'Content-Type': 'application/json; charset=utf-8',
      Vary: 'Accept-Encoding',
      ...(gzip && { 'Content-Encoding': 'gzip' }),
      'Content-Length': bytes.length,
    });
    res.end(req.method === 'HEAD' ? undefined : bytes);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        requests,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}
