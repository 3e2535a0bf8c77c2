/**
 * The alias layer as one plugin on the core's seams (SPEC §5, §6, §10; service document part 9).
 *
 * For a client below the sunset version it renames deprecated names in JSON request bodies and query
 * strings, adds them back to JSON responses, tells the client (Warning, Deprecation, Sunset, Link) and
 * counts who still uses what. Every other request gets `undefined` from {@link ProxyPlugin.onRequest}
 * and costs nothing more. Deleting this folder and its one registration line in `app.ts` removes the
 * layer (SPEC §10).
 */
import type { AliasSettings } from '../config.ts';
import type { Exchange, ExchangeHooks, PluginContext, ProxyPlugin, ResponsePatch } from '../proxy/types.ts';
import { aliasWarning, deprecationHeaders, WARNING_BUDGET } from './deprecation.ts';
import { isJsonMediaType } from './media-type.ts';
import { createAliasMetrics } from './metrics.ts';
import { createJsonPatch, DEFAULT_MAX_VALUE_BYTES } from './patch-json.ts';
import { rewriteBody } from './rewrite-body.ts';
import { rewriteQuery } from './rewrite-query.ts';
import { compileRoutes } from './route-match.ts';
import { ALIAS_TABLE, type AliasRename, type AliasRow, responsePairs } from './table.ts';
import { wantsAliases } from './version-gate.ts';

/**
 * Creates the alias layer.
 *
 * Per request of a client that {@link wantsAliases} (layer on, version below the sunset):
 * - `rewriteQuery` on routes with query aliases; `body` on routes with body aliases when the request's
 *   `Content-Type` is JSON (`application/json`, `application/*+json`); `onResponse` returns a streaming
 *   patch ({@link createJsonPatch}, holding at most `MAX_PATCH_VALUE` bytes, reserved from
 *   `context.budget`) for JSON responses of any status, and for a HEAD or a 304 without Content-Type.
 * - When an alias is used in the request: one `Warning: 299 - "<alias> is deprecated; use <canonical>"`
 *   per alias (at most {@link WARNING_BUDGET} bytes of them), and once the configured `Deprecation`,
 *   `Sunset` and `Link; rel="deprecation"` headers — appended to `exchange.responseHeaders` as soon as
 *   the use is known (both rewrites run before forwarding).
 * - `exchange.logFields.aliases` lists the aliases the request used; `aliasesAdded` counts the members
 *   added to the response.
 * - `shim_alias_uses_total{alias, direction, client}` counts each alias once per request (direction
 *   `request`) and once per patched response that received it (direction `response`).
 *
 * @param settings `AliasSettings` from the configuration (`ALIASES`, `ALIAS_SUNSET_VERSION`,
 *   `ALIAS_DEPRECATED_AT`, `ALIAS_SUNSET_AT`, `ALIAS_DOCS_URL`, `MAX_PATCH_VALUE`).
 * @param context Logger, the shared Prometheus registry (the metric is registered on it) and the
 *   process-wide buffer budget the patches reserve from.
 * @param table The alias table (default: the service document's part 9 table).
 * @throws {Error} when the registry already has `shim_alias_uses_total`, or the table is malformed.
 * @example
 * plugins.push(createAliasLayer(config.aliases, context)); // the one line in app.ts
 */
export function createAliasLayer(
  settings: AliasSettings,
  context: PluginContext,
  table: readonly AliasRow[] = ALIAS_TABLE,
): ProxyPlugin {
  const routes = compileRoutes(table);
  const pairs = responsePairs(table);
  const maxValueBytes = settings.maxPatchValue ?? DEFAULT_MAX_VALUE_BYTES;
  const metrics = createAliasMetrics(context.registry);
  const signals = deprecationHeaders(settings);
  context.logger.info(
    { aliases: settings.enabled, sunsetVersion: settings.sunsetVersion.version },
    settings.enabled
      ? 'alias layer on for clients below the sunset version'
      : 'alias layer off (ALIASES=off)',
  );

  return {
    name: 'aliases',
    onRequest(exchange: Exchange): ExchangeHooks | undefined {
      const version = exchange.clientVersion;
      if (version === undefined || !wantsAliases(settings, version)) return undefined;
      const client = metrics.clientLabel(version);

      // Aliases this request used, recorded once each (query and body may both use one).
      const used: string[] = [];
      let warningBytes = 0;
      const record = (renames: readonly AliasRename[], aliasesUsed: readonly string[]) => {
        for (const alias of aliasesUsed) {
          if (used.includes(alias)) continue;
          if (used.length === 0) exchange.responseHeaders.push(...signals);
          used.push(alias);
          const rename = renames.find((r) => r.alias === alias)!;
          const warning = aliasWarning(rename.alias, rename.canonical);
          warningBytes += warning.length;
          if (warningBytes <= WARNING_BUDGET) exchange.responseHeaders.push(['Warning', warning]);
          metrics.uses.inc({ alias, direction: 'request', client });
        }
        if (aliasesUsed.length > 0) exchange.logFields.aliases = [...used];
      };

      // Counts the members the streaming patch inserts: the log field, and each alias once per response.
      let added = 0;
      const aliasesAdded = new Set<string>();
      const onInsert = (_canonical: string, alias: string) => {
        if (!aliasesAdded.has(alias)) {
          aliasesAdded.add(alias);
          metrics.uses.inc({ alias, direction: 'response', client });
        }
        exchange.logFields.aliasesAdded = ++added;
      };
      const bodiless = exchange.method === 'HEAD';

      const hooks: ExchangeHooks = {
        // A JSON response of any status is patched as it streams (SPEC §6). A HEAD or a 304 has no body,
        // and a 304 usually no Content-Type: the patch is still returned so that the core sends the
        // headers the patched GET would carry (no Content-Length, weak ETag), then destroys it.
        onResponse: (status, headers): ResponsePatch | undefined => {
          const contentType = headers['content-type'];
          const patched =
            isJsonMediaType(contentType) || ((bodiless || status === 304) && contentType === undefined);
          if (!patched) return undefined;
          return createJsonPatch(pairs, { maxValueBytes, budget: context.budget, onInsert });
        },
      };
      const route = routes.match(exchange.method, exchange.path);
      if (route !== undefined && route.query.length > 0) {
        hooks.rewriteQuery = (rawQuery) => {
          const result = rewriteQuery(route.query, rawQuery);
          record(route.query, result.aliasesUsed);
          return result.query;
        };
      }
      if (route !== undefined && route.body.length > 0 && isJsonMediaType(exchange.headers['content-type'])) {
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
