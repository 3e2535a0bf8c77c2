/**
 * The reference backend package (`reference-backend/`, SPEC §9) on real sockets: every route of the
 * service API, Nest's whitelisting ValidationPipe on bodies and queries (an alias that leaks through the
 * shim fails loudly), credentials (service document part 5), lists, compression, weak ETags and 304,
 * and the CLI entry point `reference-backend/dist/main.js`. A fresh backend (fresh store) per test
 * where a test writes.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import {
  DEFAULT_SERVICE_VERSION,
  DEMO_USER,
  type RunningReferenceBackend,
  SEED_IDS,
  startReferenceBackend,
} from '@compat-shim/reference-backend';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Reply, send } from '../helpers/http.ts';

const KEY = Object.freeze({ 'x-api-key': 'test-key' });
const JSON_KEY = Object.freeze({ ...KEY, 'content-type': 'application/json' });
const { metadataTypes: TYPES, projects: PROJECTS, missions: MISSIONS } = SEED_IDS;
const UNKNOWN_MISSION = 'c0000000-0000-4000-8000-00000000000f';

/** Nest's 400 for one whitelisting violation. */
const forbidden = (name: string) => ({
  statusCode: 400,
  message: [`property ${name} should not exist`],
  error: 'Bad Request',
});

const post = (url: string, path: string, body: unknown, method = 'POST'): Promise<Reply> =>
  send(url, method, path, JSON_KEY, JSON.stringify(body));

let shared: RunningReferenceBackend;
beforeAll(async () => {
  shared = await startReferenceBackend({ serviceVersion: '0.61.2' });
});
afterAll(() => shared.close());

// A fresh backend for tests that write.
let fresh: RunningReferenceBackend | undefined;
afterEach(async () => {
  await fresh?.close();
  fresh = undefined;
});
async function freshBackend(options: Parameters<typeof startReferenceBackend>[0] = {}): Promise<string> {
  fresh = await startReferenceBackend(options);
  return fresh.url;
}

describe('health and credentials', () => {
  it('GET /api/health is public and carries Service-Version', async () => {
    const reply = await send(shared.url, 'GET', '/api/health');
    expect(reply.status).toBe(200);
    expect(reply.json()).toEqual({ status: 'ok' });
    expect(reply.headers['service-version']).toBe('0.61.2');
  });

  it.each([
    ['nothing', {}],
    ['an empty API key', { 'x-api-key': ' ' }],
    ['only authtoken', { cookie: 'authtoken=a' }],
    ['an empty refreshtoken', { cookie: 'authtoken=a; refreshtoken=' }],
  ])('without credentials (%s): Nest’s 401', async (_name, headers) => {
    const reply = await send(shared.url, 'GET', '/user/me', headers);
    expect(reply.status).toBe(401);
    expect(reply.json()).toEqual({ statusCode: 401, message: 'Unauthorized' });
    expect(reply.headers['service-version']).toBe('0.61.2');
  });

  it.each([
    ['an API key', KEY],
    ['both session cookies', { cookie: 'authtoken=a; refreshtoken="r"' }],
  ])('with %s: the demo user', async (_name, headers) => {
    const reply = await send(shared.url, 'GET', '/user/me', headers);
    expect(reply.status).toBe(200);
    expect(reply.json()).toEqual(DEMO_USER);
  });

  it('an unknown route is Nest’s 404, before any credential check', async () => {
    const reply = await send(shared.url, 'GET', '/nope?x=1');
    expect(reply.status).toBe(404);
    expect(reply.json()).toEqual({ statusCode: 404, message: 'Cannot GET /nope?x=1', error: 'Not Found' });
  });
});

describe('missions', () => {
  it('GET /missions/:uuid: the seeded mission, canonical names only', async () => {
    const reply = await send(shared.url, 'GET', `/missions/${MISSIONS.alpha}`, KEY);
    expect(reply.status).toBe(200);
    const mission = reply.json<Record<string, unknown>>();
    expect(mission).toMatchObject({
      uuid: MISSIONS.alpha,
      name: 'mission-alpha',
      projectUuid: PROJECTS.demo,
    });
    expect(mission.metadata).toHaveLength(2);
    expect(mission).not.toHaveProperty('tags');
  });

  it('GET /missions/:uuid: 404 for an unknown one, ParseUUIDPipe’s 400 for a malformed one', async () => {
    const missing = await send(shared.url, 'GET', `/missions/${UNKNOWN_MISSION}`, KEY);
    expect(missing.status).toBe(404);
    expect(missing.json()).toEqual({
      statusCode: 404,
      message: `Mission ${UNKNOWN_MISSION} not found`,
      error: 'Not Found',
    });
    const malformed = await send(shared.url, 'GET', '/missions/not-a-uuid', KEY);
    expect(malformed.status).toBe(400);
    expect(malformed.json()).toEqual({
      statusCode: 400,
      message: 'Validation failed (uuid is expected)',
      error: 'Bad Request',
    });
  });

  it('POST /missions: 201 with the metadata; then listed, filtered and paged', async () => {
    const url = await freshBackend();
    const created = await post(url, '/missions', {
      name: 'm',
      projectUUID: PROJECTS.demo,
      metadata: { [TYPES.location]: 'Bern', [TYPES.robot.toUpperCase()]: 'ANYmal' },
    });
    expect(created.status, created.text).toBe(201);
    const mission = created.json<{
      uuid: string;
      metadata: Array<{ value: unknown; metadataType: unknown }>;
    }>();
    expect(mission.metadata.map((m) => m.value)).toEqual(['Bern', 'ANYmal']);
    expect(mission.metadata[1]?.metadataType).toEqual({
      uuid: TYPES.robot,
      name: 'robot',
      datatype: 'string',
    });

    const all = await send(url, 'GET', '/missions', KEY);
    expect(all.json()).toMatchObject({ count: 3, skip: 0, take: 100 });
    const ofDemo = await send(url, 'GET', `/missions?projectUuid=${PROJECTS.demo}&skip=1&take=1`, KEY);
    const page = ofDemo.json<{ data: Array<{ uuid: string }>; count: number; skip: number; take: number }>();
    expect(page).toMatchObject({ count: 2, skip: 1, take: 1 });
    expect(page.data.map((m) => m.uuid)).toEqual([mission.uuid]);
  });

  it('POST /missions: missing required metadata is refused unless ignoreMissingMetadata', async () => {
    const url = await freshBackend();
    const refused = await post(url, '/missions', { name: 'm', projectUUID: PROJECTS.demo });
    expect(refused.status).toBe(400);
    expect(refused.json<{ message: string }>().message).toMatch(/requires metadata that is missing/);
    const allowed = await post(url, '/missions', {
      name: 'm',
      projectUUID: PROJECTS.demo,
      ignoreMissingMetadata: true,
    });
    expect(allowed.status).toBe(201);
  });

  it('POST /missions: class-validator’s messages for wrong types', async () => {
    const reply = await post(shared.url, '/missions', {
      name: 1,
      projectUUID: 'x',
      ignoreMissingMetadata: 'yes',
    });
    expect(reply.status).toBe(400);
    expect(reply.json<{ message: string[] }>().message).toEqual(
      expect.arrayContaining([
        'name must be a string',
        'projectUUID must be a UUID',
        'ignoreMissingMetadata must be a boolean value',
      ]),
    );
  });

  it('POST /missions/:uuid/metadata replaces the metadata (201)', async () => {
    const url = await freshBackend();
    const reply = await post(url, `/missions/${MISSIONS.beta}/metadata`, {
      metadata: { [TYPES.weather]: 'rain' },
    });
    expect(reply.status).toBe(201);
    const again = await send(url, 'GET', `/missions/${MISSIONS.beta}`, KEY);
    expect(again.json<{ metadata: Array<{ value: unknown }> }>().metadata.map((m) => m.value)).toEqual([
      'rain',
    ]);
  });
});

describe('projects', () => {
  it('POST /projects (201), GET /projects, GET /projects/:uuid', async () => {
    const url = await freshBackend();
    const created = await post(url, '/projects', { name: 'p', requiredMetadataTypes: [TYPES.weather] });
    expect(created.status).toBe(201);
    const project = created.json<{ uuid: string; requiredMetadataTypes: Array<{ uuid: string }> }>();
    expect(project.requiredMetadataTypes.map((t) => t.uuid)).toEqual([TYPES.weather]);
    const list = await send(url, 'GET', '/projects?take=2', KEY);
    expect(list.json()).toMatchObject({ count: 3, skip: 0, take: 2 });
    const one = await send(url, 'GET', `/projects/${project.uuid}`, KEY);
    expect(one.json()).toMatchObject({ uuid: project.uuid, name: 'p', description: '' });
    expect(one.json()).not.toHaveProperty('requiredTags');
  });

  it('PUT /projects/:uuid/metadata-types replaces (200); POST …?metadataTypeUUID= adds (201)', async () => {
    const url = await freshBackend();
    const put = await post(
      url,
      `/projects/${PROJECTS.open}/metadata-types`,
      { metadataTypeUUIDs: [TYPES.robot] },
      'PUT',
    );
    expect(put.status).toBe(200);
    const added = await send(
      url,
      'POST',
      `/projects/${PROJECTS.open}/metadata-types?metadataTypeUUID=${TYPES.weather}`,
      KEY,
    );
    expect(added.status).toBe(201);
    const types = added.json<{ requiredMetadataTypes: Array<{ uuid: string }> }>().requiredMetadataTypes;
    expect(types.map((t) => t.uuid)).toEqual([TYPES.robot, TYPES.weather]);
  });

  it('an unknown metadata type is a 400, an unknown project a 404', async () => {
    const unknownType = 'a0000000-0000-4000-8000-0000000000ff';
    const badType = await post(shared.url, '/projects', { name: 'p', requiredMetadataTypes: [unknownType] });
    expect(badType.status).toBe(400);
    expect(badType.json()).toMatchObject({ message: `metadata type ${unknownType} does not exist` });
    const noProject = await send(shared.url, 'GET', `/projects/${UNKNOWN_MISSION}`, KEY);
    expect(noProject.status).toBe(404);
  });
});

describe('files and lists', () => {
  it('GET /files: {data, count, skip, take}', async () => {
    const reply = await send(shared.url, 'GET', '/files?skip=1&take=2', KEY);
    const page = reply.json<{ data: unknown[]; count: number; skip: number; take: number }>();
    expect(Object.keys(page)).toEqual(['data', 'count', 'skip', 'take']);
    expect(page).toMatchObject({ count: 5, skip: 1, take: 2 });
    expect(page.data).toHaveLength(2);
  });

  it.each([
    [`metadataByTypeUuid=${TYPES.weather}`, 2],
    [`metadataByTypeUuid=${TYPES.location}&metadataByTypeUuid=${TYPES.temperature}`, 2],
    [`metadataByTypeUuid[]=${TYPES.robot}`, 1],
    [`metadataByTypeUuid[x]=${TYPES.robot}&metadataByTypeUuid[y]=${TYPES.weather}`, 3],
  ])('GET /files?%s filters by metadata type (extended query parser)', async (query, count) => {
    const reply = await send(shared.url, 'GET', `/files?${query}`, KEY);
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json<{ count: number }>().count).toBe(count);
  });

  it('GET /metadata-types lists the four seeded types', async () => {
    const reply = await send(shared.url, 'GET', '/metadata-types', KEY);
    expect(reply.json()).toMatchObject({ count: 4, skip: 0, take: 100 });
  });

  it.each([
    ['take=10001', 'take must not be greater than 10000'],
    ['take=-1', 'take must not be less than 0'],
    ['skip=x', 'skip must be an integer number'],
    ['metadataByTypeUuid=nope', 'each value in metadataByTypeUuid must be a UUID'],
  ])('GET /files?%s is a 400', async (query, message) => {
    const reply = await send(shared.url, 'GET', `/files?${query}`, KEY);
    expect(reply.status).toBe(400);
    expect(reply.json<{ message: string[] }>().message).toContain(message);
  });

  it('without a seed every list is empty', async () => {
    const url = await freshBackend({ seed: false });
    const reply = await send(url, 'GET', '/missions', KEY);
    expect(reply.json()).toEqual({ data: [], count: 0, skip: 0, take: 100 });
  });
});

describe('whitelisting: the deprecated names are unknown to the backend', () => {
  it.each([
    ['POST', '/missions', { name: 'm', projectUUID: PROJECTS.open, tags: {} }, 'tags'],
    ['POST', '/missions', { name: 'm', projectUUID: PROJECTS.open, ignoreTags: true }, 'ignoreTags'],
    ['POST', `/missions/${MISSIONS.alpha}/metadata`, { metadata: {}, tags: {} }, 'tags'],
    ['POST', '/projects', { name: 'p', requiredTags: [] }, 'requiredTags'],
    [
      'PUT',
      `/projects/${PROJECTS.open}/metadata-types`,
      { metadataTypeUUIDs: [], tagTypeUUIDs: [] },
      'tagTypeUUIDs',
    ],
  ])('%s %s with a body member %#: 400', async (method, path, body, name) => {
    const reply = await post(shared.url, path, body, method);
    expect(reply.status).toBe(400);
    expect(reply.json()).toEqual(forbidden(name));
  });

  it.each([
    ['GET', `/files?tags=${TYPES.weather}`, 'tags'],
    ['GET', `/files?tags[]=${TYPES.weather}`, 'tags'],
    ['GET', '/missions?tags=x', 'tags'],
    ['GET', '/user/me?requiredTags=1', 'requiredTags'],
    ['GET', `/missions/${MISSIONS.alpha}?ignoreTags=true`, 'ignoreTags'],
    [
      'POST',
      `/projects/${PROJECTS.open}/metadata-types?metadataTypeUUID=${TYPES.weather}&tagTypeUUID=${TYPES.robot}`,
      'tagTypeUUID',
    ],
    [
      'POST',
      `/projects/${PROJECTS.open}/metadata-types?tagTypeUUIDs=${TYPES.robot}&metadataTypeUUID=${TYPES.robot}`,
      'tagTypeUUIDs',
    ],
  ])('%s %s: 400 for the query parameter', async (method, path, name) => {
    const reply = await send(shared.url, method, path, KEY);
    expect(reply.status).toBe(400);
    expect(reply.json()).toEqual(forbidden(name));
  });
});

describe('compression and ETags', () => {
  it('gzips a JSON body over 1 KiB when accepted; the same bytes otherwise', async () => {
    const zipped = await send(shared.url, 'GET', '/files', { ...KEY, 'accept-encoding': 'gzip' });
    const plain = await send(shared.url, 'GET', '/files', KEY);
    expect(plain.body.length).toBeGreaterThan(1024);
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(zipped.headers.vary).toMatch(/Accept-Encoding/i);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(gunzipSync(zipped.body).equals(plain.body)).toBe(true);
  });

  it('a small body is not compressed', async () => {
    const reply = await send(shared.url, 'GET', '/api/health', { 'accept-encoding': 'gzip' });
    expect(reply.headers['content-encoding']).toBeUndefined();
  });

  it('a weak ETag on GET; If-None-Match with it gives 304 without a body', async () => {
    const first = await send(shared.url, 'GET', `/missions/${MISSIONS.alpha}`, KEY);
    const etag = String(first.headers.etag);
    expect(etag).toMatch(/^W\/"[0-9a-f]+-/);
    const again = await send(shared.url, 'GET', `/missions/${MISSIONS.alpha}`, {
      ...KEY,
      'if-none-match': etag,
    });
    expect(again.status).toBe(304);
    expect(again.body.length).toBe(0);
    const other = await send(shared.url, 'GET', `/missions/${MISSIONS.alpha}`, {
      ...KEY,
      'if-none-match': 'W/"0-nope"',
    });
    expect(other.status).toBe(200);
  });
});

describe('reference-backend/dist/main.js', () => {
  const MAIN = fileURLToPath(new URL('../../reference-backend/dist/main.js', import.meta.url));
  const run = (args: string[]): ChildProcess =>
    spawn(process.execPath, [MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });

  it.each([
    ['SIGTERM', ['--service-version', '1.2.3'], '1.2.3'],
    ['SIGINT', [], DEFAULT_SERVICE_VERSION],
  ] as const)(
    'logs one JSON line with the URL, serves, and exits 0 on %s',
    async (signal, extra, version) => {
      const child = run(['--port', '0', '--host', '127.0.0.1', ...extra]);
      try {
        let stdout = '';
        child.stdout?.on('data', (chunk) => {
          stdout += String(chunk);
        });
        await expect.poll(() => stdout.includes('\n'), { timeout: 20_000 }).toBe(true);
        const line = JSON.parse(stdout.slice(0, stdout.indexOf('\n'))) as Record<string, unknown>;
        expect(line).toMatchObject({ msg: 'reference backend listening', serviceVersion: version });
        const url = String(line.url);
        expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
        const reply = await send(url, 'GET', '/user/me', KEY);
        expect(reply.status).toBe(200);
        expect(reply.headers['service-version']).toBe(version);
        child.kill(signal);
        const [code] = await once(child, 'close'); // after the output pipes are drained
        expect(code).toBe(0);
        expect(stdout).toMatch(/"msg":"reference backend stopped"/);
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL');
      }
    },
  );

  it.each([[['--port', 'x']], [['--port', '70000']], [['--bogus']], [['--service-version', ' ']]])(
    'exits 1 on bad arguments %j',
    async (args) => {
      const child = run(args);
      let stderr = '';
      child.stderr?.on('data', (chunk) => {
        stderr += String(chunk);
      });
      const [code] = await once(child, 'close'); // after the output pipes are drained
      expect(code).toBe(1);
      expect(stderr).toMatch(/^reference-backend: .+\nusage: /);
    },
  );
});
