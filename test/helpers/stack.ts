/**
 * Test harness: the shim in front of the embedded reference backend (or any upstream), on real
 * sockets, port 0, with the log lines captured in memory.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { type RunningReferenceBackend, startReferenceBackend } from '@compat-shim/reference-backend';
import { createShim, PLUGINS, type Shim } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { type CoreMetrics, createMetrics } from '../../src/observability/metrics.ts';
import { createFrontServer } from '../../src/proxy/server.ts';

/** A running shim (and the reference backend, unless an upstream URL was given). */
export interface Stack {
  /** Front door, e.g. `http://127.0.0.1:41234`. */
  url: string;
  /** The upstream the shim forwards to. */
  upstreamUrl: string;
  shim: Shim;
  server: Server;
  metrics: CoreMetrics;
  /** Every log line written so far, parsed. */
  logs(): Array<Record<string, unknown>>;
  /** Every log line written so far, raw text. */
  rawLogs(): string;
  close(): Promise<void>;
}

/** Headers of a legacy client with an API key. */
export const LEGACY = Object.freeze({ 'service-client-version': '0.59.0', 'x-api-key': 'test-key' });
/** Headers of a current (1.x) client with an API key. */
export const CURRENT = Object.freeze({ 'service-client-version': '1.0.0', 'x-api-key': 'test-key' });

/**
 * Starts a stack.
 * @param env Environment overrides for `loadConfig` (e.g. `{ ALIASES: 'off' }`); `UPSTREAM_URL` set
 * means no reference backend is started.
 * @param backendOptions Options for the reference backend (e.g. `{ compress: true }`).
 */
export async function startStack(
  env: Record<string, string> = {},
  backendOptions: Parameters<typeof startReferenceBackend>[0] = {},
): Promise<Stack> {
  let backend: RunningReferenceBackend | undefined;
  let upstreamUrl = env.UPSTREAM_URL;
  if (!upstreamUrl) {
    backend = await startReferenceBackend({ port: 0, ...backendOptions });
    upstreamUrl = backend.url;
  }
  const config = loadConfig({ LOG_LEVEL: 'info', ...env, UPSTREAM_URL: upstreamUrl, PORT: '0' }, PLUGINS);
  let text = '';
  const sink = new Writable({
    write(chunk, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  });
  const logger = createLogger(config.logLevel, [`req.headers["${config.apiKeyHeader}"]`], sink);
  const metrics = createMetrics(false);
  const shim = createShim(config, { logger, metrics, upstream: new URL(upstreamUrl) });
  const server = createFrontServer(shim.app, shim.onServerRejection);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    upstreamUrl,
    shim,
    server,
    metrics,
    rawLogs: () => text,
    logs: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      shim.forwarder.agent.destroy();
      await backend?.close();
    },
  };
}
