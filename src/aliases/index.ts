/**
 * The alias layer as one plugin on the core's seams (SPEC §5, §6, §10; service document part 9).
 *
 * For a client below the sunset version it renames deprecated names in JSON request bodies and query
 * strings, adds them back to JSON responses, tells the client (Warning, Deprecation, Sunset, Link) and
 * counts who still uses what. Every other request gets `undefined` from {@link ProxyPlugin.onRequest}
 * and costs nothing more. Deleting this folder and its one registration line in `app.ts` removes the
 * layer (SPEC §10).
 */
import type { IncomingMessage } from 'node:http';
import { DEFAULT_API_KEY_HEADER, type PluginDefinition } from '../config.ts';
import { ShimError } from '../core/errors.ts';
import { combinedFieldValue } from '../core/raw-headers.ts';
import type { Exchange, ExchangeHooks, PluginContext, ProxyPlugin, ResponsePatch } from '../core/types.ts';
import { logPath } from '../observability/request-log.ts';
import { activeBrownout, type BrownoutWindow, brownoutWarning } from './brownout.ts';
import { type AliasSettings, aliasConfig } from './config.ts';
import { consumerOf, countsAsUse, MAX_CONSUMER_CHARS, userAgentProduct } from './consumer.ts';
import { aliasWarning, deprecationHeaders, WARNING_BUDGET, yieldToUpstreamDates } from './deprecation.ts';
import { isJsonInMediaTypeList, isJsonMediaType } from './media-type.ts';
import { createAliasMetrics, TOP_CONSUMER_SERIES } from './metrics.ts';
import { createJsonPatch } from './patch-json.ts';
import { rewriteBody } from './rewrite-body.ts';
import { rewriteQuery } from './rewrite-query.ts';
import { compileRoutes } from './route-match.ts';
import { ALIAS_TABLE, type AliasRename, type AliasRow, responsePairs } from './table.ts';
import { usageRoutes } from './usage-routes.ts';
import { UsageTable } from './usage-table.ts';
import { revalidatesUnpatched } from './validators.ts';
import { wantsAliases } from './version-gate.ts';

/** The `route` label of the brownout counters: `METHOD /pattern` of the alias table, e.g. `GET /files`. */
function brownoutRouteLabel(route: { method: string; path: string }): string {
  return `${route.method} ${route.path}`;
}

/**
 * Every `route` label the brownout counters can take: the table's request routes (as compileRoutes
 * groups them: method upper-cased, one per method and path).
 * @param table Alias rows.
 */
function requestRouteLabels(table: readonly AliasRow[]): string[] {
  const labels = new Map<string, string>();
  for (const { method, path } of table) {
    if (method === undefined || path === undefined) continue;
    const id = `${method.toUpperCase()} ${path.toLowerCase()}`;
    if (!labels.has(id)) labels.set(id, brownoutRouteLabel({ method: method.toUpperCase(), path }));
  }
  return [...labels.values()];
}

/**
 * Creates the alias layer.
 *
 * Per request of a client that {@link wantsAliases} (layer on, version below the sunset):
 * - `rewriteQuery` on routes with query aliases, which throws the `ShimError` 400 (`hygiene`) for a query
 *   a parser splitting on `;` would read otherwise (parameter cloaking, rewrite-query.ts; fix 158);
 *   `body` on routes with body aliases when the request's
 *   `Content-Type` is JSON (`application/json`, `application/*+json`), and the same 400 at once when it
 *   lists several media types, one of them JSON (fix 168); `onResponse` returns a streaming
 *   patch ({@link createJsonPatch}, holding at most `MAX_PATCH_VALUE` bytes, reserved from
 *   `context.budget`) for JSON responses of any status, and for a HEAD or a 304 without Content-Type —
 *   but not for a 304 that revalidates a copy the client holds unpatched (its `If-None-Match` names the
 *   strong tag only; validators.ts): the 304 keeps the validator that 200 carried.
 * - When an alias is used in the request: one `Warning: 299 - "<alias> is deprecated; use <canonical>"`
 *   per alias (at most {@link WARNING_BUDGET} bytes of them), and once the configured `Deprecation`,
 *   `Sunset` and `Link; rel="deprecation"` headers — appended to `exchange.responseHeaders` as soon as
 *   the use is known (both rewrites run before forwarding).
 * - `exchange.logFields.aliases` lists the aliases the request used; `aliasesAdded` counts the members
 *   added to the response.
 * - `shim_alias_uses_total{alias, direction, client}` counts each alias once per request (direction
 *   `request`) and once per patched response that received it (direction `response`).
 * - Who: each request that used an alias is attributed to a consumer (`consumer.ts`: gateway identity
 *   header, HMAC fingerprint of the API key, or `session`), logged as `exchange.logFields.consumer` and
 *   counted in a bounded space-saving table served on the admin listener: `GET /aliases/usage` →
 *   `{since, capacity, recorded, consumers: [{consumer, count, error, aliases, clientVersions,
 *   userAgents, firstSeen, lastSeen}]}` sorted by `count` (`?limit=n` for the first n),
 *   `DELETE /aliases/usage` → 204 and a fresh table. The 10 with the highest guaranteed counts
 *   (`count - error`, usage-table.ts `guaranteed`) are the gauge `shim_alias_consumers{consumer}`.
 * - When a request counts (against usage poisoning, test/security/aliases-usage-poisoning.test.ts):
 *   the headers and log fields above describe the request and are set when it is rewritten; the usage
 *   table, `shim_alias_consumers` and `shim_alias_uses_total{direction="request"}` count it only in
 *   `onResponse`, once the upstream has answered with a status that {@link countsAsUse} accepts (below
 *   500 and not 401 or 403: the shim admits any non-empty API key, the upstream verifies it). A request the
 *   upstream refused with 401 or 403, answered with a 5xx, or never answered (the shim's own 4xx/502/504, a
 *   client that went away) is not counted, so made-up keys can neither keep the signal that decides the
 *   layer's removal above zero nor fill the table.
 * - Brownouts (`ALIAS_BROWNOUTS`, clock `context.now`): inside a window the layer does what its
 *   deletion would do (no rewrite, no patch, no body buffered, no deprecation headers). A request whose
 *   query uses an alias, or that sends a JSON body to a route with body aliases (detected by route: the
 *   body is streamed, never scanned, exactly as without the layer), gets one
 *   `Warning: 299 - "<aliases>: aliases are browned out until <end> …; see <ALIAS_DOCS_URL>"`, the log
 *   fields `brownout: true` and `consumer`; by the same rule ({@link countsAsUse}: once the upstream
 *   answered, below 500 and not 401 or 403) it counts in `shim_alias_brownout_requests_total{route}`, in
 *   `shim_alias_brownout_refusals_total{route}` when that answer is a 4xx, and in the usage table when
 *   the query showed the alias (a body marked by route may hold none).
 *
 * @param settings `AliasSettings` from the configuration: `ALIASES`, `ALIAS_SUNSET_VERSION`,
 *   `ALIAS_DEPRECATED_AT`, `ALIAS_SUNSET_AT`, `ALIAS_DOCS_URL`, `ALIAS_SUNSET_POLICY_URL` (the
 *   deprecation headers), `ALIAS_BROWNOUTS`, `CONSUMER_HEADER`, `CONSUMER_FINGERPRINT_KEY`,
 *   `CONSUMER_TABLE_SIZE` (the usage table's capacity) and `MAX_PATCH_VALUE` (bytes).
 * @param context Logger, the shared Prometheus registry (the metrics are registered on it), the clock
 *   (`now`, default `Date.now`), the credential rules (`credentials.apiKeyHeader`, default `x-api-key`)
 *   and the process-wide buffer budget the patches reserve from (`budget`).
 * @param table The alias table (default: the service document's part 9 table).
 * @returns The plugin `aliases`: its `onRequest` hooks for clients below the sunset version, and the
 *   admin routes `GET`/`DELETE /aliases/usage`.
 * @throws {Error} when the registry already has one of the alias metrics, or the table is malformed.
 * @example
 * const plugin = createAliasLayer(settings, { logger, registry, budget, now: () => clock });
 */
export function createAliasLayer(
  settings: AliasSettings,
  context: PluginContext,
  table: readonly AliasRow[] = ALIAS_TABLE,
): ProxyPlugin {
  const routes = compileRoutes(table);
  const pairs = responsePairs(table);
  const maxValueBytes = settings.maxPatchValue;
  const now = context.now ?? Date.now;
  const usage = new UsageTable(settings.consumerTableSize);
  const metrics = createAliasMetrics(
    context.registry,
    () => usage.guaranteed(TOP_CONSUMER_SERIES),
    requestRouteLabels(table),
  );
  const signals = deprecationHeaders(settings);
  const consumerRules = {
    apiKeyHeader: context.credentials?.apiKeyHeader ?? DEFAULT_API_KEY_HEADER,
    ...(settings.consumerHeader !== undefined && { consumerHeader: settings.consumerHeader }),
    ...(settings.consumerFingerprintKey !== undefined && { fingerprintKey: settings.consumerFingerprintKey }),
  };
  const brownouts = settings.brownouts ?? [];
  context.logger.info(
    {
      aliases: settings.enabled,
      sunsetVersion: settings.sunsetVersion.version,
      brownouts: brownouts.map((w) => w.text),
      consumers: settings.consumerHeader
        ? `header ${settings.consumerHeader}`
        : settings.consumerFingerprintKey
          ? 'API-key fingerprints'
          : 'unattributed API keys (set CONSUMER_FINGERPRINT_KEY or CONSUMER_HEADER)',
    },
    settings.enabled
      ? 'alias layer on for clients below the sunset version'
      : 'alias layer off (ALIASES=off)',
  );
  // A window wholly in the past rehearses nothing: most likely a mistyped year (2025 for 2027).
  const startedAt = now();
  const past = brownouts.filter((w) => w.end <= startedAt).map((w) => w.text);
  if (settings.enabled && past.length > 0) {
    context.logger.warn(
      { brownouts: past },
      'ALIAS_BROWNOUTS: windows that ended before the start rehearse nothing (a mistyped year?)',
    );
  }

  /** Who: the request's consumer id, set as its log field at once (it describes this request). */
  const identify = (exchange: Exchange): string => {
    const consumer = consumerOf(exchange.headers, consumerRules);
    exchange.logFields.consumer = consumer;
    return consumer;
  };

  /**
   * Counts one request that used `aliases` for `consumer` in the usage table. Called from `onResponse`,
   * once the upstream's answer {@link countsAsUse counts}, never when the request is rewritten.
   */
  const recordUse = (exchange: Exchange, consumer: string, aliases: readonly string[]): void => {
    const userAgent = exchange.headers['user-agent'];
    usage.record({
      consumer,
      aliases,
      clientVersion: (exchange.clientVersion?.version ?? 'unknown').slice(0, MAX_CONSUMER_CHARS),
      userAgent: userAgentProduct(typeof userAgent === 'string' ? userAgent : undefined),
      at: now(),
    });
  };

  /**
   * Hooks inside a brownout window: the layer as deleted. Detection only: the raw query is scanned
   * (cheap, already in memory); a body is never read — a JSON body on a route with body aliases marks
   * the request by route.
   */
  const brownoutHooks = (
    exchange: Exchange,
    rawHeaders: readonly string[],
    window: BrownoutWindow,
  ): ExchangeHooks | undefined => {
    const route = routes.match(exchange.method, exchange.path);
    if (route === undefined) return undefined;
    const used =
      route.query.length > 0 && exchange.rawQuery !== ''
        ? rewriteQuery(route.query, exchange.rawQuery).aliasesUsed
        : [];
    const contentType = route.body.length > 0 ? bodyContentType(rawHeaders) : undefined;
    const bodyRoute = isJsonMediaType(contentType) || isJsonInMediaTypeList(contentType);
    if (used.length === 0 && !bodyRoute) return undefined;
    const named = used.length > 0 ? [...used] : [...new Set(route.body.map((r) => r.alias))];
    exchange.responseHeaders.push(['Warning', brownoutWarning(named, window, settings.docsUrl)]);
    exchange.logFields.brownout = true;
    if (used.length > 0) exchange.logFields.aliases = [...used];
    const consumer = identify(exchange);
    const label = brownoutRouteLabel(route);
    return {
      // Counted only once the upstream's answer shows it did not refuse the credentials. An observer
      // (`onStatus`), not a patcher: as without the layer, the client's Range goes upstream.
      onStatus(status) {
        if (!countsAsUse(status)) return;
        metrics.brownoutRequests.inc({ route: label });
        if (status >= 400) metrics.brownoutRefusals.inc({ route: label });
        if (used.length > 0) recordUse(exchange, consumer, used);
      },
    };
  };

  return {
    name: 'aliases',
    adminRoutes: usageRoutes(usage, now, (dropped) =>
      context.logger.warn(dropped, 'alias usage report reset: its counts are gone'),
    ),
    variesByClientVersion: settings.enabled, // responses depend on the client version only while the layer is on
    onRequest(exchange: Exchange, req: IncomingMessage): ExchangeHooks | undefined {
      const version = exchange.clientVersion;
      if (version === undefined || !wantsAliases(settings, version)) return undefined;
      const window = brownouts.length > 0 ? activeBrownout(brownouts, now()) : undefined;
      if (window !== undefined) return brownoutHooks(exchange, req.rawHeaders, window);
      // The `client` label is taken at the first use counted, not here: requests that never count (refused
      // by the shim or the upstream, made-up versions with made-up keys) must not use up its values.
      let client: string | undefined;
      const clientLabel = () => (client ??= metrics.clientLabel(version));

      // Aliases this request used, once each (query and body may both use one). The signals that
      // describe this request (headers, log fields) are set now; the usage counts wait for the answer.
      const used: string[] = [];
      let warningBytes = 0;
      let consumer: string | undefined;
      const record = (renames: readonly AliasRename[], aliasesUsed: readonly string[]) => {
        for (const alias of aliasesUsed) {
          if (used.includes(alias)) continue;
          if (used.length === 0) {
            exchange.responseHeaders.push(...signals);
            consumer = identify(exchange);
          }
          used.push(alias);
          const rename = renames.find((r) => r.alias === alias)!;
          const warning = aliasWarning(rename.alias, rename.canonical);
          warningBytes += warning.length;
          if (warningBytes <= WARNING_BUDGET) exchange.responseHeaders.push(['Warning', warning]);
        }
        if (aliasesUsed.length > 0) exchange.logFields.aliases = [...used];
      };
      /** The upstream answered: count the request's aliases if the answer {@link countsAsUse counts}. */
      const countRequest = (status: number) => {
        if (consumer === undefined || !countsAsUse(status)) return;
        recordUse(exchange, consumer, used);
        for (const alias of used) metrics.uses.inc({ alias, direction: 'request', client: clientLabel() });
      };

      // Counts the members the streaming patch inserts: the log field, and each alias once per response.
      let added = 0;
      const aliasesAdded = new Set<string>();
      const onInsert = (_canonical: string, alias: string, count: number) => {
        if (!aliasesAdded.has(alias)) {
          aliasesAdded.add(alias);
          metrics.uses.inc({ alias, direction: 'response', client: clientLabel() });
        }
        added += count;
        exchange.logFields.aliasesAdded = added;
      };
      // A failure of the shim's scanner, not of the upstream's JSON: logged at error, apart from the skip.
      const onScanFailure = (err: Error) =>
        context.logger.error(
          { err, path: logPath(exchange.path) },
          'the JSON scanner failed; the response passes unpatched',
        );
      const bodiless = exchange.method === 'HEAD';
      const inm = exchange.headers['if-none-match'];
      const ifNoneMatch = Array.isArray(inm) ? inm.join(', ') : inm;

      const hooks: ExchangeHooks = {
        // A JSON response of any status is patched as it streams (SPEC §6). A HEAD or a 304 has no body,
        // and a 304 usually no Content-Type: the patch is still returned so that the core sends the
        // headers the patched GET would carry (no Content-Length, weak ETag), then destroys it.
        onResponse: (status, headers): ResponsePatch | undefined => {
          countRequest(status);
          if (used.length > 0 && (headers.deprecation !== undefined || headers.sunset !== undefined))
            yieldToUpstreamDates(exchange.responseHeaders, headers);
          const contentType = headers['content-type'];
          // A 304 keeps the strong tag of an unpatched 200 the client holds (SPEC §6; validators.ts).
          if (status === 304 && revalidatesUnpatched(ifNoneMatch, headers.etag)) return undefined;
          const patched =
            isJsonMediaType(contentType) || ((bodiless || status === 304) && contentType === undefined);
          if (!patched) return undefined;
          return createJsonPatch(pairs, { maxValueBytes, budget: context.budget, onInsert, onScanFailure });
        },
      };
      const route = routes.match(exchange.method, exchange.path);
      const contentType =
        route !== undefined && route.body.length > 0 ? bodyContentType(req.rawHeaders) : undefined;
      if (isJsonInMediaTypeList(contentType)) throw ambiguousContentTypeError();
      if (route !== undefined && route.query.length > 0) {
        hooks.rewriteQuery = (rawQuery) => {
          const result = rewriteQuery(route.query, rawQuery);
          if (result.cloaked !== undefined) throw cloakedQueryError(route.query, result.cloaked);
          record(route.query, result.aliasesUsed);
          return result.query;
        };
      }
      if (route !== undefined && isJsonMediaType(contentType)) {
        hooks.body = {
          rewrite(body) {
            const result = rewriteBody(route.body, body);
            record(route.body, result.aliasesUsed);
            return result.body;
          },
        };
      }
      return hooks;
    },
  };
}

/**
 * The refusal of a legacy query that a parser splitting parameters on `;` would read differently
 * (parameter cloaking; rewrite-query.ts `rewriteQuery`, docs/reliability.md fix 158): 400, counted as
 * `hygiene`, nothing forwarded.
 * @param renames The route's query renames.
 * @param alias The alias `rewriteQuery` reported as cloaked.
 * @returns The error the core answers with.
 */
function cloakedQueryError(renames: readonly AliasRename[], alias: string): ShimError {
  const canonical = renames.find((r) => r.alias === alias)?.canonical ?? alias;
  return new ShimError(
    'hygiene',
    `The query has a ';' next to the deprecated parameter '${alias}' or its new name '${canonical}': ` +
      "servers that also separate parameters with ';' would read it otherwise than this proxy, which " +
      "cannot rename it for both. Separate parameters with '&' and send a ';' inside a value as %3B.",
  );
}

/**
 * The `Content-Type` a legacy body on a route with body aliases is judged by: its field lines combined
 * (core/raw-headers.ts `combinedFieldValue`), so that two lines with different types read as the list
 * the folded form is, which {@link ambiguousContentTypeError} refuses, instead of the first line alone
 * (Node's parsed view drops the others; docs/reliability.md fix 173).
 * @param rawHeaders The request's raw header list.
 * @returns The combined value, or `undefined` without a `Content-Type`.
 */
function bodyContentType(rawHeaders: readonly string[]): string | undefined {
  return combinedFieldValue(rawHeaders, 'content-type');
}

/**
 * The refusal of a legacy body on a route with body aliases whose `Content-Type` lists several media
 * types, one of them JSON (media-type.ts `isJsonInMediaTypeList`, docs/reliability.md fix 168): an
 * upstream that reads the first member (Rack, Werkzeug, Rails) reads the body as JSON, one that reads
 * the last may not, and this proxy cannot rename it for both. 400, counted as `hygiene`, nothing
 * forwarded.
 * @returns The error the core answers with.
 */
function ambiguousContentTypeError(): ShimError {
  return new ShimError(
    'hygiene',
    'The Content-Type names several media types, one of them JSON: servers read such a body differently, ' +
      'and this proxy, which renames deprecated fields in JSON bodies, cannot rename it for all of them. ' +
      'Send one media type, e.g. Content-Type: application/json.',
  );
}

/**
 * The alias layer's registration (issue 11 item 6): its name, its own configuration schema (variables
 * and docs rows, composed by `src/config.ts`) and its factory. `app.ts` lists it in its one-line plugin
 * list; deleting this folder and that line removes the layer, its variables and its docs rows.
 */
export const aliasPlugin: PluginDefinition<AliasSettings> = {
  name: 'aliases',
  description:
    'The deprecated field names of the service document part 9 (SPEC §5, §6), in `src/aliases/`: rewrites, response patches, deprecation signals, brownouts and the usage report. Removed at client 1.0 with its folder ([removing the alias layer](removing-the-alias-layer.md)); these variables go with it.',
  config: aliasConfig,
  create: (settings, context) => createAliasLayer(settings, context),
};
