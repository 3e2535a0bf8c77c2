import { describe, expect, it } from 'vitest';
import { fixed, markdownTable, median } from '../../../bench/lib/stats.ts';

describe('bench statistics', () => {
  it('takes the median of odd and even counts, ignoring non-finite values', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([1, Number.NaN, 3])).toBe(2);
    expect(median([])).toBeNaN();
  });

  it('formats numbers and missing values', () => {
    expect(fixed(0.4567, 2)).toBe('0.46');
    expect(fixed(Number.NaN, 1)).toBe('–');
    expect(fixed(undefined, 1)).toBe('–');
  });

  it('renders a Markdown table', () => {
    expect(markdownTable(['a', 'b'], [['1', '2']])).toBe('| a | b |\n| --- | --- |\n| 1 | 2 |');
  });
});
