/**
 * The README's curl session is what a fresh demo-mode shim prints (issue 10 items 4 and 8): the
 * `console` block of README.md is parsed — every `$ curl …` command and the output under it — each
 * command is run as written with curl (only `localhost:8080` becomes the test's port) against a fresh
 * runtime in demo mode (the reference backend as a child process, as `npm start` runs it), and the
 * output must match: the status line and body exactly, and every header line the README shows among
 * the response's headers (the README leaves out `Date`, `Content-Length`, `Connection`, `Keep-Alive`).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLUGINS } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { createRuntime, type Runtime } from '../../src/runtime.ts';

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

/** One command of the session and what the README says it prints. */
interface Step {
  command: string;
  expected: string;
}

/** Parses the first `console` block: `$ ` lines are commands, the lines up to the next one their output. */
function parseSession(markdown: string): Step[] {
  const block = /```console\n([\s\S]*?)```/.exec(markdown)?.[1];
  if (block === undefined) return [];
  const steps: Step[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('$ ')) steps.push({ command: line.slice(2), expected: '' });
    else {
      const step = steps.at(-1);
      if (step) step.expected += `${line}\n`;
    }
  }
  for (const step of steps) step.expected = step.expected.trim();
  return steps;
}

/** Splits words as a POSIX shell would for the README's commands (single quotes only). */
function shellWords(command: string): string[] {
  const words: string[] = [];
  for (const m of command.matchAll(/'([^']*)'|(\S+)/g)) words.push(m[1] ?? (m[2] as string));
  return words;
}

/** Splits curl output into status line, header lines and body (`-i`); body only without `-i`. */
function splitOutput(text: string, withHead: boolean): { status?: string; headers: string[]; body: string } {
  if (!withHead) return { headers: [], body: text.trim() };
  const normalized = text.replace(/\r\n/g, '\n');
  const end = normalized.indexOf('\n\n');
  const head = (end === -1 ? normalized : normalized.slice(0, end)).split('\n');
  return {
    status: head[0]?.trim(),
    headers: head.slice(1).map((h) => h.trim()),
    body: (end === -1 ? '' : normalized.slice(end + 2)).trim(),
  };
}

const headerKey = (line: string) => {
  const colon = line.indexOf(':');
  return `${line.slice(0, colon).toLowerCase()}:${line.slice(colon + 1).trim()}`;
};

describe('README.md session', () => {
  const steps = parseSession(README);
  let runtime: Runtime;

  beforeAll(async () => {
    const quiet = new Writable({ write: (_chunk, _enc, cb) => cb() });
    runtime = await createRuntime(loadConfig({ PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1' }, PLUGINS), {
      demo: true,
      logDestination: quiet,
      processMetrics: false,
    });
  });
  afterAll(async () => {
    await runtime?.close();
  });

  it('has a session of curl commands to check', () => {
    expect(steps.length).toBeGreaterThanOrEqual(3);
    for (const step of steps) expect(step.command).toMatch(/^curl .*localhost:8080\//);
  });

  it('prints, on a fresh demo-mode shim, what the README shows', async () => {
    expect(runtime.demo).toBe(true);
    const port = new URL(runtime.url).port;
    for (const step of steps) {
      const [tool, ...args] = shellWords(step.command.replaceAll('localhost:8080', `127.0.0.1:${port}`));
      expect(tool).toBe('curl');
      const { stdout } = await promisify(execFile)('curl', args, { encoding: 'utf8' });
      const withHead = args.some((a) => /^-[a-zA-Z]*i/.test(a));
      const actual = splitOutput(stdout, withHead);
      const expected = splitOutput(step.expected, withHead);
      expect(actual.status, step.command).toBe(expected.status);
      const actualHeaders = new Set(actual.headers.map(headerKey));
      for (const line of expected.headers)
        expect(actualHeaders, `${step.command}: ${line}`).toContain(headerKey(line));
      expect(actual.body, step.command).toBe(expected.body);
    }
  });
});
