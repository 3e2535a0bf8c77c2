/**
 * Bounded metric labels: `routeShape`, `RouteLabels` and `methodLabel` (SPEC §8: bounded labels;
 * issue 10: labels no client can exhaust).
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  mayLearnRoute,
  methodLabel,
  ROUTE_LABEL_LIMITS,
  RouteLabels,
  routeShape,
} from '../../../src/observability/metrics.ts';

describe('routeShape', () => {
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
    ['/api/v1.1/missions', '/api/v1.1/missions'],
    ['/apis/v1beta1/x', '/apis/v1beta1/x'],
    // Identifiers of any format the upstream chooses (service document part 2: "not shown").
    ['/missions/01ARZ3NDEKTSV4RRFFQ69G5FAV', '/missions/:id'],
    ['/missions/V1StGXR8_Z5jdHi6B-myT/metadata', '/missions/:id/metadata'],
    ['/missions/m-0002', '/missions/:id'],
    ['/projects/msn_2x9Kq/metadata-types', '/projects/:id/metadata-types'],
    ['/users/v2x', '/users/:id'],
    ['/oauth2/token', '/:id/token'],
    ['/files/abcdefabcdefabcdefabcdefabcdefabcdef', '/files/:id'],
    ['/notification-preferences', '/notification-preferences'],
    // Path parameters are no part of a route (a session id in a label: docs/reliability.md fix 128).
    ['/missions;jsessionid=MATRIXSECRET', '/missions'],
    ['/missions;x=1/5;v=2/metadata;y', '/missions/:id/metadata'],
    ['/a;b;c/d', '/a/d'],
    ['/;x/missions', '/missions'],
  ])('%j → %j', (path, cls) => {
    expect(routeShape(path)).toBe(cls);
  });

  it('reads the same segments as splitting the lower-cased path, each cut at its first `;`', () => {
    // An identifier: a digit anywhere but in an API version, or more than 32 characters.
    const VERSION = /^v[0-9]+(\.[0-9]+)*((alpha|beta)[0-9]*)?$/;
    const ID = { test: (s: string) => (/[0-9]/.test(s) && !VERSION.test(s)) || s.length > 32 };
    const bySplit = (path: string) => {
      let out = '';
      for (const whole of path.toLowerCase().split('/', 5).slice(1, 4)) {
        const s = whole.split(';', 1)[0]!;
        if (s !== '') out += `/${ID.test(s) ? ':id' : s}`;
      }
      return out === '' ? '/' : out;
    };
    const char = fc.constantFrom(
      '/',
      '/',
      'a',
      'F',
      '0',
      '9',
      '-',
      '.',
      '%',
      'x',
      'É',
      'ß',
      'İ',
      ' ',
      ';',
      '=',
    );
    const uuid = fc.uuid().map((u) => `/${u}`);
    const path = fc.array(fc.oneof(char, char, uuid, fc.constant('/0123456789abcdefABCDEF')), {
      maxLength: 40,
    });
    fc.assert(
      fc.property(path, (parts) => {
        const p = parts.join('');
        expect(routeShape(p)).toBe(bySplit(p));
      }),
      { numRuns: 2000 },
    );
  });

  it('gives a thousand distinct UUID paths one class', () => {
    const classes = new Set<string>();
    for (let i = 0; i < 1000; i++) classes.add(routeShape(`/missions/${randomUUID()}/metadata`));
    expect([...classes]).toEqual(['/missions/:id/metadata']);
  });

  it('gives a thousand distinct ids of other formats (ULID-like, prefixed, short) one class per route', () => {
    const classes = new Set<string>();
    const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
    for (let i = 0; i < 1000; i++) {
      const ulid = Array.from({ length: 26 }, (_, k) => alphabet[(i * 31 + k * 7) % 32]).join('');
      classes.add(routeShape(`/missions/${ulid}/metadata`));
      classes.add(routeShape(`/missions/m-${i}/metadata`));
      classes.add(routeShape(`/projects/prj_${i.toString(36)}9`));
    }
    expect([...classes].sort()).toEqual(['/missions/:id/metadata', '/projects/:id']);
  });

  it('gives a thousand distinct numeric paths one class', () => {
    const classes = new Set<string>();
    for (let i = 0; i < 1000; i++) classes.add(routeShape(`/projects/${i * 7919}`));
    expect([...classes]).toEqual(['/projects/:id']);
  });
});

describe('mayLearnRoute', () => {
  it.each<[number, boolean, boolean]>([
    [200, false, true],
    [204, false, true],
    [304, false, true],
    [399, false, true],
    [400, false, false], // the upstream rejected the path, query or body: anyone can produce one
    [401, false, false],
    [404, false, false],
    [500, false, false],
    [502, true, false],
    [200, true, false], // the shim answered (never a 2xx today, but no upstream verdict either way)
    [101, false, false],
  ])('status %d, rejected %s → %s', (status, rejected, learn) => {
    expect(mayLearnRoute({ status, rejected })).toBe(learn);
  });
});

describe('RouteLabels', () => {
  const OK = { status: 200, rejected: false };
  const BAD = { status: 400, rejected: false };
  const key = (k: string) => () => `key:${k}`;

  it('learns a class from an upstream 2xx, not from a 4xx or a rejection', () => {
    const labels = new RouteLabels();
    expect(labels.label('/x', BAD, key('a'))).toBe('other');
    expect(labels.label('/x', { status: 401, rejected: true }, key('a'))).toBe('other');
    expect(labels.known('/x')).toBe('other');
    expect(labels.label('/x', OK, key('a'))).toBe('/x');
    // Once learned, every outcome reports it.
    expect(labels.label('/x', BAD, key('b'))).toBe('/x');
    expect(labels.known('/x')).toBe('/x');
  });

  it('lets one consumer introduce at most maxPerConsumer classes', () => {
    const labels = new RouteLabels({ maxClasses: 100, maxPerConsumer: 3 });
    const got = Array.from({ length: 10 }, (_, i) => labels.label(`/g${i}`, OK, key('scanner')));
    expect(got).toEqual(['/g0', '/g1', '/g2', ...Array(7).fill('other')]);
    // Another consumer still teaches the real routes.
    expect(labels.label('/user/me', OK, key('app'))).toBe('/user/me');
    expect(labels.size).toBe(4);
  });

  it('gives all unauthenticated requests one shared budget', () => {
    const labels = new RouteLabels({ maxClasses: 100, maxPerConsumer: 2 });
    const anon = () => undefined;
    expect([
      labels.label('/a', OK, anon),
      labels.label('/b', OK, anon),
      labels.label('/c', OK, anon),
    ]).toEqual(['/a', '/b', 'other']);
  });

  it('labels at most maxClasses classes, the rest as other, and keeps learned ones', () => {
    const labels = new RouteLabels({ maxClasses: 5, maxPerConsumer: 5 });
    for (let i = 0; i < 50; i++) labels.label(`/c${i}`, OK, key(`k${i}`));
    expect(labels.size).toBe(5);
    expect(labels.label('/c49', OK, key('new'))).toBe('other');
    expect(labels.label('/c0', OK, key('new'))).toBe('/c0');
  });

  it('leaves the real routes labelled after 10,000 garbage paths from one key, 2xx or 4xx', () => {
    const labels = new RouteLabels();
    const real = ['/user/me', '/missions', '/missions/:id', '/projects', '/files'];
    for (const r of real.slice(0, 2)) labels.label(r, OK, key('app'));
    for (let i = 0; i < 10_000; i++) {
      const shape = routeShape(`/garbage-${i.toString(36)}x/${i}`);
      labels.label(shape, i % 2 === 0 ? OK : BAD, key('scanner'));
    }
    for (const r of real.slice(2)) labels.label(r, OK, key('app'));
    for (const r of real) expect(labels.known(r)).toBe(r);
    expect(labels.size).toBe(real.length + ROUTE_LABEL_LIMITS.maxPerConsumer);
  });

  it('never asks who the consumer is for a known class or an outcome that cannot teach', () => {
    const labels = new RouteLabels();
    let asked = 0;
    const who = () => {
      asked++;
      return 'key:a';
    };
    labels.label('/x', BAD, who);
    expect(asked).toBe(0);
    labels.label('/x', OK, who);
    labels.label('/x', OK, who);
    expect(asked).toBe(1);
  });

  it('keeps each instance apart (fresh state per runtime)', () => {
    const a = new RouteLabels();
    const b = new RouteLabels();
    a.label('/only-a', OK, key('k'));
    expect(a.known('/only-a')).toBe('/only-a');
    expect(b.known('/only-a')).toBe('other');
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
