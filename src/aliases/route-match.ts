/**
 * Matches a request (method, raw path) against the request rows of the alias table (SPEC §5).
 *
 * Patterns are compiled once. Matching is case-insensitive and allows one trailing slash, as the
 * upstream's router does; `:uuid` is one non-empty segment. A path is matched as the upstreams that
 * route it most loosely see it (servlet containers: Tomcat, Jetty): without its segments' `;`
 * parameters (`/missions;jsessionid=8F3A`), with percent-encoded unreserved characters decoded
 * (`/mi%73sions`; RFC 3986 §6.2.2.2) and repeated slashes as one; failing that, with its `;`
 * parameters kept, as Express and Spring read them (`/missions/;x/metadata`: the `:uuid` `;x`;
 * `/missions;jsessionid=1/…`); and a last literal segment may carry the format suffix `.json`
 * (`/missions.json`, as Rails and Mojolicious route it) — so
 * that no spelling an upstream routes to a rewritten route passes with the deprecated names. The path
 * forwarded is never changed.
 * This runs for every request of a legacy client, so it is a few anchored regular expressions per
 * method, and the normalization only for a path that has `;`, `%` or `//`.
 */
import { ALIAS_TABLE, type AliasRename, type AliasRow } from './table.ts';

/** The renames that apply to one route: body members and query parameters. */
export interface AliasRoute {
  /** Request method, upper case, e.g. `POST`. */
  readonly method: string;
  /** Route pattern as written in the table, e.g. `/missions/:uuid/metadata`. */
  readonly path: string;
  /** Renames of top-level members of a JSON request body (may be empty). */
  readonly body: readonly AliasRename[];
  /** Renames of query parameter names (may be empty). */
  readonly query: readonly AliasRename[];
}

/** Compiled request rows of an alias table. */
export interface RouteMatcher {
  /**
   * Finds the route of a request.
   * @param method Request method as sent (HTTP methods are case-sensitive; real clients send upper case).
   *   A `HEAD` matches the `GET` rows (RFC 9110 §9.3.2: the upstream answers it as the GET, so its
   *   query is renamed as the GET's would be).
   * @param path Origin-form path without the query, not percent-decoded (matched as
   *   {@link routingPath} normalizes it).
   * @returns The route, or `undefined` when no row applies.
   */
  match(method: string, path: string): AliasRoute | undefined;
}

/** Whether a byte is an unreserved character of RFC 3986 §2.3 (ALPHA / DIGIT / "-" / "." / "_" / "~"). */
function isUnreserved(c: number): boolean {
  return (
    (c >= 0x61 && c <= 0x7a) ||
    (c >= 0x41 && c <= 0x5a) ||
    (c >= 0x30 && c <= 0x39) ||
    c === 0x2d ||
    c === 0x2e ||
    c === 0x5f ||
    c === 0x7e
  );
}

/**
 * The path as the route patterns are matched against: each segment's `;` parameters dropped (as the
 * Servlet specification's path mapping does; not with `parameters` `'keep'`, as Express and most
 * routers read them: part of the segment), `%XX` of an unreserved character decoded (RFC 3986
 * §6.2.2.2: the same URI), runs of `/` as one (Tomcat merges them). Other escapes stay (`%2F` is no
 * separator). Linear in the path's length.
 * @param path Origin-form path without the query, not percent-decoded.
 * @param parameters `'drop'` (default) or `'keep'` the segments' `;` parameters.
 * @returns The normalized path; `path` itself when it has no `;`, `%` or `//`.
 * @throws Nothing.
 */
export function routingPath(path: string, parameters: 'drop' | 'keep' = 'drop'): string {
  let normalized = path;
  if (parameters === 'drop' && normalized.includes(';')) normalized = normalized.replace(/;[^/]*/g, '');
  if (normalized.includes('%')) {
    normalized = normalized.replace(/%([0-9A-Fa-f]{2})/g, (encoded, hex: string) => {
      const c = Number.parseInt(hex, 16);
      return isUnreserved(c) ? String.fromCharCode(c) : encoded;
    });
  }
  if (normalized.includes('//')) normalized = normalized.replace(/\/{2,}/g, '/');
  return normalized;
}

/** A path parameter such as `:uuid`: one non-empty segment. */
const PARAM = /^:[A-Za-z_][A-Za-z0-9_]*$/;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A literal segment's `;` parameters, when the path is read with them kept (Spring's matrix variables). */
const SEGMENT_PARAMETERS = '(?:;[^/]*)?';
/** A format suffix on the last literal segment (Rails' `(.:format)`, Mojolicious' `[format => ['json']]`). */
const JSON_FORMAT = '(?:\\.json)?';

/**
 * `/missions/:uuid/metadata` → `/^\/missions(?:;[^/]*)?\/[^/]+\/metadata(?:\.json)?(?:;[^/]*)?\/?$/i`.
 * A `:param` takes one whole segment, `;` parameters included (Express reads `/missions/;x/metadata`
 * as the uuid `;x`: fix 170); a literal segment may carry `;` parameters (Spring with matrix variables
 * keeps them, and strips only `;jsessionid`: `/missions;jsessionid=1/;x/metadata`); the last literal
 * segment may carry the format suffix `.json` (`/missions.json`), which Rails' resource routes,
 * Mojolicious' optional formats and Django REST framework's `format_suffix_patterns` route to the same
 * action, which reads the same body and query (fix 167). Other suffixes (`/files.zip`) are other
 * resources. Linear: the literals separate every optional part.
 */
function compilePattern(path: string): RegExp {
  if (!path.startsWith('/')) throw new Error(`alias table: path "${path}" must start with "/"`);
  const segments = path.slice(1).split('/');
  const parts = segments.map((segment, index) => {
    if (segment === '') throw new Error(`alias table: path "${path}" has an empty segment`);
    if (PARAM.test(segment)) return '[^/]+';
    const format = index === segments.length - 1 ? JSON_FORMAT : '';
    return `${escapeRegExp(segment)}${format}${SEGMENT_PARAMETERS}`;
  });
  return new RegExp(`^/${parts.join('/')}/?$`, 'i');
}

/**
 * Compiles the `body` and `query` rows of an alias table into a matcher; rows with the same method and
 * path form one route.
 * @param table Alias rows (default: the service document's part 9 table).
 * @returns The matcher: `match(method, path)` → the route with its body and query renames, or
 *   `undefined`.
 * @throws {Error} for a request row without method or path, or a path that does not start with `/` or
 *   has an empty segment (programming errors in the table).
 * @example
 * compileRoutes().match('POST', '/Missions/abc/metadata/')?.body; // [{canonical:'metadata', alias:'tags'}]
 */
export function compileRoutes(table: readonly AliasRow[] = ALIAS_TABLE): RouteMatcher {
  const routes = new Map<string, { route: AliasRoute; body: AliasRename[]; query: AliasRename[] }>();
  for (const row of table) {
    if (row.where === 'response') continue;
    if (row.method === undefined || row.path === undefined) {
      throw new Error(
        `alias table: ${row.where} row ${row.alias}→${row.canonical} needs a method and a path`,
      );
    }
    const method = row.method.toUpperCase();
    const id = `${method} ${row.path.toLowerCase()}`;
    let entry = routes.get(id);
    if (entry === undefined) {
      const body: AliasRename[] = [];
      const query: AliasRename[] = [];
      entry = { route: { method, path: row.path, body, query }, body, query };
      routes.set(id, entry);
    }
    const rename = Object.freeze({ canonical: row.canonical, alias: row.alias });
    (row.where === 'body' ? entry.body : entry.query).push(rename);
  }

  const byMethod = new Map<string, Array<{ pattern: RegExp; route: AliasRoute }>>();
  for (const { route, body, query } of routes.values()) {
    Object.freeze(body);
    Object.freeze(query);
    let list = byMethod.get(route.method);
    if (list === undefined) {
      list = [];
      byMethod.set(route.method, list);
    }
    list.push({ pattern: compilePattern(route.path), route: Object.freeze(route) });
  }

  return {
    match(method: string, path: string): AliasRoute | undefined {
      const list = byMethod.get(method) ?? (method === 'HEAD' ? byMethod.get('GET') : undefined);
      if (list === undefined) return undefined;
      const routed = routingPath(path);
      for (const { pattern, route } of list) {
        if (pattern.test(routed)) return route;
      }
      // A segment that is all parameter (`/missions/;x/metadata`) is gone to a servlet container, but
      // the `:uuid` `;x` to Express and Spring (fix 170): matched as they read it too, the patterns
      // taking a literal segment's parameters.
      if (!path.includes(';')) return undefined;
      const kept = routingPath(path, 'keep');
      for (const { pattern, route } of list) {
        if (pattern.test(kept)) return route;
      }
      return undefined;
    },
  };
}
