/**
 * The response-patch seam (SPEC §6; issue 9 item 1): the plugins' streaming patches of one response
 * body, chained, as a Transform between the decoder and the encoder. Bytes leave as they arrive;
 * only what a patch holds back (bounded by the patch itself) stays in memory.
 */
import { Transform, type TransformCallback } from 'node:stream';
import type { PatchOutcome, ResponsePatch } from './types.ts';

/**
 * Chains patches: the bytes the first emits are written to the second, and so on; what the last
 * emits goes out. One patch is returned as it is.
 * @param patches At least one patch, in plugin order.
 * @returns A patch whose `outcome` is the first `skipped` outcome, else `patched` when any patched,
 *   else `unchanged`.
 * @throws {RangeError} for an empty list.
 */
export function chainPatches(patches: readonly ResponsePatch[]): ResponsePatch {
  if (patches.length === 0) throw new RangeError('chainPatches needs at least one patch');
  if (patches.length === 1) return patches[0] as ResponsePatch;
  return {
    write(chunk, emit) {
      feed(patches, 0, chunk, emit);
    },
    end(emit) {
      for (let i = 0; i < patches.length; i++) {
        const next = (bytes: Buffer) => feed(patches, i + 1, bytes, emit);
        (patches[i] as ResponsePatch).end(i === patches.length - 1 ? emit : next);
      }
    },
    destroy() {
      for (const p of patches) p.destroy();
    },
    get outcome(): PatchOutcome {
      return combinedOutcome(patches.map((p) => p.outcome));
    },
  };
}

function feed(patches: readonly ResponsePatch[], i: number, chunk: Buffer, emit: (b: Buffer) => void): void {
  if (i === patches.length) {
    emit(chunk);
    return;
  }
  (patches[i] as ResponsePatch).write(chunk, (bytes) => feed(patches, i + 1, bytes, emit));
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
 * upstream failed) destroys the patch, which releases what it holds.
 */
export class PatchStream extends Transform {
  readonly patch: ResponsePatch;
  private readonly onEnd: ((outcome: PatchOutcome) => void) | undefined;
  private readonly out = (bytes: Buffer): void => {
    if (bytes.length > 0) this.push(bytes);
  };

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

  override _transform(chunk: Buffer, _enc: BufferEncoding, callback: TransformCallback): void {
    this.patch.write(chunk, this.out);
    callback();
  }

  override _flush(callback: TransformCallback): void {
    this.patch.end(this.out);
    this.onEnd?.(this.patch.outcome);
    callback();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.patch.destroy();
    callback(err);
  }
}
