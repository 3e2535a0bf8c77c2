/**
 * Bounded buffering of a request body for a rewrite (SPEC §4, §5: `MAX_REWRITE_BODY` → 413).
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { PassThrough, Readable } from 'node:stream';
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { createBufferBudget, Reservation } from '../../../src/core/buffer-budget.ts';
import { ShimError } from '../../../src/core/errors.ts';
import type { ExchangeHooks } from '../../../src/core/types.ts';
import { declaredWindowBytes, SUPPORTED_CODINGS } from '../../../src/proxy/content-coding.ts';
import {
  ClientAbortedError,
  hasLargeUnreadBody,
  readBodyStart,
  readBoundedBody,
  rewriteRequestBody,
} from '../../../src/proxy/request-body.ts';
import { ENCODE_SYNC } from '../../helpers/codings.ts';

/** A request stand-in: a readable stream with `headers` and `complete`, like `IncomingMessage`. */
function requestOf(chunks: readonly (string | Buffer)[], headers: IncomingHttpHeaders = {}): IncomingMessage {
  const stream = Readable.from(chunks.map((c) => (typeof c === 'string' ? Buffer.from(c) : c)));
  const req = Object.assign(stream, { headers, complete: false });
  stream.on('end', () => {
    req.complete = true;
  });
  return req as unknown as IncomingMessage;
}

/** A stand-in fed by hand, to end or abort it mid-body. */
function manualRequest(headers: IncomingHttpHeaders = {}): PassThrough & IncomingMessage {
  const stream = new PassThrough();
  const req = Object.assign(stream, { headers, complete: false });
  stream.on('end', () => {
    req.complete = true;
  });
  return req as unknown as PassThrough & IncomingMessage;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

/** A chunk with memory of its own, as Node's HTTP parser delivers one. */
function ownChunk(text: string): Buffer {
  const chunk = Buffer.allocUnsafeSlow(text.length);
  chunk.write(text);
  return chunk;
}

describe('readBoundedBody', () => {
  it('releases the chunks it joined (their memory goes back at once), not a body of one chunk', async () => {
    const chunks = [ownChunk('{"a":'), ownChunk('1}')];
    const body = await readBoundedBody(requestOf(chunks), 1024);
    expect(body.toString()).toBe('{"a":1}');
    expect(chunks.map((c) => (c.buffer as ArrayBuffer).detached)).toEqual([true, true]);

    const only = ownChunk('{"b":2}');
    const same = await readBoundedBody(requestOf([only]), 1024);
    expect(same).toBe(only);
    expect(same.toString()).toBe('{"b":2}');
  });

  it('releases the chunks it held when it gives up (too large)', async () => {
    const held = ownChunk('x'.repeat(600));
    const err = await rejection(readBoundedBody(requestOf([held, ownChunk('y'.repeat(600))]), 1000));
    expect(err).toBeInstanceOf(ShimError);
    expect((held.buffer as ArrayBuffer).detached).toBe(true);
  });

  it('reads a body sent in one chunk', async () => {
    const body = await readBoundedBody(requestOf(['{"tags":[1]}'], { 'content-length': '12' }), 1024);
    expect(body.toString()).toBe('{"tags":[1]}');
  });

  it('reads and joins a body sent in several chunks', async () => {
    const body = await readBoundedBody(requestOf(['{"a":', '1,', '"b":2}']), 1024);
    expect(body.toString()).toBe('{"a":1,"b":2}');
  });

  it('returns an empty buffer when there is no body', async () => {
    const body = await readBoundedBody(requestOf([]), 1024);
    expect(Buffer.isBuffer(body)).toBe(true);
    expect(body).toHaveLength(0);
  });

  it('keeps multi-byte characters split across chunks intact', async () => {
    const bytes = Buffer.from('{"name":"ü€😀"}', 'utf8');
    const chunks = [...bytes].map((b) => Buffer.from([b]));
    const body = await readBoundedBody(requestOf(chunks), 1024);
    expect(body.equals(bytes)).toBe(true);
  });

  it('accepts a body of exactly the limit', async () => {
    const body = await readBoundedBody(requestOf(['12345', '67890'], { 'content-length': '10' }), 10);
    expect(body).toHaveLength(10);
  });

  it('rejects a declared Content-Length over the limit with 413 before reading', async () => {
    let reads = 0;
    const stream = new Readable({
      read() {
        reads++;
        this.push(null);
      },
    });
    const req = Object.assign(stream, { headers: { 'content-length': '11' } }) as unknown as IncomingMessage;
    const err = await rejection(readBoundedBody(req, 10));
    expect(err).toBeInstanceOf(ShimError);
    expect((err as ShimError).statusCode).toBe(413);
    expect((err as ShimError).reason).toBe('size');
    expect((err as ShimError).message).toContain('MAX_REWRITE_BODY');
    await new Promise((resolve) => setImmediate(resolve));
    expect(reads).toBe(0);
    expect(stream.listenerCount('data')).toBe(0);
    expect(stream.readableFlowing).toBeNull();
  });

  it.each<[string, (string | Buffer)[], IncomingHttpHeaders]>([
    ['without Content-Length (chunked)', ['123456', '789012'], { 'transfer-encoding': 'chunked' }],
    ['with a Content-Length that understates it', ['12345678901'], { 'content-length': '5' }],
    ['in one chunk', [Buffer.alloc(11)], {}],
  ])('rejects a streamed body over the limit with 413: %s', async (_name, chunks, headers) => {
    const req = requestOf(chunks, headers);
    const err = await rejection(readBoundedBody(req, 10));
    expect(err).toBeInstanceOf(ShimError);
    expect((err as ShimError).statusCode).toBe(413);
  });

  it('stops reading and removes its listeners once over the limit', async () => {
    const req = manualRequest();
    const result = readBoundedBody(req, 4);
    req.write('abc');
    req.write('def');
    const err = await rejection(result);
    expect((err as ShimError).statusCode).toBe(413);
    expect(req.listenerCount('data')).toBe(0);
    expect(req.isPaused()).toBe(true);
  });

  it('rejects with ClientAbortedError when the client goes away mid-body', async () => {
    const req = manualRequest({ 'content-length': '100' });
    const result = readBoundedBody(req, 1024);
    req.write('partial');
    setImmediate(() => req.destroy());
    expect(await rejection(result)).toBeInstanceOf(ClientAbortedError);
  });

  it('rejects with ClientAbortedError when the stream fails', async () => {
    const req = manualRequest();
    const result = readBoundedBody(req, 1024);
    req.write('partial');
    setImmediate(() => req.destroy(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })));
    expect(await rejection(result)).toBeInstanceOf(ClientAbortedError);
  });

  it('resolves with the body when the stream closes after a complete body', async () => {
    const req = manualRequest();
    const result = readBoundedBody(req, 1024);
    req.end('done');
    expect((await result).toString()).toBe('done');
  });
});

describe('readBoundedBody with the buffer budget (MAX_BUFFERED_BYTES → 503)', () => {
  it('reserves a declared Content-Length as its bytes arrive, nothing for the head alone (slowhttptest -B)', async () => {
    const budget = createBufferBudget(100);
    const reservation = new Reservation(budget);
    const req = manualRequest({ 'content-length': '60' });
    const reading = readBoundedBody(req, 1024, { reservation });
    expect(budget.used).toBe(0); // a head that declares 60 bytes and sends none holds nothing
    req.write(Buffer.alloc(20));
    await new Promise((r) => setImmediate(r));
    expect(budget.used).toBe(20);
    req.end(Buffer.alloc(40));
    await reading;
    expect(reservation.bytes).toBe(60); // held until the caller forwards it
  });

  it('refuses the rest of a declared body once the budget has no room left for it, releasing all', async () => {
    const budget = createBufferBudget(100);
    const req = manualRequest({ 'content-length': '60' });
    const reading = readBoundedBody(req, 1024, { reservation: new Reservation(budget) });
    budget.tryReserve(50); // another exchange took room after this one was admitted
    req.write(Buffer.alloc(30));
    req.write(Buffer.alloc(30));
    const err = await rejection(reading);
    expect((err as ShimError).reason).toBe('buffer_budget');
    expect(budget.used).toBe(50);
  });

  it('refuses a declared length the budget cannot hold, reserving nothing', async () => {
    const budget = createBufferBudget(100);
    budget.tryReserve(50);
    const err = await rejection(
      readBoundedBody(manualRequest({ 'content-length': '60' }), 1024, {
        reservation: new Reservation(budget),
      }),
    );
    expect(err).toBeInstanceOf(ShimError);
    expect((err as ShimError).reason).toBe('buffer_budget');
    expect((err as ShimError).statusCode).toBe(503);
    expect(budget.used).toBe(50);
  });

  it('reserves a chunked body as it arrives, and releases it all when the budget runs out', async () => {
    const budget = createBufferBudget(100);
    const reservation = new Reservation(budget);
    const req = manualRequest({ 'transfer-encoding': 'chunked' });
    const reading = readBoundedBody(req, 1024, { reservation });
    req.write(Buffer.alloc(70));
    await new Promise((r) => setImmediate(r));
    expect(budget.used).toBe(70);
    req.write(Buffer.alloc(40));
    const err = await rejection(reading);
    expect((err as ShimError).reason).toBe('buffer_budget');
    expect(budget.used).toBe(0);
  });

  it('releases the reservation when the client aborts', async () => {
    const budget = createBufferBudget(100);
    const req = manualRequest({ 'content-length': '50' });
    const reading = readBoundedBody(req, 1024, { reservation: new Reservation(budget) });
    req.write(Buffer.alloc(10));
    req.destroy();
    expect(await rejection(reading)).toBeInstanceOf(ClientAbortedError);
    expect(budget.used).toBe(0);
  });
});

describe('readBoundedBody with a deadline (BODY_TIMEOUT_MS → 408)', () => {
  it('fails with body_timeout when the signal aborts mid-body, releasing the budget', async () => {
    const budget = createBufferBudget(1000);
    const controller = new AbortController();
    const req = manualRequest({ 'content-length': '100' });
    const reading = readBoundedBody(req, 1024, {
      reservation: new Reservation(budget),
      signal: controller.signal,
    });
    req.write(Buffer.alloc(10));
    controller.abort();
    const err = await rejection(reading);
    expect((err as ShimError).reason).toBe('body_timeout');
    expect((err as ShimError).statusCode).toBe(408);
    expect(budget.used).toBe(0);
  });

  it('fails at once when the deadline has already passed', async () => {
    const controller = new AbortController();
    controller.abort();
    const err = await rejection(readBoundedBody(manualRequest(), 1024, { signal: controller.signal }));
    expect((err as ShimError).reason).toBe('body_timeout');
  });

  it('a body that arrives in time is read', async () => {
    const controller = new AbortController();
    const body = await readBoundedBody(requestOf(['ok']), 1024, { signal: controller.signal });
    expect(body.toString()).toBe('ok');
  });
});

describe('rewriteRequestBody', () => {
  const JSON_HEADERS = { 'content-type': 'application/json', 'transfer-encoding': 'chunked' };
  /** A rewrite that, like the alias layer's, refuses what is not a JSON object, and records its calls. */
  function strictRewrite() {
    const calls: string[] = [];
    const hooks: ExchangeHooks = {
      body: {
        rewrite(body) {
          calls.push(body.toString());
          if (!body.toString().startsWith('{')) throw new ShimError('body', 'Request body is not valid JSON');
          return Buffer.from(body.toString().replace('"tags"', '"metadata"'));
        },
      },
    };
    return { calls, hooks };
  }

  it('refuses a coding it cannot undo with 415, naming every coding it can (zstd included)', async () => {
    const { calls, hooks } = strictRewrite();
    const req = requestOf(['xx'], { ...JSON_HEADERS, 'content-encoding': 'compress' });
    const err = await rejection(rewriteRequestBody(req, [hooks], 1024));
    expect(err).toBeInstanceOf(ShimError);
    expect((err as ShimError).statusCode).toBe(415);
    expect((err as ShimError).message).toContain('send it as identity, gzip, deflate, br or zstd.');
    for (const coding of SUPPORTED_CODINGS) expect((err as ShimError).message).toContain(coding);
    expect(calls).toEqual([]);
  });

  it('rewrites a body that has bytes', async () => {
    const { calls, hooks } = strictRewrite();
    const out = await rewriteRequestBody(requestOf(['{"tags":1}'], JSON_HEADERS), [hooks], 1024);
    expect(out.toString()).toBe('{"metadata":1}');
    expect(calls).toEqual(['{"tags":1}']);
  });

  it('passes an empty body (a chunked `0\\r\\n\\r\\n`) through without calling the rewrites', async () => {
    const { calls, hooks } = strictRewrite();
    const out = await rewriteRequestBody(requestOf([], JSON_HEADERS), [hooks], 1024);
    expect(out.length).toBe(0);
    expect(calls).toEqual([]);
  });

  it.each([
    ['gzip', zlib.gzipSync(Buffer.alloc(0))],
    ['deflate', zlib.deflateSync(Buffer.alloc(0))],
    ['br', zlib.brotliCompressSync(Buffer.alloc(0))],
    ['zstd', zlib.zstdCompressSync(Buffer.alloc(0))],
  ])('passes a %s body that decodes to nothing through as the client sent it', async (coding, encoded) => {
    const { calls, hooks } = strictRewrite();
    const req = requestOf([encoded], { ...JSON_HEADERS, 'content-encoding': coding });
    const out = await rewriteRequestBody(req, [hooks], 1024);
    expect(out.equals(encoded)).toBe(true);
    expect(calls).toEqual([]);
  });

  it.each([
    ['the rewrite refuses the decoded body', zlib.gzipSync('not json'), 'body'],
    ['the body does not decode', Buffer.from('not gzip'), 'body'],
    ['the decoded body is over the limit', zlib.gzipSync(Buffer.alloc(2000, 0x20)), 'size'],
  ])('releases the whole reservation, decoded copy included, when %s', async (_, encoded, reason) => {
    const budget = createBufferBudget(1_000_000);
    const reservation = new Reservation(budget);
    const { hooks } = strictRewrite();
    const req = requestOf([encoded], { ...JSON_HEADERS, 'content-encoding': 'gzip' });
    const err = await rejection(rewriteRequestBody(req, [hooks], 1024, { reservation }));
    expect((err as ShimError).reason).toBe(reason);
    // Released here: the exchange's own release may have run already (docs/reliability.md fix 109).
    expect(budget.used).toBe(0);
  });

  it('keeps the reservation of a body it returns, decoded copy included, for the caller to release', async () => {
    const budget = createBufferBudget(1_000_000);
    const reservation = new Reservation(budget);
    const { hooks } = strictRewrite();
    const encoded = zlib.gzipSync('{"tags":1}');
    const req = requestOf([encoded], { ...JSON_HEADERS, 'content-encoding': 'gzip' });
    await rewriteRequestBody(req, [hooks], 1024, { reservation });
    expect(budget.used).toBe(encoded.length + '{"tags":1}'.length);
  });

  // A decoder's window and its output, up to the limit, are reserved while it runs (decompression bombs:
  // docs/reliability.md fix 134).
  it.each(['gzip', 'deflate', 'br', 'zstd'] as const)(
    "reserves the %s decoder's declared window and the limit while it decodes, and gives them back after",
    async (coding) => {
      const encoded = ENCODE_SYNC[coding]('{"tags":1}');
      const budget = createBufferBudget(64 * 1024 * 1024);
      let peak = 0;
      const watched = {
        ...budget,
        tryReserve(bytes: number) {
          const ok = budget.tryReserve(bytes);
          peak = Math.max(peak, budget.used);
          return ok;
        },
        release: (bytes: number) => budget.release(bytes),
        get used() {
          return budget.used;
        },
      };
      const reservation = new Reservation(watched);
      const { hooks } = strictRewrite();
      const req = requestOf([encoded], { ...JSON_HEADERS, 'content-encoding': coding });
      await rewriteRequestBody(req, [hooks], 1024, { reservation });
      expect(peak).toBe(encoded.length + declaredWindowBytes(coding, encoded) + 1024);
      expect(budget.used).toBe(encoded.length + '{"tags":1}'.length);
    },
  );

  it('refuses with 503 (buffer_budget) a body whose decoder cannot be given room, before decoding it', async () => {
    const { calls, hooks } = strictRewrite();
    const encoded = zlib.brotliCompressSync(' '.repeat(10_000_000)); // a decompression bomb, 10 MB of spaces
    const budget = createBufferBudget(2 * 1024 * 1024); // less than the 4 MiB window Node's encoder declares
    const req = requestOf([encoded], { ...JSON_HEADERS, 'content-encoding': 'br' });
    const err = await rejection(
      rewriteRequestBody(req, [hooks], 1024, { reservation: new Reservation(budget) }),
    );
    expect((err as ShimError).reason).toBe('buffer_budget');
    expect((err as ShimError).statusCode).toBe(503);
    expect(calls).toEqual([]);
  });
});

/** The "large unread body" test that decides between draining and closing after a refusal (app.ts). */
describe('hasLargeUnreadBody', () => {
  const req = (headers: IncomingHttpHeaders, readableEnded = false) =>
    ({ headers, readableEnded }) as unknown as IncomingMessage;

  it.each<[string, IncomingHttpHeaders, boolean, boolean]>([
    ['no body', {}, false, false],
    ['Content-Length 0', { 'content-length': '0' }, false, false],
    ['a small body', { 'content-length': '1024' }, false, false],
    ['exactly 64 KiB', { 'content-length': String(64 * 1024) }, false, false],
    ['one byte over 64 KiB', { 'content-length': String(64 * 1024 + 1) }, false, true],
    ['a gigabyte', { 'content-length': String(1024 ** 3) }, false, true],
    ['a chunked body (size unknown)', { 'transfer-encoding': 'chunked' }, false, true],
    ['a large body already read', { 'content-length': String(1024 ** 3) }, true, false],
    ['a chunked body already read', { 'transfer-encoding': 'chunked' }, true, false],
  ])('%s → %s', (_name, headers, ended, expected) => {
    expect(hasLargeUnreadBody(req(headers, ended))).toBe(expected);
  });
});

describe('readBodyStart (REQUEST_BUFFER_BYTES: a body read up to the limit before the upstream is contacted)', () => {
  it.each<[string, (string | Buffer)[], IncomingHttpHeaders, string]>([
    ['a declared length below the limit', ['ab', 'cd'], { 'content-length': '4' }, 'abcd'],
    ['a declared length at the limit', ['abcd', 'efgh'], { 'content-length': '8' }, 'abcdefgh'],
    ['a chunked body that ends before the limit', ['ab', 'cd'], { 'transfer-encoding': 'chunked' }, 'abcd'],
    ['an empty chunked body', [], { 'transfer-encoding': 'chunked' }, ''],
  ])('%s: read whole', async (_name, chunks, headers, expected) => {
    const start = await readBodyStart(requestOf(chunks, headers), 8);
    expect(start.complete).toBe(true);
    expect(start.bytes.toString()).toBe(expected);
  });

  it.each<[string, IncomingHttpHeaders]>([
    ['a declared length above the limit', { 'content-length': '12' }],
    ['a chunked body', { 'transfer-encoding': 'chunked' }],
  ])(
    '%s: stops at the chunk that reaches the limit and leaves the rest paused in the request',
    async (_name, headers) => {
      const req = manualRequest(headers);
      const reading = readBodyStart(req, 8);
      req.write('abcde');
      req.write('fghij');
      req.write('kl');
      const start = await reading;
      expect(start).toMatchObject({ complete: false });
      expect(start.bytes.toString()).toBe('abcdefghij');
      expect(req.isPaused()).toBe(true);
      expect(req.listenerCount('data')).toBe(0);
      // The rest comes out of the same stream once resumed, in order, nothing lost.
      const rest: string[] = [];
      req.on('data', (chunk: Buffer) => rest.push(chunk.toString()));
      req.end();
      req.resume();
      await new Promise((resolve) => req.once('end', resolve));
      expect(rest.join('')).toBe('kl');
    },
  );

  it('reserves what it holds, and refuses a declared length whose start cannot fit the room left', async () => {
    const budget = createBufferBudget(100);
    const reservation = new Reservation(budget, 100);
    const req = manualRequest({ 'content-length': String(1024 ** 3) });
    const reading = readBodyStart(req, 8, { reservation });
    req.write('abcdefghij');
    await reading;
    expect(reservation.bytes).toBe(10);

    // 1 GiB declared: only its first 8 bytes need to fit.
    const small = new Reservation(createBufferBudget(8), 8);
    await expect(
      readBodyStart(requestOf(['abcdefgh', 'ij'], { 'content-length': '1073741824' }), 8, {
        reservation: small,
      }),
    ).resolves.toMatchObject({ complete: false });
    const none = new Reservation(createBufferBudget(7), 7);
    const err = await rejection(
      readBodyStart(requestOf(['x'], { 'content-length': '1000' }), 8, { reservation: none }),
    );
    expect((err as ShimError).reason).toBe('buffer_budget');
  });

  it('times out (408) when the start has not arrived by the deadline, and releases what it held', async () => {
    const budget = createBufferBudget(100);
    const reservation = new Reservation(budget, 100);
    const req = manualRequest({ 'transfer-encoding': 'chunked' });
    const controller = new AbortController();
    const reading = readBodyStart(req, 8, { reservation, signal: controller.signal });
    req.write('abc');
    await new Promise((resolve) => setImmediate(resolve));
    controller.abort();
    const err = await rejection(reading);
    expect((err as ShimError).statusCode).toBe(408);
    expect(budget.used).toBe(0);
  });
});
