/**
 * Peers that read slowly, for tests of what the shim holds while its writes queue
 * (test/e2e/released-chunks.test.ts, test/e2e/aliases-released-chunks.test.ts): an upstream serving
 * bodies of distinct bytes and sinking uploads at a crawl, and clients that pause while reading.
 * Real sockets; the pauses shape the load, nothing waits on them.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';

/** Byte `i` of body `seed`: distinct per body and per position, so that a chunk from elsewhere shows. */
export function bodyOf(seed: number, length: number): Buffer {
  const body = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) body[i] = (i * 7 + seed * 131 + (i >>> 10)) & 0xff;
  return body;
}

export const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

/** Pauses `stream` for a moment after every `every` bytes of `data`. */
function crawl(stream: http.IncomingMessage, every: number, onData: (d: Buffer) => void): void {
  let sincePause = 0;
  stream.on('data', (d: Buffer) => {
    onData(d);
    sincePause += d.length;
    if (sincePause >= every) {
      sincePause = 0;
      stream.pause();
      setTimeout(() => stream.resume(), 2);
    }
  });
}

export interface SlowUpstream {
  url: string;
  close(): Promise<void>;
}

/**
 * An upstream with, in 16 KiB writes with backpressure: `GET /bytes/<seed>/<length>` →
 * {@link bodyOf} as `application/octet-stream`; `GET /json/<seed>/<n>` → `json(seed, n)` as
 * `application/json`; `GET /gzip-json/<seed>/<n>` → the same gzipped (`Content-Encoding: gzip`); and `POST /sink` → `{bytes, sha}` of the body, read with a pause after every
 * 256 KiB.
 */
export async function startSlowUpstream(json?: (seed: number, n: number) => Buffer): Promise<SlowUpstream> {
  const server = http.createServer((req, res) => {
    const [, kind, seed, size] = (req.url ?? '').split('/');
    if (kind === 'sink') {
      const hash = createHash('sha256');
      let bytes = 0;
      crawl(req, 256 * 1024, (d) => {
        hash.update(d);
        bytes += d.length;
      });
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ bytes, sha: hash.digest('hex') }));
      });
      return;
    }
    const isJson = (kind === 'json' || kind === 'gzip-json') && json !== undefined;
    const plain = isJson ? json(Number(seed), Number(size)) : bodyOf(Number(seed), Number(size));
    const gzipped = kind === 'gzip-json';
    res.writeHead(200, {
      'content-type': isJson ? 'application/json' : 'application/octet-stream',
      ...(gzipped ? { 'content-encoding': 'gzip' } : {}),
    });
    writeInPieces(res, gzipped ? gzipSync(plain) : plain, 16384);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** GETs `url` with a client that pauses after every 128 KiB; resolves with the whole body. */
export function slowGet(url: string, headers: Record<string, string>) {
  return new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
    http
      .get(url, { headers, agent: false }, (res) => {
        const parts: Buffer[] = [];
        crawl(res, 128 * 1024, (d) => parts.push(d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/** POSTs `body` to `url` in 64 KiB writes; resolves with what {@link startSlowUpstream}'s sink counted. */
export function upload(url: string, body: Buffer, headers: Record<string, string>) {
  return new Promise<{ status: number; bytes: number; sha: string }>((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'POST', headers: { ...headers, 'content-type': 'application/octet-stream' }, agent: false },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => {
          text += d.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ...JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    writeInPieces(req, body, 65536);
  });
}

/** Writes `body` to `stream` in writes of `piece` bytes, waiting for `drain` when told to, then ends it. */
function writeInPieces(stream: http.ServerResponse | http.ClientRequest, body: Buffer, piece: number): void {
  let at = 0;
  const pump = (): void => {
    while (at < body.length) {
      const more = stream.write(body.subarray(at, at + piece));
      at += piece;
      if (!more) return void stream.once('drain', pump);
    }
    stream.end();
  };
  pump();
}
