/**
 * Where `npm run bench` writes a run: `bench/results/<date>.md`, or, when a run of that day is already
 * there, the next free `<date>-b.md`, `<date>-c.md` … (the names the sessions gave their later runs by
 * hand), so that a second run of a day never overwrites the first.
 */
import { join } from 'node:path';

/** Suffixes after the day's first run, in order. */
const LATER_RUNS = 'bcdefghijklmnopqrstuvwxyz';

/**
 * The file for a new run.
 * @param dir The results folder (`bench/results`).
 * @param date The day, `YYYY-MM-DD`.
 * @param taken Whether a path is already used (`existsSync`).
 * @returns `<dir>/<date>.md`, else the first free `<dir>/<date>-<letter>.md`.
 * @throws {Error} when all 26 names of the day are taken.
 * @example
 * resultFilePath('bench/results', '2026-11-26', existsSync) // → 'bench/results/2026-11-26-k.md' after ten runs
 */
export function resultFilePath(dir: string, date: string, taken: (path: string) => boolean): string {
  const first = join(dir, `${date}.md`);
  if (!taken(first)) return first;
  for (const letter of LATER_RUNS) {
    const path = join(dir, `${date}-${letter}.md`);
    if (!taken(path)) return path;
  }
  throw new Error(`bench: 26 runs of ${date} are already in ${dir}; move some away`);
}
