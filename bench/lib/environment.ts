/**
 * What a result depends on: machine, Node, wrk, the mandated libraries and the commit measured.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, release } from 'node:os';

function quiet(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch (err) {
    // wrk -v prints its version and exits 1
    const out = (err as { stdout?: string }).stdout;
    return typeof out === 'string' && out.trim() !== '' ? out.trim() : 'unknown';
  }
}

function packageVersion(name: string): string {
  try {
    return (JSON.parse(readFileSync(`node_modules/${name}/package.json`, 'utf8')) as { version: string })
      .version;
  } catch {
    return 'missing';
  }
}

/** Versions and machine facts, as `name: value` pairs in a stable order. */
export function describeEnvironment(): [string, string][] {
  const cpu = /model name\s*:\s*(.+)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown';
  const commit = quiet('git', ['rev-parse', '--short', 'HEAD']);
  const dirty = quiet('git', ['status', '--porcelain', '--untracked-files=no']) !== '';
  return [
    ['machine', `${cpus().length} cores, ${cpu}, Linux ${release()}`],
    ['node', process.version],
    ['wrk', quiet('wrk', ['-v']).split('\n')[0] ?? 'unknown'],
    [
      'libraries',
      ['express', 'http-proxy-middleware', 'pino', 'prom-client', 'zod']
        .map((name) => `${name} ${packageVersion(name)}`)
        .join(', '),
    ],
    ['commit', `${commit}${dirty ? ' (with uncommitted changes)' : ''}`],
  ];
}
