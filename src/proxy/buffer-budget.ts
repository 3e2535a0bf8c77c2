/**
 * The process-wide bound on bytes the shim holds in memory for rewrites and patches
 * (`MAX_BUFFERED_BYTES`, SPEC §2; issue 9 item 2). Every per-request buffer is also bounded on its own
 * (`MAX_REWRITE_BODY` for a body to rewrite, a plugin's own bound for the values its patch holds back);
 * this bounds their sum, so that many slow clients cannot together hold more than the limit.
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
 * A reservation owned by one exchange: grows as bytes arrive and is released once, whatever the
 * exchange's fate (forwarded, rejected, aborted).
 */
export class Reservation {
  private held = 0;
  private readonly budget: BufferBudget;
  constructor(budget: BufferBudget) {
    this.budget = budget;
  }

  /** Bytes held by this reservation. */
  get bytes(): number {
    return this.held;
  }

  /**
   * Reserves `bytes` more.
   * @returns false (and reserves nothing) when the budget has no room.
   */
  grow(bytes: number): boolean {
    if (!this.budget.tryReserve(bytes)) return false;
    this.held += bytes;
    return true;
  }

  /** Returns everything held to the budget. Idempotent. */
  release(): void {
    if (this.held === 0) return;
    this.budget.release(this.held);
    this.held = 0;
  }
}
