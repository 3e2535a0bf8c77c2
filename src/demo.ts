/**
 * Demo mode (`--demo`, what `npm start` runs; docs/operations.md "Demo mode"): when `UPSTREAM_URL` is
 * unset, the shim starts the reference backend as a child process — a separate service, as in
 * production, so the shim's own memory is measured alone — and forwards to it. The production image
 * does not contain the reference backend, so `--demo` there fails at start with a clear message.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The demo backend's entry point, run with this process's Node binary and `--port 0 --host 127.0.0.1`.
 * It must print a line containing its base URL (`http://127.0.0.1:<port>`) once it listens.
 * Resolved from this module's folder, which is `src/` when run from the sources and `dist/` when run
 * from the bundle: both are one level below the repository root.
 */
export const DEMO_BACKEND_ENTRY = new URL('../reference-backend/dist/main.js', import.meta.url);

/** How long the demo backend may take to print its listening line, in ms. */
export const DEMO_BACKEND_START_TIMEOUT_MS = 15_000;

/** A running demo backend. */
export interface DemoBackend {
  /** Its base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: URL;
  /** Its process id. */
  readonly pid: number;
  /** Sends SIGTERM and resolves once it exited (SIGKILL after 5 s). */
  stop(): Promise<void>;
}

/** Thrown when the demo backend cannot be started (absent, exits early, prints no URL in time). */
export class DemoBackendError extends Error {
  override name = 'DemoBackendError';
}

/**
 * Starts the demo backend and resolves once it printed its listening line.
 * Its stdout lines (JSON, pino-shaped) are passed to this process's stdout; its stderr is inherited.
 * It is stopped when this process exits (a SIGKILL of the shim leaves it running: stop it by its pid,
 * logged at start).
 * @param entry The entry point (default {@link DEMO_BACKEND_ENTRY}).
 * @returns Resolves to the running backend: its URL, pid and `stop()`.
 * @throws {DemoBackendError} when the entry point is missing (e.g. in the production image), the
 *   process exits before listening, or prints no URL within {@link DEMO_BACKEND_START_TIMEOUT_MS}.
 */
export async function startDemoBackend(entry: URL = DEMO_BACKEND_ENTRY): Promise<DemoBackend> {
  const path = fileURLToPath(entry);
  if (!existsSync(path)) {
    throw new DemoBackendError(
      `demo mode needs the reference backend at ${path}, which is not here (the production image does not contain it); set UPSTREAM_URL instead`,
    );
  }
  const child = spawn(process.execPath, [path, '--port', '0', '--host', '127.0.0.1'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit').then(() => undefined);
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

  const url = await new Promise<URL>((resolve, reject) => {
    let pending = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new DemoBackendError(`the demo backend printed no URL within ${DEMO_BACKEND_START_TIMEOUT_MS} ms`),
      );
    }, DEMO_BACKEND_START_TIMEOUT_MS);
    let found: URL | undefined;
    child.stdout?.on('data', (chunk: Buffer) => {
      process.stdout.write(chunk);
      if (found) return;
      pending += chunk.toString('utf8');
      const m = /https?:\/\/(?:127\.0\.0\.1|localhost|\[::1\]):\d+/.exec(pending);
      if (m) {
        found = new URL(m[0]);
        pending = '';
        clearTimeout(timer);
        resolve(found);
      } else if (pending.length > 64 * 1024) pending = pending.slice(-1024);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(
        new DemoBackendError(`the demo backend exited before listening (code ${code}, signal ${signal})`),
      );
    });
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new DemoBackendError(`cannot start the demo backend: ${err.message}`));
    });
  });
  return {
    url,
    pid: child.pid as number,
    stop: () => stopChild(child, exited, killOnExit),
  };
}

async function stopChild(child: ChildProcess, exited: Promise<void>, killOnExit: () => void): Promise<void> {
  process.off('exit', killOnExit);
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const force = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(force);
}
