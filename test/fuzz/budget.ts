/**
 * The fuzzing budget. The normal test run uses a short one (`FUZZ_RUNS` unset: 200 runs per
 * property); `npm run fuzz` sets `FUZZ_RUNS` (default 20,000) for a long one. `FUZZ_SEED` replays a
 * failure that fast-check reported (with `FUZZ_PATH` for its shrunk counterexample path).
 */
import type fc from 'fast-check';

/** Runs per property at weight 1. */
export const FUZZ_RUNS: number = Number(process.env.FUZZ_RUNS ?? 200);

/** A per-test timeout that grows with the budget, in ms (at least the suite's 30 s). */
export const FUZZ_TIMEOUT_MS: number = Math.max(30_000, FUZZ_RUNS * 10);

/**
 * fast-check parameters for one property.
 * @param weight Fraction of {@link FUZZ_RUNS} for an expensive property (e.g. `0.25`).
 * @example
 * fc.assert(fc.property(fc.string(), (s) => { … }), fuzzParams());
 */
export function fuzzParams<T>(weight = 1): fc.Parameters<T> {
  const params: fc.Parameters<T> = { numRuns: Math.max(10, Math.round(FUZZ_RUNS * weight)) };
  if (process.env.FUZZ_SEED) params.seed = Number(process.env.FUZZ_SEED);
  if (process.env.FUZZ_PATH) params.path = process.env.FUZZ_PATH;
  return params;
}
