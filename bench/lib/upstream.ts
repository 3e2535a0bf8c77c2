/**
 * The benchmarks' own upstream: a minimal `node:http` server, so that the proxy, not a backend
 * framework, is what the benchmarks measure (issue 12 item 5). It serves what bench/run.ts,
 * bench/profile.ts and the patch benchmark need, with the service's canonical names only:
 *
 * - `GET /api/health` → `{"status":"ok"}`;
 * - `POST /missions` (JSON `{name, projectUUID, metadata?}`) → 201 and the stored mission; a body
 *   member other than `name`, `projectUUID`, `metadata`, `ignoreMissingMetadata` → 400
 *   `property <name> should not exist` (so an alias leaking through the shim fails loudly);
 * - `GET /missions/:uuid` → the stored mission (strong ETag, `If-None-Match` → 304), 404 otherwise;
 * - `GET /debug/json?items=N` → a generated list `{data, count, skip, take}` of N missions (~675 bytes
 *   each: 1,000 → 0.66 MB, 2,100 → 1.4 MB, 15,500 → 10 MB), serialized once per size; with
 *   `&coding=gzip`, the same bytes gzipped (level 6, as Express' `compression` does) with
 *   `Content-Encoding: gzip`, whatever the request accepts;
 * - `GET /debug/bytes?n=N` → N deterministic bytes ({@link PATTERN_CHUNK}), streamed with backpressure;
 * - `POST|PUT /debug/sink` → consumes the body as a stream, answers `{bodyBytes, bodySha256}`.
 *
 * No credentials are checked (the shim checks them). Every response carries `Service-Version`.
 * Run alone: `node bench/lib/upstream.ts --port 3000 [--host 127.0.0.1]` (one JSON line when listening).
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';

/** `Service-Version` of every response. */
export const SERVICE_VERSION = '0.60.0';

/** The metadata types and the project the generated missions use (the reference backend's seed). */
export const BENCH_IDS = Object.freeze({
  location: 'a0000000-0000-4000-8000-000000000001',
  robot: 'a0000000-0000-4000-8000-000000000002',
  weather: 'a0000000-0000-4000-8000-000000000003',
  temperature: 'a0000000-0000-4000-8000-000000000004',
  openProject: 'b0000000-0000-4000-8000-000000000002',
});

/** Size of the reused chunk of `/debug/bytes`, in bytes (64 KiB). */
export const PATTERN_CHUNK_BYTES = 64 * 1024;

/**
 * The deterministic pattern of `/debug/bytes`: byte `i` of the stream is `PATTERN_CHUNK[i % 65536]`,
 * where `PATTERN_CHUNK[i] = (i * 31 + (i >>> 8)) & 0xff`.
 */
export const PATTERN_CHUNK: Buffer = (() => {
  const chunk = Buffer.allocUnsafe(PATTERN_CHUNK_BYTES);
  for (let i = 0; i < PATTERN_CHUNK_BYTES; i++) chunk[i] = (i * 31 + (i >>> 8)) & 0xff;
  return chunk;
})();

/** Most bytes `/debug/bytes` streams (10 GiB). */
export const MAX_PATTERN_BYTES = 10 * 1024 ** 3;
/** Most missions `/debug/json` generates. */
export const MAX_LIST_ITEMS = 100_000;
/** Most generated lists kept serialized (the oldest is dropped beyond it). */
export const MAX_CACHED_LISTS = 6;
/** Most missions kept by `POST /missions`; the oldest are dropped beyond it. */
export const MAX_MISSIONS = 100_000;
/** Largest JSON request body read, in bytes (1 MiB); larger → 413. */
export const MAX_JSON_BODY = 1024 * 1024;

const MISSION_MEMBERS = new Set(['name', 'projectUUID', 'metadata', 'ignoreMissingMetadata']);
const TYPE_NAMES: Record<string, { name: string; datatype: string }> = {
  [BENCH_IDS.location]: { name: 'location', datatype: 'string' },
  [BENCH_IDS.robot]: { name: 'robot', datatype: 'string' },
  [BENCH_IDS.weather]: { name: 'weather', datatype: 'string' },
  [BENCH_IDS.temperature]: { name: 'temperature', datatype: 'number' },
};

function hex12(n: number): string {
  return n.toString(16).padStart(12, '0');
}

const WEATHER = ['sunny', 'cloudy', 'rain', 'snow', 'fog'];
const BASE_TIME = Date.UTC(2025, 0, 1);

/**
 * Generates `items` deterministic missions, each with three metadata entries (location, weather,
 * temperature), as a list response `{data, count, skip: 0, take: items}`.
 * @param items Number of missions (0 … {@link MAX_LIST_ITEMS}).
 * @returns The plain payload (call `JSON.stringify` on it).
 */
export function generateMissionList(items: number): unknown {
  const location = { uuid: BENCH_IDS.location, name: 'location', datatype: 'string' };
  const weather = { uuid: BENCH_IDS.weather, name: 'weather', datatype: 'string' };
  const temperature = { uuid: BENCH_IDS.temperature, name: 'temperature', datatype: 'number' };
  const data = new Array(items);
  for (let i = 0; i < items; i++) {
    data[i] = {
      uuid: `c1000000-0000-4000-8000-${hex12(i)}`,
      name: `bench-mission-${i}`,
      projectUuid: BENCH_IDS.openProject,
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

/**
 * Missions in a {@link generateMissionList} list as large as the list of 1,000 once patched for a
 * legacy client (1.18 MB against 0.67 MB: each mission gains a copy of its `metadata` as `tags`).
 * Passing it through costs what any proxy pays to send the patched list's bytes, so `npm run bench`
 * compares the patched list with it (context, no target) to show the scan and patch apart from the
 * larger response. test/unit/bench/aliases-equal-output-list.test.ts checks the sizes agree.
 */
export const EQUAL_OUTPUT_ITEMS = 1745;

/** A serialized JSON body and its strong ETag (Express' format). */
interface Entity {
  readonly bytes: Buffer;
  readonly etag: string;
  /** The body's content coding, when it has one. */
  readonly coding?: 'gzip';
}

function entity(payload: unknown): Entity {
  return entityOf(Buffer.from(JSON.stringify(payload), 'utf8'));
}

function entityOf(bytes: Buffer, coding?: 'gzip'): Entity {
  const hash = createHash('sha1').update(bytes).digest('base64').slice(0, 27);
  return { bytes, etag: `"${bytes.length.toString(16)}-${hash}"`, ...(coding !== undefined && { coding }) };
}

function sendJson(req: IncomingMessage, res: ServerResponse, status: number, body: Entity | unknown): void {
  const e = isEntity(body) ? body : entity(body);
  if ((req.method === 'GET' || req.method === 'HEAD') && status === 200) {
    res.setHeader('etag', e.etag);
    if (req.headers['if-none-match'] === e.etag) {
      res.writeHead(304).end();
      return;
    }
  }
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': e.bytes.length,
    ...(e.coding !== undefined && { 'content-encoding': e.coding }),
  });
  res.end(req.method === 'HEAD' ? undefined : e.bytes);
}

function isEntity(value: unknown): value is Entity {
  return typeof value === 'object' && value !== null && (value as Entity).bytes instanceof Buffer;
}

function error(req: IncomingMessage, res: ServerResponse, status: number, message: string): void {
  const phrase: Record<number, string> = { 400: 'Bad Request', 404: 'Not Found', 413: 'Payload Too Large' };
  sendJson(req, res, status, { message, error: phrase[status] ?? 'Error', statusCode: status });
}

/** Streams `n` bytes of {@link PATTERN_CHUNK} with backpressure, reusing one buffer. */
export function streamPattern(res: ServerResponse, n: number): void {
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

/**
 * Consumes a request body as a stream, hashing it chunk by chunk (memory stays flat for any size).
 * @returns Its length in bytes and lower-case hex SHA-256; rejects when the client aborts.
 */
export function digestBody(req: IncomingMessage): Promise<{ bodyBytes: number; bodySha256: string }> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    let bodyBytes = 0;
    req.on('data', (chunk: Buffer) => {
      bodyBytes += chunk.length;
      hash.update(chunk);
    });
    req.once('end', () => resolve({ bodyBytes, bodySha256: hash.digest('hex') }));
    req.once('error', reject);
    req.once('close', () => {
      if (!req.complete) reject(new Error('client aborted the request'));
    });
  });
}

/** Reads a body of at most `limit` bytes; `undefined` when larger (the rest is drained). */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
    });
    req.once('end', () => resolve(size > limit ? undefined : Buffer.concat(chunks, size)));
    req.once('error', reject);
  });
}

/** Reads a non-negative integer query parameter; `undefined` when malformed or out of range. */
function intParam(url: URL, name: string, fallback: number, max: number): number | undefined {
  const text = url.searchParams.get(name);
  if (text === null) return fallback;
  if (!/^\d{1,16}$/.test(text)) return undefined;
  const value = Number(text);
  return value <= max ? value : undefined;
}

/**
 * Creates the benchmark upstream (not listening); each instance has its own mission store.
 * @returns A `node:http` server.
 */
export function createBenchUpstream(): Server {
  const missions = new Map<string, Entity>();
  // The generated lists, serialized once: bench/run.ts interleaves several sizes (10 … 15,500 items).
  const lists = new Map<number, Entity>();
  const gzippedLists = new Map<number, Entity>();
  const health = entity({ status: 'ok' });

  async function createMission(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req, MAX_JSON_BODY);
    if (raw === undefined) {
      error(req, res, 413, 'request entity too large');
      return;
    }
    const body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>; // SyntaxError → fail → 400
    const problem =
      typeof body !== 'object' || body === null || Array.isArray(body)
        ? 'request body must be a JSON object'
        : (Object.keys(body)
            .filter((name) => !MISSION_MEMBERS.has(name))
            .map((name) => `property ${name} should not exist`)[0] ??
          (typeof body.name === 'string' ? undefined : 'name must be a string'));
    if (problem !== undefined) {
      error(req, res, 400, problem);
      return;
    }
    const metadata = (body.metadata ?? {}) as Record<string, unknown>;
    const mission = {
      uuid: randomUUID(),
      name: body.name,
      projectUuid: body.projectUUID,
      metadata: Object.entries(metadata).map(([type, value]) => ({
        uuid: randomUUID(),
        value,
        metadataType: { uuid: type, ...(TYPE_NAMES[type] ?? { name: 'unknown', datatype: 'string' }) },
      })),
      createdAt: new Date().toISOString(),
    };
    const stored = entity(mission);
    missions.set(mission.uuid, stored);
    if (missions.size > MAX_MISSIONS) missions.delete(missions.keys().next().value as string);
    res.writeHead(201, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': stored.bytes.length,
    });
    res.end(stored.bytes);
  }

  function route(req: IncomingMessage, res: ServerResponse, url: URL, fail: (e: unknown) => void): void {
    const path = url.pathname;
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    if (method === 'GET' && path === '/api/health') {
      sendJson(req, res, 200, health);
    } else if (method === 'POST' && path === '/missions') {
      createMission(req, res).catch(fail);
    } else if (method === 'GET' && path.startsWith('/missions/')) {
      const uuid = path.slice('/missions/'.length);
      const found = missions.get(uuid.toLowerCase());
      if (found === undefined) error(req, res, 404, `Mission ${uuid} not found`);
      else sendJson(req, res, 200, found);
    } else if (method === 'GET' && path === '/debug/json') {
      const items = intParam(url, 'items', 100, MAX_LIST_ITEMS);
      if (items === undefined) {
        error(req, res, 400, 'items must be an integer number');
        return;
      }
      const gzipped = url.searchParams.get('coding') === 'gzip';
      const cache = gzipped ? gzippedLists : lists;
      let list = cache.get(items);
      if (list === undefined) {
        const plain = entity(generateMissionList(items));
        list = gzipped ? entityOf(gzipSync(plain.bytes, { level: 6 }), 'gzip') : plain;
        if (cache.size >= MAX_CACHED_LISTS) cache.delete(cache.keys().next().value as number);
        cache.set(items, list);
      }
      sendJson(req, res, 200, list);
    } else if (method === 'GET' && path === '/debug/bytes') {
      const n = intParam(url, 'n', 0, MAX_PATTERN_BYTES);
      if (n === undefined) {
        error(req, res, 400, 'n must be an integer number');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': n });
      if (req.method === 'HEAD' || n === 0) res.end();
      else streamPattern(res, n);
    } else if ((method === 'POST' || method === 'PUT') && path === '/debug/sink') {
      digestBody(req).then((digest) => sendJson(req, res, 200, digest), fail);
    } else {
      req.resume();
      error(req, res, 404, `Cannot ${req.method} ${path}`);
    }
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    req.on('error', () => {});
    res.on('error', () => {});
    res.setHeader('Service-Version', SERVICE_VERSION);
    const fail = (e: unknown): void => {
      if (!res.headersSent) error(req, res, 400, (e as Error).message);
      else res.destroy();
    };
    route(req, res, new URL(req.url ?? '/', 'http://upstream'), fail);
  }

  const server = createServer(handle);
  // Longer than the shim's idle-socket timeout, so pooled upstream sockets are not closed under it.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 0;
  return server;
}

/**
 * Starts the benchmark upstream.
 * @returns Its base URL and a `close()` that also drops idle keep-alive sockets.
 */
export function startBenchUpstream(
  port = 0,
  host = '127.0.0.1',
): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const server = createBenchUpstream();
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const { port: bound } = server.address() as AddressInfo;
      resolve({
        url: `http://${host}:${bound}`,
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

if (import.meta.main) {
  const { values } = parseArgs({
    options: { port: { type: 'string', default: '3000' }, host: { type: 'string', default: '127.0.0.1' } },
  });
  const upstream = await startBenchUpstream(Number(values.port), values.host);
  process.stdout.write(`${JSON.stringify({ msg: 'bench upstream listening', url: upstream.url })}\n`);
  const stop = (): void => {
    upstream.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
