/**
 * The response-patch seam (SPEC §6, CONTRACT ResponsePatch): patches chained, outcomes combined, and
 * the stream stage with a small test patch (no socket).
 */
import { Readable, Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip, gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { chainPatches, combinedOutcome, PatchStream } from '../../../src/proxy/response-patch.ts';
import type { PatchOutcome, ResponsePatch } from '../../../src/proxy/types.ts';

/** Upper-cases every byte; holds back the last byte of each chunk until the next (to test end()). */
function upperCasing(): ResponsePatch & { destroyed: number } {
  let held: Buffer | undefined;
  let changed = false;
  return {
    destroyed: 0,
    write(chunk) {
      const all = held ? Buffer.concat([held, chunk]) : chunk;
      const upper = Buffer.from(all.toString('latin1').toUpperCase(), 'latin1');
      if (!upper.equals(all)) changed = true;
      held = upper.subarray(upper.length - 1);
      return upper.subarray(0, upper.length - 1);
    },
    end() {
      const last = held ?? Buffer.alloc(0);
      held = undefined;
      return last;
    },
    destroy() {
      this.destroyed++;
      held = undefined;
    },
    get outcome(): PatchOutcome {
      return changed ? { kind: 'patched' } : { kind: 'unchanged' };
    },
  };
}

/** Inserts `!` after every `a`. */
function exclaiming(): ResponsePatch {
  return {
    write(chunk) {
      return Buffer.from(chunk.toString('latin1').replaceAll('A', 'A!'), 'latin1');
    },
    end() {
      return Buffer.alloc(0);
    },
    destroy() {},
    outcome: { kind: 'unchanged' },
  };
}

const collect = (patch: ResponsePatch, chunks: string[]) => {
  const out: string[] = [];
  for (const c of chunks) out.push(patch.write(Buffer.from(c, 'latin1')).toString('latin1'));
  out.push(patch.end().toString('latin1'));
  return out.join('');
};

describe('chainPatches', () => {
  it('returns a single patch as is', () => {
    const p = upperCasing();
    expect(chainPatches([p])).toBe(p);
  });

  it('feeds each patch what the one before emitted, in order, through end()', () => {
    const chained = chainPatches([upperCasing(), exclaiming()]);
    expect(collect(chained, ['ab', 'ca', 'a'])).toBe('A!BCA!A!');
  });

  it('destroys every patch', () => {
    const a = upperCasing();
    const b = upperCasing();
    chainPatches([a, b]).destroy();
    expect([a.destroyed, b.destroyed]).toEqual([1, 1]);
  });

  it('rejects an empty list', () => {
    expect(() => chainPatches([])).toThrow(RangeError);
  });
});

describe('combinedOutcome', () => {
  it.each<[PatchOutcome[], PatchOutcome]>([
    [[{ kind: 'unchanged' }, { kind: 'unchanged' }], { kind: 'unchanged' }],
    [[{ kind: 'unchanged' }, { kind: 'patched' }], { kind: 'patched' }],
    [[{ kind: 'patched' }, { kind: 'skipped', reason: 'too_deep' }], { kind: 'skipped', reason: 'too_deep' }],
  ])('%j → %j', (outcomes, expected) => expect(combinedOutcome(outcomes)).toEqual(expected));
});

describe('PatchStream', () => {
  it('streams the patched bytes, and what end() emits last', async () => {
    const out: string[] = [];
    await pipeline(
      Readable.from([Buffer.from('hello '), Buffer.from('world')]),
      new PatchStream(upperCasing()),
      new Writable({
        write(chunk: Buffer, _e, cb) {
          out.push(chunk.toString());
          cb();
        },
      }),
    );
    expect(out.join('')).toBe('HELLO WORLD');
    // bytes leave as they arrive: the first chunk's bytes before the second was read
    expect(out[0]).toBe('HELLO');
  });

  it('destroys the patch when the stage is destroyed (client gone, upstream failed)', () => {
    const patch = upperCasing();
    const stage = new PatchStream(patch);
    stage.on('error', () => {});
    stage.destroy(new Error('gone'));
    expect(patch.destroyed).toBe(1);
  });
});

describe('PatchStream outcome', () => {
  it('reports the final outcome before the next stage ends (so before the response finishes)', async () => {
    const events: string[] = [];
    await pipeline(
      Readable.from([Buffer.from('abc')]),
      new PatchStream(upperCasing(), (outcome) => events.push(`outcome ${outcome.kind}`)),
      new Writable({
        write(chunk: Buffer, _e, cb) {
          events.push(`bytes ${chunk.toString()}`);
          cb();
        },
        final(cb) {
          events.push('final');
          cb();
        },
      }),
    );
    expect(events.indexOf('outcome patched')).toBeGreaterThan(-1);
    expect(events.indexOf('outcome patched')).toBeLessThan(events.indexOf('final'));
  });
});

/** A chunk with memory of its own (what a decoder's full output buffer is), `length` bytes of `byte`. */
const owned = (length: number, byte: string) => Buffer.from(new ArrayBuffer(length)).fill(byte);

/** A patch that passes every chunk on as it came, or (`copying`) returns a copy; records recycles. */
function recordingPatch(copying: boolean): ResponsePatch & { recycled: Buffer[]; outputs: Buffer[] } {
  return {
    recycled: [],
    outputs: [],
    write(chunk) {
      if (!copying) return chunk;
      const out = Buffer.from(new ArrayBuffer(chunk.length));
      chunk.copy(out);
      this.outputs.push(out);
      return out;
    },
    end: () => Buffer.alloc(0),
    recycle(bytes) {
      this.recycled.push(bytes);
    },
    destroy() {},
    outcome: { kind: 'unchanged' },
  };
}

/** A next stage (an encoder's place) that holds each chunk until the test lets it call back. */
function holdingStage() {
  const held: Array<{ chunk: Buffer; done: (err?: Error | null) => void }> = [];
  let arrived: () => void = () => {};
  const next = new Transform({
    transform(chunk: Buffer, _e, done) {
      held.push({ chunk, done });
      arrived();
    },
  });
  next.resume();
  const nextArrival = () => new Promise<void>((resolve) => (arrived = resolve));
  return { next, held, nextArrival };
}

describe('PatchStream releases chunks and recycles outputs (body-pump.ts releaseChunk)', () => {
  it('releases a chunk the patch copied as soon as the patch returned', () => {
    const patch = recordingPatch(true);
    const stage = new PatchStream(patch);
    stage.resume();
    const chunk = owned(8192, 'a');
    stage.write(chunk);
    expect(chunk.length).toBe(0);
    expect(patch.outputs[0]?.toString()).toBe('a'.repeat(8192));
  });

  it('keeps a chunk the patch passed on until the next stage has consumed it, then releases it', async () => {
    const stage = new PatchStream(recordingPatch(false));
    const { next, held, nextArrival } = holdingStage();
    stage.pipe(stage.feeds(next));
    const arrival = nextArrival();
    const chunk = owned(8192, 'b');
    stage.write(chunk);
    await arrival;
    expect(held[0]?.chunk).toBe(chunk);
    expect(chunk.toString()).toBe('b'.repeat(8192));
    held[0]?.done();
    expect(chunk.length).toBe(0);
  });

  it('gives the patch its output back once the next stage has consumed it, not before', async () => {
    const patch = recordingPatch(true);
    const stage = new PatchStream(patch);
    const { next, held, nextArrival } = holdingStage();
    stage.pipe(stage.feeds(next));
    const arrival = nextArrival();
    stage.write(owned(4096, 'c'));
    await arrival;
    expect(patch.recycled).toEqual([]);
    held[0]?.done();
    expect(patch.recycled).toEqual([patch.outputs[0]]);
  });

  it('keeps both when the next stage fails the chunk', async () => {
    const passing = new PatchStream(recordingPatch(false));
    const { next, held, nextArrival } = holdingStage();
    next.on('error', () => {});
    passing.on('error', () => {});
    passing.pipe(passing.feeds(next));
    const arrival = nextArrival();
    const chunk = owned(8192, 'd');
    passing.write(chunk);
    await arrival;
    held[0]?.done(new Error('encoder failed'));
    expect(chunk.toString()).toBe('d'.repeat(8192));

    const patch = recordingPatch(true);
    const copying = new PatchStream(patch);
    const second = holdingStage();
    second.next.on('error', () => {});
    copying.pipe(copying.feeds(second.next));
    const secondArrival = second.nextArrival();
    copying.write(owned(4096, 'e'));
    await secondArrival;
    second.held[0]?.done(new Error('encoder failed'));
    expect(patch.recycled).toEqual([]);
  });

  it('releases and recycles through a real gzip encoder, whose output is the exact input', async () => {
    const patch = recordingPatch(true);
    const stage = new PatchStream(patch);
    const encoder = stage.feeds(createGzip());
    const out: Buffer[] = [];
    const inputs = [owned(70_000, 'f'), owned(70_000, 'g'), owned(70_000, 'h')];
    await pipeline(
      Readable.from(inputs),
      stage,
      encoder,
      new Writable({
        write(chunk: Buffer, _e, cb) {
          out.push(chunk);
          cb();
        },
      }),
    );
    expect(gunzipSync(Buffer.concat(out)).toString()).toBe(
      `${'f'.repeat(70_000)}${'g'.repeat(70_000)}${'h'.repeat(70_000)}`,
    );
    expect(inputs.map((c) => c.length)).toEqual([0, 0, 0]);
    expect(patch.recycled).toEqual(patch.outputs);
  });
});
