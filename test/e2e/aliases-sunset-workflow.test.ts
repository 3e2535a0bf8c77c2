/**
 * The sunset workflow end to end (issue 11 "how it will be checked"): a legacy client population —
 * many API keys, a few gateway identities, several client versions — through the shim and the
 * reference backend; `/aliases/usage` on the admin listener names the heavy users correctly; a brownout
 * window turns the layer off and back on at its edges: the shim built with a fake clock
 * (`ShimDependencies.now`), moved across the window's edges between requests (the edges to the
 * millisecond are unit-tested in test/unit/aliases/sunset-workflow.test.ts).
 *
 * Delete this file with `src/aliases/` at 1.0 (docs/removing-the-alias-layer.md).
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { startReferenceBackend } from '@compat-shim/reference-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { keyFingerprint } from '../../src/aliases/consumer.ts';
import { createShim, PLUGINS } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { createFrontServer } from '../../src/proxy/server.ts';
import { send } from '../helpers/http.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const FILES = '/files?tags=a0000000-0000-4000-8000-000000000003';
const CANONICAL_FILES = '/files?metadataByTypeUuid=a0000000-0000-4000-8000-000000000003';
const KEY = 'population-fingerprint-key';
const DOCS = 'https://docs.example.com/migration-guide';

let running: Stack[] = [];
const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const stack of running) await stack.close();
  running = [];
  for (const close of closers.splice(0).reverse()) await close();
});

async function start(env: Record<string, string>) {
  const stack = await startStack(env);
  running.push(stack);
  return { stack, adminUrl: stack.adminUrl };
}

interface Report {
  since: string;
  consumers: Array<{
    consumer: string;
    count: number;
    error: number;
    aliases: Record<string, number>;
    clientVersions: string[];
    userAgents: string[];
  }>;
}

describe('who still uses the aliases', () => {
  it('names the heavy users of a population, with their versions and user agents', async () => {
    const { stack, adminUrl } = await start({
      CONSUMER_HEADER: 'X-Consumer-Id',
      CONSUMER_FINGERPRINT_KEY: KEY,
      CONSUMER_TABLE_SIZE: '8',
    });
    const requests: Array<Record<string, string>> = [];
    // Heavy: two gateway identities and one API key; light: 40 API keys once each; current clients.
    for (let i = 0; i < 12; i++)
      requests.push({
        'x-consumer-id': 'team-robotics',
        'service-client-version': '0.58.0',
        'x-api-key': `gw-${i}`,
      });
    for (let i = 0; i < 8; i++)
      requests.push({
        'x-consumer-id': 'team-vision',
        'service-client-version': '0.59.1',
        'x-api-key': `gw-${i}`,
      });
    for (let i = 0; i < 10; i++)
      requests.push({ 'service-client-version': i % 2 ? '0.57.0' : '0.59.0', 'x-api-key': 'heavy-key' });
    for (let i = 0; i < 40; i++)
      requests.push({ 'service-client-version': '0.59.0', 'x-api-key': `light-key-${i}` });
    for (let i = 0; i < 20; i++) requests.push({ 'service-client-version': '1.0.0', 'x-api-key': 'current' });
    // Interleaved, as a real population arrives.
    requests.sort(
      (a, b) => (a['x-api-key']! + a['x-consumer-id']).length - (b['x-api-key']! + b['x-consumer-id']).length,
    );
    for (const headers of requests) {
      const reply = await send(
        stack.url,
        'GET',
        headers['service-client-version'] === '1.0.0' ? CANONICAL_FILES : FILES,
        {
          ...headers,
          'user-agent': 'kleinkram/0.59 python',
        },
      );
      expect(reply.status, `${JSON.stringify(headers)} ${reply.text}`).toBe(200);
    }
    const report = (await send(adminUrl, 'GET', '/aliases/usage')).json<Report>();
    const top = report.consumers.slice(0, 3);
    expect(top.map((c) => c.consumer)).toEqual([
      'team-robotics',
      keyFingerprint(KEY, 'heavy-key'),
      'team-vision',
    ]);
    expect(top[0]).toMatchObject({
      aliases: { tags: 12 },
      clientVersions: ['0.58.0'],
      userAgents: ['kleinkram/0.59'],
    });
    expect(top[1]!.clientVersions.sort()).toEqual(['0.57.0', '0.59.0']);
    expect(report.consumers.length).toBeLessThanOrEqual(8);
    expect(report.consumers.every((c) => c.consumer !== 'current')).toBe(true);
    // The log line of each aliased request carries the consumer id.
    const aliased = stack.logs().filter((l) => l.msg === 'request completed' && l.aliases);
    expect(aliased).toHaveLength(70);
    expect(aliased.every((l) => typeof l.consumer === 'string')).toBe(true);
    // Reset: the counts are gone for good, so the log says what went and who asked.
    const before = (await send(adminUrl, 'GET', '/aliases/usage')).json<Report>();
    expect((await send(adminUrl, 'DELETE', '/aliases/usage')).status).toBe(204);
    expect((await send(adminUrl, 'GET', '/aliases/usage')).json<Report>().consumers).toEqual([]);
    const reset = stack.logs().find((l) => l.msg === 'alias usage report reset: its counts are gone');
    expect(reset).toMatchObject({
      level: 40,
      recorded: 70,
      consumers: before.consumers.length,
      remoteAddress: '127.0.0.1',
    });
    expect((await send(adminUrl, 'POST', '/aliases/usage')).status).toBe(405);
  });
});

/**
 * The shim (the same `createShim` as the runtime's) in front of the reference backend, with the
 * plugins' clock `now` instead of `Date.now`.
 */
async function startWithClock(env: Record<string, string>, now: () => number) {
  const backend = await startReferenceBackend({ port: 0 });
  closers.push(() => backend.close());
  const config = loadConfig({ LOG_LEVEL: 'info', ...env, UPSTREAM_URL: backend.url }, PLUGINS);
  let text = '';
  const sink = new Writable({
    write(chunk, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  });
  const metrics = createMetrics(false);
  const shim = createShim(config, {
    logger: createLogger(config.logLevel, [], sink),
    metrics,
    upstream: new URL(backend.url),
    now,
  });
  const server = createFrontServer(shim.app, shim.onServerRejection);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    shim.forwarder.agent.destroy();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    metrics,
    logs: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('a brownout', () => {
  it('turns the layer off inside its window and back on after it', async () => {
    const startAt = Date.parse('2026-03-01T12:00:00Z');
    let clock = startAt - 1;
    const stack = await startWithClock(
      { ALIAS_BROWNOUTS: `${new Date(startAt).toISOString()}/PT2S`, ALIAS_DOCS_URL: DOCS },
      () => clock,
    );
    const legacy = { 'service-client-version': '0.59.0', 'x-api-key': 'k' };
    const probe = () => send(stack.url, 'GET', FILES, legacy);

    const before = await probe();
    expect(before.status).toBe(200);
    expect(String(before.headers.warning)).not.toContain('browned out');

    clock = startAt;
    const during = await probe();
    expect(during.status).toBe(400);
    expect(during.text).toContain('property tags should not exist');
    expect(String(during.headers.warning)).toContain(
      'aliases are browned out until 2026-03-01T12:00:02.000Z',
    );
    expect(String(during.headers.warning)).toContain(DOCS);
    clock = startAt + 1_999;
    expect((await probe()).status).toBe(400);

    clock = startAt + 2_000;
    const after = await probe();
    expect(after.status).toBe(200);
    expect(after.headers.warning).toBeDefined(); // the usual deprecation warning again
    expect(String(after.headers.warning)).not.toContain('browned out');
    const log = stack.logs().filter((l) => l.brownout === true);
    expect(log).toHaveLength(2);
    expect(log[0]).toMatchObject({ aliases: ['tags'], consumer: 'api-key' });
    const metrics = await stack.metrics.registry.metrics();
    expect(metrics).toMatch(/shim_alias_brownout_requests_total\{route="GET \/files"\} 2/);
    expect(metrics).toMatch(/shim_alias_brownout_refusals_total\{route="GET \/files"\} 2/);
  });
});
