/**
 * pumpCodedPatch (src/proxy/response-patch.ts): the patched path for a body with a content coding,
 * upstream → decoder → patch → encoder → client, with fake source and target objects (no sockets) and
 * either node:zlib's gzip streams or stages whose callbacks the test holds.
 */
import { once } from 'node:events';
import { PassThrough, Transform, type TransformCallback } from 'node:stream';
import { constants, createGunzip, createGzip, gunzipSync, gzipSync, inflateRawSync } from 'node:zlib';
import { describe, expect, it, vi } from 'vitest';
import type { PatchOutcome, ResponsePatch } from '../../../src/core/types.ts';
import { type PatchCodec, pumpCodedPatch } from '../../../src/proxy/response-patch.ts';
import { FakeSource, FakeTarget } from '../../helpers/pump-fakes.ts';

/** A chunk with memory of its own (as a decoder's full output buffer has), `length` bytes of `byte`. */
const owned = (length: number, byte: string) => Buffer.from(new ArrayBuffer(length)).fill(byte);

/**
 * Upper-cases each chunk into a buffer of its own, or (`passing`) passes it on as it came; emits `!`
 * at the end; records what it returned and what came back through `recycle`.
 */
function recordingPatch(passing = false) {
  const patch = {
    destroyed: 0,
    outputs: [] as Buffer[],
    recycled: [] as Buffer[],
    write(chunk: Buffer) {
      if (passing) return chunk;
      const out = Buffer.from(new ArrayBuffer(chunk.length));
      out.write(chunk.toString('latin1').toUpperCase(), 'latin1');
      patch.outputs.push(out);
      return out;
    },
    end: () => (passing ? Buffer.alloc(0) : Buffer.from('!')),
    recycle(bytes: Buffer) {
      patch.recycled.push(bytes);
    },
    destroy() {
      patch.destroyed++;
    },
    outcome: { kind: passing ? 'unchanged' : 'patched' } as PatchOutcome,
  };
  return patch satisfies ResponsePatch;
}

/**
 * A stage (an encoder's place) that keeps each chunk with its callback in the test's hands: it emits
 * what the test passes to the callback.
 */
function holdingStage(highWaterMark?: number) {
  const held: Array<{ chunk: Buffer; done: TransformCallback }> = [];
  const arrivals: Array<() => void> = [];
  const stage = new Transform({
    ...(highWaterMark !== undefined && { highWaterMark }),
    transform(chunk: Buffer, _e, done) {
      held.push({ chunk, done });
      arrivals.shift()?.();
    },
  });
  const nextArrival = () => new Promise<void>((resolve) => arrivals.push(resolve));
  return { stage, held, nextArrival };
}

function setUp(codec: PatchCodec, patch = recordingPatch()) {
  const source = new FakeSource();
  const target = new FakeTarget();
  const writeHead = vi.fn(() => {
    target.headersSent = true;
    target.written.push('<head>');
  });
  const onEnd = vi.fn((_outcome: PatchOutcome) => target.written.push('<outcome>'));
  const { promise: errored, resolve: reported } = Promise.withResolvers<void>();
  const onError = vi.fn((_err: Error) => reported());
  const { promise: broken, resolve: patchFailed } = Promise.withResolvers<void>();
  const onPatchFailure = vi.fn((_err: Error) => patchFailed());
  pumpCodedPatch(source, target, codec, patch, { writeHead, onEnd, onError, onPatchFailure });
  return { source, target, patch, writeHead, onEnd, onError, errored, onPatchFailure, broken };
}

/** One turn of the event loop: what a write's callback (on the next tick) has run by. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/** What a gzip stream cut after a flush decodes to so far (its 10-byte header skipped, no trailer). */
const inflatePartial = (bytes: Buffer): string =>
  bytes.length <= 10
    ? ''
    : inflateRawSync(bytes.subarray(10), { finishFlush: constants.Z_SYNC_FLUSH }).toString();

const gzipCodec = (): PatchCodec => ({ decoder: createGunzip(), encoder: createGzip() });

describe('pumpCodedPatch', () => {
  it.each(['write', 'end'] as const)(
    'a patch whose %s throws fails its exchange alone: onPatchFailure, every stage destroyed, no throw out of a listener',
    async (call) => {
      const patch = recordingPatch();
      const bug = new TypeError('a plugin bug');
      patch[call] = () => {
        throw bug;
      };
      const codec = gzipCodec();
      const { source, target, onEnd, onError, onPatchFailure, broken } = setUp(codec, patch);
      source.emit('data', gzipSync(Buffer.from('abc')));
      source.emit('end');
      await broken;
      expect(onPatchFailure).toHaveBeenCalledWith(bug);
      expect(source.destroyed).toBe(true);
      expect(codec.decoder.destroyed && codec.encoder.destroyed).toBe(true);
      expect(patch.destroyed).toBe(1);
      expect(onEnd).not.toHaveBeenCalled();
      expect(onError).not.toHaveBeenCalled();
      expect(target.writableEnded).toBe(false);
    },
  );

  it('decodes, patches and encodes again; the head before the first byte, the outcome before the end', async () => {
    const { source, target, writeHead, onEnd, onError } = setUp(gzipCodec());
    const encoded = gzipSync(Buffer.from('hello, coded world'));
    for (let at = 0; at < encoded.length; at += 5) source.emit('data', encoded.subarray(at, at + 5));
    source.emit('end');
    await once(target, 'finish');
    expect(target.written[0]).toBe('<head>');
    expect(target.written.at(-1)).toBe('<end>');
    expect(target.written.indexOf('<outcome>')).toBeLessThan(target.written.indexOf('<end>'));
    expect(gunzipSync(Buffer.concat(target.bytes)).toString()).toBe('HELLO, CODED WORLD!');
    expect(writeHead).toHaveBeenCalledTimes(1);
    expect(onEnd).toHaveBeenCalledWith({ kind: 'patched' });
    expect(onError).not.toHaveBeenCalled();
  });

  it('flushes the encoder once the upstream pauses, so that a piece sent alone reaches the client', async () => {
    const encoder = createGzip();
    const { promise: flushed, resolve: done } = Promise.withResolvers<void>();
    const flushes = vi.fn(() => encoder.flush(constants.Z_SYNC_FLUSH, () => done()));
    const { source, target } = setUp({ decoder: createGunzip(), encoder, flush: flushes });
    // An upstream that flushes its gzip stream after a first piece, then pauses.
    const upstream = createGzip();
    const sent: Buffer[] = [];
    upstream.on('data', (d: Buffer) => sent.push(d));
    upstream.write('first piece');
    await new Promise((resolve) => upstream.flush(constants.Z_SYNC_FLUSH, () => resolve(undefined)));
    source.emit('data', Buffer.concat(sent.splice(0)));
    await flushed; // what the flush made out of the encoder went to the client before its callback
    expect(inflatePartial(Buffer.concat(target.bytes))).toBe('FIRST PIECE');
    expect(flushes).toHaveBeenCalledTimes(1);
    expect(target.written).not.toContain('<end>');

    // The rest and the end: no further flush (the end flushes anyway), the whole body decodes.
    upstream.end(' and the rest');
    await once(upstream, 'end');
    source.emit('data', Buffer.concat(sent));
    source.emit('end');
    await once(target, 'finish');
    expect(gunzipSync(Buffer.concat(target.bytes)).toString()).toBe('FIRST PIECE AND THE REST!');
    expect(flushes).toHaveBeenCalledTimes(1);
  });

  it('never flushes a body that arrives in one go', async () => {
    const encoder = createGzip();
    const flushes = vi.fn(() => encoder.flush(constants.Z_SYNC_FLUSH));
    const { source, target } = setUp({ decoder: createGunzip(), encoder, flush: flushes });
    source.emit('data', gzipSync(Buffer.from('all of it')));
    source.emit('end');
    await once(target, 'finish');
    expect(gunzipSync(Buffer.concat(target.bytes)).toString()).toBe('ALL OF IT!');
    expect(flushes).not.toHaveBeenCalled();
  });

  it('writes the head at the end of a body that encodes to nothing', async () => {
    const { source, target } = setUp(
      { decoder: new PassThrough(), encoder: new PassThrough() },
      recordingPatch(true),
    );
    source.emit('end');
    await once(target, 'finish');
    expect(target.written).toEqual(['<outcome>', '<head>', '<end>']);
  });

  it('pauses each step while the next one is full: upstream for the decoder, decoder for the encoder, encoder for the client', async () => {
    const decoder = new PassThrough({ highWaterMark: 4 });
    const encoder = holdingStage(4);
    const { source, target } = setUp({ decoder, encoder: encoder.stage });
    target.full = true;
    const arrived = encoder.nextArrival();
    source.emit('data', Buffer.from('abcdefgh')); // through the decoder to the encoder: over its 4 bytes
    await arrived;
    expect(decoder.isPaused()).toBe(true);
    expect(source.paused).toBe(false);
    source.emit('data', Buffer.from('ijklmnop')); // stays in the paused decoder: over its 4 bytes
    expect(source.paused).toBe(true);
    const next = encoder.nextArrival();
    const decoderDrained = once(decoder, 'drain');
    encoder.held[0]?.done(null, Buffer.from('encoded'));
    await next; // the encoder drained, the decoder resumed and passed on the second chunk
    expect(encoder.held[1]?.chunk.toString()).toBe('IJKLMNOP');
    await decoderDrained;
    expect(source.paused).toBe(false);
    expect(target.written).toContain('encoded');
    expect(encoder.stage.isPaused()).toBe(true); // the client's buffer is full
    target.emit('drain');
    expect(encoder.stage.isPaused()).toBe(false);
  });

  it('reports a body that does not decode once, and destroys the upstream, the stages and the patch', async () => {
    const codec = gzipCodec();
    const { source, patch, onError, errored } = setUp(codec);
    source.emit('data', Buffer.from('this is not gzip'));
    await errored;
    expect(onError.mock.calls[0]?.[0]).toMatchObject({ code: expect.stringMatching(/^Z_/) });
    expect(patch.destroyed).toBe(1);
    expect(source.destroyed).toBe(true);
    expect(codec.decoder.destroyed && codec.encoder.destroyed).toBe(true);
    source.emit('error', new Error('socket destroyed'));
    expect(onError).toHaveBeenCalledTimes(1);
  });

  it('drops everything when the client goes away, and says nothing of a later error', () => {
    const codec = gzipCodec();
    const { source, target, patch, onError } = setUp(codec);
    source.emit('data', gzipSync(Buffer.from('abc')).subarray(0, 4));
    target.destroyed = true;
    target.emit('close');
    expect(source.destroyed).toBe(true);
    expect(patch.destroyed).toBe(1);
    expect(codec.decoder.destroyed && codec.encoder.destroyed).toBe(true);
    source.emit('error', new Error('socket destroyed'));
    expect(onError).not.toHaveBeenCalled();
  });

  it('releases a decoded chunk the patch copied at once', async () => {
    const encoder = holdingStage();
    const arrived = encoder.nextArrival();
    const { source } = setUp({ decoder: new PassThrough(), encoder: encoder.stage });
    const chunk = owned(8192, 'a');
    source.emit('data', chunk);
    await arrived;
    expect(chunk.length).toBe(0);
    expect(encoder.held[0]?.chunk.toString()).toBe('A'.repeat(8192));
  });

  it('releases a decoded chunk passed on as it came only once the encoder consumed it', async () => {
    const encoder = holdingStage();
    const arrived = encoder.nextArrival();
    const { source } = setUp({ decoder: new PassThrough(), encoder: encoder.stage }, recordingPatch(true));
    const chunk = owned(8192, 'b');
    source.emit('data', chunk);
    await arrived;
    expect(encoder.held[0]?.chunk).toBe(chunk);
    expect(chunk.toString()).toBe('b'.repeat(8192)); // the encoder is still reading it
    encoder.held[0]?.done();
    await settle();
    expect(chunk.length).toBe(0);
  });

  it('gives the patch its output back once the encoder consumed it, not before, and not after a failure', async () => {
    const encoder = holdingStage();
    encoder.stage.on('error', () => {});
    const patch = recordingPatch();
    const { source } = setUp({ decoder: new PassThrough(), encoder: encoder.stage }, patch);
    let arrived = encoder.nextArrival();
    source.emit('data', owned(16, 'c'));
    await arrived;
    expect(patch.recycled).toEqual([]);
    arrived = encoder.nextArrival();
    encoder.held[0]?.done();
    await settle();
    expect(patch.recycled[0]).toBe(patch.outputs[0]);

    source.emit('data', owned(16, 'd'));
    await arrived;
    // (not events.once: an `error` event rejects it)
    const closed = new Promise((resolve) => encoder.stage.once('close', resolve));
    encoder.held[1]?.done(new Error('encoder failed'));
    await closed;
    await settle();
    expect(patch.recycled).toHaveLength(1);
  });

  it('keeps a passed-on chunk whose encoder write failed', async () => {
    const encoder = holdingStage();
    encoder.stage.on('error', () => {});
    const arrived = encoder.nextArrival();
    const { source, errored } = setUp(
      { decoder: new PassThrough(), encoder: encoder.stage },
      recordingPatch(true),
    );
    const chunk = owned(8192, 'e');
    source.emit('data', chunk);
    await arrived;
    encoder.held[0]?.done(new Error('encoder failed'));
    await errored;
    await settle();
    expect(chunk.toString()).toBe('e'.repeat(8192));
  });
});
