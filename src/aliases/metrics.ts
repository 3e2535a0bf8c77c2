/**
 * The alias layer's own metric (SPEC §8): who still uses which alias, so that operators know when the
 * layer can be switched off and deleted (SPEC §10). Labels are bounded: alias names come from the table,
 * directions are two, and client versions are reduced to `major.minor` with a cap on distinct values.
 */
import { Counter, type Registry } from 'prom-client';
import type { SemVer } from 'semver';

/** Distinct `client` label values kept; later ones are counted as `other`. */
export const MAX_CLIENT_LABELS = 100;

/** Metric name of {@link AliasMetrics.uses}. */
export const ALIAS_USES_METRIC = 'shim_alias_uses_total';

export type AliasDirection = 'request' | 'response';

/** The alias layer's metric and the bounded client label. */
export interface AliasMetrics {
  /** `shim_alias_uses_total{alias, direction, client}`. */
  readonly uses: Counter<'alias' | 'direction' | 'client'>;
  /**
   * The `client` label of a version: `"<major>.<minor>"`, or `other` once {@link MAX_CLIENT_LABELS}
   * distinct values have been seen (a client can send any version below the sunset).
   */
  clientLabel(version: SemVer): string;
}

/**
 * Registers the alias metric on a registry.
 * @throws {Error} from prom-client when the registry already holds a metric of that name.
 */
export function createAliasMetrics(registry: Registry): AliasMetrics {
  const uses = new Counter({
    name: ALIAS_USES_METRIC,
    help: 'Deprecated alias uses: renamed in requests (direction=request) or added to responses (direction=response), by alias and client major.minor.',
    labelNames: ['alias', 'direction', 'client'] as const,
    registers: [registry],
  });
  const seen = new Set<string>();
  return {
    uses,
    clientLabel(version: SemVer): string {
      const label = `${version.major}.${version.minor}`;
      if (seen.has(label)) return label;
      if (seen.size >= MAX_CLIENT_LABELS) return 'other';
      seen.add(label);
      return label;
    },
  };
}
