/**
 * Reliability: a JSON response on a patched route (a legacy client's response, SPEC §6) that is not
 * valid JSON, is a truncated JSON document, or whose transfer is cut short.
 *
 * A complete response whose body is not valid JSON is passed through unpatched, byte for byte, with
 * its own `Content-Length`, a warning log line and `shim_response_patches_skipped_total{reason}`. A
 * transfer cut short (fewer bytes than `Content-Length`, a chunked body without its last chunk) is
 * never presented as complete: the client connection is aborted. The shim never crashes, and the next
 * request works.
 *
 * Goes with the alias layer (`src/aliases/`, the only response patcher): deleted with it
 * (docs/removing-the-alias-layer.md).
 */
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getOutcome, send } from '../helpers/http.ts';
import { scaled } from '../helpers/load.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const INVALID: Record<string, Buffer> = {
  '/missions/truncated-document': Buffer.from(
    '{"data":[{"uuid":"m1","metadata":[{"value":1}]},{"uuid":"m2","meta',
  ),
  '/missions/unclosed': Buffer.from('{"metadata":[1,2]'),
  '/missions/trailing-garbage': Buffer.from('{"metadata":[1,2]} <html>'),
  '/missions/two-documents': Buffer.from('{"metadata":1}{"metadata":2}'),
  '/missions/html-error-page': Buffer.from('<html><body>502 metadata gateway</body></html>'),
  '/missions/single-quotes': Buffer.from("{'metadata':[1]}"),
  '/missions/nan': Buffer.from('{"metadata":NaN}'),
  '/missions/lone-surrogate-bytes': Buffer.from([
    ...Buffer.from('{"metadata":"'),
    0xed,
    0xa0,
    0x80,
    ...Buffer.from('"}'),
  ]),
  '/missions/empty': Buffer.alloc(0),
};
const GZIP_OF_INVALID = zlib.gzipSync(Buffer.from('{"metadata":[1,2'));
const NOT_GZIP = Buffer.from('{"metadata":[1]}'); // labelled gzip, is not

/** Invalid bodies sent in a row: 500 with `npm run test:load`, 100 in `npm test` (test/helpers/load.ts). */
const INVALID_IN_A_ROW = scaled(500, 100);

let upstream: RawUpstream;
let stack: Stack;
beforeAll(async () => {
  upstream = await startRawUpstream((socket, received) => {
    if (!received.includes('\r\n\r\n')) return;
    const path = /^[A-Z]+ (\S+)/.exec(received)?.[1] ?? '';
    const json = 'Content-Type: application/json\r\n';
    if (path === '/missions/short') {
      socket.write(`HTTP/1.1 200 OK\r\n${json}Content-Length: 100\r\n\r\n{"metadata":[1,2,3],"x":`);
      setTimeout(() => socket.destroy(), 20);
    } else if (path === '/missions/chunked-cut') {
      socket.write(`HTTP/1.1 200 OK\r\n${json}Transfer-Encoding: chunked\r\n\r\n10\r\n{"metadata":[1,2\r\n`);
      setTimeout(() => socket.destroy(), 20);
    } else if (path === '/missions/gzip-invalid-json' || path === '/missions/not-gzip') {
      const body = path === '/missions/not-gzip' ? NOT_GZIP : GZIP_OF_INVALID;
      socket.write(
        `HTTP/1.1 200 OK\r\n${json}Content-Encoding: gzip\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
      socket.end(body);
    } else if (path === '/missions/ok') {
      socket.end(`HTTP/1.1 200 OK\r\n${json}Content-Length: 14\r\n\r\n{"metadata":1}`);
    } else {
      const body = INVALID[path] ?? Buffer.from('{}');
      socket.write(`HTTP/1.1 200 OK\r\n${json}Content-Length: ${body.length}\r\n\r\n`);
      socket.end(body);
    }
  });
  stack = await startStack({ UPSTREAM_URL: upstream.url });
});
afterAll(async () => {
  await stack.close();
  await upstream.close();
});

async function skipped(reason: string): Promise<number> {
  const text = await stack.metrics.registry.getSingleMetricAsString('shim_response_patches_skipped_total');
  return Number(new RegExp(`reason="${reason}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
}

/** GET with a legacy client, reporting whether the body arrived complete. */
const outcome = (path: string) => getOutcome(`${stack.url}${path}`, LEGACY);

describe('a complete response whose JSON is invalid', () => {
  it.each(Object.keys(INVALID).filter((p) => INVALID[p]?.includes('"metadata"')))(
    '%s → passed through unpatched, byte for byte, logged and counted',
    async (path) => {
      const before = await skipped('invalid_json');
      const reply = await send(stack.url, 'GET', path, LEGACY);
      expect(reply.status).toBe(200);
      expect(reply.body.equals(INVALID[path] as Buffer)).toBe(true);
      expect(reply.headers['content-length']).toBe(String(INVALID[path]?.length));
      expect(reply.headers).not.toHaveProperty('warning'); // no alias signal for a body left alone
      expect(await skipped('invalid_json')).toBe(before + 1);
      const lines = stack
        .logs()
        .filter((l) => l.path === path || (l.req as { path?: string })?.path === path);
      expect(
        lines.some(
          (l) => l.level === 40 && l.msg === 'response forwarded unpatched' && l.reason === 'invalid_json',
        ),
      ).toBe(true);
      expect(lines.some((l) => l.msg === 'request completed' && l.patchSkipped === 'invalid_json')).toBe(
        true,
      );
    },
  );

  it.each(Object.keys(INVALID).filter((p) => !INVALID[p]?.includes('"metadata"')))(
    '%s (no canonical key as a JSON string, so not even scanned) → passed through byte for byte',
    async (path) => {
      const reply = await send(stack.url, 'GET', path, LEGACY);
      expect(reply.status).toBe(200);
      expect(reply.body.equals(INVALID[path] as Buffer)).toBe(true);
    },
  );

  it("gzip of invalid JSON → the upstream's gzip bytes, unpatched", async () => {
    const before = await skipped('invalid_json');
    const reply = await send(stack.url, 'GET', '/missions/gzip-invalid-json', {
      ...LEGACY,
      'accept-encoding': 'gzip',
    });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-encoding']).toBe('gzip');
    expect(reply.body.equals(GZIP_OF_INVALID)).toBe(true);
    expect(await skipped('invalid_json')).toBe(before + 1);
  });

  it('a body labelled gzip that is not → passed through unpatched as a decode error', async () => {
    const before = await skipped('decode_error');
    const reply = await send(stack.url, 'GET', '/missions/not-gzip', {
      ...LEGACY,
      'accept-encoding': 'gzip',
    });
    expect(reply.status).toBe(200);
    expect(reply.body.equals(NOT_GZIP)).toBe(true);
    expect(await skipped('decode_error')).toBe(before + 1);
  });

  it(`${INVALID_IN_A_ROW} invalid bodies in a row, 20 at a time: every one passed through, the shim keeps patching`, async () => {
    const paths = Object.keys(INVALID);
    for (let round = 0; round < INVALID_IN_A_ROW / 20; round++) {
      const replies = await Promise.all(
        Array.from({ length: 20 }, (_, i) => {
          const path = paths[(round * 20 + i) % paths.length] as string;
          return send(stack.url, 'GET', path, LEGACY).then((r) => ({ path, r }));
        }),
      );
      for (const { path, r } of replies) expect(r.body.equals(INVALID[path] as Buffer), path).toBe(true);
    }
    const ok = await send(stack.url, 'GET', '/missions/ok', LEGACY);
    expect(ok.text).toBe('{"metadata":1,"tags":1}');
  });
});

describe('a transfer cut short', () => {
  it.each(['/missions/short', '/missions/chunked-cut'])(
    '%s → the client connection is aborted, never a complete response; the next request works',
    async (path) => {
      const result = await outcome(path);
      expect(result.complete).toBe(false);
      const next = await send(stack.url, 'GET', '/missions/ok', LEGACY);
      expect(next.status).toBe(200);
      expect(next.text).toBe('{"metadata":1,"tags":1}');
    },
  );
});
