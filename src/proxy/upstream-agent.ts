/**
 * The upstream connection pool (SPEC §4: keep-alive connections reused), for `http:` and `https:`
 * upstreams (issue 10 item 2): TLS always verified, extra CAs from `UPSTREAM_CA_FILE`, SNI from the
 * upstream URL's host — never from the client's `Host`, which the shim forwards unchanged.
 */
import http from 'node:http';
import type * as HttpsModule from 'node:https';
import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import type * as TlsModule from 'node:tls';

/**
 * Node's TLS modules, loaded by the first `https:` transport only: `node:https` and `node:tls` cost
 * ~3 MiB of idle RSS (docs/operations.md "Footprint") that an `http:` upstream never needs.
 */
const load = createRequire(import.meta.url);

/** How to reach the upstream: the pool and the per-request options that address it. */
export interface UpstreamTransport {
  /** Keep-alive pool (`https.Agent` for `https:`). */
  readonly agent: http.Agent;
  /** `http.request` or `https.request`. */
  readonly request: typeof http.request;
  /** Options every upstream request carries: protocol, hostname, port, and for TLS the server name. */
  readonly target: Readonly<{ protocol: string; hostname: string; port: number; servername?: string }>;
}

/** Pool sizes: enough sockets for a busy sidecar, few idle ones kept, the most recent reused first. */
const POOL = { keepAlive: true, maxSockets: 1024, maxFreeSockets: 256, scheduling: 'lifo' } as const;

/**
 * The TLS server name (SNI, RFC 6066 §3) for an upstream host: the DNS name itself; `''` (no SNI) for
 * an IP address, which RFC 6066 forbids as a server name — the certificate is then checked against
 * the IP. Setting it explicitly matters: left unset, Node derives it from the request's `Host`
 * header, which is the client's.
 * @param hostname `URL.hostname` (IPv6 in brackets).
 * @example tlsServerName('api.internal') // → 'api.internal'
 * @example tlsServerName('[::1]') // → ''
 */
export function tlsServerName(hostname: string): string {
  const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  return isIP(bare) === 0 ? bare : '';
}

/**
 * The request function for an upstream protocol: `http.request`, or `https.request` (loading
 * `node:https` on first use).
 * @param protocol `URL.protocol` of the upstream: `http:` or `https:`.
 * @throws {Error} for another protocol.
 */
export function upstreamRequest(protocol: string): typeof http.request {
  if (protocol === 'http:') return http.request;
  if (protocol === 'https:') return (load('node:https') as typeof HttpsModule).request as typeof http.request;
  throw new Error(`unsupported upstream protocol ${protocol}`);
}

/**
 * Creates the transport for an upstream URL.
 * @param upstream `http://…` or `https://…`.
 * @param caPem For `https:`: PEM certificates trusted in addition to Node's root store (`UPSTREAM_CA_FILE`).
 * @throws {Error} for another protocol (the configuration accepts only these two).
 */
export function createUpstreamTransport(upstream: URL, caPem?: string): UpstreamTransport {
  const hostname = upstream.hostname.startsWith('[') ? upstream.hostname.slice(1, -1) : upstream.hostname;
  if (upstream.protocol === 'http:') {
    return {
      agent: new http.Agent(POOL),
      request: http.request,
      target: { protocol: 'http:', hostname, port: Number(upstream.port || 80) },
    };
  }
  if (upstream.protocol === 'https:') {
    const https = load('node:https') as typeof HttpsModule;
    const { rootCertificates } = load('node:tls') as typeof TlsModule;
    const agent = new https.Agent({
      ...POOL,
      rejectUnauthorized: true,
      ...(caPem !== undefined && { ca: [...rootCertificates, caPem] }),
    });
    return {
      agent,
      request: upstreamRequest('https:'),
      target: {
        protocol: 'https:',
        hostname,
        port: Number(upstream.port || 443),
        servername: tlsServerName(upstream.hostname),
      },
    };
  }
  throw new Error(`unsupported upstream protocol ${upstream.protocol}`);
}
