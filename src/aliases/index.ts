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
import type {
  Exchange,
  ExchangeHooks,
  PatchOutcome,
  PluginContext,
  ProxyPlugin,
  ResponsePatch,
} from '../proxy/types.ts';
import { aliasWarning, deprecationHeaders, WARNING_BUDGET } from './deprecation.ts';
import { isJsonMediaType } from './media-type.ts';
import { createAliasMetrics } from './metrics.ts';
import { patchJson } from './patch-json.ts';
import { rewriteBody } from './rewrite-body.ts';
import { rewriteQuery } from './rewrite-query.ts';
import { compileRoutes } from './route-match.ts';
import { ALIAS_TABLE, type AliasRename, type AliasRow, responsePairs } from './table.ts';
import { wantsAliases } from './version-gate.ts';

/** TEMPORARY (until the streaming patcher lands): largest body the whole-body adapter holds, in bytes. */
const TEMPORARY_MAX_HELD = 32 * 1024 * 1024;

/**
 * Creates the alias layer.
 *
 * Per request of a client that {@link wantsAliases} (layer on, version below the sunset):
 * - `rewriteQuery` on routes with query aliases; `body` on routes with body aliases when the request's
 *   `Content-Type` is JSON (`application/json`, `application/*+json`); `onResponse` patches JSON
 *   responses of any status.
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
 *   `ALIAS_DEPRECATED_AT`, `ALIAS_SUNSET_AT`, `ALIAS_DOCS_URL`).
 * @param context Logger and the shared Prometheus registry (the metric is registered on it).
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
    variesByClientVersion: settings.enabled, // responses depend on the client version only while the layer is on
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

      // TEMPORARY whole-body adapter onto the streaming seam, until the streaming patcher
      // (createJsonPatch, src/aliases/patch-json.ts) lands: holds the body (at most
      // TEMPORARY_MAX_HELD bytes, reserved from the process-wide budget), patches it at the end;
      // beyond that it passes the body unpatched.
      const patch = (): ResponsePatch => {
        let chunks: Buffer[] = [];
        let held = 0;
        let passing = false;
        let outcome: PatchOutcome = { kind: 'unchanged' };
        const release = () => {
          context.budget.release(held);
          held = 0;
          chunks = [];
        };
        return {
          write(chunk, emit) {
            if (passing) return emit(chunk);
            if (held + chunk.length > TEMPORARY_MAX_HELD || !context.budget.tryReserve(chunk.length)) {
              outcome = {
                kind: 'skipped',
                reason: held + chunk.length > TEMPORARY_MAX_HELD ? 'value_too_large' : 'budget_exhausted',
              };
              passing = true;
              for (const c of chunks) emit(c);
              release();
              return emit(chunk);
            }
            held += chunk.length;
            chunks.push(chunk);
          },
          end(emit) {
            if (passing) return;
            const body = Buffer.concat(chunks);
            release();
            const result = patchJson(pairs, body);
            if (result.kind === 'patched') {
              exchange.logFields.aliasesAdded = result.insertions.length;
              const added = new Set(result.insertions.map((i) => i.pair));
              for (const pair of added)
                metrics.uses.inc({ alias: pairs[pair]!.alias, direction: 'response', client });
              outcome = { kind: 'patched' };
              emit(result.body);
              return;
            }
            outcome = result;
            emit(body);
          },
          destroy: release,
          get outcome() {
            return outcome;
          },
        };
      };

      const hooks: ExchangeHooks = {
        // JSON responses; and a HEAD or 304 without a content type (a 304 usually has none), so that it
        // carries the validator and length promise of the patched GET (CONTRACT, issue 10 item 3).
        onResponse: (status, headers) =>
          isJsonMediaType(headers['content-type']) ||
          ((status === 304 || exchange.method === 'HEAD') && headers['content-type'] === undefined)
            ? patch()
            : undefined,
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
