/**
 * Upstream faults found by mutation fuzzing of upstream responses (docs/reliability.md, fixes 50–52),
 * for a legacy client, whose response is patched: its head is written with the first patched byte,
 * from the pump's listeners, and its body goes through a decoder of the response's content coding.
 * Raw TCP upstreams send what no HTTP library would; real sockets.
 *
 * - A final status below 100 (`HTTP/1.1 099 X`; Node's parser takes any three digits) and a reason
 *   phrase with a NUL (Node's parser takes it, Node's `writeHead` throws on it) ended the process:
 *   `writeHead` threw inside the pump's `data` listener.
 * - A deflate, br or zstd body with bytes after the end of its compressed data (or a zstd body of two
 *   frames in one write: Node's zstd stream ends after the first) left the client waiting forever:
 *   the decoder never ended.
 *
 * Goes with `src/aliases/` at 1.0 (the core's own paths are covered by upstream-faults.test.ts).
 */
import zlib from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { getOutcome, type Outcome, send } from '../helpers/http.ts';
import { closeAll, stackWithReply as stackWith } from '../helpers/one-shot-upstream.ts';
import { CURRENT, LEGACY, type Stack } from '../helpers/stack.ts';

afterEach(closeAll);

const MISSION = '{"uuid":"m1","metadata":[1],"name":"x"}';
const PATCHED = '{"uuid":"m1","metadata":[1],"name":"x","tags":[1]}';

/** A response head and body, as bytes. */
function response(head: string, body: Buffer | string): Buffer {
  const bytes = Buffer.from(body);
  return Buffer.concat([Buffer.from(`${head}\r\nContent-Length: ${bytes.length}\r\n\r\n`, 'latin1'), bytes]);
}

/** `getOutcome`, or a failure naming the hang when no outcome comes within `ms`. */
function outcomeWithin(url: string, headers: Record<string, string>, ms: number): Promise<Outcome> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    getOutcome(url, headers).finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no outcome within ${ms} ms: the client hangs`)), ms);
    }),
  ]);
}

const invalidCount = async (stack: Stack) =>
  Number(
    /shim_upstream_errors_total\{kind="invalid"\} (\d+)/.exec(await stack.metrics.registry.metrics())?.[1] ??
      0,
  );

describe('a response head Node parses and cannot write', () => {
  it.each([
    ['a legacy client (patched)', LEGACY],
    ['a current client', CURRENT],
  ])(
    'a final status below 100 (HTTP/1.1 099): %s gets the 502 of an invalid response',
    async (_who, headers) => {
      const stack = await stackWith(() =>
        response('HTTP/1.1 099 Odd\r\nContent-Type: application/json', MISSION),
      );
      const reply = await send(stack.url, 'GET', '/missions/m1', headers);
      expect(reply.status).toBe(502);
      expect(reply.json()).toMatchObject({ statusCode: 502 });
      expect(await invalidCount(stack)).toBe(1);
      // The process goes on (it ended here).
      expect((await send(stack.url, 'GET', '/health', CURRENT)).status).toBe(200);
    },
  );

  it.each([
    ['a legacy client (patched)', LEGACY, PATCHED],
    ['a current client', CURRENT, MISSION],
  ])(
    'a reason phrase with a NUL: %s gets the response, with the status name Node knows',
    async (_who, headers, body) => {
      const stack = await stackWith(() =>
        response('HTTP/1.1 200 O\u0000K\r\nContent-Type: application/json', MISSION),
      );
      const reply = await send(stack.url, 'GET', '/missions/m1', headers);
      expect(reply.status).toBe(200);
      expect(reply.text).toBe(body);
      expect((await send(stack.url, 'GET', '/health', CURRENT)).status).toBe(200);
    },
  );
});

describe('bytes after the end of the compressed data', () => {
  const json = Buffer.from(MISSION);
  const cases: Array<[string, string, Buffer]> = [
    ['deflate, then a byte', 'deflate', Buffer.concat([zlib.deflateSync(json), Buffer.from('x')])],
    [
      'raw deflate, then bytes',
      'deflate',
      Buffer.concat([zlib.deflateRawSync(json), Buffer.from('garbage')]),
    ],
    ['br, then a byte', 'br', Buffer.concat([zlib.brotliCompressSync(json), Buffer.from('x')])],
    ['zstd, then a byte', 'zstd', Buffer.concat([zlib.zstdCompressSync(json), Buffer.from('x')])],
  ];

  it.each(cases)(
    '%s: a legacy client gets 502 (or an aborted response), never a wait or a cut body',
    async (_what, coding, body) => {
      const stack = await stackWith(() =>
        response(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: ${coding}`, body),
      );
      const outcome = await outcomeWithin(`${stack.url}/missions/m1`, LEGACY, 5_000);
      expect(outcome.status === 502 || !outcome.complete, JSON.stringify(outcome)).toBe(true);
      expect(await invalidCount(stack)).toBe(1);
      expect((await send(stack.url, 'GET', '/health', CURRENT)).status).toBe(200);
    },
  );

  it.each(cases)('%s: a current client gets the upstream bytes as they are', async (_what, coding, body) => {
    const stack = await stackWith(() =>
      response(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: ${coding}`, body),
    );
    const reply = await send(stack.url, 'GET', '/missions/m1', CURRENT);
    expect(reply.status).toBe(200);
    expect(reply.body.equals(body)).toBe(true);
  });

  it('gzip of two members still decodes whole and is patched', async () => {
    const body = Buffer.concat([zlib.gzipSync(json.subarray(0, 10)), zlib.gzipSync(json.subarray(10))]);
    const stack = await stackWith(() =>
      response('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip', body),
    );
    const reply = await send(stack.url, 'GET', '/missions/m1', LEGACY);
    expect(reply.status).toBe(200);
    expect(zlib.gunzipSync(reply.body).toString()).toBe(PATCHED);
  });

  // RFC 8878 §3: a zstd body may hold several frames. Node's stream ended after the first when the next
  // came in the same write, so the body got 502 or was patched depending on where the bytes were cut
  // (fix 52 refused it; docs/reliability.md fix 137). Node's own streaming encoder ends with an empty
  // frame: an upstream that buffers its output sends such a body.
  it.each([
    [
      'two frames in one write',
      () =>
        Buffer.concat([
          zlib.zstdCompressSync(json.subarray(0, 10)),
          zlib.zstdCompressSync(json.subarray(10)),
        ]),
    ],
    [
      'a frame and an empty one',
      () => Buffer.concat([zlib.zstdCompressSync(json), zlib.zstdCompressSync(Buffer.alloc(0))]),
    ],
  ])('zstd of several frames (%s) decodes whole and is patched', async (_what, body) => {
    const stack = await stackWith(() =>
      response('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: zstd', body()),
    );
    const reply = await send(stack.url, 'GET', '/missions/m1', LEGACY);
    expect(reply.status).toBe(200);
    expect(zlib.zstdDecompressSync(reply.body).toString()).toBe(PATCHED);
  });
});
