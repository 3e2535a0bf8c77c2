/**
 * The client-version gate (service document part 9; SPEC §3 step 4).
 */
import { lt, parse, type SemVer } from 'semver';
import { ShimError } from '../core/errors.ts';
import type { Gate } from '../core/exchange.ts';
import { forwardedValue } from '../core/hop-by-hop.ts';
import { headerCount } from '../core/raw-headers.ts';

/** Python's PEP 440 dev release form `X.Y.Z.devN`, read as SemVer `X.Y.Z-dev.N`. */
const PYTHON_DEV = /^(\d+\.\d+\.\d+)\.dev(\d+)$/;
/** Strict SemVer 2.0.0 grammar (semver.org), no `v` prefix, no surrounding space. */
const STRICT_SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

/**
 * Parses a client version header value.
 * Accepts strict SemVer 2.0 (`0.59.0`, `0.59.0-rc.1`, `0.59.0+build`) and the Python dev form
 * `0.59.0.dev20260101` (read as `0.59.0-dev.20260101`). Rejects `v0.59.0`, `0.59`, surrounding spaces.
 * @param value The header value as received, or `undefined` when absent.
 * @returns The parsed version, or `undefined` when absent, empty or not a version.
 * @throws Nothing (`semver.parse` returns `null` where `SemVer` would throw, e.g. a component beyond
 *   `Number.MAX_SAFE_INTEGER`).
 */
export function parseClientVersion(value: string | string[] | undefined): SemVer | undefined {
  if (typeof value !== 'string' || value.length === 0 || value.length > 256) return undefined;
  const dev = PYTHON_DEV.exec(value);
  const text = dev ? `${dev[1]}-dev.${dev[2]}` : value;
  if (!STRICT_SEMVER.test(text)) return undefined;
  return parse(text) ?? undefined;
}

/**
 * Whether `version` is below `minimum` (prereleases count as below their release:
 * `1.0.0-rc.1` < `1.0.0`, as `semver.lt` compares; `semver.satisfies` would not).
 * @param version The client's version.
 * @param minimum `MIN_CLIENT_VERSION`, or `undefined` when none is set.
 * @returns `true` when a minimum is set and `version` is strictly below it.
 * @throws Nothing.
 */
export function isBelow(version: SemVer, minimum: SemVer | undefined): boolean {
  return minimum !== undefined && lt(version, minimum);
}

/** Options of {@link clientVersionGate}. */
export interface ClientVersionRules {
  /** Lower-cased request header name (`CLIENT_VERSION_HEADER`). */
  header: string;
  /** Header name as configured, for messages. */
  headerDisplayName: string;
  /** `MIN_CLIENT_VERSION`. */
  minimum: SemVer | undefined;
}

/**
 * Valid versions a gate remembers, parsed: a fleet sends a few dozen distinct ones. When full, the
 * memory starts over (a client cycling through made-up versions costs what parsing costs, no memory).
 */
export const KNOWN_VERSIONS_LIMIT = 256;

/**
 * The client-version gate (SPEC §3 step 4): reads `rules.header` with {@link parseClientVersion} and
 * stores the `SemVer` on `state.exchange.clientVersion`. Skipped (no check, nothing stored) for a
 * request the public-path gate marked unchecked (a CORS preflight or a public path, steps 2–3).
 * A version seen before is not parsed again (at most {@link KNOWN_VERSIONS_LIMIT} remembered, valid
 * ones only): the same header value gives the same, never mutated, `SemVer`.
 * @param rules The header (lower case, and as configured for messages) and `MIN_CLIENT_VERSION`.
 * @returns The gate, to run after the public-path gate.
 * @throws {ShimError} (from the gate) `version` (426) for a missing, malformed or too old client
 *   version (below `rules.minimum`, prereleases below their release).
 * @example
 * const gate = clientVersionGate({ header: 'service-client-version', headerDisplayName: 'Service-Client-Version', minimum: undefined });
 * gate(req, state); // state.exchange.clientVersion?.version === '0.59.0'
 */
export function clientVersionGate(rules: ClientVersionRules): Gate {
  const known = new Map<string, SemVer>();
  const parseKnown = (value: string | string[] | undefined): SemVer | undefined => {
    if (typeof value !== 'string') return parseClientVersion(value);
    let version = known.get(value);
    if (version === undefined) {
      version = parseClientVersion(value);
      if (version === undefined) return undefined;
      if (known.size >= KNOWN_VERSIONS_LIMIT) known.clear();
      known.set(value, version);
    }
    return version;
  };
  return (req, state) => {
    if (state.unchecked) return;
    // Named by `Connection`, the header would not reach the upstream: as if it were not sent.
    const value = forwardedValue(req.headers, rules.header);
    const version = parseKnown(value);
    if (!version) throw new ShimError('version', unreadableVersionMessage(value, req.rawHeaders, rules));
    if (isBelow(version, rules.minimum)) {
      throw new ShimError(
        'version',
        `Client version ${version.version} is no longer supported; upgrade to ${rules.minimum?.version} or later.`,
      );
    }
    state.exchange.clientVersion = version;
  };
}

/**
 * The 426 message for a request whose client version could not be read, naming what is wrong: the
 * header is absent (or empty, or named by `Connection`), sent more than once (Node joins the field
 * lines with `, `, which no version parses), or not a version (`v0.59.0`, `0.59`). The value itself
 * is not echoed.
 * @param value The header's value as the gate read it (`forwardedValue`: absent when `Connection` names it).
 * @param rawHeaders The request's raw header list, counted only on this failure path.
 * @param rules The header, lower case and as configured.
 * @returns One sentence for the JSON error's `message`.
 */
function unreadableVersionMessage(
  value: string | string[] | undefined,
  rawHeaders: readonly string[],
  rules: ClientVersionRules,
): string {
  if (value === undefined || value === '')
    return `Send the header ${rules.headerDisplayName} with your client's semantic version (e.g. 0.59.0).`;
  if (headerCount(rawHeaders, rules.header) > 1) return `Send exactly one ${rules.headerDisplayName} header.`;
  return `The header ${rules.headerDisplayName} must be your client's semantic version, MAJOR.MINOR.PATCH without a prefix (e.g. 0.59.0).`;
}

/**
 * The outdated-client warning (SPEC §6): `299 - "client <v> is older than service <s>; please upgrade"`
 * when both versions are known and the client's is lower; else `undefined`.
 * @param client The client's version (`state.exchange.clientVersion`), or `undefined`.
 * @param service The service's version (configured or learned), or `undefined`.
 * @returns The `Warning` field value, or `undefined`.
 * @throws Nothing.
 */
export function outdatedClientWarning(
  client: SemVer | undefined,
  service: SemVer | undefined,
): string | undefined {
  if (!client || !service || !lt(client, service)) return undefined;
  return `299 - "client ${client.version} is older than service ${service.version}; please upgrade"`;
}
