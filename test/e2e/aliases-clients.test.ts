/**
 * Who gets the alias layer (SPEC §2, §5, §6; issue 3 "who gets it"): clients strictly below
 * `ALIAS_SUNSET_VERSION` (compared with `semver.lt`, so `1.0.0-rc.1` still does) while `ALIASES=on`.
 * Everyone else passes through untouched in both directions: an alias they send reaches the strict
 * backend, which answers with its own 400, and responses carry no `tags`.
 *
 * Delete this file with `src/aliases/` at 1.0 (docs/removing-the-alias-layer.md).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { CURRENT, LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const MISSION = 'c0000000-0000-4000-8000-000000000001';
const PROJECT = 'b0000000-0000-4000-8000-000000000001';
const OPEN_PROJECT = 'b0000000-0000-4000-8000-000000000002';
const WEATHER = 'a0000000-0000-4000-8000-000000000003';
/** The reference backend's (NestJS ValidationPipe's) own 400 for an unknown member or parameter `tags`. */
const BACKEND_400 = '{"message":["property tags should not exist"],"error":"Bad Request","statusCode":400}';

const withVersion = (version: string) => ({ ...LEGACY, 'service-client-version': version });

const createMission = (stack: Stack, headers: object, body: object) =>
  send(
    stack.url,
    'POST',
    '/missions',
    { ...headers, 'content-type': 'application/json' },
    JSON.stringify({ name: 'm', projectUUID: OPEN_PROJECT, ...body }),
  );

/** Asserts the exchange went through untouched: the backend's 400 for `tags`, its bytes for reads. */
async function expectPassThrough(stack: Stack, headers: Record<string, string>): Promise<void> {
  const post = await createMission(stack, headers, { tags: { [WEATHER]: 'x' } });
  expect(post.status).toBe(400);
  expect(post.text).toBe(BACKEND_400);
  expect(post.headers.warning ?? '').not.toMatch(/is deprecated/);

  const query = await send(stack.url, 'GET', `/files?tags=${WEATHER}`, headers);
  expect(query.status).toBe(400);
  expect(query.text).toBe(BACKEND_400);

  const add = await send(
    stack.url,
    'POST',
    `/projects/${PROJECT}/metadata-types?tagTypeUUID=${WEATHER}`,
    headers,
  );
  expect(add.status).toBe(400);
  expect(add.json().message).toContain('property tagTypeUUID should not exist');

  for (const path of [`/missions/${MISSION}`, '/missions', `/projects/${PROJECT}`, '/projects']) {
    const shim = await send(stack.url, 'GET', path, headers);
    const direct = await send(stack.upstreamUrl, 'GET', path, headers);
    expect(shim.status).toBe(200);
    expect(shim.text).not.toContain('"tags"');
    expect(shim.text).not.toContain('"requiredTags"');
    expect(shim.body.equals(direct.body), path).toBe(true);
    expect(shim.headers.etag).toBe(direct.headers.etag);
  }

  // Canonical names work as for any client.
  const canonical = await createMission(stack, headers, { metadata: { [WEATHER]: 'y' } });
  expect(canonical.status, canonical.text).toBe(201);
  expect(canonical.text).not.toContain('"tags"');
}

/** Asserts the client gets the alias layer in both directions. */
async function expectAliases(stack: Stack, headers: Record<string, string>): Promise<void> {
  const post = await createMission(stack, headers, { tags: { [WEATHER]: 'x' } });
  expect(post.status, post.text).toBe(201);
  expect(post.json().tags).toEqual(post.json().metadata);
  const files = await send(stack.url, 'GET', `/files?tags=${WEATHER}`, headers);
  expect(files.status, files.text).toBe(200);
  const project = await send(stack.url, 'GET', `/projects/${PROJECT}`, headers);
  expect(project.json().requiredTags).toEqual(project.json().requiredMetadataTypes);
}

const aliasUses = async (stack: Stack) =>
  (await stack.metrics.registry.getSingleMetric('shim_alias_uses_total')!.get()).values.reduce(
    (sum, v) => sum + v.value,
    0,
  );

describe('ALIASES=on (default), sunset 1.0.0', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  it('a 1.0.0 client passes through untouched and is not counted', async () => {
    const before = await aliasUses(stack);
    await expectPassThrough(stack, CURRENT);
    expect(await aliasUses(stack)).toBe(before);
    const line = stack.logs().findLast((l) => l.msg === 'request completed' && l.clientVersion === '1.0.0');
    expect(line).toBeDefined();
    expect(line?.aliases).toBeUndefined();
  });

  it.each(['1.0.1', '1.4.0', '2.0.0-beta.1'])('a %s client passes through untouched', async (version) => {
    await expectPassThrough(stack, withVersion(version));
  });

  it.each([
    ['1.0.0-rc.1', '1.0'],
    ['1.0.0-0', '1.0'],
    ['0.59.0', '0.59'],
    ['0.9.9+build.7', '0.9'],
    ['0.59.0.dev20260101', '0.59'],
  ])('a %s client gets the aliases and is counted as client="%s"', async (version, label) => {
    await expectAliases(stack, withVersion(version));
    const metric = await stack.metrics.registry.getSingleMetric('shim_alias_uses_total')!.get();
    const series = metric.values.find(
      (v) => v.labels.client === label && v.labels.alias === 'tags' && v.labels.direction === 'request',
    );
    expect(series?.value).toBeGreaterThan(0);
  });
});

describe('ALIASES=off', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      ALIASES: 'off',
      ALIAS_DEPRECATED_AT: '2026-01-01T00:00:00Z',
      ALIAS_DOCS_URL: 'https://docs.example.com/tags',
    });
  });
  afterAll(() => stack.close());

  it.each([
    ['legacy 0.59.0', LEGACY],
    ['1.0.0-rc.1', withVersion('1.0.0-rc.1')],
    ['1.0.0', CURRENT],
  ])('a %s client passes through untouched', async (_name, headers) => {
    await expectPassThrough(stack, headers);
  });

  it('sends no deprecation signals and counts nothing', async () => {
    const reply = await createMission(stack, LEGACY, { tags: {} });
    expect(reply.headers.deprecation).toBeUndefined();
    expect(reply.headers.link).toBeUndefined();
    expect(await aliasUses(stack)).toBe(0);
    const lines = stack.logs().filter((l) => l.msg === 'request completed');
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.some((l) => l.aliases !== undefined)).toBe(false);
  });

  it('says at start that the layer is off', () => {
    expect(stack.logs().some((l) => l.msg === 'alias layer off (ALIASES=off)')).toBe(true);
  });
});

describe('ALIAS_SUNSET_VERSION=2.0.0', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ ALIAS_SUNSET_VERSION: '2.0.0' });
  });
  afterAll(() => stack.close());

  it('a 1.0.0 client still gets the aliases; a 2.0.0 client does not', async () => {
    await expectAliases(stack, CURRENT);
    await expectPassThrough(stack, withVersion('2.0.0'));
  });
});

describe('requests the gates answer never reach the alias layer', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  it('a public path is forwarded untouched even with a legacy version', async () => {
    const shim = await send(stack.url, 'GET', '/api/health', LEGACY);
    const direct = await send(stack.upstreamUrl, 'GET', '/api/health', LEGACY);
    expect(shim.body.equals(direct.body)).toBe(true);
  });

  it('a legacy request without credentials gets the shim’s 401 without alias signals', async () => {
    const reply = await send(
      stack.url,
      'POST',
      '/missions',
      { 'service-client-version': '0.59.0', 'content-type': 'application/json' },
      '{"tags":{}}',
    );
    expect(reply.status).toBe(401);
    expect(reply.headers.warning ?? '').not.toMatch(/is deprecated/);
    expect(await aliasUses(stack)).toBe(0);
  });
});
