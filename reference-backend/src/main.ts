#!/usr/bin/env node
/**
 * Runs the reference backend alone:
 *
 *   node reference-backend/dist/main.js [--port 3000] [--host 127.0.0.1] [--service-version 0.60.0]
 *                                       [--no-seed]
 *
 * Logs one JSON line to stdout when listening (`{"level":30,…,"msg":"reference backend listening",
 * "url":"http://127.0.0.1:3000",…}`), one when stopped; SIGTERM/SIGINT stop it (exit 0). Bad arguments
 * print one line to stderr and exit 1. Reads no environment variables.
 */
import { parseArgs } from 'node:util';

/** The default `--service-version` (the same as `DEFAULT_SERVICE_VERSION` of `./index`). */
const DEFAULT_SERVICE_VERSION = '0.60.0';

const USAGE =
  'usage: node reference-backend/dist/main.js [--port 3000] [--host 127.0.0.1] ' +
  '[--service-version 0.60.0] [--no-seed]';

// A closed stdout (the reader went away) must not turn a clean stop into a crash.
process.stdout.on('error', () => {});

function log(msg: string, fields: Record<string, unknown> = {}): void {
  // pino's line shape (level 30 = info), so log collectors treat it like the shim's own lines.
  process.stdout.write(
    `${JSON.stringify({ level: 30, time: Date.now(), name: 'reference-backend', msg, ...fields })}\n`,
  );
}

function fatal(message: string): never {
  process.stderr.write(`reference-backend: ${message}\n${USAGE}\n`);
  process.exit(1);
}

function parseOptions() {
  try {
    return parseArgs({
      options: {
        port: { type: 'string', default: '3000' },
        host: { type: 'string', default: '127.0.0.1' },
        'service-version': { type: 'string', default: DEFAULT_SERVICE_VERSION },
        seed: { type: 'boolean', default: true },
        help: { type: 'boolean', default: false },
      },
      allowNegative: true,
      strict: true,
    }).values;
  } catch (error) {
    return fatal((error as Error).message);
  }
}

async function main(): Promise<void> {
  const args = parseOptions();
  if (args.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  if (!/^\d{1,5}$/.test(args.port) || Number(args.port) > 65_535)
    fatal(`--port must be 0…65535, got "${args.port}"`);
  if (args['service-version'].trim() === '') fatal('--service-version must not be empty');

  // Nest is loaded only once the arguments are known to be good (a usage error costs no framework start).
  const { startReferenceBackend } = await import('./index');
  const backend = await startReferenceBackend({
    port: Number(args.port),
    host: args.host,
    serviceVersion: args['service-version'],
    seed: args.seed,
  }).catch((error: unknown) =>
    fatal(`cannot listen on ${args.host}:${args.port}: ${(error as Error).message}`),
  );

  log('reference backend listening', {
    url: backend.url,
    serviceVersion: args['service-version'],
    seed: args.seed,
  });

  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    backend.close().then(
      () => log('reference backend stopped', { signal }),
      (error: unknown) => {
        process.stderr.write(`reference-backend: close failed: ${(error as Error).message}\n`);
        process.exitCode = 1;
      },
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

void main();
