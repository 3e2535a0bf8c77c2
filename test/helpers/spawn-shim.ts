/**
 * Runs the shim as a separate process (`node src/main.ts`), so that its memory can be measured apart
 * from the test's and signals can be sent to it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { nodeFlagsOf } from '../../bench/lib/shipped.ts';

/**
 * The Node flags the shim ships with: those of `npm start` (package.json), which the image's
 * `ENTRYPOINT` repeats (test/deploy/dockerfile.test.ts keeps the two equal). For {@link spawnShim}'s
 * `nodeFlags` where a test measures memory or GC-sensitive timing as the product runs.
 */
export const SHIPPED_NODE_FLAGS: readonly string[] = nodeFlagsOf(
  (
    JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      scripts: { start: string };
    }
  ).scripts.start,
);

/** A shim child process. */
export interface ShimProcess {
  child: ChildProcess;
  url: string;
  adminUrl: string;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** Peak resident set size so far, in bytes (Linux `VmHWM`). */
  peakRss(): number;
  /** Current resident set size, in bytes (Linux `VmRSS`). */
  rss(): number;
  /** Sends SIGTERM (unless exited) and resolves with the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Spawns the shim with `env` added to the test's environment; resolves once it logs that it listens.
 * @param env e.g. `{ UPSTREAM_URL: 'http://127.0.0.1:1234' }`; `PORT` and `ADMIN_PORT` default to 0.
 *   Without `UPSTREAM_URL` the shim runs in demo mode (`--demo`, as `npm start` does): the reference
 *   backend is its child process, so `rss()` and `peakRss()` measure the shim alone.
 * @param args More command-line flags of the shim.
 * @param nodeFlags Flags of `node` itself, before the entry file: none by default; a test that needs
 *   the documented V8 flags passes those of `npm start` and the image (test/e2e/streaming.test.ts).
 *   Not `NODE_OPTIONS`, which refuses most V8 flags.
 */
export function spawnShim(
  env: Record<string, string>,
  args: readonly string[] = [],
  nodeFlags: readonly string[] = [],
): Promise<ShimProcess> {
  const demo = env.UPSTREAM_URL ? [] : ['--demo'];
  const child = spawn(process.execPath, [...nodeFlags, 'src/main.ts', ...demo, ...args], {
    env: { ...process.env, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  // 'close' rather than 'exit': by then the output pipes are drained, so `output()` is complete.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const status = (field: string) => {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
    return Number(m?.[1] ?? 0) * 1024;
  };
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /"port":(\d+),"adminPort":(\d+)/.exec(out);
      if (m) {
        child.stdout?.off('data', onData);
        child.stdout?.on('data', (more: Buffer) => {
          out += more.toString();
        });
        resolve({
          child,
          url: `http://127.0.0.1:${m[1]}`,
          adminUrl: `http://127.0.0.1:${m[2]}`,
          output: () => out,
          peakRss: () => status('VmHWM'),
          rss: () => status('VmRSS'),
          stop: () => {
            if (child.exitCode === null) child.kill('SIGTERM');
            return exited;
          },
        });
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.once('close', (code) => reject(new Error(`shim exited with ${code} before listening:\n${out}`)));
  });
}

/**
 * Whether a process is stopped (SIGSTOP took effect: state `T` in /proc/<pid>/stat). `kill` returns
 * before it does; a test that stops the shim to let its peers make progress meanwhile waits for this.
 * @param pid The process id (`child.pid`).
 */
export function isStopped(pid: number | undefined): boolean {
  // The state is the field after the command name, which is in parentheses and may hold spaces.
  return /^\) T /.test(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\)/s, ')'));
}
