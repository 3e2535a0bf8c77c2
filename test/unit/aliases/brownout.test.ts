/**
 * Brownout schedules (issue 11 item 2): ISO 8601 intervals in both forms, validated at start; the
 * active window for an injected instant.
 */
import { describe, expect, it } from 'vitest';
import {
  activeBrownout,
  type BrownoutWindow,
  brownoutWarning,
  parseBrownouts,
  parseDuration,
} from '../../../src/aliases/brownout.ts';

const at = (iso: string) => Date.parse(iso);
const windowsOf = (text: string): BrownoutWindow[] => {
  const result = parseBrownouts(text);
  if ('problems' in result) throw new Error(result.problems.join('\n'));
  return result.windows;
};
const problemsOf = (text: string): string[] => {
  const result = parseBrownouts(text);
  return 'problems' in result ? result.problems : [];
};

describe('parseDuration', () => {
  it.each<[string, number | undefined]>([
    ['PT1H', 3_600_000],
    ['PT30M', 1_800_000],
    ['PT0.5S', 500],
    ['PT0.125S', 125], // at most three decimals: milliseconds (docs/configuration.md ALIAS_BROWNOUTS)
    ['PT0.1234S', undefined],
    ['PT1.S', undefined],
    ['P1D', 86_400_000],
    ['P1W', 7 * 86_400_000],
    ['P1DT2H3M4S', 93_784_000],
    ['P12W', 12 * 7 * 86_400_000],
    ['P10DT36H', 10 * 86_400_000 + 36 * 3_600_000],
    ['PT90.125S', 90_125],
    ['PT0S', 0],
    ['P', undefined],
    ['PT', undefined],
    ['P1M', undefined], // a month has no fixed length
    ['P1Y', undefined],
    ['1H', undefined],
    ['PT-1H', undefined],
    ['XPT1H', undefined], // the whole text, not a duration inside it
    ['PT1HX', undefined],
  ])('%s → %s', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });
});

describe('parseBrownouts', () => {
  it('reads start/duration and start/end, sorted by start', () => {
    expect(windowsOf('2027-01-19T14:00Z/2027-01-19T18:00Z, 2027-01-12T14:00Z/PT1H')).toEqual([
      { start: at('2027-01-12T14:00Z'), end: at('2027-01-12T15:00Z'), text: '2027-01-12T14:00Z/PT1H' },
      {
        start: at('2027-01-19T14:00Z'),
        end: at('2027-01-19T18:00Z'),
        text: '2027-01-19T14:00Z/2027-01-19T18:00Z',
      },
    ]);
  });

  it('honours time-zone offsets', () => {
    expect(windowsOf('2027-01-12T15:00:00+01:00/PT1H')[0]!.start).toBe(at('2027-01-12T14:00Z'));
  });

  it('accepts any number of fraction digits and a lower-case t and z (RFC 3339 §5.6)', () => {
    expect(windowsOf('2027-01-12T14:00:00.1234Z/PT1H')[0]!.start).toBe(at('2027-01-12T14:00:00.123Z'));
    expect(windowsOf('2027-01-12t14:00z/PT1H')[0]!.start).toBe(at('2027-01-12T14:00Z'));
  });

  it('accepts windows that touch', () => {
    expect(windowsOf('2027-01-12T14:00Z/PT1H,2027-01-12T15:00Z/PT1H')).toHaveLength(2);
  });

  it.each<[string, RegExp]>([
    ['2027-01-12T14:00Z', /not an interval/],
    ['2027-01-12/PT1H', /not an interval.*2027-01-12 is a date alone/], // a date is no instant here
    ['2027-01-12T14:00Z/2027-01-13', /neither a duration nor a date-time.*2027-01-13 is a date alone/],
    ['2027-01-12T14:00/PT1H', /not an interval/], // no zone
    ['2027-01-12T14:00Z/PT0S', /must be positive/],
    ['2027-01-12T14:00Z/P1M', /not a duration/],
    ['2027-01-12T14:00Z/2027-01-12T14:00Z', /end must be after/],
    ['2027-01-12T14:00Z/2027-01-12T13:00Z', /end must be after/],
    ['2027-01-12T14:00Z/soon', /neither a duration nor a date-time/],
    ['2027-01-12T14:00Z/PT2H,2027-01-12T15:00Z/PT1H', /overlap/],
    // Its Warning could not name the end: every aliased request in it failed (toISOString's RangeError).
    ['2020-01-12T14:00Z/P99999999999W', /end after the last instant a date can hold/],
  ])('%s is a config error', (text, problem) => {
    const problems = problemsOf(text);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(problem);
  });

  it('holds at most 1000 windows (docs/configuration.md ALIAS_BROWNOUTS)', () => {
    const schedule = (n: number) =>
      Array.from({ length: n }, (_, k) => new Date(at('2027-01-12T00:00Z') + k * 3_600_000).toISOString())
        .map((start) => `${start}/PT1H`)
        .join(',');
    expect(windowsOf(schedule(1000))).toHaveLength(1000);
    expect(problemsOf(schedule(1001))).toEqual(['at most 1000 windows (got 1001)']);
  });

  it('names a date alone in the problem, and only then', () => {
    expect(problemsOf('2027-01-12T14:00Z')).toEqual([
      '"2027-01-12T14:00Z" is not an interval <start>/<duration> or <start>/<end> of date-times with a time zone, such as 2027-01-12T14:00Z/PT1H',
    ]);
    expect(problemsOf('2027-01-12T14:00/PT1H')).toEqual([
      '"2027-01-12T14:00/PT1H" is not an interval <start>/<duration> or <start>/<end> of date-times with a time zone, such as 2027-01-12T14:00Z/PT1H',
    ]);
    expect(problemsOf('soon/2027-01-13')).toEqual([
      '"soon/2027-01-13" is not an interval <start>/<duration> or <start>/<end> of date-times with a time zone, such as 2027-01-12T14:00Z/PT1H (2027-01-13 is a date alone: write the instant, e.g. 2027-01-13T00:00Z)',
    ]);
    expect(problemsOf('2027-01-12T14:00Z/soon')).toEqual([
      '"2027-01-12T14:00Z/soon": "soon" is neither a duration nor a date-time with a time zone',
    ]);
  });

  it('ignores empty entries of the comma-separated list, as the other list variables do', () => {
    expect(windowsOf('')).toEqual([]);
    expect(windowsOf(' , 2027-01-12T14:00Z/PT1H,, ')).toHaveLength(1);
  });

  it('reports every bad entry', () => {
    expect(problemsOf('x,y,2027-01-12T14:00Z/PT1H')).toHaveLength(2);
  });
});

describe('activeBrownout', () => {
  const windows = windowsOf('2027-01-12T14:00Z/PT1H,2027-01-19T14:00Z/PT1H');

  it('is the window containing the instant: start inclusive, end exclusive', () => {
    expect(activeBrownout(windows, at('2027-01-12T13:59:59.999Z'))).toBeUndefined();
    expect(activeBrownout(windows, at('2027-01-12T14:00Z'))).toBe(windows[0]);
    expect(activeBrownout(windows, at('2027-01-12T14:59:59.999Z'))).toBe(windows[0]);
    expect(activeBrownout(windows, at('2027-01-12T15:00Z'))).toBeUndefined();
    expect(activeBrownout(windows, at('2027-01-19T14:30Z'))).toBe(windows[1]);
    expect(activeBrownout(windows, at('2028-01-01T00:00Z'))).toBeUndefined();
    expect(activeBrownout([], 0)).toBeUndefined();
  });
});

describe('brownoutWarning', () => {
  it('is a 299 warning naming the aliases, the end and the docs link', () => {
    const [w] = windowsOf('2027-01-12T14:00Z/PT1H');
    expect(brownoutWarning(['tags', 'ignoreTags'], w!, 'https://docs.example.com/migrate')).toBe(
      '299 - "tags, ignoreTags: aliases are browned out until 2027-01-12T15:00:00.000Z (rehearsal of their removal); use the canonical names, see https://docs.example.com/migrate"',
    );
    expect(brownoutWarning(['tags'], w!)).toBe(
      '299 - "tags: aliases are browned out until 2027-01-12T15:00:00.000Z (rehearsal of their removal); use the canonical names"',
    );
  });
});
