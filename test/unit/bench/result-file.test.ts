import { describe, expect, it } from 'vitest';
import { resultFilePath } from '../../../bench/lib/result-file.ts';

describe('resultFilePath', () => {
  it("is the day's file for the day's first run", () => {
    expect(resultFilePath('bench/results', '2026-11-26', () => false)).toBe('bench/results/2026-11-26.md');
  });

  it('never overwrites a run of the same day: the next free letter', () => {
    const taken = new Set(['r/2026-11-26.md', 'r/2026-11-26-b.md', 'r/2026-11-26-d.md']);
    expect(resultFilePath('r', '2026-11-26', (p) => taken.has(p))).toBe('r/2026-11-26-c.md');
  });

  it('throws when every name of the day is taken', () => {
    expect(() => resultFilePath('r', '2026-11-26', () => true)).toThrow(/26 runs of 2026-11-26/);
  });
});
