import { describe, expect, it } from 'vitest';
import { compileRoutes, routingPath } from '../../../src/aliases/route-match.ts';
import { ALIAS_TABLE } from '../../../src/aliases/table.ts';

const matcher = compileRoutes();

/** Replaces `:uuid` with a concrete segment. */
const concrete = (path: string, uuid = '0b5e0c9e-6f4c-4c1a-9f0e-3d3c2b1a0f9e') => path.replace(':uuid', uuid);

describe('compileRoutes().match — every request row of the table', () => {
  const requestRows = ALIAS_TABLE.filter((r) => r.where !== 'response');

  it.each(requestRows.map((r) => [r.method!, r.path!, r.where, r.canonical, r.alias] as const))(
    '%s %s (%s %s ← %s)',
    (method, path, where, canonical, alias) => {
      const variants = [
        concrete(path),
        `${concrete(path)}/`,
        concrete(path).toUpperCase(),
        concrete(path.replace(/^\/(\w)/, (_, c: string) => `/${c.toUpperCase()}`)),
        concrete(path, 'x'),
        concrete(path, '%20'),
      ];
      for (const variant of variants) {
        const route = matcher.match(method, variant);
        expect(route, variant).toBeDefined();
        expect(route?.[where as 'body' | 'query']).toContainEqual({ canonical, alias });
      }
    },
  );

  it('groups rows of one route', () => {
    expect(matcher.match('POST', '/missions')).toEqual({
      method: 'POST',
      path: '/missions',
      body: [
        { canonical: 'metadata', alias: 'tags' },
        { canonical: 'ignoreMissingMetadata', alias: 'ignoreTags' },
      ],
      query: [],
    });
  });

  it('matches a HEAD with the GET rows (RFC 9110 §9.3.2: answered as the GET), and no other method', () => {
    expect(matcher.match('HEAD', '/files')).toBe(matcher.match('GET', '/files'));
    expect(matcher.match('HEAD', '/files')?.query).toContainEqual({
      canonical: 'metadataByTypeUuid',
      alias: 'tags',
    });
    // Only a HEAD borrows the GET rows, and a HEAD row of its own would win.
    expect(matcher.match('OPTIONS', '/files')).toBeUndefined();
    expect(matcher.match('HEAD', '/missions')).toBeUndefined();
    const own = compileRoutes([
      { where: 'query', method: 'GET', path: '/x', canonical: 'a', alias: 'b' },
      { where: 'query', method: 'HEAD', path: '/x', canonical: 'c', alias: 'd' },
    ]);
    expect(own.match('HEAD', '/x')?.query).toEqual([{ canonical: 'c', alias: 'd' }]);
  });

  it('keeps body and query routes of the same path apart by method', () => {
    expect(matcher.match('PUT', '/projects/p/metadata-types')).toMatchObject({
      body: [{ canonical: 'metadataTypeUUIDs', alias: 'tagTypeUUIDs' }],
      query: [],
    });
    expect(matcher.match('POST', '/projects/p/metadata-types')).toMatchObject({
      body: [],
      query: [{ canonical: 'metadataTypeUUID', alias: 'tagTypeUUID' }],
    });
  });
});

describe('compileRoutes().match — what must not match', () => {
  it.each([
    ['POST', '/missions//metadata', 'empty :uuid segment'],
    ['POST', '/missions/a/b/metadata', ':uuid spanning two segments'],
    ['POST', '/missions/a/metadatax', 'longer last segment'],
    ['POST', '/missionsx', 'longer segment'],
    ['POST', '/api/missions', 'prefix'],
    ['POST', 'missions', 'not origin-form'],
    ['GET', '/missions', 'other method'],
    ['post', '/missions', 'lower-case method (methods are case-sensitive)'],
    ['DELETE', '/files', 'method without rows'],
    ['GET', '/files/x', 'sub-path'],
    ['POST', '/projects/metadata-types', 'missing :uuid'],
    ['PUT', '/projects/a/metadata-types/x', 'extra segment'],
    ['GET', '/fil.s', 'regular-expression metacharacter is literal'],
  ])('%s %s (%s)', (method, path) => {
    expect(matcher.match(method, path)).toBeUndefined();
  });
});

describe('compileRoutes — table errors', () => {
  it('rejects a request row without a path or without a method', () => {
    expect(() => compileRoutes([{ where: 'body', method: 'POST', canonical: 'a', alias: 'b' }])).toThrow(
      /needs a method and a path/,
    );
    expect(() => compileRoutes([{ where: 'query', path: '/files', canonical: 'a', alias: 'b' }])).toThrow(
      'alias table: query row b→a needs a method and a path',
    );
  });

  it('rejects paths that are not origin-form or have empty segments', () => {
    expect(() =>
      compileRoutes([{ where: 'body', method: 'POST', path: 'x', canonical: 'a', alias: 'b' }]),
    ).toThrow(/must start with/);
    expect(() =>
      compileRoutes([{ where: 'query', method: 'GET', path: '/a//b', canonical: 'a', alias: 'b' }]),
    ).toThrow(/empty segment/);
  });

  it('escapes literal segments and accepts any parameter name', () => {
    const m = compileRoutes([
      { where: 'query', method: 'get', path: '/v1.0/:id/x+y', canonical: 'a', alias: 'b' },
    ]);
    expect(m.match('GET', '/v1.0/7/x+y')).toBeDefined();
    expect(m.match('GET', '/v1x0/7/x+y')).toBeUndefined();
    expect(m.match('GET', '/v1.0/7/xxy')).toBeUndefined();
  });

  it('reads only a whole segment ":name" as a parameter; a colon inside a segment is literal', () => {
    const m = compileRoutes([
      { where: 'body', method: 'POST', path: '/files:search', canonical: 'a', alias: 'b' },
    ]);
    expect(m.match('POST', '/files:search')).toBeDefined();
    expect(m.match('POST', '/anything')).toBeUndefined();
  });

  it('hands out routes that cannot be changed: one matcher serves every request', () => {
    const route = matcher.match('POST', '/missions')!;
    expect(Object.isFrozen(route)).toBe(true);
    expect(Object.isFrozen(route.body)).toBe(true);
    expect(Object.isFrozen(route.query)).toBe(true);
    expect(route.body.every((rename) => Object.isFrozen(rename))).toBe(true);
  });
});

describe('the path a route is matched on (alias bypass through path parameters and encodings)', () => {
  it('matches the spellings a servlet container routes to a rewritten route; the rename cannot be sidestepped', () => {
    // Tomcat and Jetty map `/missions;jsessionid=ABC`, `/mi%73sions` and (Tomcat) `//missions` to the
    // `/missions` servlet: a legacy body sent there reached it with "tags" (Java upstreams probe).
    for (const path of [
      '/missions;jsessionid=ABC',
      '/missions;',
      '/missions/;x',
      '//missions',
      '/mi%73sions',
      '/%6D%69ssions/',
      '/missions;a=1;b=2',
      '/missions//',
    ]) {
      expect(matcher.match('POST', path)?.path, path).toBe('/missions');
    }
    expect(matcher.match('POST', `/missions;v=1/${concrete(':uuid')};x//metadata;y`)?.path).toBe(
      '/missions/:uuid/metadata',
    );
    expect(matcher.match('POST', '/missions/a/metadata//')?.path).toBe('/missions/:uuid/metadata');
  });

  it('matches a parameter segment that starts with `;`, which Express routes as the :uuid (fix 170)', () => {
    // Dropping `;x` left `/missions//metadata`, merged to `/missions/metadata`: no route, and a legacy
    // body reached Express' `/missions/:uuid/metadata` (uuid `;x`) with "tags" (ffuf probe).
    for (const [method, path, route] of [
      ['POST', '/missions/;x/metadata', '/missions/:uuid/metadata'],
      ['POST', '/missions/;id;abc/metadata', '/missions/:uuid/metadata'],
      ['PUT', '/projects/;/metadata-types', '/projects/:uuid/metadata-types'],
      ['POST', '/projects/;x=1/metadata-types', '/projects/:uuid/metadata-types'],
      // Spring with matrix variables strips only `;jsessionid` and keeps the rest (review of fix 170).
      ['POST', '/missions;jsessionid=1/;x/metadata', '/missions/:uuid/metadata'],
      ['POST', '/missions;v=1/abc;w=2/metadata;z=3', '/missions/:uuid/metadata'],
    ] as const) {
      expect(matcher.match(method, path)?.path, path).toBe(route);
    }
    expect(routingPath('/missions/;x/metadata', 'keep')).toBe('/missions/;x/metadata');
    expect(routingPath('/mi%73sions//;x', 'keep')).toBe('/missions/;x');
  });

  it('matches the format suffix .json on the last literal segment, which Rails, Mojolicious and DRF route to the same action', () => {
    // Mojolicious' `post '/missions' => [format => ['json']]` took `/missions.json` with "tags" (fix 167).
    for (const path of [
      '/missions.json',
      '/missions.JSON',
      '/missions.json/',
      '/mi%73sions.json',
      '/missions.json;x=1',
    ]) {
      expect(matcher.match('POST', path)?.path, path).toBe('/missions');
    }
    // Other suffixes name other resources (`/files.zip`): not the rewritten route (review of fix 167).
    for (const path of ['/missions.xml', '/missions.', '/missions.json.bak', '/missions..json'])
      expect(matcher.match('POST', path), path).toBeUndefined();
    expect(matcher.match('GET', '/files.zip')).toBeUndefined();
    expect(matcher.match('POST', `/missions/${concrete(':uuid')}/metadata.json`)?.path).toBe(
      '/missions/:uuid/metadata',
    );
    expect(matcher.match('GET', '/files.json')?.path).toBe('/files');
    expect(matcher.match('POST', '/missions.json/x')).toBeUndefined();
    expect(matcher.match('POST', '/missionsjson')).toBeUndefined();
  });

  it('decodes only unreserved characters: an encoded separator or parameter stays part of its segment', () => {
    for (const path of ['/missions%2F', '/missions%3Bx', '/missions%2fx', '/missionsx', '/missions%7']) {
      expect(matcher.match('POST', path), path).toBeUndefined();
    }
  });

  it('routingPath: drops parameters, decodes unreserved escapes, merges slashes, and leaves a plain path as it is', () => {
    expect(routingPath('/a;b=c/d;e')).toBe('/a/d');
    expect(routingPath('/%41%7e%2d%2E%5F%30')).toBe('/A~-._0');
    expect(routingPath('/%2F%3B%25%20%C3%A9')).toBe('/%2F%3B%25%20%C3%A9');
    expect(routingPath('///a//b/')).toBe('/a/b/');
    const plain = '/missions/abc/metadata';
    expect(routingPath(plain)).toBe(plain);
  });
});
