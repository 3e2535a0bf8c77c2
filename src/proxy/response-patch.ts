/**
 * The response-patch seam (SPEC §6; issue 9 item 1): the plugins' streaming patches of one response
 * body, chained, as a Transform between the decoder and the encoder. Bytes leave as they arrive;
 * only what a patch holds back (bounded by the patch itself) stays in memory.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { pauseUntilDrain, releaseChunk } from './body-pump.ts';
import type { PatchOutcome, ResponsePatch } from './types.ts';

/**
 * Chains patches: what the first returns for a chunk is written to the second, and so on; what the
 * last returns goes out. One patch is returned as it is.
 * @param patches At least one patch, in plugin order.
 * @returns A patch whose `outcome` is the first `skipped` outcome, else `patched` when any patched,
 *   else `unchanged`.
 * @throws {RangeError} for an empty list.
 */
export function chainPatches(patches: readonly ResponsePatch[]): ResponsePatch {
  if (patches.length === 0) throw new RangeError('chainPatches needs at least one patch');
  if (patches.length === 1) return patches[0] as ResponsePatch;
  const feed = (from: number, chunk: Buffer): Buffer => {
    let bytes = chunk;
    for (let i = from; i < patches.length && bytes.length > 0; i++)
      bytes = (patches[i] as ResponsePatch).write(bytes);
    return bytes;
  };
  return {
    write(chunk) {
      return feed(0, chunk);
    },
    end() {
      // What each patch still held goes through the patches after it, before they end in turn.
      const out: Buffer[] = [];
      for (let i = 0; i < patches.length; i++) {
        const bytes = feed(i + 1, (patches[i] as ResponsePatch).end());
        if (bytes.length > 0) out.push(bytes);
      }
      return out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out);
    },
    recycle(bytes) {
      // Only what the last patch returned reaches the caller; earlier outputs may be held by later patches.
      (patches[patches.length - 1] as ResponsePatch).recycle?.(bytes);
    },
    destroy() {
      for (const p of patches) p.destroy();
    },
    get outcome(): PatchOutcome {
      return combinedOutcome(patches.map((p) => p.outcome));
    },
  };
}

/**
 * The outcome of several patches of one body: the first `skipped`, else `patched` if any, else `unchanged`.
 */
export function combinedOutcome(outcomes: readonly PatchOutcome[]): PatchOutcome {
  let patched = false;
  for (const o of outcomes) {
    if (o.kind === 'skipped') return o;
    if (o.kind === 'patched') patched = true;
  }
  return patched ? { kind: 'patched' } : { kind: 'unchanged' };
}

/**
 * A patch as a stream stage (decoded bytes in, patched bytes out). Destroying the stage (client gone,
 * upstream failed) destroys the patch, which releases what it holds. The chunks written to it must be
 * its own, as a decoder's output is: a chunk the patch copied is released at once (body-pump.ts).
 */
export class PatchStream extends Transform {
  readonly patch: ResponsePatch;
  private readonly onEnd: ((outcome: PatchOutcome) => void) | undefined;
  /** Chunks passed on as they came, until the next stage has consumed them (see {@link feeds}). */
  private passed: Set<Buffer> | undefined;

  /**
   * @param patch The (chained) patch of this response.
   * @param onEnd Told the final outcome when the body ended, before the last bytes go out (so that the
   *   request log line, written when the response finishes, already knows it).
   */
  constructor(patch: ResponsePatch, onEnd?: (outcome: PatchOutcome) => void) {
    super();
    this.patch = patch;
    this.onEnd = onEnd;
  }

  /**
   * Makes `next`, the stage this one pipes into, report each chunk it has consumed: from then on the
   * patch gets its output buffer back (`recycle`) once `next` has consumed it, and a chunk the patch
   * passed on as it came is released then (body-pump.ts `releaseChunk`), as {@link pumpPatch} does
   * once the socket has written them. A chunk the patch copied is released at once in any case.
   * Without it, every patched chunk of a coded response got a new output buffer (a 1.4 MB gzip list:
   * ~22 of ~110 KiB each), left to the garbage collector.
   * @param next A `node:zlib` stream (the response's encoder): by the time its `_transform` calls back
   *   without an error, zlib has copied the chunk into its own window and dropped its reference.
   *   Wraps `next._transform`. Never throws.
   * @returns `next`, for the pipeline.
   */
  feeds<T extends Transform>(next: T): T {
    const passed = new Set<Buffer>();
    this.passed = passed;
    const transform = next._transform;
    next._transform = (chunk: Buffer, encoding: BufferEncoding, callback: TransformCallback) => {
      transform.call(next, chunk, encoding, (err?: Error | null, data?: unknown) => {
        if (!err && chunk.length > 0) {
          if (passed.delete(chunk)) releaseChunk(chunk);
          else this.patch.recycle?.(chunk);
        }
        callback(err, data);
      });
    };
    return next;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, callback: TransformCallback): void {
    const bytes = this.patch.write(chunk);
    // The patch has copied what it needs of a chunk it did not pass on (body-pump.ts).
    if (bytes !== chunk) releaseChunk(chunk);
    else if (this.passed !== undefined && bytes.length > 0) this.passed.add(chunk);
    if (bytes.length > 0) this.push(bytes);
    callback();
  }

  override _flush(callback: TransformCallback): void {
    const bytes = this.patch.end();
    if (bytes.length > 0) this.push(bytes);
    this.onEnd?.(this.patch.outcome);
    callback();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.patch.destroy();
    this.passed?.clear();
    callback(err);
  }
}

/** What {@link pumpPatch} writes to: the client's response (a `ServerResponse` in the shim). */
export interface PatchTarget {
  /** Queues `chunk`; `callback` runs once the socket has written it (with an error if it could not). */
  write(chunk: Buffer, callback?: (err?: Error | null) => void): boolean;
  end(): void;
  once(event: 'drain' | 'close', listener: () => void): unknown;
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  readonly writableFinished: boolean;
}

/**
 * What {@link pumpPatch} reads from: the upstream's response body (an `IncomingMessage`), whose chunks
 * nothing else reads.
 */
export interface PatchSource {
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  once(event: 'end', listener: () => void): unknown;
  once(event: 'error', listener: (err: Error) => void): unknown;
  pause(): unknown;
  resume(): unknown;
  destroy(): unknown;
}

/**
 * Patches an uncoded response body from `source` to `target` without a stream pipeline: each
 * upstream chunk goes through `patch.write`, and what it returns is written at once as one HTTP chunk
 * (the head just before the first byte, or at the end of an empty body); a full client buffer pauses
 * the upstream until `drain`. Measured (bench/RESULTS.md): `stream.pipeline` with a Transform and a
 * Writable per patched response cost ~35 % of a patched 1.5 KB GET (Node's pipeline creates and aborts
 * an AbortController, with a DOMException, per call); this does the same work with four listeners.
 * A chunk the patch did not return as it is has been copied, so its memory is released at once, and
 * one it passed on once the socket has written it (body-pump.ts `releaseChunk`): `source` must hand
 * its chunks to this function alone.
 *
 * @param patch The (chained) patch of this response; destroyed when the exchange is abandoned.
 * @param writeHead Writes the response head; called once, before the first body byte.
 * @param onEnd Told the final outcome when the body ended, before the response ends.
 * @param onError The upstream failed mid-body while the client is still there (502/504 if nothing was
 *   sent, else an abort: the caller decides). Not called after the client went away.
 */
export function pumpPatch(
  source: PatchSource,
  target: PatchTarget,
  patch: ResponsePatch,
  writeHead: () => void,
  onEnd: (outcome: PatchOutcome) => void,
  onError: (err: Error) => void,
): void {
  const hold = pauseUntilDrain(source, target);
  source.on('data', (chunk) => {
    const bytes = patch.write(chunk);
    // The patch has copied what it needs of a chunk it did not pass on (body-pump.ts).
    if (bytes !== chunk) releaseChunk(chunk);
    if (bytes.length === 0 || target.destroyed) return;
    if (!target.headersSent) writeHead();
    // Once the socket has written them (not on an error: then it may not be done with them), a chunk
    // passed on is released, and a buffer of the patch's own goes back to it for its next chunk.
    const written = target.write(bytes, (err) => {
      if (err) return;
      if (bytes === chunk) releaseChunk(chunk);
      else patch.recycle?.(bytes);
    });
    if (!written) hold();
  });
  source.once('end', () => {
    const bytes = patch.end();
    onEnd(patch.outcome);
    if (target.destroyed) return;
    if (!target.headersSent) writeHead();
    if (bytes.length > 0) target.write(bytes);
    target.end();
  });
  source.once('error', (err) => {
    patch.destroy();
    if (target.destroyed && !target.writableFinished) return; // the client went away: nothing to say
    onError(err);
  });
  target.once('close', () => {
    if (target.writableFinished) return;
    patch.destroy();
    source.destroy();
  });
}
