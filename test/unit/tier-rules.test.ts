/**
 * Keeps the unit tier pure (docs/testing.md): a test under test/unit or test/fuzz may not open a
 * socket, start a process, wait on a timer or read a clock (`setImmediate`, a turn of the event loop
 * with no time in it, is allowed). Such a test belongs to the system tier
 * (test/e2e, test/security), which runs files one at a time; timing and memory limits belong there or
 * in bench/.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

/** What a unit test may not use, with the reason shown when it does. */
const FORBIDDEN: ReadonlyArray<[RegExp, string]> = [
  [/\bsetTimeout\s*\(|\bsetInterval\s*\(/, 'timers'],
  [/\bDate\.now\s*\(|\bperformance\.now\s*\(|\bprocess\.hrtime\b|\bnew Date\(\s*\)/, 'clocks'],
  [/['"]node:(net|dgram|child_process|worker_threads)['"]|\btls\.connect\s*\(/, 'sockets or processes'],
  [/\.listen\s*\(|\bcreateServer\s*\(|\bfetch\s*\(/, 'listening sockets or fetch'],
  [/\bmemoryUsage\s*\(|monitorEventLoopDelay/, 'memory or event-loop measurements'],
];

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name));
}

describe('the unit tier', () => {
  const files = [...testFiles(join(ROOT, 'test', 'unit')), ...testFiles(join(ROOT, 'test', 'fuzz'))].filter(
    (f) => !f.endsWith('tier-rules.test.ts'),
  );

  it('has test files to check', () => {
    expect(files.length).toBeGreaterThan(10);
  });

  it.each(FORBIDDEN.map(([pattern, what]) => [what, pattern] as const))('uses no %s', (_what, pattern) => {
    const offenders = files
      .filter((f) => pattern.test(readFileSync(f, 'utf8')))
      .map((f) => relative(ROOT, f));
    expect(offenders).toEqual([]);
  });
});
