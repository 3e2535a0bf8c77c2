/**
 * pumpPatch (src/proxy/response-patch.ts): the patched path for an uncoded body, with fake source and
 * target objects (no sockets).
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import { pumpPatch } from '../../../src/proxy/response-patch.ts';
import type { PatchOutcome, ResponsePatch } from '../../../src/proxy/types.ts';

/** Upper-cases every chunk; emits `!` at the end. */
function upperPatch(): ResponsePatch & { destroyed: number } {
  return {
    destroyed: 0,
    write(chunk, emit) {
      emit(Buffer.from(chunk.toString().toUpperCase()));
    },
    end(emit) {
      emit(Buffer.from('!'));
    },
    destroy() {
      this.destroyed++;
    },
    outcome: { kind: 'patched' } as PatchOutcome,
  };
}

class FakeSource extends EventEmitter {
  paused = false;
  destroyed = false;
  pause() {
    this.paused = true;
  }
  resume() {
    this.paused = false;
  }
  destroy() {
    this.destroyed = true;
  }
}

class FakeTarget extends EventEmitter {
  written: string[] = [];
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  full = false;
  write(chunk: Buffer) {
    this.written.push(chunk.toString());
    return !this.full;
  }
  end() {
    this.writableFinished = true;
    this.written.push('<end>');
  }
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
  pumpPatch(source, target, patch, writeHead, onEnd, onError);
  return { source, target, patch, writeHead, onEnd, onError };
}

describe('pumpPatch', () => {
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

  it('pauses the upstream while the client buffer is full and resumes on drain', () => {
    const { source, target } = setUp();
    target.full = true;
    source.emit('data', Buffer.from('a'));
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
});
