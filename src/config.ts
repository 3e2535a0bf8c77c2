/**
 * The only reader of `process.env` at run time. Turns the environment into one typed, frozen
 * {@link Config} or reports every invalid variable at once (SPEC §2); a plugin's cross-variable rules
 * (e.g. one date not before another) run once its variables are each valid.
 *
 * The schema is composed: the core's variables ({@link CORE_VARIABLES}) plus the variables each
 * registered plugin declares ({@link PluginDefinition.config}), each with its docs row (name, default,
 * meaning). This module knows no plugin; `app.ts`'s one-line plugin list hands them in. A plugin's
 * variables, its docs rows and its start-log entry therefore go when the plugin is deleted, and a
 * variable of a retired plugin still set in the environment is named in a start-up warning
 * ({@link unknownVariableWarnings}).
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { closest, distance } from 'fastest-levenshtein';
import { parse as parseSemver, type SemVer } from 'semver';
import * as z from 'zod';
import { requestBodyShare } from './core/buffer-budget.ts';
import type { PluginContext, ProxyPlugin } from './core/types.ts';
import { HEAD_HOLD_MS } from './proxy/head-hold.ts';
import { type ForwardedHeaders, NOT_FORWARDED_AS_SENT } from './proxy/outgoing-request.ts';
import {
  UPSTREAM_CONNECT_TIMEOUT_MS,
  UPSTREAM_IDLE_TIMEOUT_MS,
  UPSTREAM_POOL_IDLE_SOCKETS,
  UPSTREAM_POOL_SOCKETS,
} from './proxy/upstream-agent.ts';

/** The shim's whole configuration, validated and frozen. */
export interface Config {
  /** Front-door port (`PORT`, default 8080). */
  port: number;
  /** Front-door bind address (`HOST`, default `0.0.0.0`). */
  host: string;
  /** Canonical upstream (`UPSTREAM_URL`); `undefined` is refused by the runtime except in demo mode (src/demo.ts). */
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
  /** Origins whose pages may read the shim's own responses (`CORS_ALLOWED_ORIGINS`; none by default). */
  corsAllowedOrigins: string[];
  /**
   * Settings of each configured plugin, by plugin name, as its own schema parsed them
   * ({@link PluginDefinition.config}); the composition root hands each to its plugin.
   */
  plugins: Readonly<Record<string, unknown>>;
  /**
   * Start-up warnings, one line each (e.g. a variable that looks like the shim's but nothing reads:
   * a retired plugin's, or a typo). Logged at `warn` by the runtime once its logger exists
   * (`createRuntime`, src/runtime.ts).
   */
  warnings: readonly string[];
  /** Largest request body buffered for a rewrite, in bytes (`MAX_REWRITE_BODY`, default 1 MiB). */
  maxRewriteBody: number;
  /** Process-wide bound on bytes held for rewrites and patches (`MAX_BUFFERED_BYTES`, default 64 MiB). */
  maxBufferedBytes: number;
  /**
   * A request body held for a rewrite (or held whole) must arrive within this many ms of the head
   * (`BODY_TIMEOUT_MS`).
   */
  bodyTimeoutMs: number;
  /**
   * A request body of a declared length is read up to this many bytes before the upstream is contacted
   * (`REQUEST_BUFFER_BYTES`; 0: none): whole when it ends by then, else the rest streams after it.
   */
  requestBufferBytes: number;
  /**
   * Most request bodies streaming to the upstream at once (`MAX_STREAMING_UPLOADS`, default 512; 503
   * beyond): each holds an upstream connection until its last byte arrives.
   */
  maxStreamingUploads: number;
  /** PEM certificates trusted for an `https:` upstream besides Node's roots (`UPSTREAM_CA_FILE`, read at start). */
  upstreamCa: string | undefined;
  /** No upstream response headers within this many ms → 504 (`UPSTREAM_TIMEOUT_MS`). */
  upstreamTimeoutMs: number;
  /**
   * An upstream response head waits at most this many ms for its body's first byte, then goes to the
   * client alone (`RESPONSE_HEAD_HOLD_MS`; proxy/head-hold.ts).
   */
  responseHeadHoldMs: number;
  /** Idle pooled upstream connections are closed after this many ms (`UPSTREAM_IDLE_TIMEOUT_MS`). */
  upstreamIdleTimeoutMs: number;
  /** A new upstream connection not established within this many ms → 502 (`UPSTREAM_CONNECT_TIMEOUT_MS`). */
  upstreamConnectTimeoutMs: number;
  /** Most connections to the upstream at once; a request waits for one at most the connect timeout (`UPSTREAM_MAX_CONNECTIONS`). */
  upstreamMaxConnections: number;
  /** The client's `X-Forwarded-*` and `Forwarded`: appended to or replaced (`FORWARDED_HEADERS`, default `append`). */
  forwardedHeaders: ForwardedHeaders;
  /** Drain time after SIGTERM, in ms (`SHUTDOWN_TIMEOUT_MS`). */
  shutdownTimeoutMs: number;
  /** pino level (`LOG_LEVEL`). */
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

/** Thrown by {@link loadConfig} with one line per problem. */
export class ConfigError extends Error {
  readonly problems: string[];
  /**
   * A configuration error listing its problems.
   * @param problems One line per problem, e.g. `PORT: must be a port number`; the message lists them,
   *   indented, after `invalid configuration:`.
   * @throws Nothing.
   */
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
 * @param text The size as written: a number, optionally fractional, then `b`, `kb`, `mb` or `gb` (any
 *   case; none = bytes), surrounding whitespace allowed.
 * @returns Bytes, rounded down: a positive safe integer, or `undefined` (also for 0 and for sizes
 *   beyond `Number.MAX_SAFE_INTEGER`).
 * @throws Nothing.
 */
export function parseByteSize(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?$/i.exec(text.trim());
  if (!m) return undefined;
  const n = Math.floor(Number(m[1]) * (UNITS[(m[2] ?? 'b').toLowerCase()] ?? 1));
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** Header field-name token (RFC 9110 §5.1). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Only the characters a URI may hold (RFC 3986 §2: unreserved, reserved and `%`). */
const URI_CHARACTERS = /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]+$/;

/** An ISO 8601 calendar date, `2026-01-31`. */
const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/;
/**
 * An ISO 8601 date-time with its time zone (`Z` or `±hh:mm`), seconds and any number of fraction digits
 * optional (`Date` keeps milliseconds); `T` and `Z` in either case, as RFC 3339 §5.6 allows.
 */
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/i;

/** Options of {@link parseInstant}. */
export interface InstantOptions {
  /** Whether a date alone (`2026-01-31`) is accepted, as midnight UTC; when false only a date-time is. */
  readonly allowDate: boolean;
}

/**
 * Parses an instant written in ISO 8601: a date-time with its time zone (`2026-01-31T14:00Z`,
 * `2026-01-31T14:00:00.1234+01:00`) or, when `options.allowDate`, a date alone (midnight UTC). A
 * date-time without a zone is refused: `Date` would read it in the host's `TZ`, so the same setting
 * would mean another instant on another machine; so is a day the month does not have (`2026-02-30`,
 * which `Date` rolls over to 2 March). The one instant parser of the configuration (the core's and
 * the plugins').
 * @param text The value, e.g. `2027-01-12T14:00Z`.
 * @param options See {@link InstantOptions}.
 * @returns Ms since the epoch, or `undefined` when `text` is not such an instant. Never throws.
 * @example parseInstant('2027-01-12', { allowDate: true }) // → 1799712000000
 * @example parseInstant('2027-01-12', { allowDate: false }) // → undefined
 */
export function parseInstant(text: string, options: InstantOptions): number | undefined {
  if (!ISO_DATE_TIME.test(text) && !(options.allowDate && ISO_DATE.test(text))) return undefined;
  const ms = Date.parse(text);
  return Number.isNaN(ms) || !isCalendarDate(text) ? undefined : ms;
}

/**
 * Whether the date a validated instant starts with (`YYYY-MM-DD`) exists: `Date.parse` rolls an
 * impossible day over (`2026-02-30` is 2 March), so an announced sunset or a brownout would fall on
 * another day than the one written (ISO 8601-1:2019 §5.2.2: a day of the month's own range).
 */
function isCalendarDate(text: string): boolean {
  const year = Number(text.slice(0, 4));
  const month = Number(text.slice(5, 7));
  const day = Number(text.slice(8, 10));
  // Day 0 of the next month is the last day of this one; setUTCFullYear, since Date.UTC reads years
  // 0–99 as 1900–1999 (0000 is a leap year, 1900 is not).
  const last = new Date(0);
  last.setUTCFullYear(year, month, 0);
  return month >= 1 && month <= 12 && day >= 1 && day <= last.getUTCDate();
}

/**
 * Whether `text` is a serialized origin as a browser sends it in `Origin` (RFC 6454 §6.2): an `http:`
 * or `https:` scheme, a lower-case host and the port when it is not the scheme's default; no path, no
 * trailing slash.
 * @example isOrigin('https://app.example') // → true
 * @example isOrigin('https://App.example/') // → false
 */
function isOrigin(text: string): boolean {
  if (!URL.canParse(text)) return false;
  const url = new URL(text);
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === text;
}

/**
 * Headers that cannot carry an API key (lower case): `Host` (RFC 9112 §3.2: every HTTP/1.1 request),
 * `Cookie` (any cookie would be a key; cookies are `AUTH_COOKIES`), and every header the upstream may
 * not receive as sent (outgoing-request.ts `NOT_FORWARDED_AS_SENT`: hop-by-hop and framing fields, RFC
 * 9110 §7.6.1 and RFC 9112 §6, `Proxy-Authorization` among them; the forwarding fields the shim writes
 * itself; the validators it maps): the gate would admit a key the upstream never checks.
 */
const NOT_AN_API_KEY_HEADER: ReadonlySet<string> = new Set(['host', 'cookie', ...NOT_FORWARDED_AS_SENT]);

/**
 * The start's warning for a `PUBLIC_PATHS` that makes every path public (`/*`): legal, for a shim whose
 * callers are checked elsewhere, but it turns off SPEC §3's version and credential gates for all.
 * @param paths `PUBLIC_PATHS` as parsed (entries).
 * @returns One warning line, or none.
 * @throws Nothing.
 */
function publicPathWarnings(paths: readonly string[] | undefined): string[] {
  return paths?.includes('/*')
    ? [
        'PUBLIC_PATHS includes "/*": every path is public, no request is checked for a client version or credentials',
      ]
    : [];
}

/**
 * A host name `HOST` may give (RFC 1123 §2.1 labels, dot-separated, one final dot allowed; `_` too, which
 * Docker's and Compose's service names carry): resolved by the listen itself.
 */
const LISTEN_HOST_NAME =
  /^(?=.{1,254}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/;

/** Default of `API_KEY_HEADER`: the header carrying an API key (lower case, as Node names headers). */
export const DEFAULT_API_KEY_HEADER = 'x-api-key';

const port = (fallback: number) =>
  parsers.str(String(fallback)).pipe(
    z
      .string()
      .regex(/^\d+$/, 'must be a port number')
      .transform(Number)
      // Every bound has its own message: zod's defaults ("Too big: expected int to be <=…") name no variable's rule.
      .pipe(
        z
          .number()
          .int({ error: 'must be a port number (0 to 65535)', abort: true })
          .max(65535, 'must be a port number (0 to 65535)'),
      ),
  );

/** An optional string (`undefined` when unset or empty): the one place where empty means unset. */
const optionalStr = z
  .string()
  .optional()
  .transform((v) => (v === '' ? undefined : v));

/** A PEM certificate block (RFC 7468 §2), from its BEGIN line to its END line (or the text's end). */
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?(?:-----END CERTIFICATE-----|$)/g;

/**
 * The certificate blocks of a PEM text that do not parse as X.509 (RFC 7468 §5), by position from 1.
 * @param text A PEM file's text.
 * @returns The positions of the blocks `X509Certificate` refuses (a truncated or corrupt base64 body, no
 *   END line); empty when every block parses.
 * @throws Nothing: each block's parse error is caught and counted.
 * @example unparsableCertificates('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----') // → [1]
 */
function unparsableCertificates(text: string): number[] {
  const broken: number[] = [];
  let position = 0;
  for (const [block] of text.matchAll(PEM_CERTIFICATE)) {
    position++;
    try {
      new X509Certificate(block);
    } catch {
      broken.push(position);
    }
  }
  return broken;
}

/** The largest pool `UPSTREAM_MAX_CONNECTIONS` accepts (and so `MAX_STREAMING_UPLOADS`): a TCP port's range. */
const MAX_POOL_CONNECTIONS = 65_535;

/** Parsers for variable values, shared by the core schema and plugin schemas. Empty counts as unset. */
export const parsers = {
  /** A string with a default. */
  str: (fallback: string) => optionalStr.transform((v) => v ?? fallback),
  /** An optional string (`undefined` when unset or empty). */
  optionalStr,
  /** A whole number of milliseconds, 1 to 2^31-1. */
  ms: (fallback: number) =>
    parsers.str(String(fallback)).pipe(
      z
        .string()
        .regex(/^\d+$/, 'must be a whole number of milliseconds')
        .transform(Number)
        .pipe(
          z
            .number()
            .int({ error: 'must be at most 2147483647 ms (about 24.8 days)', abort: true })
            // Node's timers hold at most 2^31 - 1 ms (about 24.8 days).
            .min(1, 'must be at least 1 ms')
            .max(2_147_483_647, 'must be at most 2147483647 ms (about 24.8 days)'),
        ),
    ),
  /** A positive whole number with an upper bound. */
  count: (fallback: number, max: number) =>
    parsers.str(String(fallback)).pipe(
      z
        .string()
        .regex(/^\d+$/, 'must be a whole number')
        .transform(Number)
        .pipe(
          z
            .number()
            .int({ error: `must be at most ${max}`, abort: true })
            .min(1, 'must be at least 1')
            .max(max, `must be at most ${max}`),
        ),
    ),
  /**
   * A byte size, see {@link parseByteSize}; with `zeroMeans` (e.g. `to stream every body`), `0` too,
   * read as 0.
   */
  byteSize: (fallback: string, zeroMeans?: string) =>
    parsers.str(fallback).transform((v, ctx) => {
      if (zeroMeans !== undefined && v.trim() === '0') return 0;
      const n = parseByteSize(v);
      if (n === undefined) {
        const zero = zeroMeans === undefined ? '' : `, or 0 ${zeroMeans}`;
        ctx.addIssue({
          code: 'custom',
          message: `must be a size such as 1mb, 512kb or 1048576${zero} (got "${v}")`,
        });
        return z.NEVER;
      }
      return n;
    }),
  /** An optional semantic version (SemVer 2.0). */
  semver: optionalStr.transform((v, ctx) => {
    if (v === undefined) return undefined;
    const parsed = parseSemver(v);
    if (!parsed) {
      ctx.addIssue({ code: 'custom', message: `must be a semantic version such as 1.0.0 (got "${v}")` });
      return z.NEVER;
    }
    return parsed;
  }),
  /** An HTTP header field name (RFC 9110 §5.1 token) with a default. */
  headerName: (fallback: string) =>
    parsers.str(fallback).pipe(z.string().regex(TOKEN, 'must be a valid HTTP header name')),
  /** An optional HTTP header field name. */
  optionalHeaderName: optionalStr.pipe(
    z.string().regex(TOKEN, 'must be a valid HTTP header name').optional(),
  ),
  /**
   * An optional instant, ISO 8601: a date (`2026-01-31`, midnight UTC) or a date-time with its time
   * zone (`2026-01-31T00:00:00Z`, `…+01:00`): {@link parseInstant} with `allowDate`.
   */
  date: optionalStr.transform((v, ctx) => {
    if (v === undefined) return undefined;
    const ms = parseInstant(v, { allowDate: true });
    if (ms === undefined) {
      ctx.addIssue({
        code: 'custom',
        message: `must be an ISO 8601 date (2026-01-31, midnight UTC) or date-time with a time zone (2026-01-31T00:00:00Z) (got "${v}")`,
      });
      return z.NEVER;
    }
    return new Date(ms);
  }),
  /**
   * An optional absolute URL, as a URI (RFC 3986) that can go into a header field such as `Link:
   * <url>`: the value as written when it has only URI characters, else its WHATWG serialization, which
   * percent-encodes the rest (RFC 3987 §3.1, IRI → URI). A URL as written with `€`, a space or `>` is
   * a valid URL, yet it broke the header it went into (`€`: Node refuses the field, the response is lost).
   * @example parsers.url.parse('https://docs.example/€') // → 'https://docs.example/%E2%82%AC'
   */
  url: optionalStr.pipe(
    z
      .url({ error: 'must be an absolute URL' })
      .transform((v) => (URI_CHARACTERS.test(v) ? v : new URL(v).href))
      .optional(),
  ),
  /** A comma-separated list (entries trimmed, empty entries dropped) with a default. */
  list: (fallback: string) =>
    parsers.str(fallback).transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
};

/**
 * The problem line of an unset `UPSTREAM_URL` outside demo mode (fail closed, issue 10): reported by
 * {@link loadConfig} with `requireUpstream`, and by the runtime when it is started without an upstream.
 */
export const UPSTREAM_URL_REQUIRED =
  'UPSTREAM_URL: required (the canonical backend, e.g. http://127.0.0.1:3000); only demo mode (--demo, what npm start runs) starts the reference backend instead';

/** Options of {@link loadConfig}. */
export interface LoadOptions {
  /**
   * An unset `UPSTREAM_URL` is a problem (fail closed, issue 10). `src/main.ts` sets it unless started
   * with `--demo` (docs/operations.md "Demo mode"); the runtime refuses an unset upstream outside demo
   * mode either way. Default false, so that tests can read the defaults.
   */
  requireUpstream?: boolean;
}

/**
 * One environment variable: its parser and its row in `docs/configuration.md`.
 * `schema` receives the raw value (`undefined` when unset) and applies the default itself.
 */
export interface VariableSpec {
  readonly schema: z.ZodType<unknown, string | undefined>;
  /** The default as written in the environment (e.g. `8080`, `1mb`); absent means "unset". */
  readonly default?: string;
  /** One docs paragraph (Markdown, no line breaks, no `|`). */
  readonly meaning: string;
}

/** Variables by name. */
export type VariableSpecs = Readonly<Record<string, VariableSpec>>;

/** The parsed values of a set of variables, by name. */
export type ParsedValues<V extends VariableSpecs> = { -readonly [K in keyof V]: z.output<V[K]['schema']> };

/**
 * The configuration a plugin declares: its variables (with docs rows) and how their values become the
 * plugin's settings.
 */
export interface PluginConfigSchema<S> {
  /** The plugin's variables, in docs order. Names must not collide with the core's or another plugin's. */
  readonly variables: VariableSpecs;
  /**
   * Builds the settings from the values (all valid), pushing one line per cross-variable problem
   * (`NAME: what is wrong`) to `problems`. `core` holds the core's parsed values by variable name
   * (read-only; a plugin may check its values against them); a core variable that is itself invalid
   * is absent (its problem is already reported).
   */
  build(values: Record<string, unknown>, problems: string[], core: CoreValues): S;
}

/**
 * A plugin as registered in `app.ts`'s one-line list: its name, its configuration schema and its
 * factory. Deleting the plugin's folder and that line removes its variables from the configuration,
 * the docs and the start log.
 */
export interface PluginDefinition<S = unknown> {
  /** Short name (start log, `Config.plugins` key). */
  readonly name: string;
  /** One line for the generated docs: what the plugin is. */
  readonly description: string;
  readonly config: PluginConfigSchema<S>;
  /** Creates the plugin from its settings (method syntax: a definition of any `S` fits the list). */
  create(settings: S, context: PluginContext): ProxyPlugin;
}

/** The core's environment variables (SPEC §2), with their parsers and docs rows. */
export const CORE_VARIABLES = {
  PORT: {
    schema: port(8080),
    default: '8080',
    meaning: 'Front-door port (the one clients and the Service use). `0` picks a free port.',
  },
  HOST: {
    schema: parsers
      .str('0.0.0.0')
      .refine((v) => (isIP(v) !== 0 && !v.includes('%')) || LISTEN_HOST_NAME.test(v), {
        error: 'must be an IP address (e.g. 0.0.0.0, ::, 127.0.0.1; no IPv6 zone id) or a host name',
      }),
    default: '0.0.0.0',
    meaning:
      'Address both listeners bind to: an IPv4 or IPv6 address (`::` for every address of both), or a name resolved once at start (a name that does not resolve stops the start, `listen error (HOST)`).',
  },
  UPSTREAM_URL: {
    schema: parsers.optionalStr.transform((v, ctx) => {
      if (v === undefined) return undefined;
      let u: URL | undefined;
      try {
        u = new URL(v);
      } catch {}
      // A user name or password is never sent (the shim forwards the client's credentials, not its
      // own), and the URL is logged at start: refused, and not echoed.
      if (u?.username || u?.password || /\/\/[^/?#]*@/.test(v)) {
        ctx.addIssue({
          code: 'custom',
          message:
            'must not contain a user name or password (user:password@): the shim sends no credentials of its own upstream, and logs this URL',
        });
        return z.NEVER;
      }
      if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:') || u.search || u.hash) {
        ctx.addIssue({
          code: 'custom',
          message: `must be an http(s) URL without query or fragment, such as http://127.0.0.1:3000 (got "${v}")`,
        });
        return z.NEVER;
      }
      // Port 0 names no listener: every connection would be refused (RFC 6335 §6 reserves it).
      if (u.port === '0') {
        ctx.addIssue({
          code: 'custom',
          message: `must name the upstream's port (1–65535), not 0 (got "${v}")`,
        });
        return z.NEVER;
      }
      return u;
    }),
    meaning:
      'The canonical backend, an `http:` or `https:` URL without query, fragment or credentials, and not port 0, e.g. `http://127.0.0.1:3000`; a path prefix is kept. Required: unset is a configuration error (the shim fails closed), except in demo mode (`--demo`, what `npm start` runs), which starts the reference backend as a child process and says so in the start log and on `/readyz` ([operations](operations.md#demo-mode)).',
  },
  ADMIN_PORT: {
    schema: port(9090),
    default: '9090',
    meaning:
      'Admin listener: `/healthz`, `/readyz`, `/metrics` ([operations](operations.md#probes)) and the routes plugins add. Must differ from `PORT`; never reachable through the front door.',
  },
  CLIENT_VERSION_HEADER: {
    schema: parsers.headerName('Service-Client-Version'),
    default: 'Service-Client-Version',
    meaning:
      "Request header carrying the client's version, matched case-insensitively. Missing or not a semantic version → 426.",
  },
  SERVICE_VERSION_HEADER: {
    schema: parsers.headerName('Service-Version'),
    default: 'Service-Version',
    meaning: "Response header carrying the service version, also on the shim's own error responses.",
  },
  SERVICE_VERSION: {
    schema: parsers.semver,
    meaning:
      'The backend\'s version (semantic version). Unset: the value the upstream sends in `SERVICE_VERSION_HEADER`, read from its health route (`GET /api/health`) before the shim listens and by every readiness probe, then from every response; so the shim\'s own 426/401 carry it from the first request. Clients below it get `Warning: 299 - "client <v> is older than service <s>; please upgrade"`.',
  },
  MIN_CLIENT_VERSION: {
    schema: parsers.semver,
    meaning: 'Clients below this version get 426. Unset: every valid version is admitted.',
  },
  PUBLIC_PATHS: {
    schema: parsers
      .list('/api/health')
      .pipe(z.array(z.string().regex(/^\/[^?#\s]*$/, 'entries must be paths starting with "/"'))),
    default: '/api/health',
    meaning:
      'Comma-separated paths that skip the version and credential checks; each starts with `/`. Exact match (one trailing slash allowed, query ignored, case-sensitive); an entry ending in `/*` is a prefix. Setting it replaces the default: list `/api/health` too to keep it public (the readiness of whatever probes the service through the shim). `/*` makes every path public (no request is checked; the start logs a warning).',
  },
  AUTH_COOKIES: {
    schema: parsers
      .list('authtoken,refreshtoken')
      .pipe(
        z
          .array(z.string().regex(TOKEN, 'entries must be cookie names'))
          .min(1, 'must name at least one cookie'),
      ),
    default: 'authtoken,refreshtoken',
    meaning:
      'Comma-separated cookie names (at least one) that together form the cookie credential: all present and non-empty.',
  },
  CORS_ALLOWED_ORIGINS: {
    schema: parsers
      .list('')
      .pipe(
        z.array(
          z
            .string()
            .refine(
              isOrigin,
              'entries must be origins such as https://app.example (scheme, host and port if not the default; lower case, no path)',
            ),
        ),
      ),
    meaning:
      "Comma-separated origins (`https://app.example`) whose pages may read the shim's own JSON responses (401, 426, the other 4xx, 500, 502, 503, 504): for a request whose `Origin` is listed, they carry `Access-Control-Allow-Origin: <origin>`, `Access-Control-Allow-Credentials: true` and `Access-Control-Expose-Headers` naming their other headers (`Service-Version`, `Warning`, `Retry-After`, `WWW-Authenticate`), and, while it is set, every shim-made response carries `Vary: Origin`. Without it a browser client sees a network error instead of the 401 that tells it to log in. The upstream's responses are untouched: it owns the CORS policy, and preflights go to it unchecked; list the origins it allows. Unset: none. The refusals the HTTP server writes itself (a malformed or oversized head: 400, 431; a head not received in time: 408; upgrades and CONNECT) carry no CORS headers: the request's `Origin` is not known there, so a page sees them as network errors.",
  },
  API_KEY_HEADER: {
    schema: parsers.headerName(DEFAULT_API_KEY_HEADER),
    default: DEFAULT_API_KEY_HEADER,
    meaning:
      'Header carrying an API key; any non-empty value is a credential (the upstream verifies it). Its value is redacted from logs. Must not be a header every request carries or the shim reads for itself (`Host`, `Cookie`, `CLIENT_VERSION_HEADER`, the framing fields): any request would then pass the credential check; nor one the upstream does not receive as sent (the hop-by-hop fields, `Proxy-Authorization` among them, `Proxy`, `Forwarded`, `X-Forwarded-*`, `Range`, `If-Range`, `If-None-Match`, `If-Modified-Since`, CGI meta-variables such as `Script_Name`): the shim would admit a key the upstream never checks.',
  },
  MAX_REWRITE_BODY: {
    schema: parsers.byteSize('1mb'),
    default: '1mb',
    meaning:
      "Largest request body the shim buffers for a plugin's rewrite; larger → 413. Sizes: a number of bytes or `b`, `kb`, `mb`, `gb` (powers of 1024).",
  },
  REQUEST_BUFFER_BYTES: {
    schema: parsers.byteSize('64kb', 'to stream every body'),
    default: '64kb',
    meaning:
      "A request body of a declared `Content-Length` is read up to this size before the upstream is contacted, as nginx buffers request bodies: a client that sends it slowly (slowhttptest -B, R.U.D.Y.), whatever length it declares, holds no upstream connection until this much has arrived. A body up to this size goes upstream whole (and an idempotent request can be sent again on a connection the upstream had closed); a larger one goes on from there, its first bytes then the rest as it comes. Held like a body to rewrite: within `MAX_BUFFERED_BYTES` (503 beyond) and `BODY_TIMEOUT_MS` (408: with the defaults, a body's first 64 KiB must arrive at 2.2 KB/s or faster), released once written upstream. A chunked body (no declared length: a stream a client may send as it goes) streams from its first byte. `0` streams every body from its first byte. Sizes as `MAX_REWRITE_BODY`.",
  },
  MAX_STREAMING_UPLOADS: {
    schema: parsers.count(512, MAX_POOL_CONNECTIONS),
    default: '512',
    meaning: `Most request bodies streaming to the upstream at once: chunked bodies, and the rest of those declaring more than \`REQUEST_BUFFER_BYTES\`. Each holds one of the pool's upstream connections (\`UPSTREAM_MAX_CONNECTIONS\`) until its last byte arrives, so clients that send such bodies slowly (a chunked R.U.D.Y.) could otherwise hold them all, and every other request would wait for a connection and get 503. Beyond it a streamed body gets 503 with \`Retry-After: 1\` — a chunked one before any of it is read (no \`100 Continue\`), a declared one once its first \`REQUEST_BUFFER_BYTES\` have arrived — counted in \`shim_rejections_total{reason="streaming_uploads"}\` and logged at \`warn\`; the connection closes after it. The default keeps half of the pool for requests whose bodies have arrived or that have none: unset, it is half of a pool smaller than 1024 (\`UPSTREAM_MAX_CONNECTIONS\`). A body of a declared length up to \`REQUEST_BUFFER_BYTES\` goes whole and needs no slot. 1 to \`UPSTREAM_MAX_CONNECTIONS\`.`,
  },
  MAX_BUFFERED_BYTES: {
    schema: parsers.byteSize('64mb'),
    default: '64mb',
    meaning:
      'Process-wide bound on bytes the shim holds in memory for rewrites and patches: request bodies held for a rewrite or up to `REQUEST_BUFFER_BYTES` before they are forwarded (reserved as their bytes arrive, released once forwarded or abandoned; a declared `Content-Length` that does not fit the room left is refused at once) and values response patches hold to copy. Request bodies may fill three quarters of it together; the last quarter stays for the patches, so that slow or many uploads never take them out of the responses of other clients. Buffers kept only for reuse (a patch\'s spare output) are kept while its use stays within a quarter, so that clients that stop reading patched responses cannot take it either. At least 8/3 × `MAX_REWRITE_BODY` (a body is held as sent and decoded). Decoders are held too, with the window their body declares in its first bytes (gzip and deflate 64 KiB, brotli up to 16 MiB, zstd up to 8 MiB): a coded body to rewrite while it is decoded (with `MAX_REWRITE_BODY` of output: decompression bombs), and a patched coded response for as long as it lasts (decoders within three quarters of the budget; a response without room goes out unpatched, `shim_response_patches_skipped_total{reason="budget_exhausted"}`: raise this bound for many slow or long-lived legacy downloads of coded responses: at the default about 768 gzip or deflate ones at once, or 12 brotli ones with their usual 4 MiB window, [operations](operations.md)). A request that would exceed its share gets 503 with `Retry-After: 1`, counted in `shim_rejections_total{reason="buffer_budget"}` and logged at `warn`.',
  },
  BODY_TIMEOUT_MS: {
    schema: parsers.ms(30_000),
    default: '30000',
    meaning:
      'A request body the shim holds, for a rewrite or up to `REQUEST_BUFFER_BYTES`, must have arrived (whole, or that much of it) within this many ms of the request head; otherwise 408 (`shim_rejections_total{reason="body_timeout"}`) and the connection closes. What is streamed after it is bounded by the server\'s request timeout and `UPSTREAM_TIMEOUT_MS` of silence instead ([operations](operations.md)).',
  },
  UPSTREAM_CA_FILE: {
    schema: parsers.optionalStr.transform((v, ctx) => {
      if (v === undefined) return undefined;
      let text: string;
      try {
        text = readFileSync(v, 'utf8');
      } catch (err) {
        ctx.addIssue({
          code: 'custom',
          message: `cannot read "${v}" (${(err as NodeJS.ErrnoException).code ?? err})`,
        });
        return z.NEVER;
      }
      if (!text.includes('-----BEGIN CERTIFICATE-----')) {
        ctx.addIssue({
          code: 'custom',
          message: `"${v}" holds no PEM certificate (-----BEGIN CERTIFICATE-----)`,
        });
        return z.NEVER;
      }
      // Node's TLS skips a block it cannot parse without a word: every request would then fail
      // verification (502) and the log blame the upstream's certificate (docs/reliability.md fix 131).
      const broken = unparsableCertificates(text);
      if (broken.length > 0) {
        ctx.addIssue({
          code: 'custom',
          message: `"${v}": certificate ${broken.join(', ')} (counted from 1) is not a valid PEM certificate`,
        });
        return z.NEVER;
      }
      return text;
    }),
    meaning:
      'For an `https:` upstream: a PEM file of CA certificates trusted in addition to Node\'s root store (a private CA). Read once at start into one trust store for every connection; unreadable, without a certificate, or with a block that does not parse as one → config error. TLS verification is always on; the server name (SNI) is the `UPSTREAM_URL` host, never the client\'s `Host`. An upstream whose certificate does not verify → 502 (`shim_upstream_errors_total{kind="refused"}`). Set for an `http:` upstream it is not used, and the start logs a warning.',
  },
  UPSTREAM_TIMEOUT_MS: {
    schema: parsers.ms(60_000),
    default: '60000',
    meaning:
      "No upstream response headers within this many ms after the request was sent → 504 (a request that waits for a connection of a full pool is answered 503 after `UPSTREAM_CONNECT_TIMEOUT_MS` when that is the shorter). An upstream socket idle that long in any phase also ends the exchange: before the response headers → 504 (408 when it is a streamed request body that stopped arriving: the upstream took all of it and waits for the rest); **once the response has started to reach the client, the client connection is aborted, not answered with 504** (a status was sent; a cut body must never look complete). The response starts with the first byte of its body, or `RESPONSE_HEAD_HOLD_MS` after the upstream's head when its body is slower: until then the client has received nothing, and gets the 504.",
  },
  RESPONSE_HEAD_HOLD_MS: {
    schema: parsers.ms(HEAD_HOLD_MS),
    default: String(HEAD_HOLD_MS),
    meaning:
      "An upstream response's head goes to the client with the first byte of its body (one write; an upstream that fails in between still gets the client a 502 or 504 JSON), but waits for that byte at most this many ms: then the head goes alone, so that a client of a response whose body comes later (server-sent events before their first event, a long poll) has its status and headers at once, as nginx with `proxy_buffering off` and Envoy send them. From then on a failure aborts the response, as after its first byte. `1` sends every head as soon as a body does not come with it; a value above `UPSTREAM_TIMEOUT_MS` holds every head until its body ([operations](operations.md#streaming-responses)).",
  },
  UPSTREAM_CONNECT_TIMEOUT_MS: {
    schema: parsers.ms(UPSTREAM_CONNECT_TIMEOUT_MS),
    default: String(UPSTREAM_CONNECT_TIMEOUT_MS),
    meaning:
      'A new upstream connection (TCP, and TLS for an `https:` upstream) not established within this many ms of its name being resolved is given up: 502 (`shim_upstream_errors_total{kind="refused"}`, log cause `ESHIMCONNECTTIMEDOUT`), as for an unreachable host, instead of a 504 after `UPSTREAM_TIMEOUT_MS`. A host that drops packets (a partition, a dead node, a firewall) fails fast while the pool has no live connection to it; a request sent on a pooled connection still waits `UPSTREAM_TIMEOUT_MS`. The default, Envoy\'s, lets two SYN retransmissions (at 1 s and 3 s) through; the earlier of the two timeouts applies. Resolving the name is not counted (as nginx, Envoy and HAProxy do not): a slow resolver is bounded by `UPSTREAM_TIMEOUT_MS`. It also bounds the wait for a connection of the pool when all `UPSTREAM_MAX_CONNECTIONS` are in use (503 then, as HAProxy\'s `timeout queue` defaults to its `timeout connect`).',
  },
  UPSTREAM_IDLE_TIMEOUT_MS: {
    schema: parsers.ms(UPSTREAM_IDLE_TIMEOUT_MS),
    default: String(UPSTREAM_IDLE_TIMEOUT_MS),
    meaning:
      "An idle upstream connection of the shim's pool is closed after this many ms, or 1 s before the upstream's `Keep-Alive: timeout=N` hint when that is sooner (a hint of 1 s or less: not kept). Keep it below the upstream's own idle timeout when the upstream sends no hint (nginx's `keepalive_timeout 3s` without its second value; gunicorn's `gthread` workers, 2 s: set `1000`; uvicorn's 5 s is above the default): a request the shim writes on a connection the upstream is closing fails, and only an idempotent one is retried (a POST gets 502). Measured servers: [operations](operations.md#upstream-servers-keep-alive).",
  },
  UPSTREAM_MAX_CONNECTIONS: {
    schema: parsers.count(UPSTREAM_POOL_SOCKETS, MAX_POOL_CONNECTIONS),
    default: String(UPSTREAM_POOL_SOCKETS),
    meaning: `Most connections to the upstream at once (the pool's size; at most ${UPSTREAM_POOL_IDLE_SOCKETS} of them kept idle). Each request being forwarded holds one until its response has been read whole, so a long-lived response (server-sent events, a long poll, a download to a slow client) holds one for as long as it lasts. When all are in use, a request waits for one at most \`UPSTREAM_CONNECT_TIMEOUT_MS\` (or \`UPSTREAM_TIMEOUT_MS\` when shorter: 504), then gets 503 with \`Retry-After: 1\`, counted in \`shim_rejections_total{reason="pool_full"}\` and logged at \`warn\`; never sent upstream (\`shim_upstream_requests_waiting\` counts those waiting). Raise it for many long-lived streams (each also holds a client connection: two file descriptors), or add replicas ([operations](operations.md#streaming-responses)). 1–${MAX_POOL_CONNECTIONS}; at least \`MAX_STREAMING_UPLOADS\`.`,
  },
  FORWARDED_HEADERS: {
    schema: parsers.str('append').pipe(z.enum(['append', 'replace'], { error: 'must be append or replace' })),
    default: 'append',
    meaning:
      "What the shim does with the client's `X-Forwarded-For`, `X-Forwarded-Proto`, `X-Forwarded-Host` and `Forwarded` (RFC 7239). `append` (SPEC §4): this hop's values (the client's address, `http` or `https`, the client's `Host`) are appended to the client's and `Forwarded` passes untouched; for a shim behind a proxy that sets these headers itself (an ingress or L7 load balancer; the sidecar). `replace`: the client's four headers are dropped and this hop's values go alone; for a shim that clients connect to directly (a front door on an L4 load balancer, NodePort), where an upstream that trusts its proxy (Express `trust proxy`) would otherwise take `req.hostname` and `req.protocol` from the client's first value (X-Forwarded-Host injection). In both modes a client `X-Forwarded-Host` element that is not a host and optional port, or `X-Forwarded-Proto` element that is not a URI scheme, drops that header's client value (the request goes on, its log line says `invalidForwarded`) ([operations](operations.md#forwarded-headers)).",
  },
  SHUTDOWN_TIMEOUT_MS: {
    schema: parsers.ms(10_000),
    default: '10000',
    meaning:
      "Drain time after SIGTERM, SIGINT or SIGHUP, in ms: in-flight requests may finish within it, then remaining connections are cut. Keep the orchestrator's grace period above it ([operations](operations.md#shutdown)).",
  },
  LOG_LEVEL: {
    schema: parsers.str('info').pipe(
      z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
        error: 'must be one of fatal, error, warn, info, debug, trace, silent',
      }),
    ),
    default: 'info',
    meaning:
      'pino level: `fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`. The request log is at `info` (`error` for 5xx).',
  },
} satisfies VariableSpecs;

/** The core's parsed values by variable name, as a plugin's {@link PluginConfigSchema.build} sees them. */
export type CoreValues = Readonly<Partial<ParsedValues<typeof CORE_VARIABLES>>>;

/** Names of the core's environment variables (plugins add theirs: {@link configVariables}). */
export const CONFIG_VARIABLES: readonly string[] = Object.freeze(Object.keys(CORE_VARIABLES));

/**
 * Names of every variable the shim reads with these plugins registered (core first, then each plugin's).
 * @param plugins The registered plugins (`app.ts`'s `PLUGINS`).
 * @returns A new array of the names, e.g. `['PORT', …]` followed by each plugin's names.
 * @throws Nothing.
 */
export function configVariables(plugins: readonly PluginDefinition[]): string[] {
  return [...CONFIG_VARIABLES, ...plugins.flatMap((p) => Object.keys(p.config.variables))];
}

/**
 * Environment variables that belong to the platform, not to the shim: never reported as unknown.
 * Shell and locale, Node and npm, container and Kubernetes service links (`<SVC>_SERVICE_HOST`,
 * `<SVC>_PORT_443_TCP_ADDR`, …), CI runners and test runners.
 */
export const AMBIENT_VARIABLES: readonly RegExp[] = Object.freeze([
  // `NODE` and `COLOR`: set by npm for the scripts it runs (`npm start`).
  /^(PATH|HOME|HOSTNAME|PWD|OLDPWD|SHLVL|USER|LOGNAME|SHELL|TERM|LANG|LANGUAGE|TZ|TMPDIR|TEMP|TMP|MAIL|EDITOR|PAGER|DISPLAY|COLORTERM|INIT_CWD|CI|NODE|COLOR|FORCE_COLOR|NO_COLOR|DEBUG|UV_THREADPOOL_SIZE|HTTP_PROXY|HTTPS_PROXY|NO_PROXY|ALL_PROXY|DEBIAN_FRONTEND|CURL_CA_BUNDLE|REQUESTS_CA_BUNDLE)$/,
  /^(LC|XDG|NODE|NPM|YARN|PNPM|COREPACK|VITEST|TSX|ESBUILD|KUBERNETES|GITHUB|RUNNER|GITLAB|BUILDKITE|DOCKER|CONTAINER|SSH|GPG|TERM|OTEL|AWS|GOOGLE|AZURE|CLOUDSDK|CLOUD_SDK|SSL|GIT|NIX|GRPC|HTTPLIB2|PYENV|PIP|JAVA|GO|RUST|RUSTUP|CARGO|MALLOC|GLIBC)_/,
  // Python's own (`PYTHONUNBUFFERED`, `PYTHONPATH`, …) and its images' (`PYTHON_VERSION`).
  /^PYTHON/,
  /_SERVICE_(HOST|PORT)(_[A-Z0-9_]+)?$/,
  /_PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?$/,
]);

/**
 * The start-up warning for variables that look like the shim's but that nothing reads — typically a
 * variable of a plugin deleted since (e.g. after the removal of SPEC §10) or a typo.
 *
 * Rule (documented in `docs/configuration.md`): every environment variable whose name is upper snake
 * case (`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`, the form of every variable the shim has ever read), that is not
 * read by the core or a registered plugin and is not an {@link AMBIENT_VARIABLES platform variable}.
 * Unknown variables are warned about, never an error: a rollback or a shared env file must not stop
 * the process.
 * @param env The environment.
 * @param known Names the core and the registered plugins read.
 * @returns One line (names sorted), or `[]` when there is nothing to report.
 * @throws Nothing.
 */
export function unknownVariableWarnings(env: NodeJS.ProcessEnv, known: readonly string[]): string[] {
  const unknown = unknownVariables(env, known);
  if (unknown.length === 0) return [];
  const named = unknown.map((name) => {
    const near = nearMiss(name, known);
    return near === undefined ? name : `${name} (did you mean ${near}?)`;
  });
  return [
    `environment variables not read by this shim (a retired plugin's, or a typo?): ${named.join(', ')}; see docs/configuration.md#unknown-variables`,
  ];
}

/** The upper-snake-case variables of `env` that neither `known` nor {@link AMBIENT_VARIABLES} has, sorted. */
function unknownVariables(env: NodeJS.ProcessEnv, known: readonly string[]): string[] {
  const knownSet = new Set(known);
  return Object.keys(env)
    .filter((name) => /^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$/.test(name) && !knownSet.has(name))
    .filter((name) => !AMBIENT_VARIABLES.some((pattern) => pattern.test(name)))
    .sort();
}

/**
 * The variable the shim reads that `name` is likely a misspelling of: at most two edits away
 * (Levenshtein distance; `LOG_LEVL` → `LOG_LEVEL`, `UPSTREM_URL` → `UPSTREAM_URL`), for names of five
 * characters or more, so that short unrelated names are not matched.
 * @param name A variable nothing reads, e.g. `ALIASE`.
 * @param known The names the core and the registered plugins read.
 * @returns The known name, or `undefined`. Never throws.
 * @example nearMiss('UPSTREM_URL', ['UPSTREAM_URL', 'PORT']) // → 'UPSTREAM_URL'
 */
export function nearMiss(name: string, known: readonly string[]): string | undefined {
  if (name.length < 5 || known.length === 0) return undefined;
  const candidate = closest(name, known);
  return distance(name, candidate) <= 2 ? candidate : undefined;
}

/**
 * Lines for a configuration that failed: the unknown variables that are near misses of a variable the
 * shim reads (likely the cause: `UPSTREM_URL` set, `UPSTREAM_URL` required), as `config error` lines.
 */
function nearMissProblems(env: NodeJS.ProcessEnv, known: readonly string[]): string[] {
  const lines: string[] = [];
  for (const name of unknownVariables(env, known)) {
    const near = nearMiss(name, known);
    if (near !== undefined) lines.push(`${name}: not read by this shim; did you mean ${near}?`);
  }
  return lines;
}

/**
 * Reads and validates the configuration (SPEC §2): the core's variables and each plugin's.
 * @param env The environment, normally `process.env`.
 * @param plugins The registered plugins (`app.ts`'s `PLUGINS`); their settings land in
 *   `Config.plugins[name]`. Default: none (the core alone).
 * @param options See {@link LoadOptions}.
 * @returns A deeply frozen {@link Config}; `warnings` names variables nothing reads.
 * @throws {ConfigError} listing one line per invalid variable, e.g. `PORT: must be a port number`.
 * @throws {Error} when two schemas declare the same variable (a programming error).
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  plugins: readonly PluginDefinition[] = [],
  options: LoadOptions = {},
): Config {
  const names = configVariables(plugins);
  const duplicate = names.find((name, i) => names.indexOf(name) !== i);
  if (duplicate !== undefined) throw new Error(`configuration variable ${duplicate} is declared twice`);

  // Each variable is parsed on its own so that every invalid one is reported at once; a plugin's
  // cross-variable checks need valid values, so they run once its variables are each valid.
  const problems: string[] = [];
  const parse = (specs: VariableSpecs): Record<string, unknown> => {
    const values: Record<string, unknown> = {};
    for (const [name, spec] of Object.entries(specs)) {
      const result = spec.schema.safeParse(env[name]);
      if (result.success) values[name] = result.data;
      else for (const issue of result.error.issues) problems.push(`${name}: ${issue.message}`);
    }
    return values;
  };
  const e = parse(CORE_VARIABLES) as ParsedValues<typeof CORE_VARIABLES>;
  if (options.requireUpstream && !problems.some((p) => p.startsWith('UPSTREAM_URL:')) && !e.UPSTREAM_URL) {
    problems.push(UPSTREAM_URL_REQUIRED);
  }
  if (e.PORT !== undefined && e.PORT === e.ADMIN_PORT && e.PORT !== 0) {
    problems.push('ADMIN_PORT: must differ from PORT (the admin listener is never the front door)');
  }
  // A body to rewrite is held at most twice (as sent and decoded) within the bodies' share of the
  // budget: below that, the largest bodies would get 503 even on an idle shim.
  if (
    e.MAX_BUFFERED_BYTES !== undefined &&
    e.MAX_REWRITE_BODY !== undefined &&
    requestBodyShare(e.MAX_BUFFERED_BYTES) < 2 * e.MAX_REWRITE_BODY
  ) {
    problems.push(
      `MAX_BUFFERED_BYTES: must be at least 8/3 × MAX_REWRITE_BODY (${Math.ceil((8 * e.MAX_REWRITE_BODY) / 3)} bytes): request bodies may hold three quarters of it, and the largest body to rewrite is held as sent and decoded`,
    );
  }
  // A body held whole must fit the bodies' share of the budget, or every such body would get 503.
  if (
    e.MAX_BUFFERED_BYTES !== undefined &&
    e.REQUEST_BUFFER_BYTES !== undefined &&
    requestBodyShare(e.MAX_BUFFERED_BYTES) < e.REQUEST_BUFFER_BYTES
  ) {
    problems.push(
      `REQUEST_BUFFER_BYTES: must be at most three quarters of MAX_BUFFERED_BYTES (${requestBodyShare(e.MAX_BUFFERED_BYTES)} bytes), the share request bodies may hold`,
    );
  }
  // An API key header that every request carries, or that the shim reads as something else, would let
  // any request through the credential gate (SPEC §3): e.g. `Service-Client-Version`, `Host`, `Cookie`;
  // one the upstream does not receive as sent (`Proxy-Authorization`) would admit a key nobody checks.
  if (e.API_KEY_HEADER !== undefined) {
    const key = e.API_KEY_HEADER.toLowerCase();
    if (NOT_AN_API_KEY_HEADER.has(key) || key === e.CLIENT_VERSION_HEADER?.toLowerCase()) {
      problems.push(
        `API_KEY_HEADER: must not be "${e.API_KEY_HEADER}", which every request carries, the shim reads for itself, or the upstream does not receive as sent: the credential check would admit keys nobody checks`,
      );
    }
  }
  // Every streamed upload holds a connection of the pool: more slots than connections bound nothing.
  // Unset, the slots are 512, or half of a smaller pool (rounded up: a pool of 1 has 1).
  const uploadsSet = (env.MAX_STREAMING_UPLOADS ?? '') !== '';
  const maxStreamingUploads =
    uploadsSet || e.UPSTREAM_MAX_CONNECTIONS === undefined
      ? e.MAX_STREAMING_UPLOADS
      : Math.min(e.MAX_STREAMING_UPLOADS, Math.ceil(e.UPSTREAM_MAX_CONNECTIONS / 2));
  if (
    uploadsSet &&
    e.MAX_STREAMING_UPLOADS !== undefined &&
    e.UPSTREAM_MAX_CONNECTIONS !== undefined &&
    e.MAX_STREAMING_UPLOADS > e.UPSTREAM_MAX_CONNECTIONS
  ) {
    problems.push(
      `MAX_STREAMING_UPLOADS: must be at most UPSTREAM_MAX_CONNECTIONS (${e.UPSTREAM_MAX_CONNECTIONS}): each streamed body holds one of the pool's connections`,
    );
  }
  const pluginSettings: Record<string, unknown> = {};
  for (const plugin of plugins) {
    const before = problems.length;
    const values = parse(plugin.config.variables);
    // Cross-variable rules run only on valid values.
    if (problems.length === before) pluginSettings[plugin.name] = plugin.config.build(values, problems, e);
  }
  if (problems.length > 0) throw new ConfigError([...problems, ...nearMissProblems(env, names)]);

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
    corsAllowedOrigins: e.CORS_ALLOWED_ORIGINS,
    plugins: pluginSettings,
    warnings: [
      ...unknownVariableWarnings(env, names),
      ...publicPathWarnings(e.PUBLIC_PATHS),
      ...(e.UPSTREAM_CA_FILE !== undefined && e.UPSTREAM_URL?.protocol === 'http:'
        ? ['UPSTREAM_CA_FILE is set but UPSTREAM_URL is http: (no TLS): the CA file is not used']
        : []),
    ],
    maxRewriteBody: e.MAX_REWRITE_BODY,
    maxBufferedBytes: e.MAX_BUFFERED_BYTES,
    bodyTimeoutMs: e.BODY_TIMEOUT_MS,
    requestBufferBytes: e.REQUEST_BUFFER_BYTES,
    maxStreamingUploads,
    upstreamCa: e.UPSTREAM_CA_FILE,
    upstreamTimeoutMs: e.UPSTREAM_TIMEOUT_MS,
    responseHeadHoldMs: e.RESPONSE_HEAD_HOLD_MS,
    upstreamIdleTimeoutMs: e.UPSTREAM_IDLE_TIMEOUT_MS,
    upstreamConnectTimeoutMs: e.UPSTREAM_CONNECT_TIMEOUT_MS,
    upstreamMaxConnections: e.UPSTREAM_MAX_CONNECTIONS,
    forwardedHeaders: e.FORWARDED_HEADERS,
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
