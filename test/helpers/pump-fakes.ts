/**
 * Fake upstream responses and client responses for the pumps (src/proxy/response-patch.ts `pumpPatch`,
 * `pumpCodedPatch`; the source also for body-pump.ts `pumpBody`): no sockets, every write and callback
 * in the test's hands.
 */
import { EventEmitter } from 'node:events';
import { expect } from 'vitest';

/** An upstream response body: the test emits `data`, `end` and `error`. */
export class FakeSource extends EventEmitter {
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

/** A queued write: its bytes (as given), what they were when written, and its callback. */
interface Queued {
  bytes: Buffer;
  copy: string;
  callback: ((err?: Error | null) => void) | undefined;
}

/**
 * A client response: records what is written (as strings, and the raw bytes), says it is full when
 * told to, and keeps each write queued until the test lets the "socket" write it.
 */
export class FakeTarget extends EventEmitter {
  written: string[] = [];
  /** The body bytes written, in order. */
  bytes: Buffer[] = [];
  headersSent = false;
  destroyed = false;
  writableEnded = false;
  writableFinished = false;
  full = false;
  /** Writes whose callback has not run: the socket still holds their bytes. */
  queued: Queued[] = [];
  /** The bytes `end` was given, if any (written with the end of the response). */
  endChunk: string | undefined;
  write(chunk: Buffer, callback?: (err?: Error | null) => void) {
    this.written.push(chunk.toString());
    this.bytes.push(Buffer.from(chunk));
    this.queued.push({ bytes: chunk, copy: chunk.toString(), callback });
    return !this.full;
  }
  /** The socket wrote the oldest queued write: its bytes must still be those written. */
  flushOne(err?: Error) {
    const write = this.queued.shift();
    if (write === undefined) throw new Error('nothing queued');
    expect(write.bytes.toString()).toBe(write.copy);
    write.callback?.(err);
  }
  /** Ends the response, after `chunk` (recorded as a write); `callback` as Node calls it, on `finish`. */
  end(chunk?: Buffer, callback?: () => void) {
    if (chunk !== undefined) {
      this.endChunk = chunk.toString();
      this.written.push(chunk.toString());
      this.bytes.push(Buffer.from(chunk));
    }
    this.writableEnded = true;
    this.writableFinished = true;
    this.written.push('<end>');
    this.emit('finish');
    callback?.();
  }
}

/**
 * Resolves once the microtasks queued before the call have run: `pumpPatch` writes each output in the
 * microtask after its chunk's `data` event (response-patch.ts).
 */
export async function queuedWrites(): Promise<void> {
  await Promise.resolve();
}
