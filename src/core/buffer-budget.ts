/**
 * The process-wide bound on bytes the shim holds in memory for rewrites and patches
 * (`MAX_BUFFERED_BYTES`, SPEC §2; issue 9 item 2). Every per-request buffer is also bounded on its own
 * (`MAX_REWRITE_BODY` for a body to rewrite, a plugin's own bound for the values its patch holds back);
 * this bounds their sum, so that many slow clients cannot together hold more than the limit. Also
 * {@link ownsMemory}: which buffers can be kept for reuse or released at once, whole.
 */
import type { BufferBudget } from './types.ts';

/**
 * Creates a budget of `limit` bytes.
 * @param limit Total bytes that may be reserved at once (positive integer).
 * @returns A {@link BufferBudget}; `tryReserve` is all-or-nothing, `release` never lets `used` go
 *   below 0 (a double release is a bug in the caller, but must not widen the budget).
 * @throws {RangeError} when `limit` is not a positive safe integer.
 * @example
 * const budget = createBufferBudget(64 * 1024 * 1024);
 * if (!budget.tryReserve(chunk.length)) throw new ShimError('buffer_budget', '…');
 */
export function createBufferBudget(limit: number): BufferBudget {
  if (!Number.isSafeInteger(limit) || limit <= 0) throw new RangeError(`invalid budget limit ${limit}`);
  let used = 0;
  return {
    tryReserve(bytes: number): boolean {
      if (bytes < 0 || used + bytes > limit) return false;
      used += bytes;
      return true;
    },
    release(bytes: number): void {
      used = Math.max(0, used - bytes);
    },
    get used() {
      return used;
    },
    limit,
  };
}

/**
 * The share of a budget that request bodies held for a rewrite may fill together: three quarters. The
 * last quarter is kept for the values that response patches hold, so that clients uploading slowly
 * (or many at once) can make the shim refuse rewrites (503) but never take the patches out of the
 * responses of other clients (`budget_exhausted`); patches may use the whole budget.
 * @param budget The process-wide budget.
 * @returns The ceiling, in bytes, for {@link Reservation}s of request bodies.
 * @throws Nothing.
 */
export function requestBodyCeiling(budget: BufferBudget): number {
  return requestBodyShare(budget.limit);
}

/**
 * Three quarters of a budget's limit ({@link requestBodyCeiling}), for the configuration's check that
 * the largest body to rewrite fits (`src/config.ts`).
 * @param limit `MAX_BUFFERED_BYTES`, in bytes.
 * @returns The bytes request bodies may hold together.
 * @throws Nothing.
 */
export function requestBodyShare(limit: number): number {
  return Math.floor((limit * 3) / 4);
}

/**
 * The use of a budget up to which a buffer kept only for reuse may still be reserved: a quarter of its
 * limit. Such buffers (a response patch's spare output, the pool of idle ones) save allocations and
 * collections, and hold nothing a response needs; a response that stalls keeps its spare for as long as
 * it lasts. Kept only while the budget's total use stays within this ceiling, they never take from
 * request bodies or from the values patches must hold the room the budget is for: without it, a few
 * hundred clients that stop reading patched responses (slowhttptest -X) filled the default 64 MiB with
 * spares, and every other patched response went out unpatched (`budget_exhausted`; docs/reliability.md
 * fix 89).
 * @param budget The process-wide budget.
 * @returns The ceiling, in bytes, on the budget's total use for reservations of reusable buffers.
 * @throws Nothing.
 */
export function reusableOutputCeiling(budget: BufferBudget): number {
  return Math.floor(budget.limit / 4);
}

/**
 * Reserves `bytes` for a buffer kept only for reuse ({@link reusableOutputCeiling}).
 * @param budget The process-wide budget.
 * @param bytes Bytes to reserve (non-negative).
 * @returns false, reserving nothing, when the budget's use would pass the ceiling (the caller then
 *   simply does not keep the buffer).
 * @throws Nothing.
 */
export function tryReserveReusable(budget: BufferBudget, bytes: number): boolean {
  return budget.used + bytes <= reusableOutputCeiling(budget) && budget.tryReserve(bytes);
}

/**
 * A reservation owned by one exchange: grows as bytes arrive and is released once, whatever the
 * exchange's fate (forwarded, rejected, aborted). It grows only while the budget's total use stays
 * within its `ceiling` (the whole budget unless given; request bodies: {@link requestBodyCeiling}).
 */
export class Reservation {
  private held = 0;
  private readonly budget: BufferBudget;
  private readonly ceiling: number;
  /**
   * An empty reservation.
   * @param budget The process-wide budget it reserves from.
   * @param ceiling The budget's total use, in bytes, up to which it may grow (default: the whole
   *   budget; request bodies: {@link requestBodyCeiling}).
   * @throws Nothing.
   */
  constructor(budget: BufferBudget, ceiling = budget.limit) {
    this.budget = budget;
    this.ceiling = ceiling;
  }

  /**
   * Whether `bytes` more would fit now (the budget's total use within the ceiling), reserving nothing.
   * @param bytes Bytes the caller may need.
   * @returns `true` when the budget's use plus `bytes` stays within the ceiling.
   * @throws Nothing.
   */
  fits(bytes: number): boolean {
    return this.budget.used + bytes <= this.ceiling;
  }

  /** Bytes held by this reservation. */
  get bytes(): number {
    return this.held;
  }

  /**
   * Reserves `bytes` more.
   * @param bytes Bytes to reserve (non-negative).
   * @returns false (and reserves nothing) when the budget has no room.
   * @throws Nothing.
   */
  grow(bytes: number): boolean {
    if (!this.fits(bytes) || !this.budget.tryReserve(bytes)) return false;
    this.held += bytes;
    return true;
  }

  /**
   * Gives `bytes` of what is held back to the budget (at most what is held): the end of a use that
   * needed room only for a while, such as a decoder's working memory.
   * @param bytes Bytes to give back (non-negative).
   * @throws Nothing.
   */
  shrink(bytes: number): void {
    const given = Math.min(bytes, this.held);
    this.budget.release(given);
    this.held -= given;
  }

  /**
   * Moves everything held to a new reservation of the same budget and ceiling, for another owner to
   * release; this one then holds nothing (its own release, still due, gives back nothing more). For a
   * rewritten body that outlives its exchange's response: an upstream that answered before the body
   * was all sent leaves the rest queued in its socket (upstream-attempt.ts; docs/reliability.md fix
   * 111).
   * @returns The new reservation, holding what this one held.
   * @throws Nothing.
   */
  transfer(): Reservation {
    const moved = new Reservation(this.budget, this.ceiling);
    moved.held = this.held;
    this.held = 0;
    return moved;
  }

  /** Returns everything held to the budget. Idempotent; never throws. */
  release(): void {
    if (this.held === 0) return;
    this.budget.release(this.held);
    this.held = 0;
  }
}

/**
 * Whether `buffer` spans the whole of its memory, rather than being a slice of a larger allocation
 * (Node's 8 KiB pool for buffers under 4 KiB, a decoder's output, a subarray): only such a buffer can
 * be released (proxy/body-pump.ts `releaseChunk`) or kept for reuse (a plugin's output pool) without
 * touching bytes something else holds.
 * @param buffer Any buffer.
 * @returns True when its offset is 0 and its length that of its `ArrayBuffer`. Never throws.
 * @example
 * ownsMemory(Buffer.alloc(8192)) // → true
 * ownsMemory(Buffer.alloc(8192).subarray(1)) // → false
 */
export function ownsMemory(buffer: Buffer): boolean {
  return buffer.byteOffset === 0 && buffer.byteLength === buffer.buffer.byteLength;
}
