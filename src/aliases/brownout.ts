/**
 * Brownouts (issue 11 item 2): scheduled windows during which the alias layer behaves exactly as after
 * its deletion, so that a legacy client sees what it will see at the sunset — the practice of GitHub's
 * API brownouts. The schedule is `ALIAS_BROWNOUTS`: ISO 8601 time intervals (ISO 8601-1:2019 §5.5),
 * comma-separated, in the forms `<start>/<duration>` and `<start>/<end>`; each date-time with its time
 * zone (the configuration's one instant parser, {@link parseInstant}, without dates alone).
 */
import { parseInstant } from '../config.ts';
import { warningText } from './deprecation.ts';

/** One brownout window: `[start, end)` in ms since the epoch. */
export interface BrownoutWindow {
  /** First instant of the window, ms since the epoch (inclusive). */
  readonly start: number;
  /** First instant after the window, ms since the epoch (exclusive). */
  readonly end: number;
  /** The interval as configured (for logs and warnings). */
  readonly text: string;
}

/** The last instant a `Date` can hold, in ms since the epoch (ECMA-262 §21.4.1.1: ±8.64e15). */
const LAST_INSTANT_MS = 8.64e15;

/** Most windows a schedule may hold (the lookup is linear). */
const MAX_BROWNOUT_WINDOWS = 1000;

/** A duration in weeks, days, hours, minutes, seconds (years and months have no fixed length). */
const DURATION = /^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d{1,3})?)S)?)?$/;

/**
 * Parses an ISO 8601 duration of weeks, days, hours, minutes and seconds (`P1D`, `PT1H30M`, `PT0.5S`).
 * Days are 24 h (the schedule is in UTC instants).
 * @param text The duration as written, e.g. `PT1H30M`.
 * @returns Milliseconds, or `undefined` for anything else (years, months, an empty `P`/`PT`).
 * @throws Nothing.
 */
export function parseDuration(text: string): number | undefined {
  const m = DURATION.exec(text);
  if (!m || text === 'P' || text.endsWith('T')) return undefined;
  const [w, d, h, min, s] = m.slice(1).map((part) => (part === undefined ? 0 : Number(part))) as number[];
  return Math.round(((((w! * 7 + d!) * 24 + h!) * 60 + min!) * 60 + s!) * 1000);
}

/**
 * A window's edge: a date-time with its time zone (`2027-01-12T14:00Z`, `2027-01-12T14:00:30.1234+01:00`).
 * A date alone is refused: a window is a range of instants, and an edge is written with its time.
 */
function parseEdge(text: string): number | undefined {
  return parseInstant(text, { allowDate: false });
}

/** The hint for an edge written as a date alone (`2027-01-12`), or `''`. */
function dateAlone(edges: readonly string[]): string {
  const date = edges.find(
    (edge) => parseInstant(edge, { allowDate: true }) !== undefined && parseEdge(edge) === undefined,
  );
  return date === undefined ? '' : ` (${date} is a date alone: write the instant, e.g. ${date}T00:00Z)`;
}

/**
 * Parses and validates a brownout schedule.
 * @param text `ALIAS_BROWNOUTS`, e.g. `2027-01-12T14:00Z/PT1H,2027-01-19T14:00Z/2027-01-19T18:00Z`.
 * @returns The windows sorted by start, or every problem found (one line each): a malformed interval,
 *   a zero or negative duration, an end not after the start, overlapping windows, too many windows.
 *   Windows that touch (`end` of one = `start` of the next) are accepted.
 * @throws Nothing: every problem is returned, a duration that carries the end past the last instant a
 *   `Date` can hold (8.64e15 ms, e.g. `P99999999999W`) among them.
 */
export function parseBrownouts(text: string): { windows: BrownoutWindow[] } | { problems: string[] } {
  const problems: string[] = [];
  const windows: BrownoutWindow[] = [];
  const entries = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (entries.length > MAX_BROWNOUT_WINDOWS) {
    return { problems: [`at most ${MAX_BROWNOUT_WINDOWS} windows (got ${entries.length})`] };
  }
  for (const entry of entries) {
    const parts = entry.split('/');
    const start = parts.length === 2 ? parseEdge(parts[0]!) : undefined;
    if (parts.length !== 2 || start === undefined) {
      problems.push(
        `"${entry}" is not an interval <start>/<duration> or <start>/<end> of date-times with a time zone, such as 2027-01-12T14:00Z/PT1H${dateAlone(parts)}`,
      );
      continue;
    }
    const second = parts[1]!;
    let end: number | undefined;
    if (second.startsWith('P')) {
      const duration = parseDuration(second);
      if (duration === undefined) {
        problems.push(
          `"${entry}": "${second}" is not a duration of days, hours, minutes or seconds (e.g. PT1H)`,
        );
        continue;
      }
      if (duration <= 0) {
        problems.push(`"${entry}": the duration must be positive`);
        continue;
      }
      end = start + duration;
      if (end > LAST_INSTANT_MS) {
        // A window no Date can end: its Warning could not name the end (toISOString throws).
        problems.push(`"${entry}": the window would end after the last instant a date can hold`);
        continue;
      }
    } else {
      end = parseEdge(second);
      if (end === undefined) {
        problems.push(
          `"${entry}": "${second}" is neither a duration nor a date-time with a time zone${dateAlone([second])}`,
        );
        continue;
      }
      if (end <= start) {
        problems.push(`"${entry}": the end must be after the start`);
        continue;
      }
    }
    windows.push({ start, end, text: entry });
  }
  windows.sort((a, b) => a.start - b.start);
  for (let i = 1; i < windows.length; i++) {
    const previous = windows[i - 1]!;
    const current = windows[i]!;
    if (current.start < previous.end) problems.push(`"${previous.text}" and "${current.text}" overlap`);
  }
  return problems.length > 0 ? { problems } : { windows };
}

/**
 * The window that contains an instant, if any.
 * @param windows Sorted, disjoint windows (from {@link parseBrownouts}).
 * @param now Ms since the epoch.
 * @returns The window with `start ≤ now < end`, or `undefined` outside every window (the scan stops at
 *   the first window that starts after `now`).
 * @throws Nothing.
 */
export function activeBrownout(windows: readonly BrownoutWindow[], now: number): BrownoutWindow | undefined {
  for (const window of windows) {
    if (now < window.start) return undefined;
    if (now < window.end) return window;
  }
  return undefined;
}

/**
 * The `Warning` value for a request that used aliases during a brownout (RFC 9111 §5.5 syntax; code 299).
 * @param aliases The aliases the request used (from the alias table).
 * @param window The active window.
 * @param docsUrl `ALIAS_DOCS_URL`, named in the text when set.
 * @returns The `Warning` field value, naming `window.end` as an ISO 8601 UTC instant.
 * @throws Nothing for a window of {@link parseBrownouts} (its end is a valid `Date`); a hand-made
 *   window ending beyond ±8.64e15 ms throws `RangeError` (`toISOString`).
 * @example
 * brownoutWarning(['tags'], w, 'https://example.com/migrate')
 * // '299 - "tags: aliases are browned out until 2027-01-12T15:00:00.000Z (rehearsal of their removal); use the canonical names, see https://example.com/migrate"'
 */
export function brownoutWarning(
  aliases: readonly string[],
  window: BrownoutWindow,
  docsUrl?: string,
): string {
  const names = aliases.map(warningText).join(', ');
  const docs = docsUrl === undefined ? '' : `, see ${warningText(docsUrl)}`;
  return `299 - "${names}: aliases are browned out until ${new Date(window.end).toISOString()} (rehearsal of their removal); use the canonical names${docs}"`;
}
