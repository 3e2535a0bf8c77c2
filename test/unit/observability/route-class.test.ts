/**
 * Bounded metric labels: `routeClass` and `methodLabel` (SPEC §8: bounded labels).
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { methodLabel, routeClass } from '../../../src/observability/metrics.ts';

describe('routeClass', () => {
  it.each<[string, string]>([
    ['/', '/'],
    ['', '/'],
    ['/missions', '/missions'],
    ['/missions/', '/missions'],
    ['/Missions', '/missions'],
    ['/API/Health', '/api/health'],
    ['/missions/5f0c3a9e-1f2b-4c3d-8e9f-0a1b2c3d4e5f', '/missions/:id'],
    ['/missions/5F0C3A9E-1F2B-4C3D-8E9F-0A1B2C3D4E5F/metadata', '/missions/:id/metadata'],
    ['/projects/42/metadata-types', '/projects/:id/metadata-types'],
    ['/files/0123456789abcdef0123', '/files/:id'],
    ['/files/a-long-opaque-token-of-more-than-33-chars', '/files/:id'],
    ['/a/b/c/d/e', '/a/b/c'],
    ['/a/b/c/d/e/f/g/h', '/a/b/c'],
    ['/missions/1/metadata/2/extra', '/missions/:id/metadata'],
    ['/missions//x', '/missions/x'],
    ['/user/me', '/user/me'],
    ['/v2', '/v2'],
  ])('%j → %j', (path, cls) => {
    expect(routeClass(path)).toBe(cls);
  });

  it('gives a thousand distinct UUID paths one class', () => {
    const classes = new Set<string>();
    for (let i = 0; i < 1000; i++) classes.add(routeClass(`/missions/${randomUUID()}/metadata`));
    expect([...classes]).toEqual(['/missions/:id/metadata']);
  });

  it('gives a thousand distinct numeric paths one class', () => {
    const classes = new Set<string>();
    for (let i = 0; i < 1000; i++) classes.add(routeClass(`/projects/${i * 7919}`));
    expect([...classes]).toEqual(['/projects/:id']);
  });

  it('reports at most 200 distinct classes, the rest as "other"', async () => {
    vi.resetModules();
    const fresh = (await import('../../../src/observability/metrics.ts')).routeClass;
    const classes = new Set<string>();
    for (let i = 0; i < 1000; i++)
      classes.add(fresh(`/word${String.fromCharCode(97 + (i % 26))}${i.toString(36)}x`));
    expect(classes.size).toBeLessThanOrEqual(201);
    expect(classes.has('other')).toBe(true);
    // A class seen before the cap keeps its name.
    expect(fresh('/worda0x')).toBe('/worda0x');
  });
});

describe('routeClass learning', () => {
  it('does not learn a class from a request that may not (rejected, upstream 404), but reports known ones', () => {
    expect(routeClass('/never-seen-before/x', false)).toBe('other');
    expect(routeClass('/never-seen-before/x', true)).toBe('/never-seen-before/x');
    expect(routeClass('/never-seen-before/x', false)).toBe('/never-seen-before/x');
  });
});

describe('methodLabel', () => {
  it.each(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])('%s is its own label', (method) => {
    expect(methodLabel(method)).toBe(method);
  });

  it.each(['get', 'PROPFIND', 'TRACE', 'CONNECT', 'BREW', ''])('%j is OTHER', (method) => {
    expect(methodLabel(method)).toBe('OTHER');
  });
});
