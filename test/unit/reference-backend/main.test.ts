import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { AUTH, send } from './helpers.ts';

const MAIN = fileURLToPath(new URL('../../../src/reference-backend/main.ts', import.meta.url));

function run(args: string[]): ChildProcess {
  return spawn(process.execPath, [MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Collects the child's stdout lines as JSON; `next()` resolves with the next line. */
function jsonLines(child: ChildProcess): { next(): Promise<Record<string, unknown>> } {
  const lines: string[] = [];
  const waiting: Array<(line: string) => void> = [];
  let text = '';
  child.stdout!.on('data', (chunk) => {
    text += String(chunk);
    for (let newline = text.indexOf('\n'); newline !== -1; newline = text.indexOf('\n')) {
      const line = text.slice(0, newline);
      text = text.slice(newline + 1);
      const waiter = waiting.shift();
      if (waiter === undefined) lines.push(line);
      else waiter(line);
    }
  });
  return {
    next: () =>
      new Promise((resolve) => {
        const line = lines.shift();
        if (line !== undefined) resolve(JSON.parse(line));
        else waiting.push((l) => resolve(JSON.parse(l)));
      }),
  };
}

describe('main.ts', () => {
  it.each([['SIGTERM'], ['SIGINT']] as const)(
    'listens, logs one JSON line, serves, and stops on %s',
    async (signal) => {
      const child = run(['--port', '0', '--host', '127.0.0.1', '--service-version', '1.2.3', '--compress']);
      try {
        const stdout = jsonLines(child);
        const line = await stdout.next();
        expect(line).toMatchObject({
          msg: 'reference backend listening',
          serviceVersion: '1.2.3',
          compress: true,
        });
        const url = String(line.url);
        expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
        const res = await send(url, '/files', { headers: { ...AUTH, 'accept-encoding': 'gzip' } });
        expect(res.headers['service-version']).toBe('1.2.3');
        expect(res.headers['content-encoding']).toBe('gzip');
        child.kill(signal);
        const [code] = await once(child, 'exit');
        expect(code).toBe(0);
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL');
      }
    },
  );

  it.each([[['--port', 'x']], [['--port', '70000']], [['--bogus']], [['--service-version', ' ']]])(
    'exits 1 on bad arguments %j',
    async (args) => {
      const child = run(args);
      let stderr = '';
      child.stderr!.on('data', (chunk) => {
        stderr += String(chunk);
      });
      const [code] = await once(child, 'exit');
      expect(code).toBe(1);
      expect(stderr).toMatch(/^reference-backend: .+\nusage: /);
    },
  );
});
