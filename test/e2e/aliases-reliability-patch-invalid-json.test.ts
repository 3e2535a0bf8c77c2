/**
 * Reliability: a JSON response on a patched route (a legacy client's response, SPEC §6) that is not
 * valid JSON, is a truncated JSON document, or whose transfer is cut short.
 *
 * A complete response whose body is not valid JSON is passed through from its first invalid byte on
 * (chunked, as every patched response; members inserted before that byte have already left), never
 * repaired, with a warning log line and `shim_response_patches_skipped_total{reason}`.
 * A body labelled gzip that does not decode is an invalid upstream response: 502 while nothing has
 * reached the client. A transfer cut short (fewer bytes than `Content-Length`, a chunked body without
 * its last chunk) is never presented as a complete 200: a 502 while no byte has reached the client,
 * else an aborted connection. The shim never crashes, and the next request works.
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
/**
 * What the legacy client receives for each invalid body. The patch streams: a member it inserted
 * before the first invalid byte has already left (it is never taken back, and the JSON is never
 * "repaired"); from that byte on the rest passes verbatim. Cutting the inserted members out gives the
 * upstream's bytes.
 */
const RECEIVED: Record<string, Buffer> = {
  ...INVALID,
  '/missions/truncated-document': Buffer.from(
    '{"data":[{"uuid":"m1","metadata":[{"value":1}],"tags":[{"value":1}]},{"uuid":"m2","meta',
  ),
  '/missions/trailing-garbage': Buffer.from('{"metadata":[1,2],"tags":[1,2]} <html>'),
  '/missions/two-documents': Buffer.from('{"metadata":1,"tags":1}{"metadata":2}'),
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
    '%s → passed through from the first invalid byte on, never repaired, logged and counted',
    async (path) => {
      const before = await skipped('invalid_json');
      const reply = await send(stack.url, 'GET', path, LEGACY);
      expect(reply.status).toBe(200);
      expect(reply.body.toString('latin1')).toBe((RECEIVED[path] as Buffer).toString('latin1'));
      expect(reply.headers['content-length']).toBeUndefined();
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

  it("gzip of invalid JSON → the upstream's bytes, unpatched, gzip again", async () => {
    const before = await skipped('invalid_json');
    const reply = await send(stack.url, 'GET', '/missions/gzip-invalid-json', {
      ...LEGACY,
      'accept-encoding': 'gzip',
    });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-encoding']).toBe('gzip');
    expect(zlib.gunzipSync(reply.body).equals(zlib.gunzipSync(GZIP_OF_INVALID))).toBe(true);
    expect(await skipped('invalid_json')).toBe(before + 1);
  });

  it('a body labelled gzip that is not → 502 (an invalid upstream response), counted', async () => {
    const before = await stack.metrics.registry.getSingleMetricAsString('shim_upstream_errors_total');
    const reply = await send(stack.url, 'GET', '/missions/not-gzip', {
      ...LEGACY,
      'accept-encoding': 'gzip',
    });
    expect(reply.status).toBe(502);
    expect(reply.json()).toMatchObject({ statusCode: 502, error: 'Bad Gateway' });
    const after = await stack.metrics.registry.getSingleMetricAsString('shim_upstream_errors_total');
    const invalid = (text: string) => Number(/kind="invalid"\} (\d+)/.exec(text)?.[1] ?? 0);
    expect(invalid(after)).toBe(invalid(before) + 1);
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
      for (const { path, r } of replies) expect(r.body.equals(RECEIVED[path] as Buffer), path).toBe(true);
    }
    const ok = await send(stack.url, 'GET', '/missions/ok', LEGACY);
    expect(ok.text).toBe('{"metadata":1,"tags":1}');
  });
});

describe('a transfer cut short', () => {
  it.each(['/missions/short', '/missions/chunked-cut'])(
    '%s → never a complete 200 (502 before any byte, else aborted); the next request works',
    async (path) => {
      const result = await outcome(path);
      if (result.status === 200) expect(result.complete).toBe(false);
      else expect(result.status).toBe(502);
      const next = await send(stack.url, 'GET', '/missions/ok', LEGACY);
      expect(next.status).toBe(200);
      expect(next.text).toBe('{"metadata":1,"tags":1}');
    },
  );
});
