/**
 * Large transfers over one connection: a download of `GET /debug/bytes?n=<bytes>` and an upload of
 * `POST /debug/sink` with a `Content-Length` body, each timed from request start to response end.
 */
import http from 'node:http';

/** One 64 KiB chunk reused for the whole upload (the client allocates nothing per chunk). */
const CHUNK = Buffer.alloc(64 * 1024, 0x61);

/** What a transfer measured. */
export interface TransferResult {
  bytes: number;
  seconds: number;
  /** MiB per second. */
  mibPerSecond: number;
}

/**
 * Downloads `bytes` bytes and discards them.
 * @throws {Error} on a non-200 status, a short body or a 120 s timeout.
 */
export function download(
  base: string,
  headers: Record<string, string>,
  bytes: number,
): Promise<TransferResult> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const req = http.get(`${base}/debug/bytes?n=${bytes}`, { headers, timeout: 120_000 }, (res) => {
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
      });
      res.on('end', () => {
        if (res.statusCode !== 200 || received !== bytes) {
          reject(new Error(`download: status ${res.statusCode}, ${received} of ${bytes} bytes`));
          return;
        }
        resolve(result(bytes, started));
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('download timed out')));
    req.on('error', reject);
  });
}

/**
 * Uploads `bytes` bytes (with backpressure) and waits for the sink's answer.
 * @throws {Error} on a non-200 status or a 120 s timeout.
 */
export function upload(
  base: string,
  headers: Record<string, string>,
  bytes: number,
): Promise<TransferResult> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const req = http.request(
      `${base}/debug/sink`,
      {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/octet-stream', 'content-length': String(bytes) },
        timeout: 120_000,
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode !== 200) reject(new Error(`upload: status ${res.statusCode}`));
          else resolve(result(bytes, started));
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('upload timed out')));
    req.on('error', reject);
    let remaining = bytes;
    const pump = () => {
      while (remaining > 0) {
        const size = Math.min(remaining, CHUNK.length);
        remaining -= size;
        if (!req.write(size === CHUNK.length ? CHUNK : CHUNK.subarray(0, size))) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
}

function result(bytes: number, started: bigint): TransferResult {
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { bytes, seconds, mibPerSecond: bytes / 1024 / 1024 / seconds };
}

/** When the parts of one response arrived, in ms from the request's start. */
export interface FirstByteResult {
  /** The response head was parsed (the status line and headers). */
  headMs: number;
  /** The first body byte arrived (time to first byte of the body, what a streaming client can use). */
  firstByteMs: number;
  /** The last body byte arrived. */
  totalMs: number;
  bytes: number;
}

/**
 * Times one GET on a fresh connection (no agent): to the response head, to the first body byte and to
 * the end. The body is discarded.
 * @throws {Error} on a non-200 status or a 60 s timeout.
 */
export function timeFirstByte(url: string, headers: Record<string, string>): Promise<FirstByteResult> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const ms = () => Number(process.hrtime.bigint() - started) / 1e6;
    const req = http.get(url, { headers, agent: false, timeout: 60_000 }, (res) => {
      const headMs = ms();
      let firstByteMs = Number.NaN;
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        if (bytes === 0) firstByteMs = ms();
        bytes += chunk.length;
      });
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`GET ${url}: status ${res.statusCode}`));
        else resolve({ headMs, firstByteMs, totalMs: ms(), bytes });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
  });
}
