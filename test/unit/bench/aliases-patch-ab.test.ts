/**
 * The A/B summary of bench/aliases-patch-throughput.ts `--baseline` (pure: no process is run here).
 */
import { describe, expect, it } from 'vitest';
import { summarizePatchAb } from '../../../bench/aliases-patch-throughput.ts';

describe('summarizePatchAb', () => {
  it('takes the median of each tree and of the per-round ratios, not the ratio of the medians', () => {
    const rounds = [
      { base: 1000, candidate: 900 }, // 0.9
      { base: 2000, candidate: 1000 }, // 0.5: a noisy round for the baseline
      { base: 1100, candidate: 1045 }, // 0.95
    ];
    expect(summarizePatchAb(rounds)).toEqual({ base: 1100, candidate: 1000, ratio: 0.9 });
  });

  it('gives NaN for no rounds', () => {
    const summary = summarizePatchAb([]);
    expect(Number.isNaN(summary.base) && Number.isNaN(summary.candidate) && Number.isNaN(summary.ratio)).toBe(
      true,
    );
  });
});
