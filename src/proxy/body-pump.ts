/**
 * Body chunks passed through, and their memory given back as soon as the shim is done with them
 * (issue 9 item 4: memory stays flat because the data plane holds less, not because of a flag).
 *
 * Every body chunk Node's HTTP parser delivers — an upstream response's, a client's request body's — is
 * a fresh copy of its own (`parser.execute` copies each body piece out of the bytes read), allocated
 * outside the V8 heap. Left to the garbage collector, such memory is freed only when a collection
 * finds the chunk dead: under load that is every bytes read during tens of milliseconds, and more for
 * chunks that live long enough to be promoted. Measured under 32 concurrent 1.4 MB lists: +56 to +96
 * MiB of peak RSS, most of it these chunks and the malloc fragments around them. Once a chunk has been copied
 * (a patch) or written to the socket (a pass-through), nothing references it any more, so the shim
 * releases it then — by detaching its `ArrayBuffer` (`transfer(0)`, ECMA-262 §25.1.6.8), which frees
 * the memory at once — and the allocator hands the same, still cached, memory to the next chunk.
 * bench/RESULTS.md has the figures; docs/reliability.md "Memory while streaming" the design.
 */
import { ownsMemory } from '../core/buffer-budget.ts';
import { isUpstreamReadBuffer } from './upstream-agent.ts';

/**
 * Frees a body chunk's memory now instead of at the next garbage collection, when the chunk owns all of
 * it: `chunk` then reads as empty (length 0). Memory shared with anything else is left alone: a slice
 * of a larger allocation (Node's 8 KiB pool for small buffers, a decoder's output, a subarray), a
 * `SharedArrayBuffer`, the upstream read buffer, or memory already detached.
 *
 * Only call it for a chunk nobody else can still read: one a stream delivered to its only `data`
 * listener (the caller), that was copied or fully written (its write callback ran without error).
 *
 * @param chunk A body chunk as a `data` event delivered it.
 * @returns Whether the memory was released. Never throws.
 */
export function releaseChunk(chunk: Buffer): boolean {
  const memory = chunk.buffer;
  if (!(memory instanceof ArrayBuffer) || memory.detached || chunk.byteLength === 0) return false;
  if (!ownsMemory(chunk) || isUpstreamReadBuffer(memory)) return false;
  memory.transfer(0);
  return true;
}

/** What {@link pumpBody} reads: an upstream response or a client's request body (`IncomingMessage`). */
export interface BodySource {
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  once(event: 'end', listener: () => void): unknown;
  pause(): unknown;
  resume(): unknown;
}

/** What {@link pumpBody} writes to: the client's `ServerResponse`, or the upstream `ClientRequest`. */
export interface BodyTarget {
  /** Queues `chunk`; `callback` runs once the socket has written it (with an error if it could not). */
  write(chunk: Buffer, callback: (err?: Error | null) => void): boolean;
  end(): unknown;
  once(event: 'drain' | 'close', listener: () => void): unknown;
  readonly destroyed: boolean;
  /** `end()` was called: nothing more may be written. */
  readonly writableEnded: boolean;
}

/**
 * Passes a body through unchanged, as `source.pipe(target)` does (a full target pauses the source until
 * `drain`; the source's end ends the target), but releases each chunk ({@link releaseChunk}) once the
 * socket has written it. The pump must be the source's only `data` listener. Errors are not its
 * business: the caller listens for the source's `error`/`close` and the target's `close`, as with
 * `pipe`, and destroys the other side.
 *
 * Measured (bench/RESULTS.md, 2026-11-25): on a 0.67 MB list passed through, 0.84× the CPU per request
 * of `pipe`; 32 concurrent 1.4 MB lists peaked at +19 MiB over idle instead of +79 to +96.
 *
 * A target that closes (destroyed, or done) never emits the `drain` a paused source waits for: the
 * source is resumed then, and the rest of its body read and dropped, as Node's server does with a
 * request body nobody reads (`IncomingMessage._dump`) and nginx with a body its upstream did not take
 * (`ngx_http_discard_request_body`). Without it, an upload whose upstream answered early and reset
 * (gunicorn; relayed since fix 59) kept the client's connection unread, its body half sent and its
 * exchange held, until the keep-alive timeout cut it (66 s) with a reset (docs/reliability.md fix 77).
 *
 * @param source The body's producer (its chunks are the caller's alone).
 * @param target Where the body goes.
 * @param start Called once, just before the first chunk is written or the target is ended (and not
 *   once the target was destroyed or ended by someone else): a response's head, written only when its
 *   body starts (relay-response.ts), so that a source failing before its first byte can still be answered.
 * @throws Nothing of its own; a target's failed write reaches only that write's callback.
 */
export function pumpBody(source: BodySource, target: BodyTarget, start?: () => void): void {
  const hold = pauseUntilDrain(source, target);
  let started = start === undefined;
  /** Runs `start` the first time; false when the target is destroyed (by it, or before). */
  const begin = (): boolean => {
    if (!started) {
      started = true;
      start?.();
    }
    return !target.destroyed;
  };
  target.once('close', () => {
    source.resume();
  });
  source.on('data', (chunk) => {
    if (target.destroyed || target.writableEnded || !begin()) return;
    const written = target.write(chunk, (err) => {
      if (!err) releaseChunk(chunk);
    });
    if (!written) hold();
  });
  source.once('end', () => {
    if (target.destroyed || target.writableEnded || !begin()) return;
    target.end();
  });
}

/**
 * Backpressure: returns a function to call when a write to `target` returned false; it pauses
 * `source` until `target` emits `drain`.
 * @param source What to pause: an `IncomingMessage`, or a decoder or encoder (response-patch.ts
 *   `pumpCodedPatch`).
 * @param target What to wait for: a `ServerResponse`, a `ClientRequest`, or a decoder or encoder.
 * @returns The function that pauses `source` until the next `drain`; it never throws.
 */
export function pauseUntilDrain(
  source: Pick<BodySource, 'pause' | 'resume'>,
  target: Pick<BodyTarget, 'once'>,
): () => void {
  let resume: (() => void) | undefined;
  return () => {
    source.pause();
    // Made on the first full buffer only: most bodies never need it.
    resume ??= () => {
      source.resume();
    };
    target.once('drain', resume);
  };
}
