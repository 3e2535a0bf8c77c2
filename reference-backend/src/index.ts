/**
 * The reference backend (SPEC §9) as a library: a strict, canonical-only, in-memory copy of the service
 * on NestJS 11 + Express 5 — class-validator DTOs behind the global
 * `ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true })`, Express' extended
 * query parser, `compression` and Express' weak ETags. Every response carries `Service-Version`.
 * Errors are Nest's own (`{"message": …, "error": …, "statusCode": …}`).
 */
import 'reflect-metadata';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import compression from 'compression';
import { appModule } from './app.module';

export { API_KEY_HEADER, hasCredentials, parseCookieHeader, SESSION_COOKIES } from './credentials.guard';
export { DEFAULT_TAKE, MAX_TAKE } from './dto';
export {
  DEMO_USER,
  type FileEntity,
  MAX_ENTITIES,
  type MetadataEntry,
  type MetadataType,
  type Mission,
  type Page,
  type Project,
  SEED_IDS,
  type User,
} from './store';

/** Service version announced when none is configured. */
export const DEFAULT_SERVICE_VERSION = '0.60.0';

/** Largest JSON (and URL-encoded) request body accepted; larger → Nest's 413. */
export const MAX_BODY = '1mb';

// Longer than any sane proxy's idle-socket timeout, so a proxy's pooled upstream sockets are not closed
// under it mid-reuse (a race that shows up as ECONNRESET on the proxy).
const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** Options of {@link createReferenceBackend} and {@link startReferenceBackend}. */
export interface ReferenceBackendOptions {
  /** Value of the `Service-Version` response header; default {@link DEFAULT_SERVICE_VERSION}. */
  serviceVersion?: string;
  /** Load the deterministic seed (`SEED_IDS`); default `true`. */
  seed?: boolean;
  /** Nest's log levels; default `['error', 'warn']` (no bootstrap chatter). `false` silences Nest. */
  logger?: LogLevel[] | false;
}

/** Options of {@link startReferenceBackend}. */
export interface StartOptions extends ReferenceBackendOptions {
  /** TCP port; default `0` (any free port). */
  port?: number;
  /** Interface to bind; default `127.0.0.1`. */
  host?: string;
}

/** A listening reference backend. */
export interface RunningReferenceBackend {
  /** Base URL, e.g. `http://127.0.0.1:41234` (no trailing slash). */
  readonly url: string;
  /** The underlying `node:http` server. */
  readonly server: Server;
  /** Stops listening and closes every connection, idle keep-alive ones included. Idempotent. */
  close(): Promise<void>;
}

/**
 * Creates the Nest application (not listening): one in-memory store per call.
 * @param options See {@link ReferenceBackendOptions}.
 * @returns The initialised `NestExpressApplication`; call `listen` on it.
 */
export async function createReferenceBackend(
  options: ReferenceBackendOptions = {},
): Promise<NestExpressApplication> {
  const serviceVersion = options.serviceVersion ?? DEFAULT_SERVICE_VERSION;
  const app = await NestFactory.create<NestExpressApplication>(
    appModule({ seed: options.seed !== false }),
    new ExpressAdapter(),
    {
      bodyParser: false,
      forceCloseConnections: true,
      logger: options.logger ?? ['error', 'warn'],
      abortOnError: false,
    },
  );
  app.set('query parser', 'extended');
  app.use((_req: unknown, res: { setHeader(name: string, value: string): void }, next: () => void) => {
    res.setHeader('Service-Version', serviceVersion);
    next();
  });
  app.use(compression());
  app.useBodyParser('json', { limit: MAX_BODY });
  app.useBodyParser('urlencoded', { limit: MAX_BODY, extended: true });
  await app.init();
  const server = app.getHttpServer() as Server;
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000;
  return app;
}

/**
 * Creates the reference backend and starts listening.
 * @param options {@link StartOptions}: port (default `0`), host (default `127.0.0.1`), and the
 *   {@link ReferenceBackendOptions}.
 * @returns Its base URL, the `node:http` server and `close()`.
 * @throws The `listen` error (e.g. `EADDRINUSE`) as a rejection.
 * @example
 * const backend = await startReferenceBackend();
 * await fetch(`${backend.url}/api/health`);
 * await backend.close();
 */
export async function startReferenceBackend(options: StartOptions = {}): Promise<RunningReferenceBackend> {
  const { port = 0, host = '127.0.0.1', ...backendOptions } = options;
  const app = await createReferenceBackend(backendOptions);
  try {
    await app.listen(port, host);
  } catch (error) {
    await app.close().catch(() => {});
    throw error;
  }
  const server = app.getHttpServer() as Server;
  const address = server.address() as AddressInfo;
  const hostPart = address.address.includes(':') ? `[${address.address}]` : address.address;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${hostPart}:${address.port}`,
    server,
    close: () => {
      closing ??= app.close();
      return closing;
    },
  };
}
