/**
 * Process entry: configuration → listeners → graceful shutdown. Nothing else.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createShim } from './app.ts';
import { ConfigError, loadConfig } from './config.ts';
import { createAdminServer, probeUpstream } from './observability/admin.ts';
import { createLogger } from './observability/logger.ts';
import { createMetrics } from './observability/metrics.ts';
import { createFrontServer } from './proxy/server.ts';
import { startReferenceBackend } from './reference-backend/server.ts';

let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig(process.env);
} catch (err) {
  if (err instanceof ConfigError) {
    for (const problem of err.problems) process.stderr.write(`config error: ${problem}\n`);
    process.exit(1);
  }
  throw err;
}

const logger = createLogger(config.logLevel, [`req.headers["${config.apiKeyHeader}"]`]);
const metrics = createMetrics();

let upstream = config.upstreamUrl;
let referenceBackend: Awaited<ReturnType<typeof startReferenceBackend>> | undefined;
if (!upstream) {
  referenceBackend = await startReferenceBackend({ port: 0, host: '127.0.0.1' });
  upstream = new URL(referenceBackend.url);
  logger.info({ upstream: upstream.href }, 'UPSTREAM_URL is unset: started the embedded reference backend');
}

const shim = createShim(config, { logger, metrics, upstream });
const front = createFrontServer(shim.app);
let draining = false;
const admin = createAdminServer({
  registry: metrics.registry,
  upstreamReachable: () => probeUpstream(upstream, 1_000),
  draining: () => draining,
});

front.listen(config.port, config.host);
admin.listen(config.adminPort, config.host);
await Promise.all([once(front, 'listening'), once(admin, 'listening')]);
logger.info(
  {
    port: (front.address() as AddressInfo).port,
    adminPort: (admin.address() as AddressInfo).port,
    upstream: upstream.href,
    aliases: config.aliases.enabled ? 'on' : 'off',
  },
  'compat-shim listening',
);

async function shutdown(signal: string): Promise<void> {
  if (draining) {
    logger.warn({ signal }, 'second signal: exiting now');
    process.exit(1);
  }
  draining = true;
  logger.info({ signal, timeoutMs: config.shutdownTimeoutMs }, 'draining');
  const deadline = setTimeout(() => {
    logger.warn('shutdown timeout reached: closing remaining connections');
    front.closeAllConnections();
  }, config.shutdownTimeoutMs);
  deadline.unref();
  const closed = new Promise<void>((resolve) => front.close(() => resolve()));
  front.closeIdleConnections();
  await closed;
  clearTimeout(deadline);
  shim.forwarder.agent.destroy();
  admin.closeAllConnections();
  await new Promise<void>((resolve) => admin.close(() => resolve()));
  await referenceBackend?.close();
  logger.info('stopped');
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
