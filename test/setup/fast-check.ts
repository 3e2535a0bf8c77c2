/**
 * fast-check's seed for the normal test run: fixed, so that `npm test` (and CI) checks the same
 * generated cases every time and a red run is always reproducible. The long fuzzing run
 * (`npm run fuzz`, which sets `FUZZ_RUNS`) keeps fast-check's random seed to explore new cases;
 * `FUZZ_SEED` replays one (test/fuzz/budget.ts).
 */
import fc from 'fast-check';

if (process.env.FUZZ_RUNS === undefined) {
  fc.configureGlobal({ seed: Number(process.env.FUZZ_SEED ?? 20261121) });
}
