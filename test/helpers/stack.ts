/**
 * Test harness: the shim in front of the embedded reference backend (or any upstream), on real
 * sockets, port 0, with the log lines captured in memory.
 */
import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import { type RunningReferenceBackend, startReferenceBackend } from '@compat-shim/reference-backend';
import { PLUGINS, type Shim } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import type { CoreMetrics } from '../../src/observability/metrics.ts';
import { createRuntime, type Runtime, type RuntimeOptions } from '../../src/runtime.ts';

/** A running shim (and the reference backend, unless an upstream URL was given). */
export interface Stack {
  /** Front door, e.g. `http://127.0.0.1:41234`. */
  url: string;
  /** Admin listener (`/healthz`, `/readyz`, `/metrics`). */
  adminUrl: string;
  /** The upstream the shim forwards to. */
  upstreamUrl: string;
  /** The runtime itself (its own metrics, route labels, service version). */
  runtime: Runtime;
  shim: Shim;
  /** The front-door server. */
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
 * Starts a stack: the same runtime as `src/main.ts` (src/runtime.ts), in-process, both listeners on
 * port 0 of 127.0.0.1, fresh state (registry, route labels, service version) per stack.
 * @param env Environment overrides for `loadConfig` (e.g. `{ ALIASES: 'off' }`); `UPSTREAM_URL` set
 * means no reference backend is started.
 * @param backendOptions Options for the reference backend (e.g. `{ compress: true }`).
 * @param runtimeOptions Runtime options; by default the start probe of the upstream (which learns the
 * service version) runs only against the reference backend, so that upstreams that record every
 * request see only the test's own.
 */
export async function startStack(
  env: Record<string, string> = {},
  backendOptions: Parameters<typeof startReferenceBackend>[0] = {},
  runtimeOptions: RuntimeOptions = {},
): Promise<Stack> {
  let backend: RunningReferenceBackend | undefined;
  let upstreamUrl = env.UPSTREAM_URL;
  if (!upstreamUrl) {
    backend = await startReferenceBackend({ port: 0, ...backendOptions });
    upstreamUrl = backend.url;
  }
  const config = loadConfig(
    {
      LOG_LEVEL: 'info',
      HOST: '127.0.0.1',
      ...env,
      UPSTREAM_URL: upstreamUrl,
      PORT: '0',
      ADMIN_PORT: '0',
    },
    PLUGINS,
  );
  let text = '';
  const sink = new Writable({
    write(chunk, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  });
  let runtime: Runtime;
  try {
    runtime = await createRuntime(config, {
      logDestination: sink,
      processMetrics: false,
      probeAtStart: backend !== undefined,
      ...runtimeOptions,
    });
  } catch (err) {
    await backend?.close();
    throw err;
  }
  return {
    url: runtime.url,
    adminUrl: runtime.adminUrl,
    upstreamUrl,
    runtime,
    shim: runtime.shim,
    server: runtime.front,
    metrics: runtime.metrics,
    rawLogs: () => text,
    logs: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    async close() {
      await runtime.close();
      await backend?.close();
    },
  };
}
