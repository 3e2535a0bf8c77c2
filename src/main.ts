/**
 * Process entry: read the configuration and the command line, start the runtime (src/runtime.ts),
 * drain on SIGTERM, SIGINT or SIGHUP (a closed terminal; unhandled, it would end the process without
 * the drain, and leave a demo backend running) and exit 0. Nothing else.
 *
 *   node dist/main.js [--demo]        (npm start: the bundle, in demo mode)
 *   node src/main.ts [--demo]         (the sources, Node 24 type stripping)
 *
 * `--demo`: when `UPSTREAM_URL` is unset, start the reference backend as a child process and forward
 * to it (docs/operations.md "Demo mode"). Without `--demo`, an unset `UPSTREAM_URL` is a configuration
 * error: the shim fails closed. Configuration errors print one `config error: …` line each and exit 1;
 * a port in use or a demo backend that cannot start prints one line and exits 1. Once it runs, Node's
 * process warnings are log lines too. A second signal
 * during the drain exits at once with code 1; a drain that hangs past `SHUTDOWN_TIMEOUT_MS` + 5 s exits 1.
 */
// First: a Node older than 24 stops here with one line (node-version.ts).
import './node-version.ts';
// Second, before Express, pino and the rest load: the stop signals, held from here on until the handler
// below is in place (signals.ts). A bare import, so that sorting the imports cannot move it after them.
import './signals.ts';
import { parseArgs } from 'node:util';
import { PLUGINS } from './app.ts';
import { type Config, ConfigError, loadConfig } from './config.ts';
import { createRuntime, type Runtime } from './runtime.ts';
import { onStopSignal } from './signals.ts';

const USAGE =
  'usage: node dist/main.js [--demo]   (configuration: environment variables, docs/configuration.md)';

let demo: boolean;
try {
  const { values } = parseArgs({
    options: { demo: { type: 'boolean', default: false }, help: { type: 'boolean', default: false } },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  demo = values.demo;
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
  process.exit(1);
}

let config: Config;
let runtime: Runtime | undefined;
// Handled before the start, so that a signal during it (a rolling update that gives up on a pod still
// starting, a Ctrl-C) is not Node's default action, which ends the process at once: exit 143 instead of
// 0, and a demo backend already spawned left running without its parent (docs/reliability.md fix 132).
// The start completes, then drains at once; a second signal exits 1 (the demo backend killed on exit).
let signalled: NodeJS.Signals | undefined;
/** The listeners' address and ports, once the configuration is read: to name what a listen error is about. */
let ports: Pick<Config, 'host' | 'port' | 'adminPort'> | undefined;
onStopSignal(shutdown);
try {
  config = loadConfig(process.env, PLUGINS, { requireUpstream: !demo });
  ports = config;
  runtime = await createRuntime(config, { demo });
} catch (err) {
  if (err instanceof ConfigError) {
    for (const problem of err.problems) process.stderr.write(`config error: ${problem}\n`);
  } else if (
    (err as NodeJS.ErrnoException).syscall === 'getaddrinfo' &&
    (err as { hostname?: string }).hostname === ports?.host
  ) {
    // HOST is a name that does not resolve: both listeners bind it.
    process.stderr.write(`listen error (HOST): ${(err as Error).message}\n`);
  } else if ((err as NodeJS.ErrnoException).syscall === 'listen') {
    // Which variable names the port: both listeners bind the same HOST.
    const { port } = err as { port?: number };
    const variable = port === ports?.port ? 'PORT' : port === ports?.adminPort ? 'ADMIN_PORT' : undefined;
    process.stderr.write(`listen error${variable ? ` (${variable})` : ''}: ${(err as Error).message}\n`);
  } else {
    process.stderr.write(`start error: ${(err as Error).message}\n`);
  }
  process.exit(1);
}

// Node's process warnings (a dependency's deprecation such as Express's `url.parse()`, DEP0169; a
// listener leak) go to the log as JSON lines at warn, not as plain text on stderr among them: Node's own
// printer is a 'warning' listener, replaced here. Node still emits each deprecation code once.
process.removeAllListeners('warning');
process.on('warning', (warning: Error & { code?: string }) => {
  runtime.logger.warn({ warning: { name: warning.name, code: warning.code } }, warning.message);
});

// A signal that came while starting: drain now (nothing is in flight yet).
if (signalled !== undefined) {
  const signal = signalled;
  signalled = undefined;
  shutdown(signal);
}

// SIGHUP too (signals.ts): `nohup` never kept a Node process alive (Node resets SIGHUP to its default at
// start; seen on Node 24: `nohup node -e …` ends on `kill -HUP` with 129). A hangup drains like SIGTERM.
function shutdown(signal: NodeJS.Signals): void {
  if (runtime === undefined) {
    // Still starting: the first signal waits for the start; a second one ends the process.
    if (signalled !== undefined) process.exit(1);
    signalled = signal;
    return;
  }
  if (runtime.draining) {
    runtime.logger.warn({ signal }, 'second signal: exiting now');
    process.exit(1);
  }
  // Backstop: whatever still hangs (a close callback that never comes), the process ends.
  const started = runtime;
  setTimeout(() => {
    started.logger.error('shutdown did not complete: exiting');
    process.exit(1);
  }, config.shutdownTimeoutMs + 5_000).unref();
  void started.drain(signal).then(() => process.exit(0));
}
