/**
 * Diagnostics and streaming routes of the reference backend. Not part of the service API: the shim's
 * end-to-end tests use them to check forwarding fidelity byte for byte, the benchmarks to measure
 * streaming and patching cost. Credentials are required as on any route.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { digestBody } from './body.ts';
import { type JsonEntity, jsonEntity, sendJson } from './respond.ts';
import type { RouteShape } from './router.ts';
import { SEED_IDS } from './store.ts';
import { assertKnownParams, intParam, type QueryParams } from './validation.ts';

/** Size of the reused chunk `/debug/bytes` writes, in bytes (64 KiB). */
export const PATTERN_CHUNK_BYTES = 64 * 1024;

/** Most bytes `/debug/bytes` streams (10 GiB). */
export const MAX_DEBUG_BYTES = 10 * 1024 ** 3;

/** Most missions `/debug/json` generates. */
export const MAX_DEBUG_ITEMS = 100_000;

/**
 * The deterministic pattern of `/debug/bytes`: byte `i` of the stream is `PATTERN_CHUNK[i % 65536]`,
 * where `PATTERN_CHUNK[i] = (i * 31 + (i >>> 8)) & 0xff`. Exported so tests can compute the expected
 * digest.
 */
export const PATTERN_CHUNK: Buffer = (() => {
  const chunk = Buffer.allocUnsafe(PATTERN_CHUNK_BYTES);
  for (let i = 0; i < PATTERN_CHUNK_BYTES; i++) chunk[i] = (i * 31 + (i >>> 8)) & 0xff;
  return chunk;
})();

/** What a diagnostics handler gets besides the request and response. */
export interface RawContext {
  /** Parsed query (not whitelisted by the server; each handler checks its own). */
  readonly query: QueryParams;
  /** Whether JSON responses may be gzip-encoded. */
  readonly compress: boolean;
}

/** A diagnostics route: it reads the request and writes the response itself. */
export interface RawRoute extends RouteShape {
  readonly kind: 'raw';
  /**
   * Handles the exchange. May reject with {@link HttpError} before writing anything, or with
   * `ClientAbortError`.
   */
  handle(req: IncomingMessage, res: ServerResponse, ctx: RawContext): Promise<void> | void;
}

/** `ANY /debug/echo[/…]`: what arrived, exactly. */
async function echo(req: IncomingMessage, res: ServerResponse, ctx: RawContext): Promise<void> {
  const digest = await digestBody(req);
  const payload = {
    method: req.method,
    url: req.url,
    headers: req.headers,
    rawHeaders: req.rawHeaders,
    bodyBytes: digest.bodyBytes,
    bodySha256: digest.bodySha256,
  };
  sendJson(req, res, 200, jsonEntity(payload), ctx.compress);
}

/** `POST|PUT /debug/sink`: consumes the body as a stream. */
async function sink(req: IncomingMessage, res: ServerResponse, ctx: RawContext): Promise<void> {
  assertKnownParams(ctx.query, NO_PARAMS);
  const digest = await digestBody(req);
  sendJson(req, res, 200, jsonEntity(digest), ctx.compress);
}

const NO_PARAMS: ReadonlySet<string> = new Set();
const BYTES_PARAMS: ReadonlySet<string> = new Set(['n']);
const JSON_PARAMS: ReadonlySet<string> = new Set(['items']);

/**
 * Streams `n` bytes of {@link PATTERN_CHUNK} with backpressure, reusing one buffer.
 * @param n Number of bytes.
 */
function streamPattern(res: ServerResponse, n: number): void {
  let remaining = n;
  const pump = (): void => {
    while (remaining > 0) {
      if (res.destroyed) return;
      const size = Math.min(remaining, PATTERN_CHUNK_BYTES);
      remaining -= size;
      const more = res.write(size === PATTERN_CHUNK_BYTES ? PATTERN_CHUNK : PATTERN_CHUNK.subarray(0, size));
      if (!more) {
        res.once('drain', pump);
        return;
      }
    }
    res.end();
  };
  pump();
}

/** `GET /debug/bytes?n=<N>`: N deterministic bytes as `application/octet-stream`. */
function bytes(req: IncomingMessage, res: ServerResponse, ctx: RawContext): void {
  assertKnownParams(ctx.query, BYTES_PARAMS);
  const n = intParam(ctx.query, 'n', { fallback: 0, min: 0, max: MAX_DEBUG_BYTES });
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': n });
  if (req.method === 'HEAD' || n === 0) {
    res.end();
    return;
  }
  streamPattern(res, n);
}

function hex12(n: number): string {
  return n.toString(16).padStart(12, '0');
}

const WEATHER = ['sunny', 'cloudy', 'rain', 'snow', 'fog'];
const BASE_TIME = Date.UTC(2025, 0, 1);

/**
 * Generates `items` deterministic missions, each with three metadata entries (location, robot,
 * temperature), as a list response `{data, count, skip: 0, take: items}`.
 * @param items Number of missions (0 … {@link MAX_DEBUG_ITEMS}).
 * @returns The plain payload (call `JSON.stringify` on it).
 */
export function generateMissionList(items: number): unknown {
  const types = SEED_IDS.metadataTypes;
  const location = { uuid: types.location, name: 'location', datatype: 'string' };
  const weather = { uuid: types.weather, name: 'weather', datatype: 'string' };
  const temperature = { uuid: types.temperature, name: 'temperature', datatype: 'number' };
  const data = new Array(items);
  for (let i = 0; i < items; i++) {
    data[i] = {
      uuid: `c1000000-0000-4000-8000-${hex12(i)}`,
      name: `bench-mission-${i}`,
      projectUuid: SEED_IDS.projects.open,
      metadata: [
        { uuid: `e1000000-0000-4000-8000-${hex12(i * 3)}`, value: `site-${i % 97}`, metadataType: location },
        { uuid: `e1000000-0000-4000-8000-${hex12(i * 3 + 1)}`, value: WEATHER[i % 5], metadataType: weather },
        {
          uuid: `e1000000-0000-4000-8000-${hex12(i * 3 + 2)}`,
          value: (i % 400) / 10,
          metadataType: temperature,
        },
      ],
      createdAt: new Date(BASE_TIME + i * 1000).toISOString(),
    };
  }
  return { data, count: items, skip: 0, take: items };
}

/** The last generated `/debug/json` body, reused with its ETag and gzip form (benchmarks repeat one size). */
let cachedList: { items: number; entity: JsonEntity } | undefined;

/** `GET /debug/json?items=<N>` (default 100): a large mission list for patch-cost benchmarks. */
function json(req: IncomingMessage, res: ServerResponse, ctx: RawContext): void {
  assertKnownParams(ctx.query, JSON_PARAMS);
  const items = intParam(ctx.query, 'items', { fallback: 100, min: 0, max: MAX_DEBUG_ITEMS });
  if (cachedList?.items !== items) cachedList = { items, entity: jsonEntity(generateMissionList(items)) };
  sendJson(req, res, 200, cachedList.entity, ctx.compress);
}

/** The diagnostics routes, in matching order. */
export const DEBUG_ROUTES: readonly RawRoute[] = [
  { kind: 'raw', method: null, path: '/debug/echo', prefix: true, handle: echo },
  { kind: 'raw', method: 'GET', path: '/debug/bytes', handle: bytes },
  { kind: 'raw', method: 'POST', path: '/debug/sink', handle: sink },
  { kind: 'raw', method: 'PUT', path: '/debug/sink', handle: sink },
  { kind: 'raw', method: 'GET', path: '/debug/json', handle: json },
];
