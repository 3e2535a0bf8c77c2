/**
 * The only reader of `process.env`. Turns the environment into one typed, frozen {@link Config}
 * or reports every problem at once (SPEC §2).
 */
import { parse as parseSemver, type SemVer } from 'semver';
import { z } from 'zod';

/** Settings of the alias layer (SPEC §5, §6, §10). */
export interface AliasSettings {
  /** `ALIASES=on|off`: `false` switches the whole alias layer off. */
  enabled: boolean;
  /** `ALIAS_SUNSET_VERSION`: clients at or above it get no alias handling. */
  sunsetVersion: SemVer;
  /** `ALIAS_DEPRECATED_AT`: source of the `Deprecation` header (RFC 9745). */
  deprecatedAt?: Date;
  /** `ALIAS_SUNSET_AT`: source of the `Sunset` header (RFC 8594). */
  sunsetAt?: Date;
  /** `ALIAS_DOCS_URL`: target of `Link: <…>; rel="deprecation"`. */
  docsUrl?: string;
  /** `MAX_PATCH_VALUE`: most bytes of canonical values held per response for copies (default 1 MiB; SPEC §6). */
  maxPatchValue?: number;
}

/** The shim's whole configuration, validated and frozen. */
export interface Config {
  /** Front-door port (`PORT`, default 8080). */
  port: number;
  /** Front-door bind address (`HOST`, default `0.0.0.0`). */
  host: string;
  /** Canonical upstream (`UPSTREAM_URL`); `undefined` means "start the embedded reference backend". */
  upstreamUrl: URL | undefined;
  /** Admin listener port (`ADMIN_PORT`, default 9090): `/healthz`, `/readyz`, `/metrics`. */
  adminPort: number;
  /** Request header carrying the client version, as configured (`CLIENT_VERSION_HEADER`); matched case-insensitively. */
  clientVersionHeader: string;
  /** Response header carrying the service version, as configured (`SERVICE_VERSION_HEADER`). */
  serviceVersionHeader: string;
  /** The backend's version (`SERVICE_VERSION`); when unset, learned from upstream responses. */
  serviceVersion: SemVer | undefined;
  /** Clients below it get 426 (`MIN_CLIENT_VERSION`). */
  minClientVersion: SemVer | undefined;
  /** Paths that skip the version and credential gates (`PUBLIC_PATHS`). */
  publicPaths: { exact: string[]; prefixes: string[] };
  /** Cookie names that together form the cookie credential (`AUTH_COOKIES`). */
  authCookies: string[];
  /** Header carrying an API key, lower-cased (`API_KEY_HEADER`). */
  apiKeyHeader: string;
  aliases: AliasSettings;
  /** Largest request body buffered for a rewrite, in bytes (`MAX_REWRITE_BODY`, default 1 MiB). */
  maxRewriteBody: number;
  /** Largest JSON response buffered for a patch, in bytes (`MAX_PATCH_BODY`, default 32 MiB). */
  maxPatchBody: number;
  /** No upstream response headers within this many ms → 504 (`UPSTREAM_TIMEOUT_MS`). */
  upstreamTimeoutMs: number;
  /** Drain time after SIGTERM, in ms (`SHUTDOWN_TIMEOUT_MS`). */
  shutdownTimeoutMs: number;
  /** pino level (`LOG_LEVEL`). */
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

/** Thrown by {@link loadConfig} with one line per problem. */
export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

const UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/**
 * Parses a byte size such as `1mb`, `512kb`, `1048576` (units are powers of 1024, as in Express's
 * `bytes`). Returns bytes, or `undefined` when the text is not a size.
 */
export function parseByteSize(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?$/i.exec(text.trim());
  if (!m) return undefined;
  const n = Math.floor(Number(m[1]) * (UNITS[(m[2] ?? 'b').toLowerCase()] ?? 1));
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** Header field-name token (RFC 9110 §5.1). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

const str = (fallback: string) =>
  z
    .string()
    .optional()
    .transform((v) => (v === undefined || v === '' ? fallback : v));
const optionalStr = z
  .string()
  .optional()
  .transform((v) => (v === '' ? undefined : v));
const port = (fallback: number) =>
  str(String(fallback)).pipe(
    z.string().regex(/^\d+$/, 'must be a port number').transform(Number).pipe(z.number().int().max(65535)),
  );
const ms = (fallback: number) =>
  str(String(fallback)).pipe(
    z
      .string()
      .regex(/^\d+$/, 'must be a whole number of milliseconds')
      .transform(Number)
      .pipe(z.number().int().positive().max(2_147_483_647)),
  );
const byteSize = (fallback: string) =>
  str(fallback).transform((v, ctx) => {
    const n = parseByteSize(v);
    if (n === undefined) {
      ctx.addIssue({ code: 'custom', message: `must be a size such as 1mb, 512kb or 1048576 (got "${v}")` });
      return z.NEVER;
    }
    return n;
  });
const semverValue = optionalStr.transform((v, ctx) => {
  if (v === undefined) return undefined;
  const parsed = parseSemver(v);
  if (!parsed) {
    ctx.addIssue({ code: 'custom', message: `must be a semantic version such as 1.0.0 (got "${v}")` });
    return z.NEVER;
  }
  return parsed;
});
const headerName = (fallback: string) =>
  str(fallback).pipe(z.string().regex(TOKEN, 'must be a valid HTTP header name'));
const date = optionalStr.transform((v, ctx) => {
  if (v === undefined) return undefined;
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) {
    ctx.addIssue({ code: 'custom', message: `must be a date such as 2026-01-31T00:00:00Z (got "${v}")` });
    return z.NEVER;
  }
  return d;
});
const list = (fallback: string) =>
  str(fallback).transform((v) =>
    v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );

/** The environment variables the shim reads, with their parsers (SPEC §2). */
const ENV_SCHEMA = z.object({
  PORT: port(8080),
  HOST: str('0.0.0.0'),
  UPSTREAM_URL: optionalStr.transform((v, ctx) => {
    if (v === undefined) return undefined;
    try {
      const u = new URL(v);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('protocol');
      if (u.search || u.hash) throw new Error('query');
      return u;
    } catch {
      ctx.addIssue({
        code: 'custom',
        message: `must be an http(s) URL without query, such as http://127.0.0.1:3000 (got "${v}")`,
      });
      return z.NEVER;
    }
  }),
  ADMIN_PORT: port(9090),
  CLIENT_VERSION_HEADER: headerName('Service-Client-Version'),
  SERVICE_VERSION_HEADER: headerName('Service-Version'),
  SERVICE_VERSION: semverValue,
  MIN_CLIENT_VERSION: semverValue,
  PUBLIC_PATHS: list('/api/health').pipe(
    z.array(z.string().regex(/^\/[^?#\s]*$/, 'entries must be paths starting with "/"')),
  ),
  AUTH_COOKIES: list('authtoken,refreshtoken').pipe(
    z.array(z.string().regex(TOKEN, 'entries must be cookie names')).min(1, 'must name at least one cookie'),
  ),
  API_KEY_HEADER: headerName('x-api-key'),
  ALIASES: str('on').pipe(z.enum(['on', 'off'], { error: 'must be "on" or "off"' })),
  ALIAS_SUNSET_VERSION: semverValue.transform((v) => v ?? (parseSemver('1.0.0') as SemVer)),
  ALIAS_DEPRECATED_AT: date,
  ALIAS_SUNSET_AT: date,
  ALIAS_DOCS_URL: optionalStr.pipe(z.url({ error: 'must be an absolute URL' }).optional()),
  MAX_REWRITE_BODY: byteSize('1mb'),
  MAX_PATCH_VALUE: byteSize('1mb'),
  MAX_PATCH_BODY: byteSize('32mb'),
  UPSTREAM_TIMEOUT_MS: ms(60_000),
  SHUTDOWN_TIMEOUT_MS: ms(10_000),
  LOG_LEVEL: str('info').pipe(
    z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
      error: 'must be one of fatal, error, warn, info, debug, trace, silent',
    }),
  ),
});

/** Names of every environment variable the shim reads (for docs and deployment-file checks). */
export const CONFIG_VARIABLES: readonly string[] = Object.freeze(Object.keys(ENV_SCHEMA.shape));

/**
 * Reads and validates the configuration (SPEC §2).
 * @param env The environment, normally `process.env`.
 * @returns A deeply frozen {@link Config}.
 * @throws {ConfigError} listing one line per invalid variable, e.g. `PORT: must be a port number`.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Each variable is parsed on its own so that every problem is reported at once, cross-variable
  // checks included.
  const problems: string[] = [];
  const values: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(ENV_SCHEMA.shape)) {
    const result = schema.safeParse(env[name]);
    if (result.success) values[name] = result.data;
    else for (const issue of result.error.issues) problems.push(`${name}: ${issue.message}`);
  }
  const e = values as z.infer<typeof ENV_SCHEMA>;
  if (e.ALIAS_DEPRECATED_AT && e.ALIAS_SUNSET_AT && e.ALIAS_SUNSET_AT < e.ALIAS_DEPRECATED_AT) {
    problems.push('ALIAS_SUNSET_AT: must not be earlier than ALIAS_DEPRECATED_AT (RFC 9745 §3)');
  }
  if (e.PORT !== undefined && e.PORT === e.ADMIN_PORT && e.PORT !== 0) {
    problems.push('ADMIN_PORT: must differ from PORT (the admin listener is never the front door)');
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const config: Config = {
    port: e.PORT,
    host: e.HOST,
    upstreamUrl: e.UPSTREAM_URL,
    adminPort: e.ADMIN_PORT,
    clientVersionHeader: e.CLIENT_VERSION_HEADER,
    serviceVersionHeader: e.SERVICE_VERSION_HEADER,
    serviceVersion: e.SERVICE_VERSION,
    minClientVersion: e.MIN_CLIENT_VERSION,
    publicPaths: {
      exact: e.PUBLIC_PATHS.filter((p) => !p.endsWith('/*')),
      prefixes: e.PUBLIC_PATHS.filter((p) => p.endsWith('/*')).map((p) => p.slice(0, -1)),
    },
    authCookies: e.AUTH_COOKIES,
    apiKeyHeader: e.API_KEY_HEADER.toLowerCase(),
    aliases: {
      enabled: e.ALIASES === 'on',
      sunsetVersion: e.ALIAS_SUNSET_VERSION,
      ...(e.ALIAS_DEPRECATED_AT && { deprecatedAt: e.ALIAS_DEPRECATED_AT }),
      ...(e.ALIAS_SUNSET_AT && { sunsetAt: e.ALIAS_SUNSET_AT }),
      ...(e.ALIAS_DOCS_URL && { docsUrl: e.ALIAS_DOCS_URL }),
      maxPatchValue: e.MAX_PATCH_VALUE,
    },
    maxRewriteBody: e.MAX_REWRITE_BODY,
    maxPatchBody: e.MAX_PATCH_BODY,
    upstreamTimeoutMs: e.UPSTREAM_TIMEOUT_MS,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    logLevel: e.LOG_LEVEL,
  };
  return deepFreeze(config);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !(value instanceof URL) && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
