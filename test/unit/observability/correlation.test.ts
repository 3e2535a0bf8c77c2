import { describe, expect, it } from 'vitest';
import { requestIdOf, traceIdOf } from '../../../src/observability/correlation.ts';

describe('requestIdOf', () => {
  it.each([
    'b7ad6b7169203331',
    '4bf92f35-77b3-4da6-a3ce-929d0e0e4736',
    'Root=1-67891233-abcdef012345678912345678',
    'x'.repeat(128),
  ])('logs %s', (id) => {
    expect(requestIdOf(id)).toBe(id);
  });

  it.each<[string, string | string[] | undefined]>([
    ['absent', undefined],
    ['empty', ''],
    ['two field lines, joined by Node', 'a, b'],
    ['an array', ['a', 'b']],
    ['longer than 128', 'x'.repeat(129)],
    ['a control character', 'a\tb'],
    ['a non-ASCII character', 'añb'],
  ])('ignores %s', (_what, value) => {
    expect(requestIdOf(value)).toBeUndefined();
  });
});

describe('traceIdOf', () => {
  const trace = '4bf92f3577b34da6a3ce929d0e0e4736';

  it('reads the trace id of a version-00 traceparent', () => {
    expect(traceIdOf(`00-${trace}-00f067aa0ba902b7-01`)).toBe(trace);
  });

  it('reads a later version with more fields (W3C Trace Context §3.2.4)', () => {
    expect(traceIdOf(`01-${trace}-00f067aa0ba902b7-01-extra`)).toBe(trace);
  });

  it.each<[string, string | undefined]>([
    ['absent', undefined],
    ['version ff', `ff-${trace}-00f067aa0ba902b7-01`],
    ['version 00 with more fields', `00-${trace}-00f067aa0ba902b7-01-extra`],
    ['an all-zero trace id', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`],
    ['an all-zero parent id', `00-${trace}-${'0'.repeat(16)}-01`],
    ['upper-case hex', `00-${trace.toUpperCase()}-00f067aa0ba902b7-01`],
    ['a short trace id', `00-${trace.slice(1)}-00f067aa0ba902b7-01`],
    ['two field lines, joined by Node', `00-${trace}-00f067aa0ba902b7-01, 00-${trace}-00f067aa0ba902b7-01`],
  ])('ignores %s', (_what, value) => {
    expect(traceIdOf(value)).toBeUndefined();
  });
});
