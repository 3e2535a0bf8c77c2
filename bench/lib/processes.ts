/**
 * The processes under test: the reference backend and the shim, each started as its own Node process
 * (optionally pinned to a core with `taskset`), with their CPU time and memory read from Linux `/proc`.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** Linux clock ticks per second for `/proc/<pid>/stat` (`getconf CLK_TCK`; 100 on every common kernel). */
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** A started child process and what the benchmark reads from it. */
export interface Measured {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** Base URL, e.g. `http://127.0.0.1:40123`. */
  readonly url: string;
  /** User + system CPU time so far, in µs (all threads). */
  cpuMicros(): number;
  /** Resident set size now, in bytes (`VmRSS`). */
  rss(): number;
  /** Peak resident set size since start or the last {@link resetPeak}, in bytes (`VmHWM`). */
  peakRss(): number;
  /** Resets the peak (`echo 5 > /proc/<pid>/clear_refs`); `false` when the kernel refuses. */
  resetPeak(): boolean;
  /** SIGTERM, then SIGKILL after 15 s; resolves when the process has exited. */
  stop(): Promise<void>;
  /** What the process wrote to stderr (its log file), for error reports. */
  stderr(): string;
}

/** A free TCP port on 127.0.0.1 (closed again before it is returned; a race is unlikely on loopback). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Options of {@link startProcess}. */
export interface StartOptions {
  name: string;
  /** Arguments of `node` (the same Node binary that runs the benchmark). */
  nodeArgs: string[];
  env?: Record<string, string>;
  /** `taskset -c` CPU list, or `undefined` for no pinning. */
  cpus: string | undefined;
  /** URL that answers 200 once the process is ready (polled for up to 20 s). */
  readyUrl: string;
  /** Base URL reported as {@link Measured.url}. */
  url: string;
  /** Folder for the stderr log. */
  scratch: string;
}

/**
 * Starts a Node process with stdout discarded (the shim's request log is written, at full cost, to
 * `/dev/null`) and stderr kept in a file; resolves once `readyUrl` answers.
 * @throws {Error} when the process exits or does not become ready within 20 s.
 */
export async function startProcess(options: StartOptions): Promise<Measured> {
  const errPath = join(options.scratch, `${options.name}.stderr.log`);
  const out = openSync('/dev/null', 'w');
  const err = openSync(errPath, 'w');
  const argv = [process.execPath, ...options.nodeArgs];
  const command = options.cpus === undefined ? argv : ['taskset', '-c', options.cpus, ...argv];
  const child = spawn(command[0]!, command.slice(1), {
    cwd: process.cwd(),
    env: { ...process.env, ...options.env },
    stdio: ['ignore', out, err],
  });
  closeSync(out);
  closeSync(err);
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${options.name}: spawn failed`);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stderr = () => {
    try {
      return readFileSync(errPath, 'utf8');
    } catch {
      return '';
    }
  };
  const status = (field: string) => {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return Number(m?.[1] ?? 0) * 1024;
  };
  const measured: Measured = {
    name: options.name,
    child,
    pid,
    url: options.url,
    cpuMicros() {
      // Fields after the command name (which is in parentheses and may contain spaces): utime is the
      // 14th field of the line, stime the 15th.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS) * 1e6;
    },
    rss: () => status('VmRSS'),
    peakRss: () => status('VmHWM'),
    resetPeak() {
      try {
        writeFileSync(`/proc/${pid}/clear_refs`, '5');
        return true;
      } catch {
        return false;
      }
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
    stderr,
  };

  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${options.name} exited (${child.exitCode}):\n${stderr()}`);
    try {
      const res = await fetch(options.readyUrl, { signal: AbortSignal.timeout(1_000) });
      await res.arrayBuffer();
      if (res.ok) return measured;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await measured.stop();
      throw new Error(`${options.name} did not become ready at ${options.readyUrl}:\n${stderr()}`);
    }
    await sleep(100);
  }
}

/** Where a benchmark process runs: `taskset -c` CPU list (or `undefined`) and the stderr folder. */
export interface Placement {
  cpus: string | undefined;
  scratch: string;
}

/** Arguments of `node` that run the benchmarks' own upstream (`bench/lib/upstream.ts`) on `port`. */
export function benchUpstreamArgs(port: number): string[] {
  return ['bench/lib/upstream.ts', '--port', String(port), '--host', '127.0.0.1'];
}

/**
 * Starts the benchmarks' upstream on a free loopback port; ready once `GET /api/health` answers.
 * @throws {Error} as {@link startProcess}.
 */
export async function startBenchUpstream(where: Placement): Promise<Measured> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  return startProcess({
    name: 'upstream',
    nodeArgs: benchUpstreamArgs(port),
    readyUrl: `${url}/api/health`,
    url,
    ...where,
  });
}

/**
 * Starts a shim build on free loopback ports (front and admin), as the benchmarks measure it: the
 * request log on at `info` (written to `/dev/null` by {@link startProcess}), metrics on; ready once the
 * admin listener's `/healthz` answers.
 * @param name Label of the process (its stderr log file).
 * @param nodeArgs Arguments of `node`: V8 flags, then the entry file (e.g. `dist/main.js`).
 * @param upstreamUrl `UPSTREAM_URL` of the shim.
 * @throws {Error} as {@link startProcess}.
 */
export async function startShim(
  name: string,
  nodeArgs: string[],
  upstreamUrl: string,
  where: Placement,
): Promise<Measured> {
  const port = await freePort();
  const adminPort = await freePort();
  return startProcess({
    name,
    nodeArgs,
    env: {
      UPSTREAM_URL: upstreamUrl,
      PORT: String(port),
      ADMIN_PORT: String(adminPort),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
    },
    readyUrl: `http://127.0.0.1:${adminPort}/healthz`,
    url: `http://127.0.0.1:${port}`,
    ...where,
  });
}

/**
 * Starts a calibration proxy (`bench/calibration/*.ts`) on free loopback ports; ready once its admin
 * port answers `/`.
 * @param file The calibration proxy's script.
 * @param nodeFlags Flags of `node` before the script (e.g. the shim's V8 flags); none by default.
 * @throws {Error} as {@link startProcess}.
 */
export async function startCalibrationProxy(
  name: string,
  file: string,
  upstreamUrl: string,
  where: Placement,
  nodeFlags: readonly string[] = [],
): Promise<Measured> {
  const port = await freePort();
  const adminPort = await freePort();
  return startProcess({
    name,
    nodeArgs: [...nodeFlags, file],
    env: { UPSTREAM_URL: upstreamUrl, PORT: String(port), ADMIN_PORT: String(adminPort) },
    readyUrl: `http://127.0.0.1:${adminPort}/`,
    url: `http://127.0.0.1:${port}`,
    ...where,
  });
}

/** Pins the calling process to `cpus` (`taskset -cp`); ignored where taskset is missing. */
export function pinSelf(cpus: string | undefined): void {
  if (cpus === undefined) return;
  execFileSync('taskset', ['-cp', cpus, String(process.pid)], { stdio: 'ignore' });
}

/** Whether a command is on the PATH. */
export function hasCommand(name: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
