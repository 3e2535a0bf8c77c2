import type { IncomingHttpHeaders } from 'node:http';
import pino from 'pino';
import { Registry } from 'prom-client';
import { SemVer } from 'semver';
import { describe, expect, it } from 'vitest';
import type { AliasSettings } from '../../../src/aliases/config.ts';
import { createAliasLayer } from '../../../src/aliases/index.ts';
import { injectScanFailure } from '../../../src/aliases/json-scan.ts';
import { ShimError } from '../../../src/core/errors.ts';
import type { BufferBudget, Exchange, ExchangeHooks, ResponsePatch } from '../../../src/core/types.ts';
import { requestHooks } from './request-of.ts';

const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' };
/** A budget that never refuses (the core's real one is tested with the core). */
const budget: BufferBudget = {
  tryReserve: () => true,
  release() {},
  used: 0,
  limit: Number.MAX_SAFE_INTEGER,
};

/** The settings `loadConfig` builds from an empty environment (the variables' defaults). */
const DEFAULTS: AliasSettings = {
  enabled: true,
  sunsetVersion: new SemVer('1.0.0'),
  consumerTableSize: 1000,
  maxPatchValue: 1024 * 1024,
};

/** Streams `body` through a patch in two chunks: the bytes it emits and its outcome. */
function run(patch: ResponsePatch, body: string) {
  const bytes = Buffer.from(body);
  const out = [patch.write(bytes.subarray(0, 10)), patch.write(bytes.subarray(10)), patch.end()];
  return { body: Buffer.concat(out).toString(), outcome: patch.outcome };
}

function setup(overrides: Partial<AliasSettings> = {}) {
  const registry = new Registry();
  const settings: AliasSettings = { ...DEFAULTS, ...overrides };
  const plugin = createAliasLayer(settings, { logger: pino({ level: 'silent' }), registry, budget });
  const exchangeOf = (
    method: string,
    target: string,
    headers: IncomingHttpHeaders = {},
    version: string | null = '0.59.0',
  ): Exchange => {
    const q = target.indexOf('?');
    return {
      method,
      path: q < 0 ? target : target.slice(0, q),
      rawQuery: q < 0 ? '' : target.slice(q + 1),
      headers,
      clientVersion: version === null ? undefined : new SemVer(version),
      responseHeaders: [],
      logFields: {},
    };
  };
  const uses = async () =>
    (await registry.getSingleMetric('shim_alias_uses_total')!.get()).values.map(
      (v) => `${v.labels.alias} ${v.labels.direction} ${v.labels.client} ${v.value}`,
    );
  return { plugin, registry, exchangeOf, uses };
}

const hooksOf = (hooks: ExchangeHooks | undefined): ExchangeHooks => {
  expect(hooks).toBeDefined();
  return hooks!;
};

describe('createAliasLayer — who gets hooks', () => {
  it('is named', () => {
    expect(setup().plugin.name).toBe('aliases');
  });

  it.each([
    ['1.0.0', 'at the sunset version'],
    ['1.2.3', 'above it'],
    [null, 'without a client version (public path, preflight)'],
  ] as Array<[string | null, string]>)('returns undefined for client %s (%s)', (version: string | null) => {
    const { plugin, exchangeOf } = setup();
    expect(requestHooks(plugin, exchangeOf('POST', '/missions', JSON_TYPE, version))).toBeUndefined();
  });

  it('returns undefined when the layer is off', () => {
    const { plugin, exchangeOf } = setup({ enabled: false });
    expect(requestHooks(plugin, exchangeOf('POST', '/missions', JSON_TYPE))).toBeUndefined();
  });

  it('gives a release candidate of the sunset version aliases', () => {
    const { plugin, exchangeOf } = setup();
    expect(requestHooks(plugin, exchangeOf('GET', '/missions', {}, '1.0.0-rc.1'))).toBeDefined();
  });

  it('gives a legacy client only the response hook on routes without request aliases', () => {
    const { plugin, exchangeOf } = setup();
    const hooks = hooksOf(requestHooks(plugin, exchangeOf('GET', '/missions/abc')));
    expect(Object.keys(hooks)).toEqual(['onResponse']);
  });

  it('rewrites bodies only when the request is JSON', () => {
    const { plugin, exchangeOf } = setup();
    for (const type of ['application/json', 'application/vnd.api+json', 'APPLICATION/JSON; charset=utf-8']) {
      expect(
        requestHooks(plugin, exchangeOf('POST', '/missions', { 'content-type': type }))?.body,
      ).toBeDefined();
    }
    for (const headers of [{}, { 'content-type': 'text/plain' }, { 'content-type': 'multipart/form-data' }]) {
      expect(requestHooks(plugin, exchangeOf('POST', '/missions', headers))?.body).toBeUndefined();
    }
  });

  it('judges a body by its Content-Type lines combined: two types are a list, refused (fix 173)', () => {
    const { plugin, exchangeOf } = setup();
    const lines = (...types: string[]) => ({ 'content-type': types }) as unknown as IncomingHttpHeaders;
    for (const types of [
      ['application/json', 'text/plain'],
      ['text/plain', 'application/json'],
    ]) {
      expect(() => requestHooks(plugin, exchangeOf('POST', '/missions', lines(...types)))).toThrow(
        expect.objectContaining({ reason: 'hygiene' }),
      );
    }
    const twice = requestHooks(
      plugin,
      exchangeOf('POST', '/missions', lines('application/json', 'application/json')),
    );
    expect(twice?.body).toBeDefined();
    // A list without JSON: not a JSON body, nothing to rename, nothing refused.
    expect(
      requestHooks(plugin, exchangeOf('POST', '/missions', lines('text/plain', 'text/csv')))?.body,
    ).toBeUndefined();
  });

  it('rewrites queries only on query routes', () => {
    const { plugin, exchangeOf } = setup();
    expect(requestHooks(plugin, exchangeOf('GET', '/files?tags=1'))?.rewriteQuery).toBeDefined();
    expect(
      requestHooks(plugin, exchangeOf('POST', '/projects/p/metadata-types/'))?.rewriteQuery,
    ).toBeDefined();
    expect(requestHooks(plugin, exchangeOf('GET', '/missions?tags=1'))?.rewriteQuery).toBeUndefined();
    expect(
      requestHooks(plugin, exchangeOf('PUT', '/projects/p/metadata-types', JSON_TYPE))?.rewriteQuery,
    ).toBeUndefined();
  });
});

describe('createAliasLayer — request rewrites and signals', () => {
  it('renames a body alias, warns and counts', async () => {
    const { plugin, exchangeOf, uses } = setup();
    const exchange = exchangeOf('POST', '/missions', JSON_TYPE);
    const hooks = hooksOf(requestHooks(plugin, exchange));
    const out = hooks.body!.rewrite(Buffer.from('{"name":"m","tags":[{"k":1.50}],"ignoreTags":true}'));
    expect(out.toString()).toBe('{"name":"m","metadata":[{"k":1.50}],"ignoreMissingMetadata":true}');
    expect(exchange.responseHeaders).toEqual([
      ['Warning', '299 - "tags is deprecated; use metadata"'],
      ['Warning', '299 - "ignoreTags is deprecated; use ignoreMissingMetadata"'],
    ]);
    expect(exchange.logFields).toEqual({ aliases: ['tags', 'ignoreTags'], consumer: 'session' });
    // Counted once the upstream has answered (src/aliases/consumer.ts countsAsUse), not before.
    expect(await uses()).toEqual([]);
    hooks.onResponse!(201, JSON_TYPE);
    expect(await uses()).toEqual(['tags request 0.59 1', 'ignoreTags request 0.59 1']);
  });

  it('adds nothing when the body used no alias, and returns the same Buffer', async () => {
    const { plugin, exchangeOf, uses } = setup();
    const exchange = exchangeOf('POST', '/missions/u1/metadata', JSON_TYPE);
    const body = Buffer.from('{"metadata":[]}');
    expect(hooksOf(requestHooks(plugin, exchange)).body!.rewrite(body)).toBe(body);
    expect(exchange.responseHeaders).toEqual([]);
    expect(exchange.logFields).toEqual({});
    expect(await uses()).toEqual([]);
  });

  it('lets ShimError 400 through for malformed JSON', () => {
    const { plugin, exchangeOf } = setup();
    const hooks = hooksOf(requestHooks(plugin, exchangeOf('POST', '/projects', JSON_TYPE)));
    expect(() => hooks.body!.rewrite(Buffer.from('{"requiredTags":[1,]}'))).toThrow(ShimError);
  });

  it('renames a query alias, with the configured Deprecation, Sunset and Link headers once', async () => {
    const { plugin, exchangeOf, uses } = setup({
      deprecatedAt: new Date('2026-01-01T00:00:00Z'),
      sunsetAt: new Date('2026-07-01T00:00:00Z'),
      docsUrl: 'https://docs.example.com/aliases',
    });
    const exchange = exchangeOf('GET', '/Files/?tags[]=a&take=5', {}, '0.9.0-beta.2');
    const hooks = hooksOf(requestHooks(plugin, exchange));
    expect(hooks.rewriteQuery!('tags[]=a&take=5&tags[]=b')).toBe(
      'metadataByTypeUuid[]=a&take=5&metadataByTypeUuid[]=b',
    );
    expect(exchange.responseHeaders).toEqual([
      ['Deprecation', '@1767225600'],
      ['Sunset', 'Wed, 01 Jul 2026 00:00:00 GMT'],
      ['Link', '<https://docs.example.com/aliases>; rel="deprecation"'],
      ['Warning', '299 - "tags is deprecated; use metadataByTypeUuid"'],
    ]);
    expect(exchange.logFields.aliases).toEqual(['tags']);
    hooks.onResponse!(200, JSON_TYPE);
    expect(await uses()).toEqual(['tags request 0.9 1']);
  });

  it('sends no signals for a query without aliases', () => {
    const { plugin, exchangeOf } = setup({ docsUrl: 'https://docs.example.com' });
    const exchange = exchangeOf('POST', '/projects/p/metadata-types?metadataTypeUUID=x');
    expect(hooksOf(requestHooks(plugin, exchange)).rewriteQuery!('metadataTypeUUID=x')).toBe(
      'metadataTypeUUID=x',
    );
    expect(exchange.responseHeaders).toEqual([]);
  });

  it('records an alias once even when it is used twice in one request', async () => {
    const { plugin, exchangeOf, uses } = setup();
    const exchange = exchangeOf('GET', '/files', JSON_TYPE);
    const hooks = hooksOf(requestHooks(plugin, exchange));
    hooks.rewriteQuery!('tags=a');
    hooks.rewriteQuery!('tags=b');
    expect(exchange.responseHeaders).toHaveLength(1);
    hooks.onResponse!(200, JSON_TYPE);
    expect(await uses()).toEqual(['tags request 0.59 1']);
  });

  it('keeps Warning values under 4 KB in total', () => {
    const table = Array.from({ length: 60 }, (_, k) => ({
      where: 'body' as const,
      method: 'POST',
      path: '/many',
      canonical: `canonicalName${k}`.padEnd(40, 'x'),
      alias: `aliasName${k}`.padEnd(40, 'y'),
    }));
    const registry = new Registry();
    const plugin = createAliasLayer(DEFAULTS, { logger: pino({ level: 'silent' }), registry, budget }, table);
    const exchange = setup().exchangeOf('POST', '/many', JSON_TYPE);
    const body = `{${table.map((r) => `"${r.alias}":1`).join(',')}}`;
    hooksOf(requestHooks(plugin, exchange)).body!.rewrite(Buffer.from(body));
    const warnings = exchange.responseHeaders.filter(([name]) => name === 'Warning');
    expect(warnings.length).toBeGreaterThan(10);
    expect(warnings.length).toBeLessThan(60);
    expect(warnings.reduce((n, [, v]) => n + v.length, 0)).toBeLessThanOrEqual(4096);
    expect(exchange.logFields.aliases).toHaveLength(60);
  });
});

describe('createAliasLayer — a request counts once the upstream answered it, not with 401, 403 or 5xx', () => {
  /** The usage signals after one aliased request (query and body) that the upstream answered `status`. */
  async function countedAfter(status: number | undefined) {
    const { plugin, registry, exchangeOf, uses } = setup();
    const exchange = exchangeOf('POST', '/missions', { ...JSON_TYPE, 'x-api-key': 'made-up' });
    const hooks = hooksOf(requestHooks(plugin, exchange));
    hooks.body!.rewrite(Buffer.from('{"tags":{}}'));
    if (status !== undefined) hooks.onResponse!(status, JSON_TYPE);
    const consumers = (await registry.getSingleMetric('shim_alias_consumers')!.get()).values;
    // The signals that describe the request itself are there whatever the answer.
    expect(exchange.logFields).toEqual({ aliases: ['tags'], consumer: 'api-key' });
    expect(exchange.responseHeaders).toEqual([['Warning', '299 - "tags is deprecated; use metadata"']]);
    return { uses: await uses(), consumers: consumers.map((v) => [v.labels.consumer, v.value]) };
  }

  it.each([200, 201, 204, 304, 400, 404, 409, 413, 429])('%i counts', async (status) => {
    expect(await countedAfter(status)).toEqual({
      uses: ['tags request 0.59 1'],
      consumers: [['api-key', 1]],
    });
  });

  it.each([401, 403, 500, 502, 503, 504])('%i does not count', async (status) => {
    expect(await countedAfter(status)).toEqual({ uses: [], consumers: [] });
  });

  it('a request the upstream never answered (the shim answered 502/504, the client left) does not count', async () => {
    expect(await countedAfter(undefined)).toEqual({ uses: [], consumers: [] });
  });

  it('a request that used no alias counts nowhere, whatever the answer', async () => {
    const { plugin, registry, exchangeOf, uses } = setup();
    const hooks = hooksOf(requestHooks(plugin, exchangeOf('GET', '/files?metadataByTypeUuid=a')));
    hooks.rewriteQuery!('metadataByTypeUuid=a');
    hooks.onResponse!(200, JSON_TYPE);
    expect(await uses()).toEqual([]);
    expect((await registry.getSingleMetric('shim_alias_consumers')!.get()).values).toEqual([]);
  });
});

describe('createAliasLayer — shim_alias_consumers', () => {
  it('exports the guaranteed count of each consumer: a flood of one-off consumers never outranks a real one', async () => {
    const { plugin, registry, exchangeOf } = setup({ consumerTableSize: 3, consumerHeader: 'x-consumer' });
    const aliased = (consumer: string) => {
      const hooks = hooksOf(
        requestHooks(plugin, exchangeOf('GET', '/files?tags=a', { 'x-consumer': consumer })),
      );
      hooks.rewriteQuery!('tags=a');
      hooks.onResponse!(200, JSON_TYPE);
    };
    for (let i = 0; i < 8; i++) aliased('team-a');
    for (let i = 0; i < 3; i++) aliased('team-b');
    for (let i = 1; i <= 4; i++) aliased(`once-${i}`);
    const consumers = (await registry.getSingleMetric('shim_alias_consumers')!.get()).values;
    // The table's estimate gives once-4 a count of 4 (3 of them inherited from evictions), above team-b.
    expect(consumers.map((v) => [v.labels.consumer, v.value])).toEqual([
      ['team-a', 8],
      ['team-b', 3],
      ['once-4', 1],
    ]);
  });
});

describe('createAliasLayer — response patches', () => {
  it.each([
    ['application/json', true],
    ['application/json; charset=utf-8', true],
    ['application/problem+json', true],
    ['text/html', false],
    ['application/octet-stream', false],
    [undefined, false],
  ])('patches %s responses: %s', (type, expected) => {
    const { plugin, exchangeOf } = setup();
    const hooks = hooksOf(requestHooks(plugin, exchangeOf('GET', '/missions')));
    const headers: IncomingHttpHeaders = type === undefined ? {} : { 'content-type': type };
    expect(hooks.onResponse!(200, headers) !== undefined).toBe(expected);
  });

  it('returns a patch for a HEAD or a 304 without Content-Type (the core adjusts the headers)', () => {
    const { plugin, exchangeOf } = setup();
    const head = hooksOf(requestHooks(plugin, exchangeOf('HEAD', '/missions')));
    expect(head.onResponse!(200, {})).toBeDefined();
    expect(head.onResponse!(200, JSON_TYPE)).toBeDefined();
    expect(head.onResponse!(200, { 'content-type': 'text/html' })).toBeUndefined();
    const get = hooksOf(requestHooks(plugin, exchangeOf('GET', '/missions')));
    expect(get.onResponse!(304, {})).toBeDefined();
    expect(get.onResponse!(200, {})).toBeUndefined();
  });

  it('holds copies up to MAX_PATCH_VALUE, then passes the rest unpatched', () => {
    const { plugin, exchangeOf } = setup({ maxPatchValue: 8 });
    const patch = hooksOf(requestHooks(plugin, exchangeOf('GET', '/missions'))).onResponse!(200, JSON_TYPE)!;
    expect(run(patch, '[{"metadata":[1]},{"metadata":"0123456789"}]')).toEqual({
      outcome: { kind: 'skipped', reason: 'value_too_large' },
      body: '[{"metadata":[1],"tags":[1]},{"metadata":"0123456789"}]',
    });
  });

  it('logs a failure of the JSON scanner at error; the response passes unpatched', () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const plugin = createAliasLayer(DEFAULTS, { logger, registry: new Registry(), budget });
    const { exchangeOf } = setup();
    const patch = hooksOf(requestHooks(plugin, exchangeOf('GET', '/missions'))).onResponse!(200, JSON_TYPE)!;
    injectScanFailure(new Error('unreachable'));
    expect(run(patch, '[{"metadata":1}]').body).toBe('[{"metadata":1}]');
    const failure = lines.find((l) => l.msg === 'the JSON scanner failed; the response passes unpatched');
    expect(failure).toMatchObject({ level: 50, path: '/missions', err: { message: 'unreachable' } });
  });

  it('patches JSON responses of any status', () => {
    const { plugin, exchangeOf } = setup();
    const hooks = hooksOf(requestHooks(plugin, exchangeOf('GET', '/missions')));
    for (const status of [200, 201, 400, 404, 500])
      expect(hooks.onResponse!(status, JSON_TYPE)).toBeDefined();
  });

  it('adds aliases, logs how many and counts each alias once per response', async () => {
    const { plugin, exchangeOf, uses } = setup();
    const exchange = exchangeOf('GET', '/missions', {}, '0.59.3');
    const patch = hooksOf(requestHooks(plugin, exchange)).onResponse!(200, JSON_TYPE)!;
    expect(
      run(
        patch,
        '{"data":[{"metadata":[1]},{"metadata":[2],"project":{"requiredMetadataTypes":[]}}],"count":2}',
      ),
    ).toEqual({
      outcome: { kind: 'patched' },
      body: '{"data":[{"metadata":[1],"tags":[1]},{"metadata":[2],"project":{"requiredMetadataTypes":[],"requiredTags":[]},"tags":[2]}],"count":2}',
    });
    expect(exchange.logFields).toEqual({ aliasesAdded: 3 });
    expect(exchange.responseHeaders).toEqual([]);
    expect(await uses()).toEqual(['tags response 0.59 1', 'requiredTags response 0.59 1']);
  });

  it('passes unchanged and skipped outcomes through', async () => {
    const { plugin, exchangeOf, uses } = setup();
    const exchange = exchangeOf('GET', '/missions');
    const patch = hooksOf(requestHooks(plugin, exchange)).onResponse!(200, JSON_TYPE)!;
    expect(run(patch, '{"a":1,"b":[2]}').outcome).toEqual({ kind: 'unchanged' });
    const second = hooksOf(requestHooks(plugin, exchange)).onResponse!(200, JSON_TYPE)!;
    expect(run(second, '{"metadata":[1,')).toEqual({
      outcome: { kind: 'skipped', reason: 'invalid_json' },
      body: '{"metadata":[1,',
    });
    expect(exchange.logFields).toEqual({});
    expect(await uses()).toEqual([]);
  });
});

describe('createAliasLayer — metrics', () => {
  it('registers shim_alias_uses_total on the given registry', async () => {
    const { registry } = setup();
    expect(await registry.metrics()).toContain('# TYPE shim_alias_uses_total counter');
  });

  it('refuses to register twice on one registry', () => {
    const { registry } = setup();
    expect(() =>
      createAliasLayer(DEFAULTS, { logger: pino({ level: 'silent' }), registry, budget }),
    ).toThrow();
  });
});
