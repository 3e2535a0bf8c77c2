/**
 * Decides which clients get alias handling: those below the sunset version (SPEC §2 `ALIAS_SUNSET_VERSION`;
 * service document part 9: "until the service's client reaches version 1.0").
 */
import { lt, type SemVer } from 'semver';
import type { AliasSettings } from './config.ts';

/**
 * Whether a client gets alias rewrites and patches.
 *
 * Compared with `semver.lt`, which orders pre-releases below their release (`1.0.0-rc.1` < `1.0.0`), so a
 * release candidate of 1.0 still gets aliases. (`semver.satisfies('1.0.0-rc.1', '<1.0.0')` is `false`,
 * because ranges exclude pre-releases of other tuples: the wrong tool here.)
 *
 * @param settings The alias layer's settings (`enabled`, `sunsetVersion`).
 * @param clientVersion The parsed client version; `undefined` on public paths and preflights.
 * @returns `true` when the layer is on and the client is strictly below the sunset version.
 * @throws Nothing (`semver.lt` of two parsed versions).
 * @example
 * wantsAliases({ enabled: true, sunsetVersion: new SemVer('1.0.0') }, new SemVer('0.59.0')); // true
 */
export function wantsAliases(
  settings: Pick<AliasSettings, 'enabled' | 'sunsetVersion'>,
  clientVersion: SemVer | undefined,
): boolean {
  return settings.enabled && clientVersion !== undefined && lt(clientVersion, settings.sunsetVersion);
}
