/**
 * Path matching as Express/NestJS' default router does it: case-insensitive, one optional trailing
 * slash, `:name` matching exactly one non-empty segment; HEAD is served by GET routes. A wrong method on
 * a known path is simply no match (NestJS answers 404 `Cannot <METHOD> <url>` for both).
 */

/** What the router needs to know of a route. */
export interface RouteShape {
  /** Upper-case method; `null` matches every method. */
  readonly method: string | null;
  /** Pattern such as `/missions/:uuid/metadata` (literal segments in lower case). */
  readonly path: string;
  /** When `true`, the pattern also matches any longer path below it (`/debug/echo/…`). */
  readonly prefix?: boolean;
}

/** A matched route and its `:param` segments in order (still percent-encoded). */
export interface RouteMatch<R extends RouteShape> {
  readonly route: R;
  readonly params: readonly string[];
}

interface Compiled<R extends RouteShape> {
  readonly route: R;
  /** Lower-case literal, or `null` for a parameter. */
  readonly segments: ReadonlyArray<string | null>;
}

/** A compiled route table. */
export interface Router<R extends RouteShape> {
  /**
   * Finds the first route matching a request.
   * @param method Request method as sent.
   * @param path Origin-form path without the query.
   * @returns The match, or `undefined` (→ 404).
   */
  match(method: string, path: string): RouteMatch<R> | undefined;
}

/**
 * Compiles a route table; routes are tried in order.
 * @example
 * createRouter([{ method: 'GET', path: '/missions/:uuid' }]).match('GET', '/Missions/abc/');
 * // { route, params: ['abc'] }
 */
export function createRouter<R extends RouteShape>(routes: readonly R[]): Router<R> {
  const compiled: Array<Compiled<R>> = routes.map((route) => ({
    route,
    segments: route.path
      .split('/')
      .slice(1)
      .map((segment) => (segment.startsWith(':') ? null : segment.toLowerCase())),
  }));
  return {
    match(method, path) {
      if (!path.startsWith('/')) return undefined;
      const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
      const parts = trimmed.split('/').slice(1);
      const effective = method === 'HEAD' ? 'GET' : method;
      for (const { route, segments } of compiled) {
        if (route.method !== null && route.method !== effective) continue;
        if (route.prefix === true ? parts.length < segments.length : parts.length !== segments.length)
          continue;
        const params = matchSegments(segments, parts);
        if (params !== undefined) return { route, params };
      }
      return undefined;
    },
  };
}

function matchSegments(
  segments: ReadonlyArray<string | null>,
  parts: readonly string[],
): string[] | undefined {
  const params: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i];
    const part = parts[i] ?? '';
    if (segment === null) {
      if (part === '') return undefined;
      params.push(part);
    } else if (part.toLowerCase() !== segment) {
      return undefined;
    }
  }
  return params;
}
