/**
 * Small statistics and formatting helpers of the benchmark (pure, unit-tested).
 */

/**
 * The median of a list of numbers (mean of the two middle values for an even count).
 * @returns `NaN` for an empty list.
 */
export function median(values: readonly number[]): number {
  const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (finite.length === 0) return Number.NaN;
  const mid = finite.length >> 1;
  return finite.length % 2 === 1 ? finite[mid]! : (finite[mid - 1]! + finite[mid]!) / 2;
}

/**
 * Formats a number with a fixed number of decimals; `NaN` and infinities print as `–`.
 * @example fixed(0.4567, 2) // '0.46'
 */
export function fixed(value: number | undefined, digits: number): string {
  if (value === undefined || !Number.isFinite(value)) return '–';
  return value.toFixed(digits);
}

/**
 * Renders a GitHub-flavoured Markdown table.
 * @param header Column titles.
 * @param rows Cells, already formatted.
 */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}
