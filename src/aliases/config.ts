/**
 * The alias layer's own configuration: its environment variables, their docs rows and their settings
 * (SPEC §2, §5, §6, §10; issue 11 item 6). `src/config.ts` composes this schema with the core's; deleting
 * this folder and its line in `app.ts` removes the variables from the configuration, from
 * `docs/configuration.md` and from the start log.
 */
import { parse as parseSemver, type SemVer } from 'semver';
import * as z from 'zod';
import {
  DEFAULT_API_KEY_HEADER,
  type ParsedValues,
  type PluginConfigSchema,
  parsers,
  type VariableSpecs,
} from '../config.ts';
import { type BrownoutWindow, parseBrownouts } from './brownout.ts';
import { DEFAULT_MAX_VALUE_BYTES } from './patch-json.ts';

/** Settings of the alias layer (SPEC §5, §6, §10; issue 11). */
export interface AliasSettings {
  /** `ALIASES=on|off`: `false` switches the whole alias layer off. */
  enabled: boolean;
  /** `ALIAS_SUNSET_VERSION`: clients at or above it get no alias handling. */
  sunsetVersion: SemVer;
  /** `ALIAS_DEPRECATED_AT`: source of the `Deprecation` header (RFC 9745). */
  deprecatedAt?: Date;
  /** `ALIAS_SUNSET_AT`: source of the `Sunset` header (RFC 8594). */
  sunsetAt?: Date;
  /** `ALIAS_DOCS_URL`: target of `Link: <…>; rel="deprecation"` (RFC 9745 §3). */
  docsUrl?: string;
  /** `ALIAS_SUNSET_POLICY_URL`: target of `Link: <…>; rel="sunset"` (RFC 8594 §3). */
  sunsetPolicyUrl?: string;
  /** `ALIAS_BROWNOUTS`: windows during which the layer behaves as deleted; sorted, disjoint. */
  brownouts?: readonly BrownoutWindow[];
  /** `CONSUMER_HEADER`: lower-cased identity header set by a gateway in front. */
  consumerHeader?: string;
  /** `CONSUMER_FINGERPRINT_KEY`: HMAC-SHA-256 key for API-key fingerprints (a secret: never logged). */
  consumerFingerprintKey?: string;
  /** `CONSUMER_TABLE_SIZE`: consumers the usage table tracks (space-saving). */
  consumerTableSize: number;
  /** `MAX_PATCH_VALUE`: largest member value the streaming patcher holds to copy, in bytes (SPEC §6). */
  maxPatchValue: number;
}

/** Default of `MAX_PATCH_VALUE` as documented: the patcher's own {@link DEFAULT_MAX_VALUE_BYTES} (`1mb`). */
const DEFAULT_MAX_PATCH_VALUE = `${DEFAULT_MAX_VALUE_BYTES / (1024 * 1024)}mb`;

/** Largest accepted `CONSUMER_TABLE_SIZE` (entries of a few hundred bytes each: ~100 MB at most). */
const MAX_CONSUMER_TABLE_SIZE = 100_000;

/** The alias layer's variables, in docs order. */
export const ALIAS_VARIABLES = {
  ALIASES: {
    schema: parsers.str('on').pipe(z.enum(['on', 'off'], { error: 'must be "on" or "off"' })),
    default: 'on',
    meaning:
      '`off` switches the whole alias layer off: requests and responses pass unchanged, no deprecation headers; the alias metrics stay registered but count nothing, and `/aliases/usage` is still served, empty. See [removing the alias layer](removing-the-alias-layer.md) for when.',
  },
  ALIAS_SUNSET_VERSION: {
    schema: parsers.semver.transform((v) => v ?? (parseSemver('1.0.0') as SemVer)),
    default: '1.0.0',
    meaning: 'Clients at or above this version get no alias handling.',
  },
  ALIAS_DEPRECATED_AT: {
    schema: parsers.date,
    meaning:
      'Date the aliases were deprecated, ISO 8601 (`2026-01-01`, midnight UTC, or `2026-01-01T00:00:00Z`; a date-time needs its time zone, its seconds and their fraction are optional): `Deprecation: @<epoch seconds>` (RFC 9745) on responses to requests that used an alias. Must not be later than `ALIAS_SUNSET_AT`.',
  },
  ALIAS_SUNSET_AT: {
    schema: parsers.date,
    meaning:
      'Date the aliases stop working, in the same form as `ALIAS_DEPRECATED_AT`: `Sunset: <HTTP-date>` (RFC 8594). Must not be earlier than `ALIAS_DEPRECATED_AT`.',
  },
  ALIAS_DOCS_URL: {
    schema: parsers.url,
    meaning:
      'Absolute URL of the migration guide (`docs/migration-guide.md`): `Link: <url>; rel="deprecation"` (RFC 9745 §3), also named in brownout warnings. Characters a URI cannot hold (non-ASCII, spaces, `<>"`) are sent percent-encoded.',
  },
  ALIAS_SUNSET_POLICY_URL: {
    schema: parsers.url,
    meaning:
      'Absolute URL of the sunset policy: `Link: <url>; rel="sunset"` (RFC 8594 §3), percent-encoded as `ALIAS_DOCS_URL`.',
  },
  ALIAS_BROWNOUTS: {
    schema: parsers.optionalStr.transform((v, ctx) => {
      if (v === undefined) return undefined;
      const result = parseBrownouts(v);
      if ('problems' in result) {
        for (const problem of result.problems) ctx.addIssue({ code: 'custom', message: problem });
        return z.NEVER;
      }
      return result.windows;
    }),
    meaning:
      'Comma-separated ISO 8601 intervals, `start/duration` (`2027-01-12T14:00Z/PT1H`) or `start/end`, each start and end a date-time with its time zone (seconds and their fraction optional; a date alone such as `2027-01-12` is refused: a window is a range of instants, write `2027-01-12T00:00Z`), during which the layer behaves as if deleted: no rewrites, no patches; requests that used an alias get `Warning: 299 - "… browned out …"` and `brownout: true` in the log. Windows must not overlap, at most 1000 of them; durations are weeks, days, hours, minutes, seconds (`P1W`, `P1D`, `PT30M`, `PT0.5S`: at most three decimals), never zero, never years or months.',
  },
  CONSUMER_HEADER: {
    schema: parsers.optionalHeaderName,
    meaning:
      'Identity header set by a gateway in front (e.g. `X-Consumer-Id`): its value (sanitised, at most 64 characters) names the consumer in `/aliases/usage` and the log. The gateway must set it on every request (overwriting any value a client sent): the shim cannot tell who set it. Must not be a credential header (`Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie`, `API_KEY_HEADER`).',
  },
  CONSUMER_FINGERPRINT_KEY: {
    schema: parsers.optionalStr.pipe(
      z.string().min(16, 'must be at least 16 characters (an HMAC key)').optional(),
    ),
    meaning:
      'Secret HMAC-SHA-256 key, at least 16 characters: a consumer without `CONSUMER_HEADER` that sends an API key is named by the first 16 hex digits of HMAC(key, API key). Unset: all API-key consumers count as `api-key` (the key itself is never stored). Cookie sessions count as `session`.',
  },
  CONSUMER_TABLE_SIZE: {
    schema: parsers.count(1000, MAX_CONSUMER_TABLE_SIZE),
    default: '1000',
    meaning:
      'Consumers tracked by the usage table (space-saving heavy hitters, `GET /aliases/usage` on the admin listener), 1 to 100000; memory is bounded by it.',
  },
  MAX_PATCH_VALUE: {
    schema: parsers.byteSize(DEFAULT_MAX_PATCH_VALUE),
    default: DEFAULT_MAX_PATCH_VALUE,
    meaning:
      'Largest member value the streaming response patcher holds back to copy (SPEC §6); a larger value passes unpatched from there on and is counted.',
  },
} satisfies VariableSpecs;

/** Credential headers a consumer header must not name: their value would land in the usage table. */
const CREDENTIAL_HEADERS = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie'];

/**
 * The alias layer's configuration schema (composed by `src/config.ts`).
 * Cross-variable rule: `ALIAS_DEPRECATED_AT` must not be later than `ALIAS_SUNSET_AT` (RFC 9745 §3:
 * the sunset date should not be earlier than the deprecation date).
 */
export const aliasConfig: PluginConfigSchema<AliasSettings> = {
  variables: ALIAS_VARIABLES,
  build(raw, problems, core) {
    const v = raw as ParsedValues<typeof ALIAS_VARIABLES>;
    if (v.ALIAS_DEPRECATED_AT && v.ALIAS_SUNSET_AT && v.ALIAS_SUNSET_AT < v.ALIAS_DEPRECATED_AT) {
      problems.push('ALIAS_SUNSET_AT: must not be earlier than ALIAS_DEPRECATED_AT (RFC 9745 §3)');
    }
    const consumerHeader = v.CONSUMER_HEADER?.toLowerCase();
    // Checked here, at configuration time; at run time the layer reads the header from its context.
    const apiKeyHeader = (core.API_KEY_HEADER ?? DEFAULT_API_KEY_HEADER).toLowerCase();
    if (consumerHeader !== undefined && [...CREDENTIAL_HEADERS, apiKeyHeader].includes(consumerHeader)) {
      problems.push(`CONSUMER_HEADER: must not be a credential header (got "${v.CONSUMER_HEADER}")`);
    }
    return {
      enabled: v.ALIASES === 'on',
      sunsetVersion: v.ALIAS_SUNSET_VERSION,
      ...(v.ALIAS_DEPRECATED_AT && { deprecatedAt: v.ALIAS_DEPRECATED_AT }),
      ...(v.ALIAS_SUNSET_AT && { sunsetAt: v.ALIAS_SUNSET_AT }),
      ...(v.ALIAS_DOCS_URL && { docsUrl: v.ALIAS_DOCS_URL }),
      ...(v.ALIAS_SUNSET_POLICY_URL && { sunsetPolicyUrl: v.ALIAS_SUNSET_POLICY_URL }),
      ...(v.ALIAS_BROWNOUTS && { brownouts: v.ALIAS_BROWNOUTS }),
      ...(consumerHeader && { consumerHeader }),
      ...(v.CONSUMER_FINGERPRINT_KEY && { consumerFingerprintKey: v.CONSUMER_FINGERPRINT_KEY }),
      consumerTableSize: v.CONSUMER_TABLE_SIZE,
      maxPatchValue: v.MAX_PATCH_VALUE,
    };
  },
};
