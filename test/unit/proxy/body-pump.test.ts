/**
 * releaseChunk and pumpBody (src/proxy/body-pump.ts), with plain buffers and fake streams (no sockets):
 * which memory is released and which is left alone, and that a chunk is released only after its
 * write completed. The same on real sockets, with byte-exact bodies under backpressure:
 * test/e2e/released-chunks.test.ts.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { pumpBody, releaseChunk } from '../../../src/proxy/body-pump.ts';
import { upstreamReadBuffer } from '../../../src/proxy/upstream-agent.ts';
import { FakeSource } from '../../helpers/pump-fakes.ts';

/** A chunk as Node's HTTP parser delivers one: memory of its own, exactly its size. */
function ownChunk(text: string): Buffer {
  const chunk = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  chunk.write(text);
  return chunk;
}

describe('releaseChunk', () => {
  it('frees memory the chunk owns whole: the chunk then reads as empty', () => {
    const chunk = ownChunk('x'.repeat(65536));
    const memory = chunk.buffer as ArrayBuffer;
    expect(releaseChunk(chunk)).toBe(true);
    expect(memory.detached).toBe(true);
    expect(chunk.length).toBe(0);
  });

  it("leaves alone a small buffer from Node's shared pool", () => {
    const pooled = Buffer.from('abc'); // a slice of the 8 KiB pool
    const neighbour = Buffer.from('def');
    expect(releaseChunk(pooled)).toBe(false);
    expect(pooled.toString()).toBe('abc');
    expect(neighbour.toString()).toBe('def');
  });

  it('leaves alone a view of part of a larger buffer, and the buffer', () => {
    const whole = ownChunk('0123456789');
    const view = whole.subarray(2, 6);
    expect(releaseChunk(view)).toBe(false);
    expect(whole.toString()).toBe('0123456789');
    expect(view.toString()).toBe('2345');
  });

  it('leaves alone a view that starts at 0 but is shorter than its memory', () => {
    const whole = ownChunk('0123456789');
    expect(releaseChunk(whole.subarray(0, 9))).toBe(false);
    expect(whole.toString()).toBe('0123456789');
  });

  it('leaves alone shared memory, detached memory and an empty chunk', () => {
    const shared = Buffer.from(new SharedArrayBuffer(8));
    shared.write('shared!!');
    expect(releaseChunk(shared)).toBe(false);
    expect(shared.toString()).toBe('shared!!');

    const chunk = ownChunk('gone');
    expect(releaseChunk(chunk)).toBe(true);
    expect(releaseChunk(chunk)).toBe(false);

    expect(releaseChunk(Buffer.allocUnsafeSlow(0))).toBe(false);
  });

  it('never releases the buffer every upstream socket reads into, even given whole', () => {
    const readBuffer = upstreamReadBuffer();
    readBuffer.fill(7);
    expect(releaseChunk(readBuffer)).toBe(false);
    expect((readBuffer.buffer as ArrayBuffer).detached).toBe(false);
    expect(readBuffer[readBuffer.length - 1]).toBe(7);
  });
});

/** A socket-like target: writes stay queued (their memory in use) until `flushOne`. */
class FakeTarget extends EventEmitter {
  destroyed = false;
  full = false;
  ended = false;
  get writableEnded() {
    return this.ended;
  }
  written: string[] = [];
  queued: Array<{ chunk: Buffer; callback: (err?: Error | null) => void }> = [];
  write(chunk: Buffer, callback: (err?: Error | null) => void) {
    this.written.push(chunk.toString());
    this.queued.push({ chunk, callback });
    return !this.full;
  }
  /** The socket wrote the oldest queued chunk: its bytes must still be there until then. */
  flushOne(err?: Error) {
    const write = this.queued.shift();
    if (write === undefined) throw new Error('nothing queued');
    expect(write.chunk.length).toBeGreaterThan(0);
    write.callback(err);
    return write.chunk;
  }
  end() {
    this.ended = true;
  }
}

function setUp() {
  const source = new FakeSource();
  const target = new FakeTarget();
  pumpBody(source, target);
  return { source, target };
}

describe('pumpBody', () => {
  it('writes every chunk in order and ends the target at the end of the source', () => {
    const { source, target } = setUp();
    source.emit('data', ownChunk('ab'));
    source.emit('data', ownChunk('cd'));
    source.emit('end');
    expect(target.written).toEqual(['ab', 'cd']);
    expect(target.ended).toBe(true);
  });

  it('releases a chunk only once the socket has written it', () => {
    const { source, target } = setUp();
    const first = ownChunk('first');
    const second = ownChunk('second');
    source.emit('data', first);
    source.emit('data', second);
    expect(first.toString()).toBe('first'); // still queued: still intact
    expect(target.flushOne()).toBe(first);
    expect((first.buffer as ArrayBuffer).detached).toBe(true);
    expect(second.toString()).toBe('second');
    target.flushOne();
    expect((second.buffer as ArrayBuffer).detached).toBe(true);
  });

  it('does not release a chunk whose write failed (the socket may still hold it)', () => {
    const { source, target } = setUp();
    const chunk = ownChunk('kept');
    source.emit('data', chunk);
    target.flushOne(new Error('EPIPE'));
    expect(chunk.toString()).toBe('kept');
  });

  it('pauses the source while the target is full and resumes it on drain', () => {
    const { source, target } = setUp();
    target.full = true;
    source.emit('data', ownChunk('a'));
    expect(source.paused).toBe(true);
    target.emit('drain');
    expect(source.paused).toBe(false);
    source.emit('data', ownChunk('b'));
    target.emit('drain');
    expect(source.paused).toBe(false);
    expect(target.listenerCount('drain')).toBe(0);
  });

  it('writes nothing more, and does not end, once the target is destroyed', () => {
    const { source, target } = setUp();
    source.emit('data', ownChunk('a'));
    target.destroyed = true;
    source.emit('data', ownChunk('b'));
    source.emit('end');
    expect(target.written).toEqual(['a']);
    expect(target.ended).toBe(false);
  });
});

describe('pumpBody — start (a response head written when its body starts)', () => {
  function started() {
    const source = new FakeSource();
    const target = new FakeTarget();
    const calls: string[] = [];
    const start = () => calls.push(`start after ${target.written.length} writes`);
    pumpBody(source, target, start);
    return { source, target, calls };
  }

  it('runs once, just before the first chunk is written', () => {
    const { source, target, calls } = started();
    expect(calls).toEqual([]);
    source.emit('data', ownChunk('a'));
    source.emit('data', ownChunk('b'));
    source.emit('end');
    expect(calls).toEqual(['start after 0 writes']);
    expect(target.written).toEqual(['a', 'b']);
    expect(target.ended).toBe(true);
  });

  it('runs before the end of an empty body', () => {
    const { source, target, calls } = started();
    source.emit('end');
    expect(calls).toEqual(['start after 0 writes']);
    expect(target.ended).toBe(true);
  });

  it('does not run once the target was ended or destroyed by someone else (the shim answered 502)', () => {
    const ended = started();
    ended.target.ended = true;
    ended.source.emit('data', ownChunk('a'));
    ended.source.emit('end');
    expect(ended.calls).toEqual([]);
    expect(ended.target.written).toEqual([]);
    const destroyed = started();
    destroyed.target.destroyed = true;
    destroyed.source.emit('end');
    expect(destroyed.calls).toEqual([]);
  });

  it('writes nothing when start destroyed the target (a head Node refused)', () => {
    const source = new FakeSource();
    const target = new FakeTarget();
    pumpBody(source, target, () => {
      target.destroyed = true;
    });
    source.emit('data', ownChunk('a'));
    source.emit('end');
    expect(target.written).toEqual([]);
    expect(target.ended).toBe(false);
    // An empty body: start runs at the end, and a destroyed target is not ended.
    const empty = new FakeSource();
    const refused = new FakeTarget();
    pumpBody(empty, refused, () => {
      refused.destroyed = true;
    });
    empty.emit('end');
    expect(refused.ended).toBe(false);
  });
});
