/**
 * The alias layer's sunset workflow at the plugin level (issue 11 items 1–3), with an injected clock:
 * consumers attributed and logged, the usage report on the admin routes, brownouts that switch the
 * layer off exactly inside their windows, the sunset link.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import pino from 'pino';
import { Registry } from 'prom-client';
import { SemVer } from 'semver';
import { describe, expect, it } from 'vitest';
import { parseBrownouts } from '../../../src/aliases/brownout.ts';
import type { AliasSettings } from '../../../src/aliases/config.ts';
import { keyFingerprint } from '../../../src/aliases/consumer.ts';
import { createAliasLayer } from '../../../src/aliases/index.ts';
import { USAGE_PATH } from '../../../src/aliases/usage-routes.ts';
import type { AdminRoute, Exchange } from '../../../src/core/types.ts';
import { requestHooks } from './request-of.ts';

const JSON_TYPE = { 'content-type': 'application/json' };
const FINGERPRINT_KEY = 'test-fingerprint-key-0001';
const windows = (text: string) => {
  const r = parseBrownouts(text);
  if ('problems' in r) throw new Error(r.problems.join());
  return r.windows;
};

function setup(overrides: Partial<AliasSettings> = {}) {
  const registry = new Registry();
  let clock = Date.parse('2027-01-12T13:00:00Z');
  const settings: AliasSettings = {
    enabled: true,
    sunsetVersion: new SemVer('1.0.0'),
    consumerTableSize: 1000,
    maxPatchValue: 1024 * 1024,
    consumerFingerprintKey: FINGERPRINT_KEY,
    ...overrides,
  };
  const plugin = createAliasLayer(settings, {
    logger: pino({ level: 'silent' }),
    registry,
    now: () => clock,
    credentials: { apiKeyHeader: 'x-api-key' },
    budget: { tryReserve: () => true, release() {}, used: 0, limit: Number.MAX_SAFE_INTEGER },
  });
  const exchangeOf = (
    method: string,
    target: string,
    headers: IncomingHttpHeaders = {},
    version = '0.59.0',
  ) => {
    const q = target.indexOf('?');
    return {
      method,
      path: q < 0 ? target : target.slice(0, q),
      rawQuery: q < 0 ? '' : target.slice(q + 1),
      headers,
      clientVersion: new SemVer(version),
      responseHeaders: [],
      logFields: {},
    } satisfies Exchange;
  };
  const route = (method: string): AdminRoute =>
    plugin.adminRoutes!.find((r) => r.method === method && r.path === USAGE_PATH)!;
  const usage = (query = '') => {
    let status = 0;
    let body = '';
    const res = {
      writeHead(s: number) {
        status = s;
        return res;
      },
      end(text?: string) {
        body = text ?? '';
      },
    } as unknown as ServerResponse;
    void route('GET').handle({ url: `${USAGE_PATH}${query}` } as IncomingMessage, res);
    expect(status).toBe(200);
    return JSON.parse(body) as { since: string; consumers: Array<Record<string, unknown>> };
  };
  const reset = () => {
    let status = 0;
    const res = { writeHead: (s: number) => (status = s), end() {} } as unknown as ServerResponse;
    void route('DELETE').handle({ socket: {} } as IncomingMessage, res);
    return status;
  };
  /** The series of a metric that counted something (the brownout counters start every route at 0). */
  const metric = async (name: string) =>
    (await registry.getSingleMetric(name)!.get()).values
      .filter((v) => v.value !== 0)
      .map((v) => [v.labels, v.value]);
  const zeros = async (name: string) =>
    (await registry.getSingleMetric(name)!.get()).values
      .filter((v) => v.value === 0)
      .map((v) => v.labels.route);
  return {
    plugin,
    exchangeOf,
    usage,
    reset,
    metric,
    zeros,
    setClock: (iso: string) => (clock = Date.parse(iso)),
  };
}

/** Sends a legacy request through the hooks the plugin returns, as the core would. */
function run(plugin: ReturnType<typeof setup>['plugin'], exchange: Exchange, body?: string) {
  const hooks = requestHooks(plugin, exchange);
  const query = hooks?.rewriteQuery ? hooks.rewriteQuery(exchange.rawQuery) : exchange.rawQuery;
  const sent = body !== undefined && hooks?.body ? hooks.body.rewrite(Buffer.from(body)).toString() : body;
  hooks?.onStatus?.(400);
  hooks?.onResponse?.(400, { 'content-type': 'application/json' });
  return { hooks, query, sent };
}

describe('consumers', () => {
  it('attributes each aliased request, logs the consumer id and serves the report', () => {
    const { plugin, exchangeOf, usage, setClock } = setup({ consumerHeader: 'x-consumer-id' });
    const ex1 = exchangeOf('GET', '/files?tags=a', {
      'x-api-key': 'key-one',
      'user-agent': 'cli/0.59.0 extra',
    });
    run(plugin, ex1);
    expect(ex1.logFields).toMatchObject({
      consumer: keyFingerprint(FINGERPRINT_KEY, 'key-one'),
      aliases: ['tags'],
    });
    setClock('2027-01-12T13:00:01Z');
    const ex2 = exchangeOf('POST', '/missions', { ...JSON_TYPE, 'x-consumer-id': 'gateway-team' }, '0.58.1');
    run(plugin, ex2, '{"tags":{},"ignoreTags":true}');
    run(
      plugin,
      exchangeOf('POST', '/missions', { ...JSON_TYPE, 'x-consumer-id': 'gateway-team' }),
      '{"tags":{}}',
    );
    const report = usage();
    expect(report.since).toBe('2027-01-12T13:00:00.000Z');
    expect(report.consumers).toEqual([
      {
        consumer: 'gateway-team',
        count: 2,
        error: 0,
        aliases: { tags: 2, ignoreTags: 1 },
        clientVersions: ['0.58.1', '0.59.0'],
        userAgents: ['unknown'],
        firstSeen: '2027-01-12T13:00:01.000Z',
        lastSeen: '2027-01-12T13:00:01.000Z',
      },
      expect.objectContaining({
        consumer: keyFingerprint(FINGERPRINT_KEY, 'key-one'),
        count: 1,
        userAgents: ['cli/0.59.0'],
      }),
    ]);
    expect(usage('?limit=1').consumers).toHaveLength(1);
    expect(usage('?limit=0').consumers).toEqual([]);
    // Not a whole number in decimal digits: the whole table (`Number` read '' as 0, '0x1' as 1).
    for (const limit of ['', '-1', '1.5', 'abc', '0x1', '1e0', '%201', '+1'])
      expect(usage(`?limit=${limit}`).consumers, `?limit=${limit}`).toHaveLength(2);
  });

  it('does not count requests that used no alias', () => {
    const { plugin, exchangeOf, usage } = setup();
    const ex = exchangeOf('POST', '/missions', JSON_TYPE);
    run(plugin, ex, '{"metadata":{}}');
    expect(ex.logFields).toEqual({});
    expect(usage().consumers).toEqual([]);
  });

  it('resets on DELETE, with a new `since`', () => {
    const { plugin, exchangeOf, usage, reset, setClock } = setup();
    run(plugin, exchangeOf('GET', '/files?tags=a', { 'x-api-key': 'k' }));
    setClock('2027-01-12T14:30:00Z');
    expect(reset()).toBe(204);
    expect(usage()).toEqual({
      since: '2027-01-12T14:30:00.000Z',
      capacity: 1000,
      recorded: 0,
      consumers: [],
    });
  });

  it('exports the heaviest consumers as a bounded gauge', async () => {
    const { plugin, exchangeOf, metric } = setup({ consumerHeader: 'x-consumer-id' });
    for (let i = 0; i < 30; i++) {
      for (let n = 0; n <= i; n++)
        run(plugin, exchangeOf('GET', '/files?tags=a', { 'x-consumer-id': `c${i}` }));
    }
    const series = await metric('shim_alias_consumers');
    expect(series).toHaveLength(10);
    expect(series[0]).toEqual([{ consumer: 'c29' }, 30]);
  });
});

describe('brownouts', () => {
  const BROWNOUTS = windows('2027-01-12T14:00Z/PT1H');
  const DOCS = 'https://docs.example.com/migrate';

  it('warns at start about windows that ended before it: they rehearse nothing (a mistyped year)', () => {
    const startWith = (text: string, enabled = true) => {
      const lines: Array<Record<string, unknown>> = [];
      createAliasLayer(
        {
          enabled,
          sunsetVersion: new SemVer('1.0.0'),
          consumerTableSize: 10,
          maxPatchValue: 1024,
          brownouts: windows(text),
        },
        {
          logger: pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) }),
          registry: new Registry(),
          // The start: the first window below ended an hour before it, the second is to come.
          now: () => Date.parse('2027-01-12T16:00:00Z'),
          budget: { tryReserve: () => true, release() {}, used: 0, limit: Number.MAX_SAFE_INTEGER },
        },
      );
      return lines.filter((l) => l.level === 40);
    };
    expect(startWith('2027-01-12T14:00Z/PT1H,2027-01-19T14:00Z/PT1H')).toEqual([
      expect.objectContaining({
        brownouts: ['2027-01-12T14:00Z/PT1H'],
        msg: expect.stringMatching(/^ALIAS_BROWNOUTS: windows that ended before the start/),
      }),
    ]);
    // A window in progress or to come, or the layer off: nothing to say.
    expect(startWith('2027-01-12T15:30Z/PT1H,2027-01-19T14:00Z/PT1H')).toEqual([]);
    expect(startWith('2027-01-12T14:00Z/PT1H', false)).toEqual([]);
  });

  it('leave the layer on outside the window and switch it off inside, at the exact edges', () => {
    const { plugin, exchangeOf, setClock, usage } = setup({ brownouts: BROWNOUTS, docsUrl: DOCS });
    const at = (iso: string) => {
      setClock(iso);
      const ex = exchangeOf('GET', '/files?tags=a&x=1', { 'x-api-key': 'k' });
      const { query } = run(plugin, ex);
      return { query, ex };
    };
    expect(at('2027-01-12T13:59:59.999Z').query).toBe('metadataByTypeUuid=a&x=1');
    const inside = at('2027-01-12T14:00:00.000Z');
    expect(inside.query).toBe('tags=a&x=1');
    expect(inside.ex.logFields).toMatchObject({
      brownout: true,
      aliases: ['tags'],
      consumer: expect.any(String),
    });
    expect(inside.ex.responseHeaders).toEqual([
      [
        'Warning',
        `299 - "tags: aliases are browned out until 2027-01-12T15:00:00.000Z (rehearsal of their removal); use the canonical names, see ${DOCS}"`,
      ],
    ]);
    expect(at('2027-01-12T14:59:59.999Z').query).toBe('tags=a&x=1');
    expect(at('2027-01-12T15:00:00.000Z').query).toBe('metadataByTypeUuid=a&x=1');
    // Browned out or not, a query that used an alias counts for its consumer.
    expect(usage().consumers).toEqual([
      expect.objectContaining({ consumer: keyFingerprint(FINGERPRINT_KEY, 'k'), count: 4 }),
    ]);
  });

  it('neither buffers a body nor patches a response inside the window; marks a JSON body by route', async () => {
    const { plugin, exchangeOf, setClock, metric, usage } = setup({ brownouts: BROWNOUTS });
    setClock('2027-01-12T14:10:00Z');
    const ex = exchangeOf('POST', '/missions', JSON_TYPE);
    const hooks = requestHooks(plugin, ex)!;
    expect(hooks.body).toBeUndefined();
    expect(hooks.rewriteQuery).toBeUndefined();
    // An observer only: no patch, and Range goes upstream as without the layer.
    expect(hooks.onResponse).toBeUndefined();
    hooks.onStatus!(400);
    expect(ex.logFields).toMatchObject({ brownout: true, consumer: 'session' });
    expect(ex.responseHeaders[0]![1]).toContain('tags, ignoreTags: aliases are browned out');
    // Marked by route only: the body may hold no alias, so the usage table does not count it.
    expect(usage().consumers).toEqual([]);
    expect(await metric('shim_alias_brownout_requests_total')).toEqual([[{ route: 'POST /missions' }, 1]]);
    expect(await metric('shim_alias_brownout_refusals_total')).toEqual([[{ route: 'POST /missions' }, 1]]);
  });

  it('start both counters at 0 for every route of the table, before any brownout (increase() reads 0, not no data)', async () => {
    const { zeros } = setup({ brownouts: BROWNOUTS });
    const routes = [
      'POST /missions',
      'POST /missions/:uuid/metadata',
      'POST /projects',
      'GET /files',
      'PUT /projects/:uuid/metadata-types',
      'POST /projects/:uuid/metadata-types',
    ];
    expect((await zeros('shim_alias_brownout_requests_total')).sort()).toEqual([...routes].sort());
    expect((await zeros('shim_alias_brownout_refusals_total')).sort()).toEqual([...routes].sort());
  });

  it('count a request only once the upstream answered it, and not a 401, 403 or 5xx (usage poisoning)', async () => {
    const { plugin, exchangeOf, setClock, metric, usage } = setup({ brownouts: BROWNOUTS });
    setClock('2027-01-12T14:10:00Z');
    const browned = (key: string) => {
      const ex = exchangeOf('GET', '/files?tags=a', { 'x-api-key': key });
      return { ex, hooks: requestHooks(plugin, ex)! };
    };
    for (const status of [401, 403, 500, 503]) browned(`made-up-${status}`).hooks.onStatus!(status);
    const unanswered = browned('made-up-never-answered');
    // The warning and the log fields describe each request, answered or not …
    expect(unanswered.ex.logFields).toMatchObject({ brownout: true, consumer: expect.any(String) });
    expect(unanswered.ex.responseHeaders).toHaveLength(1);
    // … but nothing counted: a 401 is no refusal of the alias, a 5xx and no answer say nothing of the caller.
    expect(await metric('shim_alias_brownout_requests_total')).toEqual([]);
    expect(await metric('shim_alias_brownout_refusals_total')).toEqual([]);
    expect(usage().consumers).toEqual([]);
    browned('real-key').hooks.onStatus!(400);
    browned('real-key').hooks.onStatus!(200);
    expect(await metric('shim_alias_brownout_requests_total')).toEqual([[{ route: 'GET /files' }, 2]]);
    expect(await metric('shim_alias_brownout_refusals_total')).toEqual([[{ route: 'GET /files' }, 1]]);
    expect(usage().consumers).toEqual([
      expect.objectContaining({ consumer: keyFingerprint(FINGERPRINT_KEY, 'real-key'), count: 2 }),
    ]);
  });

  it('leave requests that cannot use an alias untouched inside the window', () => {
    const { plugin, exchangeOf, setClock } = setup({ brownouts: BROWNOUTS });
    setClock('2027-01-12T14:10:00Z');
    expect(requestHooks(plugin, exchangeOf('GET', '/missions'))).toBeUndefined();
    expect(requestHooks(plugin, exchangeOf('GET', '/files?metadataByTypeUuid=a'))).toBeUndefined();
    expect(
      requestHooks(plugin, exchangeOf('POST', '/missions', { 'content-type': 'text/plain' })),
    ).toBeUndefined();
    expect(requestHooks(plugin, exchangeOf('GET', '/files?tags=a', {}, '1.0.0'))).toBeUndefined();
  });
});

describe('sunset link (RFC 8594 §3)', () => {
  it('goes beside the deprecation link on a request that used an alias', () => {
    const { plugin, exchangeOf } = setup({
      docsUrl: 'https://docs.example.com/migrate',
      sunsetPolicyUrl: 'https://docs.example.com/sunset',
      sunsetAt: new Date('2027-06-01T00:00:00Z'),
    });
    const ex = exchangeOf('GET', '/files?tags=a');
    run(plugin, ex);
    expect(ex.responseHeaders).toEqual([
      ['Sunset', 'Tue, 01 Jun 2027 00:00:00 GMT'],
      ['Link', '<https://docs.example.com/migrate>; rel="deprecation"'],
      ['Link', '<https://docs.example.com/sunset>; rel="sunset"'],
      ['Warning', '299 - "tags is deprecated; use metadataByTypeUuid"'],
    ]);
  });
});
