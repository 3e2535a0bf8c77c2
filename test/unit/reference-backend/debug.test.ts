import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { Readable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateMissionList, PATTERN_CHUNK } from '../../../src/reference-backend/debug.ts';
import {
  type RunningReferenceBackend,
  startReferenceBackend,
} from '../../../src/reference-backend/server.ts';
import { AUTH, send } from './helpers.ts';

const MiB = 1024 * 1024;

let backend: RunningReferenceBackend;
let url: string;

beforeAll(async () => {
  backend = await startReferenceBackend({ compress: true });
  url = backend.url;
});
afterAll(() => backend.close());

/** sha256 of the first n bytes of the /debug/bytes pattern, computed independently of the server. */
function patternSha256(n: number): string {
  const hash = createHash('sha256');
  for (let left = n; left > 0; left -= PATTERN_CHUNK.length) {
    hash.update(left >= PATTERN_CHUNK.length ? PATTERN_CHUNK : PATTERN_CHUNK.subarray(0, left));
  }
  return hash.digest('hex');
}

/** A stream of n bytes of a non-repeating-per-chunk pattern (chunk k filled with k & 0xff), and its sha256. */
function generated(n: number, chunkSize = 256 * 1024): { stream: Readable; sha256: string } {
  const hash = createHash('sha256');
  const chunks: Buffer[] = [];
  for (let k = 0, left = n; left > 0; k++, left -= chunkSize) {
    const chunk = Buffer.alloc(Math.min(chunkSize, left), k & 0xff);
    hash.update(chunk);
    chunks.push(chunk);
  }
  return { stream: Readable.from(chunks), sha256: hash.digest('hex') };
}

describe('PATTERN_CHUNK', () => {
  it('is the documented 64 KiB pattern', () => {
    expect(PATTERN_CHUNK.length).toBe(65536);
    for (const i of [0, 1, 255, 256, 1000, 65535]) expect(PATTERN_CHUNK[i]).toBe((i * 31 + (i >>> 8)) & 0xff);
  });
});

describe('GET /debug/bytes', () => {
  it.each([[0], [1], [65535], [65536], [65537], [50 * MiB + 123]])(
    'streams %i bytes with a correct digest',
    async (n) => {
      const res = await new Promise<{
        status: number;
        length: string | undefined;
        type: string | undefined;
        bytes: number;
        sha256: string;
      }>((resolve, reject) => {
        const port = new URL(url).port;
        request(
          { port, host: '127.0.0.1', path: `/debug/bytes?n=${n}`, headers: AUTH, agent: false },
          (r) => {
            const hash = createHash('sha256');
            let bytes = 0;
            r.on('data', (chunk: Buffer) => {
              bytes += chunk.length;
              hash.update(chunk);
            });
            r.on('end', () =>
              resolve({
                status: r.statusCode ?? 0,
                length: r.headers['content-length'],
                type: r.headers['content-type'],
                bytes,
                sha256: hash.digest('hex'),
              }),
            );
            r.on('error', reject);
          },
        )
          .on('error', reject)
          .end();
      });
      expect(res.status).toBe(200);
      expect(res.type).toBe('application/octet-stream');
      expect(res.length).toBe(String(n));
      expect(res.bytes).toBe(n);
      expect(res.sha256).toBe(patternSha256(n));
    },
  );

  it('answers HEAD with the length only', async () => {
    const res = await send(url, `/debug/bytes?n=${10 * 1024 ** 3}`, { method: 'HEAD', headers: AUTH });
    expect(res.status).toBe(200);
    expect(res.headers['content-length']).toBe(String(10 * 1024 ** 3));
    expect(res.body.length).toBe(0);
  });

  it.each([
    ['n=-1', 'n must not be less than 0'],
    [`n=${10 * 1024 ** 3 + 1}`, 'n must not be greater than 10737418240'],
    ['n=abc', 'n must be an integer number'],
  ])('%s → 400', async (query, message) => {
    const res = await send(url, `/debug/bytes?${query}`, { headers: AUTH });
    expect(res.status).toBe(400);
    expect(res.json().message).toBe(message);
  });

  it('survives a client that disconnects mid-stream', async () => {
    await new Promise<void>((resolve) => {
      const req = request(
        {
          port: new URL(url).port,
          host: '127.0.0.1',
          path: `/debug/bytes?n=${1024 * MiB}`,
          headers: AUTH,
          agent: false,
        },
        (r) => {
          r.once('data', () => {
            req.destroy();
            setTimeout(resolve, 50);
          });
        },
      );
      req.on('error', () => {});
      req.end();
    });
    expect((await send(url, '/api/health')).status).toBe(200);
  });
});

describe('POST|PUT /debug/sink', () => {
  it.each([
    ['POST', 0],
    ['PUT', 1],
    ['POST', 50 * MiB + 7],
  ])('%s consumes %i bytes', async (method, n) => {
    const { stream, sha256 } = generated(n);
    const res = await send(url, '/debug/sink', {
      method,
      headers: { ...AUTH, 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' },
      body: stream,
    });
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ bodyBytes: n, bodySha256: sha256 });
  });

  it('GET /debug/sink → 404', async () => {
    expect((await send(url, '/debug/sink', { headers: AUTH })).status).toBe(404);
  });
});

describe('ANY /debug/echo', () => {
  it.each([
    ['GET', '/debug/echo'],
    ['DELETE', '/debug/echo/'],
    ['PATCH', '/Debug/Echo/a/b%2Fc?x=1&tags[]=%20&x=1'],
    ['OPTIONS', '/debug/echo/?'],
  ])('%s %s echoes the request exactly', async (method, path) => {
    const body = Buffer.from('{"tags":[1,2]}');
    const res = await send(url, path, {
      method,
      headers: {
        ...AUTH,
        'X-Custom': ['a', 'b'],
        'content-type': 'application/json',
        'content-length': body.length,
      },
      body,
    });
    expect(res.status).toBe(200);
    const echo = res.json();
    expect(echo.method).toBe(method);
    expect(echo.url).toBe(path);
    expect(echo.headers['x-custom']).toBe('a, b');
    expect(echo.rawHeaders).toEqual(expect.arrayContaining(['X-Custom', 'a', 'X-Custom', 'b']));
    expect(echo.bodyBytes).toBe(body.length);
    expect(echo.bodySha256).toBe(createHash('sha256').update(body).digest('hex'));
  });
});

describe('GET /debug/json', () => {
  it.each([[0], [1], [250]])('lists %i generated missions', async (items) => {
    const res = await send(url, `/debug/json?items=${items}`, { headers: AUTH });
    expect(res.status).toBe(200);
    const body = res.json();
    expect(body.count).toBe(items);
    expect(body.data).toHaveLength(items);
    expect(body).toMatchObject({ skip: 0, take: items });
    for (const mission of body.data) expect(mission.metadata).toHaveLength(3);
    expect(res.body.toString()).toBe(JSON.stringify(generateMissionList(items)));
    expect(res.headers.etag).toBeDefined();
  });

  it('is deterministic and gzips when asked', async () => {
    const a = await send(url, '/debug/json?items=1000', { headers: AUTH });
    const b = await send(url, '/debug/json?items=1000', { headers: { ...AUTH, 'accept-encoding': 'gzip' } });
    expect(b.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(b.body).equals(a.body)).toBe(true);
    const c = await send(url, '/debug/json?items=1000', { headers: AUTH });
    expect(c.body.equals(a.body)).toBe(true);
    expect(c.headers.etag).toBe(a.headers.etag);
  });

  it('refuses more than 100000 items', async () => {
    const res = await send(url, '/debug/json?items=100001', { headers: AUTH });
    expect(res.status).toBe(400);
    expect(res.json().message).toBe('items must not be greater than 100000');
  });
});
