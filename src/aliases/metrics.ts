/**
 * The alias layer's own metrics (SPEC §8): who still uses which alias, so that operators know when the
 * layer can be switched off and deleted (SPEC §10) — `shim_alias_uses_total`,
 * `shim_alias_brownout_requests_total`, `shim_alias_brownout_refusals_total` and the gauge
 * `shim_alias_consumers`. Labels are bounded: alias names and routes come from the table, directions
 * are two, client versions are reduced to `major.minor` with a cap on distinct values, and consumers
 * are the top {@link TOP_CONSUMER_SERIES}.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { SemVer } from 'semver';
import { startAtZero } from '../observability/metrics.ts';

/** Distinct `client` label values kept; later ones are counted as `other`. */
export const MAX_CLIENT_LABELS = 100;

/** Metric name of {@link AliasMetrics.uses}. */
const ALIAS_USES_METRIC = 'shim_alias_uses_total';

/** Metric name of {@link AliasMetrics.brownoutRequests}. */
const ALIAS_BROWNOUT_REQUESTS_METRIC = 'shim_alias_brownout_requests_total';
/** Metric name of {@link AliasMetrics.brownoutRefusals}. */
const ALIAS_BROWNOUT_REFUSALS_METRIC = 'shim_alias_brownout_refusals_total';
/** Metric name of the top-consumers gauge. */
const ALIAS_CONSUMERS_METRIC = 'shim_alias_consumers';
/** Consumers exported by the top-consumers gauge (the full list is `GET /aliases/usage`). */
export const TOP_CONSUMER_SERIES = 10;

/**
 * The alias layer's counters and the bounded client label (the fourth metric, the gauge
 * `shim_alias_consumers`, reads the usage table at each scrape and needs no handle).
 */
export interface AliasMetrics {
  /** `shim_alias_uses_total{alias, direction, client}`. */
  readonly uses: Counter<'alias' | 'direction' | 'client'>;
  /**
   * The `client` label of a version: `"<major>.<minor>"`, or `other` once {@link MAX_CLIENT_LABELS}
   * distinct values have been seen (a client can send any version below the sunset). Each call takes a
   * value for good: call it only for a use that is counted (index.ts), so that requests which never count
   * (refused, made up) cannot use the values up.
   */
  clientLabel(version: SemVer): string;
  /**
   * `shim_alias_brownout_requests_total{route}`: requests of legacy clients on an aliased route
   * (`route` = `METHOD /pattern` from the alias table) that a brownout left untranslated, counted once
   * the upstream answered them with a status below 500 other than 401 and 403 (`countsAsUse`, consumer.ts).
   */
  readonly brownoutRequests: Counter<'route'>;
  /** `shim_alias_brownout_refusals_total{route}`: of those, the ones the upstream answered 4xx (not 401 or 403). */
  readonly brownoutRefusals: Counter<'route'>;
}

/**
 * Registers the alias metrics on a registry.
 * @param registry The shared registry.
 * @param topConsumers Called at each scrape: the consumers with the highest guaranteed counts (at most
 *   {@link TOP_CONSUMER_SERIES} are exported as `shim_alias_consumers{consumer}`: the aliased requests
 *   certainly theirs since the usage table was last reset, usage-table.ts `guaranteed`; ids are
 *   sanitised and never credentials).
 * @param brownoutRoutes The alias table's request routes (`METHOD /pattern`): both brownout counters
 *   start at 0 for each, so that `increase()` over them reads 0, not "no data", and sees a first
 *   brownout after a restart (a series that first appears with 1 hides that increase from Prometheus).
 * @returns The three counters (the brownout ones started at 0 per route) and `clientLabel`.
 * @throws {Error} from prom-client when the registry already holds a metric of one of these names.
 */
export function createAliasMetrics(
  registry: Registry,
  topConsumers: () => ReadonlyArray<{ consumer: string; count: number }> = () => [],
  brownoutRoutes: readonly string[] = [],
): AliasMetrics {
  const uses = new Counter({
    name: ALIAS_USES_METRIC,
    help: 'Deprecated alias uses: renamed in requests the upstream answered with neither 401, 403 nor 5xx (direction=request) or added to responses (direction=response), by alias and client major.minor.',
    labelNames: ['alias', 'direction', 'client'] as const,
    registers: [registry],
  });
  const brownoutRequests = new Counter({
    name: ALIAS_BROWNOUT_REQUESTS_METRIC,
    help: 'Requests of legacy clients on an aliased route left untranslated by a brownout (ALIAS_BROWNOUTS) that the upstream answered with neither 401, 403 nor 5xx, by alias-table route.',
    labelNames: ['route'] as const,
    registers: [registry],
  });
  const brownoutRefusals = new Counter({
    name: ALIAS_BROWNOUT_REFUSALS_METRIC,
    help: 'Of the browned-out requests, those the upstream refused (4xx other than 401 and 403), by alias-table route.',
    labelNames: ['route'] as const,
    registers: [registry],
  });
  startAtZero(brownoutRequests, 'route', brownoutRoutes);
  startAtZero(brownoutRefusals, 'route', brownoutRoutes);
  new Gauge({
    name: ALIAS_CONSUMERS_METRIC,
    help: `Guaranteed aliased requests (count - error in the usage report) of the ${TOP_CONSUMER_SERIES} consumers with the most since the usage table was reset (GET /aliases/usage on the admin listener has the rest).`,
    labelNames: ['consumer'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const { consumer, count } of topConsumers().slice(0, TOP_CONSUMER_SERIES))
        this.set({ consumer }, count);
    },
  });
  const seen = new Set<string>();
  return {
    uses,
    brownoutRequests,
    brownoutRefusals,
    clientLabel(version: SemVer): string {
      const label = `${version.major}.${version.minor}`;
      if (seen.has(label)) return label;
      if (seen.size >= MAX_CLIENT_LABELS) return 'other';
      seen.add(label);
      return label;
    },
  };
}
