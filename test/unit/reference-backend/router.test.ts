import { describe, expect, it } from 'vitest';
import { createRouter } from '../../../src/reference-backend/router.ts';

const router = createRouter([
  { method: 'GET', path: '/missions' },
  { method: 'GET', path: '/missions/:uuid' },
  { method: 'POST', path: '/missions/:uuid/metadata' },
  { method: null, path: '/debug/echo', prefix: true },
]);

describe('createRouter', () => {
  it.each([
    ['GET', '/missions', '/missions', []],
    ['GET', '/missions/', '/missions', []],
    ['GET', '/MISSIONS', '/missions', []],
    ['HEAD', '/missions', '/missions', []],
    ['GET', '/missions/abc', '/missions/:uuid', ['abc']],
    ['GET', '/Missions/ABC/', '/missions/:uuid', ['ABC']],
    ['POST', '/missions/x/Metadata', '/missions/:uuid/metadata', ['x']],
    ['DELETE', '/debug/echo', '/debug/echo', []],
    ['GET', '/debug/echo/a/b/c', '/debug/echo', []],
  ])('%s %s → %s', (method, path, pattern, params) => {
    const match = router.match(method, path);
    expect(match?.route.path).toBe(pattern);
    expect(match?.params).toEqual(params);
  });

  it.each([
    ['POST', '/missions'],
    ['GET', '/missions//'],
    ['GET', '/missions//metadata'],
    ['GET', '/missions/a/b'],
    ['GET', '//missions'],
    ['GET', '/debug/echoes'],
    ['GET', 'missions'],
    ['GET', '*'],
  ])('%s %s → no match', (method, path) => {
    expect(router.match(method, path)).toBeUndefined();
  });
});
