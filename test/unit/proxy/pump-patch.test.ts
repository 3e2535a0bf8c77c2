/**
 * pumpPatch (src/proxy/response-patch.ts): the patched path for an uncoded body, with fake source and
 * target objects (no sockets).
 */
import { describe, expect, it, vi } from 'vitest';
import type { PatchOutcome, ResponsePatch } from '../../../src/core/types.ts';
import { pumpPatch } from '../../../src/proxy/response-patch.ts';
import { FakeSource, FakeTarget, queuedWrites } from '../../helpers/pump-fakes.ts';

/** Upper-cases every chunk; emits `!` at the end. */
function upperPatch(): ResponsePatch & { destroyed: number } {
  return {
    destroyed: 0,
    write(chunk) {
      return Buffer.from(chunk.toString().toUpperCase());
    },
    end() {
      return Buffer.from('!');
    },
    destroy() {
      this.destroyed++;
    },
    outcome: { kind: 'patched' } as PatchOutcome,
  };
}

/**
 * Upper-cases each chunk into a buffer of its own and reuses the memory of whatever is recycled at
 * once, as eagerly as a patch may: any early recycle by the pump shows up as changed bytes.
 */
function reusingPatch(): ResponsePatch & { recycled: Buffer[] } {
  let spare: Buffer | undefined;
  const recycled: Buffer[] = [];
  return {
    recycled,
    write(chunk) {
      const out = spare !== undefined && spare.length >= chunk.length ? spare : Buffer.alloc(chunk.length);
      spare = undefined;
      out.write(chunk.toString().toUpperCase());
      return out.subarray(0, chunk.length);
    },
    end() {
      return Buffer.alloc(0);
    },
    recycle(bytes) {
      recycled.push(bytes);
      spare = bytes;
    },
    destroy() {},
    outcome: { kind: 'patched' } as PatchOutcome,
  };
}

function setUp() {
  const source = new FakeSource();
  const target = new FakeTarget();
  const patch = upperPatch();
  const writeHead = vi.fn(() => {
    target.headersSent = true;
    target.written.push('<head>');
  });
  const onEnd = vi.fn();
  const onError = vi.fn();
  const onPatchFailure = vi.fn();
  pumpPatch(source, target, patch, { writeHead, onEnd, onError, onPatchFailure });
  return { source, target, patch, writeHead, onEnd, onError, onPatchFailure };
}

/** A pump with {@link reusingPatch}, its head already sent. */
function setUpReusing() {
  const source = new FakeSource();
  const target = new FakeTarget();
  target.headersSent = true;
  const patch = reusingPatch();
  pumpPatch(source, target, patch, {
    writeHead: vi.fn(),
    onEnd: vi.fn(),
    onError: vi.fn(),
    onPatchFailure: vi.fn(),
  });
  return { source, target, patch };
}

describe('pumpPatch', () => {
  it.each(['write', 'end'] as const)(
    'a patch whose %s throws fails its exchange alone: onPatchFailure, the source destroyed, no throw out of the listener',
    (call) => {
      const { source, target, patch, writeHead, onEnd, onError, onPatchFailure } = setUp();
      const bug = new TypeError('a plugin bug');
      patch[call] = () => {
        throw bug;
      };
      expect(() => {
        source.emit('data', Buffer.from('abc'));
        source.emit('end');
      }).not.toThrow();
      expect(onPatchFailure).toHaveBeenCalledTimes(1);
      expect(onPatchFailure).toHaveBeenCalledWith(bug);
      expect(source.destroyed).toBe(true);
      expect(onEnd).not.toHaveBeenCalled();
      expect(onError).not.toHaveBeenCalled();
      expect(target.writableEnded).toBe(false);
      // A write that threw wrote nothing; an end that threw leaves what was written before it.
      expect(target.written).toEqual(call === 'write' ? [] : ['<head>', 'ABC']);
      expect(writeHead).toHaveBeenCalledTimes(call === 'write' ? 0 : 1);
    },
  );

  it('writes the head just before the first patched byte, then the body, the end and the outcome', () => {
    const { source, target, writeHead, onEnd, onError } = setUp();
    expect(writeHead).not.toHaveBeenCalled();
    source.emit('data', Buffer.from('ab'));
    source.emit('data', Buffer.from('c'));
    source.emit('end');
    expect(target.written).toEqual(['<head>', 'AB', 'C', '!', '<end>']);
    expect(writeHead).toHaveBeenCalledTimes(1);
    expect(onEnd).toHaveBeenCalledWith({ kind: 'patched' });
    expect(onError).not.toHaveBeenCalled();
  });

  it('writes each output in the microtask after its chunk, without waiting for the next chunk or the end', async () => {
    const { source, target } = setUp();
    source.emit('data', Buffer.from('ab'));
    expect(target.written).toEqual(['<head>']);
    await queuedWrites();
    expect(target.written).toEqual(['<head>', 'AB']);
    source.emit('end');
    expect(target.queued.map((w) => w.copy)).toEqual(['AB']);
    expect(target.written).toEqual(['<head>', 'AB', '!', '<end>']);
    expect(target.endChunk).toBe('!');
  });

  it('sends the last output with the end of the response when the upstream ends in the same turn: no write of its own for the terminating chunk', () => {
    const { source, target, patch } = setUpReusing();
    source.emit('data', Buffer.from('ab'));
    source.emit('data', Buffer.from('cd'));
    source.emit('end');
    // 'AB' went before 'CD' came (another chunk of the same read); 'CD' with the end.
    expect(target.queued.map((w) => w.copy)).toEqual(['AB']);
    expect(target.endChunk).toBe('CD');
    expect(target.written).toEqual(['AB', 'CD', '<end>']);
    // The buffer ended with goes back to the patch once the response is finished.
    expect(patch.recycled.map(String)).toEqual(['CD']);
  });

  it('writes the output before the patch’s own last bytes, then ends with those', () => {
    const { source, target } = setUp();
    source.emit('data', Buffer.from('ab'));
    source.emit('end');
    expect(target.queued.map((w) => w.copy)).toEqual(['AB']);
    expect(target.endChunk).toBe('!');
    expect(target.written).toEqual(['<head>', 'AB', '!', '<end>']);
  });

  // Fix 162: a patch that skipped before changing a byte lets the upstream's own head go.
  it.each<[string, (chunk: Buffer) => Buffer, PatchOutcome, boolean]>([
    ['skipped, the chunk itself', (chunk) => chunk, { kind: 'skipped', reason: 'budget_exhausted' }, true],
    [
      'skipped, bytes of its own',
      (chunk) => Buffer.from(chunk),
      { kind: 'skipped', reason: 'budget_exhausted' },
      false,
    ],
    ['patched, the chunk itself', (chunk) => chunk, { kind: 'patched' }, false],
    ['unchanged, the chunk itself', (chunk) => chunk, { kind: 'unchanged' }, false],
    [
      'skipped for the scanner, the chunk itself',
      (chunk) => chunk,
      { kind: 'skipped', reason: 'scanner_failed' },
      true,
    ],
    // A skip every fetch repeats keeps the patched tag, which then names one body and revalidates.
    [
      'skipped as invalid, the chunk itself',
      (chunk) => chunk,
      { kind: 'skipped', reason: 'invalid_json' },
      false,
    ],
  ])('tells writeHead whether the body is the upstream’s as sent: %s', (_case, write, outcome, unpatched) => {
    const source = new FakeSource();
    const target = new FakeTarget();
    const writeHead = vi.fn();
    const patch: ResponsePatch = { write, end: () => Buffer.alloc(0), destroy() {}, outcome };
    pumpPatch(source, target, patch, {
      writeHead,
      onEnd: vi.fn(),
      onError: vi.fn(),
      onPatchFailure: vi.fn(),
    });
    source.emit('data', Buffer.from('{"a":1}'));
    expect(writeHead).toHaveBeenCalledExactlyOnceWith(unpatched);
  });

  it('pauses the upstream while the client buffer is full and resumes on drain', async () => {
    const { source, target } = setUp();
    target.full = true;
    source.emit('data', Buffer.from('a'));
    await queuedWrites();
    expect(source.paused).toBe(true);
    target.emit('drain');
    expect(source.paused).toBe(false);
  });

  it('reports an upstream error while the client is there, and destroys the patch', () => {
    const { source, patch, onError } = setUp();
    source.emit('data', Buffer.from('a'));
    source.emit('error', new Error('upstream reset'));
    expect(onError).toHaveBeenCalledWith(expect.objectContaining({ message: 'upstream reset' }));
    expect(patch.destroyed).toBe(1);
  });

  it('writes nothing more once the response was answered otherwise (the shim sent its 502)', () => {
    const { source, target, writeHead } = setUp();
    target.headersSent = true;
    target.end(); // the shim's own error response, ended before the upstream's buffered chunks come
    target.written.length = 0;
    source.emit('data', Buffer.from('a'));
    source.emit('end');
    expect(target.written).toEqual([]);
    expect(writeHead).not.toHaveBeenCalled();
  });

  it('drops the upstream and the patch when the client goes away, and says nothing of a later error', () => {
    const { source, target, patch, onError } = setUp();
    source.emit('data', Buffer.from('a'));
    target.destroyed = true;
    target.emit('close');
    expect(source.destroyed).toBe(true);
    expect(patch.destroyed).toBeGreaterThan(0);
    source.emit('error', new Error('socket destroyed'));
    expect(onError).not.toHaveBeenCalled();
  });

  it('gives the patch its buffer back only once the socket wrote it, so queued bytes never change', async () => {
    const { source, target, patch } = setUpReusing();
    source.emit('data', Buffer.from('ab'));
    source.emit('data', Buffer.from('cd')); // 'AB' still queued: 'CD' must not go into its memory
    await queuedWrites();
    expect(patch.recycled).toEqual([]);
    target.flushOne();
    expect(patch.recycled.map(String)).toEqual(['AB']);
    source.emit('data', Buffer.from('ef')); // reuses the memory of 'AB', written already
    await queuedWrites();
    target.flushOne();
    target.flushOne();
    expect(target.written).toEqual(['AB', 'CD', 'EF']);
  });

  it('does not give back a buffer whose write failed, nor the chunk passed through as it came', async () => {
    const { source, target, patch } = setUpReusing();
    source.emit('data', Buffer.from('ab'));
    await queuedWrites();
    target.flushOne(new Error('EPIPE'));
    expect(patch.recycled).toEqual([]);

    const passing: ResponsePatch = {
      write: (chunk) => chunk,
      end: () => Buffer.alloc(0),
      recycle: vi.fn(),
      destroy() {},
      outcome: { kind: 'unchanged' },
    };
    const source2 = new FakeSource();
    const target2 = new FakeTarget();
    pumpPatch(source2, target2, passing, {
      writeHead: vi.fn(),
      onEnd: vi.fn(),
      onError: vi.fn(),
      onPatchFailure: vi.fn(),
    });
    source2.emit('data', Buffer.from('x'));
    await queuedWrites();
    target2.flushOne();
    expect(passing.recycle).not.toHaveBeenCalled();
  });

  it('releases a chunk the patch copied at once, and one it passed on only once the socket wrote it', async () => {
    const { source, target } = setUp(); // upperPatch: a new buffer per chunk
    const copied = Buffer.allocUnsafeSlow(2);
    copied.write('ab');
    source.emit('data', copied);
    expect((copied.buffer as ArrayBuffer).detached).toBe(true);
    await queuedWrites();
    expect(target.written).toEqual(['<head>', 'AB']);

    const passing: ResponsePatch = {
      write: (chunk) => chunk,
      end: () => Buffer.alloc(0),
      destroy() {},
      outcome: { kind: 'unchanged' },
    };
    const source2 = new FakeSource();
    const target2 = new FakeTarget();
    pumpPatch(source2, target2, passing, {
      writeHead: vi.fn(),
      onEnd: vi.fn(),
      onError: vi.fn(),
      onPatchFailure: vi.fn(),
    });
    const passed = Buffer.allocUnsafeSlow(2);
    passed.write('xy');
    const failed = Buffer.allocUnsafeSlow(2);
    failed.write('zz');
    source2.emit('data', passed);
    source2.emit('data', failed);
    await queuedWrites();
    expect(passed.toString()).toBe('xy'); // queued: intact
    target2.flushOne(); // checks that the chunk still holds its bytes when the socket writes it
    expect((passed.buffer as ArrayBuffer).detached).toBe(true);
    target2.flushOne(new Error('EPIPE')); // a failed write keeps its chunk: the socket may hold it
    expect(failed.toString()).toBe('zz');
  });
});
