import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type RunningReferenceBackend,
  startReferenceBackend,
} from '../../../src/reference-backend/server.ts';
import { SEED_IDS } from '../../../src/reference-backend/store.ts';
import { AUTH, send, sendJson } from './helpers.ts';

const T = SEED_IDS.metadataTypes;
const P = SEED_IDS.projects;
const M = SEED_IDS.missions;
const UNKNOWN = 'a0000000-0000-4000-8000-0000000000ff';

let backend: RunningReferenceBackend;
let url: string;

beforeAll(async () => {
  backend = await startReferenceBackend({ serviceVersion: '0.61.2' });
  url = backend.url;
});
afterAll(() => backend.close());

describe('routing', () => {
  it.each([['/api/health'], ['/api/health/'], ['/API/Health'], ['/api/health?probe=1']])(
    'GET %s → 200 without credentials',
    async (path) => {
      const res = await send(url, path);
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({ status: 'ok' });
    },
  );

  it.each([
    ['GET', '/x'],
    ['GET', '/missions/a/b'],
    ['DELETE', '/missions'],
    ['PATCH', '/projects?tags=1'],
    ['GET', '/missions//'],
  ])('%s %s → Nest-style 404', async (method, path) => {
    const res = await send(url, path, { method, headers: AUTH });
    expect(res.status).toBe(404);
    expect(res.json()).toEqual({ statusCode: 404, message: `Cannot ${method} ${path}`, error: 'Not Found' });
  });

  it.each([['/user/me'], ['/USER/ME/'], ['/User/Me']])('GET %s is the user route', async (path) => {
    const res = await send(url, path, { headers: AUTH });
    expect(res.status).toBe(200);
    expect(res.json()).toMatchObject({ name: 'Demo User', role: 'USER' });
  });

  it('serves HEAD like GET without a body', async () => {
    const res = await send(url, '/projects', { method: 'HEAD', headers: AUTH });
    expect(res.status).toBe(200);
    expect(res.body.length).toBe(0);
    expect(Number(res.headers['content-length'])).toBeGreaterThan(0);
  });
});

describe('credentials', () => {
  it.each([
    [{}],
    [{ cookie: 'authtoken=a' }],
    [{ cookie: 'authtoken=; refreshtoken=r' }],
    [{ 'x-api-key': '' }],
  ])('401 with %j', async (headers) => {
    const res = await send(url, '/user/me', { headers });
    expect(res.status).toBe(401);
    expect(res.headers['service-version']).toBe('0.61.2');
    expect(res.json()).toEqual({ statusCode: 401, message: 'Unauthorized', error: 'Unauthorized' });
  });

  it.each([
    ['/debug/echo', 'GET'],
    ['/missions', 'POST'],
  ])('401 on %s before any validation', async (path, method) => {
    const res = await send(url, `${path}?tags=1`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: '{',
    });
    expect(res.status).toBe(401);
  });

  it.each([[{ 'x-api-key': 'k' }], [{ cookie: 'authtoken=a; refreshtoken=r' }]])(
    '200 with %j',
    async (headers) => {
      expect((await send(url, '/user/me', { headers })).status).toBe(200);
    },
  );
});

describe('response headers', () => {
  it('JSON responses are compact, typed, sized, versioned and tagged', async () => {
    const res = await send(url, '/projects', { headers: AUTH });
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['service-version']).toBe('0.61.2');
    expect(Number(res.headers['content-length'])).toBe(res.body.length);
    expect(res.body.toString()).toBe(JSON.stringify(res.json()));
    expect(res.headers.etag).toMatch(/^"[0-9a-f]+-[A-Za-z0-9+/]{27}"$/);
  });

  it.each([['strong'], ['weak']])('answers 304 to a matching %s If-None-Match', async (kind) => {
    const first = await send(url, '/metadata-types', { headers: AUTH });
    const etag = String(first.headers.etag);
    const tag = kind === 'weak' ? `W/${etag}` : etag;
    const res = await send(url, '/metadata-types', { headers: { ...AUTH, 'if-none-match': tag } });
    expect(res.status).toBe(304);
    expect(res.body.length).toBe(0);
    expect(res.headers.etag).toBe(etag);
  });

  it('sends no ETag on errors or POST', async () => {
    expect((await send(url, '/user/me')).headers.etag).toBeUndefined();
    const res = await sendJson(url, 'POST', '/projects', { name: 'p' });
    expect(res.status).toBe(201);
    expect(res.headers.etag).toBeUndefined();
  });
});

describe('whitelisting', () => {
  it.each([
    ['POST', '/missions', { name: 'm', projectUUID: P.open, tags: {} }, 'tags'],
    ['POST', '/missions', { name: 'm', projectUUID: P.open, ignoreTags: true }, 'ignoreTags'],
    ['POST', `/missions/${M.alpha}/metadata`, { tags: {} }, 'tags'],
    ['POST', '/projects', { name: 'p', requiredTags: [] }, 'requiredTags'],
    ['PUT', `/projects/${P.open}/metadata-types`, { tagTypeUUIDs: [] }, 'tagTypeUUIDs'],
    ['PUT', `/projects/${P.open}/metadata-types`, { metadataTypeUUIDs: [], extra: 1 }, 'extra'],
  ])('%s %s with body %j → 400 property %s', async (method, path, body, name) => {
    const res = await sendJson(url, method, path, body);
    expect(res.status).toBe(400);
    expect(res.body.toString()).toBe(
      `{"statusCode":400,"message":"property ${name} should not exist","error":"Bad Request"}`,
    );
  });

  it.each([
    ['GET', `/files?tags=${T.location}`, 'tags'],
    ['GET', `/files?tags[]=${T.location}`, 'tags'],
    ['GET', `/files?tags%5B%5D=${T.location}`, 'tags'],
    ['GET', `/files?tags[0]=${T.location}&take=1`, 'tags'],
    ['GET', `/files?metadataByTypeUuid=${T.location}&tags=${T.robot}`, 'tags'],
    ['POST', `/projects/${P.open}/metadata-types?tagTypeUUID=${T.location}`, 'tagTypeUUID'],
    ['GET', '/missions?limit=1', 'limit'],
    ['GET', `/missions/${M.alpha}?x=1`, 'x'],
    ['GET', '/user/me?x', 'x'],
    ['GET', '/debug/bytes?n=1&size=2', 'size'],
  ])('%s %s → 400 property %s', async (method, path, name) => {
    const res = await send(url, path, { method, headers: AUTH });
    expect(res.status).toBe(400);
    expect(res.json()).toEqual({
      statusCode: 400,
      message: `property ${name} should not exist`,
      error: 'Bad Request',
    });
  });

  it.each([
    ['POST', '/missions', { name: 1, projectUUID: P.open }, 'name must be a string'],
    ['POST', '/missions', { name: ' ', projectUUID: P.open }, 'name should not be empty'],
    ['POST', '/missions', { name: 'm' }, 'projectUUID must be a UUID'],
    ['POST', '/missions', { name: 'm', projectUUID: P.open, metadata: [] }, 'metadata must be an object'],
    [
      'POST',
      '/missions',
      { name: 'm', projectUUID: P.open, ignoreMissingMetadata: 'yes' },
      'ignoreMissingMetadata must be a boolean value',
    ],
    [
      'POST',
      '/missions',
      { name: 'm', projectUUID: P.open, metadata: { [UNKNOWN]: 'x' } },
      `metadata type ${UNKNOWN} does not exist`,
    ],
    ['POST', `/missions/${M.alpha}/metadata`, {}, 'metadata must be an object'],
    [
      'POST',
      '/projects',
      { name: 'p', requiredMetadataTypes: 'x' },
      'requiredMetadataTypes must be an array',
    ],
    [
      'POST',
      '/projects',
      { name: 'p', requiredMetadataTypes: ['x'] },
      'each value in requiredMetadataTypes must be a UUID',
    ],
    [
      'POST',
      '/projects',
      { name: 'p', requiredMetadataTypes: [UNKNOWN] },
      `metadata type ${UNKNOWN} does not exist`,
    ],
    ['POST', '/projects', { name: 'p', description: 5 }, 'description must be a string'],
    ['PUT', `/projects/${P.open}/metadata-types`, {}, 'metadataTypeUUIDs must be an array'],
    ['GET', '/missions/not-a-uuid', undefined, 'Validation failed (uuid is expected)'],
    ['GET', '/files?metadataByTypeUuid=x', undefined, 'metadataByTypeUuid must be a UUID'],
    ['GET', '/projects?take=10001', undefined, 'take must not be greater than 10000'],
    ['GET', '/projects?skip=x', undefined, 'skip must be an integer number'],
    ['GET', '/missions?projectUuid=x', undefined, 'projectUuid must be a UUID'],
    ['POST', `/projects/${P.open}/metadata-types`, undefined, 'metadataTypeUUID must be a UUID'],
  ])('%s %s %j → 400 %j', async (method, path, body, message) => {
    const res =
      body === undefined
        ? await send(url, path, { method, headers: AUTH })
        : await sendJson(url, method, path, body);
    expect(res.status).toBe(400);
    expect(res.json()).toEqual({ statusCode: 400, message, error: 'Bad Request' });
  });
});

describe('request bodies', () => {
  it.each([
    ['{"name":', /JSON/],
    ['{"name":"m",}', /JSON/],
    ['[]', /^request body must be a JSON object$/],
  ])('malformed %j → 400', async (body, message) => {
    const res = await send(url, '/projects', {
      method: 'POST',
      headers: { ...AUTH, 'content-type': 'application/json' },
      body,
    });
    expect(res.status).toBe(400);
    expect(res.json().message).toMatch(message);
  });

  it.each([['text/plain'], ['application/x-www-form-urlencoded']])('%s body → 415', async (type) => {
    const res = await send(url, '/projects', {
      method: 'POST',
      headers: { ...AUTH, 'content-type': type },
      body: 'name=p',
    });
    expect(res.status).toBe(415);
  });

  it('accepts application/*+json', async () => {
    const res = await send(url, '/projects', {
      method: 'POST',
      headers: { ...AUTH, 'content-type': 'application/vnd.api+json; charset=utf-8' },
      body: '{"name":"vnd"}',
    });
    expect(res.status).toBe(201);
  });

  it('rejects a body over 1 MiB with 413', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024) });
    const res = await send(url, '/projects', {
      method: 'POST',
      headers: { ...AUTH, 'content-type': 'application/json' },
      body: big,
    });
    expect(res.status).toBe(413);
    expect(res.json()).toEqual({
      statusCode: 413,
      message: 'request entity too large',
      error: 'Payload Too Large',
    });
  });

  it.each([
    ['declared Content-Length', false, 2 * 1024 * 1024, undefined, true],
    ['chunked', true, 2 * 1024 * 1024, undefined, true],
    ['far beyond the discard budget', true, 40 * 1024 * 1024, 'close', false],
  ])(
    '413 for an oversized upload (%s) reads it off, then keeps the connection when small enough',
    async (_label, chunked, size, connection, reused) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const port = new URL(url).port;
      const post = () =>
        new Promise<{ status: number; connection: string | undefined; reused: boolean }>(
          (resolve, reject) => {
            const headers: Record<string, string | number> = { ...AUTH, 'content-type': 'application/json' };
            if (!chunked) headers['content-length'] = size;
            const req = request(
              { port, host: '127.0.0.1', method: 'POST', path: '/projects', headers, agent },
              (res) => {
                res.resume();
                res.on('end', () =>
                  resolve({
                    status: res.statusCode ?? 0,
                    connection: res.headers.connection,
                    reused: req.reusedSocket,
                  }),
                );
              },
            );
            req.on('error', reject);
            const chunk = Buffer.alloc(64 * 1024, 0x20);
            let left = size;
            const pump = (): void => {
              while (left > 0) {
                left -= chunk.length;
                if (!req.write(chunk)) {
                  req.once('drain', pump);
                  return;
                }
              }
              req.end();
            };
            pump();
          },
        );
      try {
        const first = await post().catch((error: Error) => ({
          status: 0,
          connection: error.message,
          reused: false,
        }));
        if (connection === undefined) {
          expect(first.status).toBe(413);
          expect(first.connection).toBe('keep-alive');
          const health = await new Promise<boolean>((resolve, reject) => {
            const req = request({ port, host: '127.0.0.1', path: '/api/health', agent }, (res) => {
              res.resume();
              res.on('end', () => resolve(req.reusedSocket));
            });
            req.on('error', reject);
            req.end();
          });
          expect(health).toBe(reused);
        } else {
          // Beyond the budget the backend answers and closes; the client may see the 413 or a reset.
          expect([413, 0]).toContain(first.status);
          if (first.status === 413) expect(first.connection).toBe(connection);
        }
      } finally {
        agent.destroy();
      }
    },
  );

  it('survives a client that aborts mid-body', async () => {
    await new Promise<void>((resolve) => {
      const socket = connect(Number(new URL(url).port), '127.0.0.1', () => {
        socket.write(
          'POST /projects HTTP/1.1\r\nHost: x\r\nx-api-key: k\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"na',
        );
        setTimeout(() => socket.destroy(), 20);
        setTimeout(resolve, 50);
      });
    });
    expect((await send(url, '/api/health')).status).toBe(200);
  });

  it('answers 400 to an unparsable request line', async () => {
    const reply = await new Promise<string>((resolve) => {
      const socket = connect(Number(new URL(url).port), '127.0.0.1', () => socket.write('BOGUS\r\n\r\n'));
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString();
      });
      socket.on('close', () => resolve(text));
    });
    expect(reply).toMatch(/^HTTP\/1\.1 400 /);
    expect(reply).toMatch(/Service-Version: 0\.61\.2/);
  });
});

describe('missions', () => {
  it.each([
    ['all required given', P.demo, { [T.location]: 'Bern', [T.robot]: 'X' }, undefined, 201],
    ['required missing', P.demo, { [T.location]: 'Bern' }, undefined, 400],
    ['required missing, ignoreMissingMetadata false', P.demo, {}, false, 400],
    ['required missing, ignoreMissingMetadata true', P.demo, {}, true, 201],
    ['no metadata at all, ignoreMissingMetadata true', P.demo, undefined, true, 201],
    ['nothing required', P.open, undefined, undefined, 201],
  ])('%s → %i', async (_label, projectUUID, metadata, ignoreMissingMetadata, status) => {
    const res = await sendJson(url, 'POST', '/missions', {
      name: 'm',
      projectUUID,
      metadata,
      ignoreMissingMetadata,
    });
    expect(res.status).toBe(status);
    if (status === 400) {
      expect(res.json().message).toMatch(/requires metadata that is missing: .*robot/);
      expect(res.json().message).toContain('ignoreMissingMetadata');
    }
  });

  it('creates, reads back and lists a mission with canonical names only', async () => {
    const res = await sendJson(url, 'POST', '/missions', {
      name: 'created',
      projectUUID: P.demo,
      metadata: { [T.location]: 'Bern', [T.robot.toUpperCase()]: 'X', [T.temperature]: 3.5 },
    });
    expect(res.status).toBe(201);
    const mission = res.json();
    expect(Object.keys(mission)).toEqual(['uuid', 'name', 'projectUuid', 'metadata', 'createdAt']);
    expect(
      mission.metadata.map((m: { value: unknown; metadataType: { name: string } }) => [
        m.metadataType.name,
        m.value,
      ]),
    ).toEqual([
      ['location', 'Bern'],
      ['robot', 'X'],
      ['temperature', 3.5],
    ]);
    expect(res.body.toString()).not.toMatch(/"tags"|"requiredTags"/);
    const read = await send(url, `/missions/${mission.uuid.toUpperCase()}/`, { headers: AUTH });
    expect(read.json()).toEqual(mission);
    const list = (await send(url, `/missions?projectUuid=${P.demo}&take=10000`, { headers: AUTH })).json();
    expect(list.data.map((m: { uuid: string }) => m.uuid)).toContain(mission.uuid);
    expect(list.data.every((m: { projectUuid: string }) => m.projectUuid === P.demo)).toBe(true);
  });

  it('replaces metadata with POST /missions/:uuid/metadata', async () => {
    const created = (
      await sendJson(url, 'POST', '/missions', {
        name: 'm',
        projectUUID: P.open,
        metadata: { [T.weather]: 'rain' },
      })
    ).json();
    const res = await sendJson(url, 'POST', `/missions/${created.uuid}/metadata`, {
      metadata: { [T.robot]: 'Y' },
    });
    expect(res.status).toBe(201);
    expect(res.json().metadata).toEqual([
      {
        uuid: expect.any(String),
        value: 'Y',
        metadataType: { uuid: T.robot, name: 'robot', datatype: 'string' },
      },
    ]);
  });

  it.each([
    ['GET', `/missions/${UNKNOWN}`, undefined, `Mission ${UNKNOWN} not found`],
    ['POST', `/missions/${UNKNOWN}/metadata`, { metadata: {} }, `Mission ${UNKNOWN} not found`],
    ['POST', '/missions', { name: 'm', projectUUID: UNKNOWN }, `Project ${UNKNOWN} not found`],
    ['GET', `/projects/${UNKNOWN}`, undefined, `Project ${UNKNOWN} not found`],
    ['PUT', `/projects/${UNKNOWN}/metadata-types`, { metadataTypeUUIDs: [] }, `Project ${UNKNOWN} not found`],
  ])('%s %s → 404', async (method, path, body, message) => {
    const res =
      body === undefined
        ? await send(url, path, { method, headers: AUTH })
        : await sendJson(url, method, path, body);
    expect(res.status).toBe(404);
    expect(res.json()).toEqual({ statusCode: 404, message, error: 'Not Found' });
  });
});

describe('projects', () => {
  it('creates a project and edits its required metadata types', async () => {
    const res = await sendJson(url, 'POST', '/projects', {
      name: 'p',
      description: 'd',
      requiredMetadataTypes: [T.location, T.location],
    });
    expect(res.status).toBe(201);
    const project = res.json();
    expect(Object.keys(project)).toEqual([
      'uuid',
      'name',
      'description',
      'requiredMetadataTypes',
      'createdAt',
    ]);
    expect(project.requiredMetadataTypes).toEqual([
      { uuid: T.location, name: 'location', datatype: 'string' },
    ]);

    const put = await sendJson(url, 'PUT', `/projects/${project.uuid}/metadata-types`, {
      metadataTypeUUIDs: [T.robot, T.weather],
    });
    expect(put.status).toBe(200);
    expect(put.json().requiredMetadataTypes.map((t: { name: string }) => t.name)).toEqual([
      'robot',
      'weather',
    ]);

    const post = await send(url, `/projects/${project.uuid}/metadata-types?metadataTypeUUID=${T.location}`, {
      method: 'POST',
      headers: AUTH,
    });
    expect(post.status).toBe(201);
    expect(post.json().requiredMetadataTypes.map((t: { name: string }) => t.name)).toEqual([
      'robot',
      'weather',
      'location',
    ]);

    const again = await send(url, `/projects/${project.uuid}/metadata-types?metadataTypeUUID=${T.location}`, {
      method: 'POST',
      headers: AUTH,
    });
    expect(again.json().requiredMetadataTypes).toHaveLength(3);

    const unknown = await send(url, `/projects/${project.uuid}/metadata-types?metadataTypeUUID=${UNKNOWN}`, {
      method: 'POST',
      headers: AUTH,
    });
    expect(unknown.status).toBe(400);

    const read = (await send(url, `/projects/${project.uuid}`, { headers: AUTH })).json();
    expect(read.requiredMetadataTypes).toHaveLength(3);
    expect(JSON.stringify(read)).not.toMatch(/requiredTags/);
  });
});

describe('lists', () => {
  it.each([['/missions'], ['/projects'], ['/files'], ['/metadata-types']])(
    'GET %s → {data, count, skip, take}',
    async (path) => {
      const res = await send(url, path, { headers: AUTH });
      expect(res.status).toBe(200);
      const body = res.json();
      expect(Object.keys(body)).toEqual(['data', 'count', 'skip', 'take']);
      expect(body.skip).toBe(0);
      expect(body.take).toBe(100);
      expect(body.count).toBeGreaterThanOrEqual(body.data.length);
      expect(body.data.length).toBeGreaterThan(0);
    },
  );

  it('pages with skip and take, counting all matches', async () => {
    const all = (await send(url, '/files', { headers: AUTH })).json();
    expect(all.count).toBe(5);
    const page = (await send(url, '/files?skip=1&take=2', { headers: AUTH })).json();
    expect(page).toMatchObject({ count: 5, skip: 1, take: 2 });
    expect(page.data).toEqual(all.data.slice(1, 3));
  });

  it('lists the seeded metadata types', async () => {
    const body = (await send(url, '/metadata-types', { headers: AUTH })).json();
    expect(body.data.map((t: { uuid: string; name: string }) => [t.name, t.uuid])).toEqual([
      ['location', T.location],
      ['robot', T.robot],
      ['weather', T.weather],
      ['temperature', T.temperature],
    ]);
  });

  it.each([
    [`metadataByTypeUuid=${T.location}`, ['alpha_front.bag']],
    [`metadataByTypeUuid=${T.weather}`, ['beta_imu.bag', 'beta_camera.mcap']],
    [
      `metadataByTypeUuid[]=${T.location}&metadataByTypeUuid[]=${T.temperature}`,
      ['alpha_front.bag', 'beta_camera.mcap'],
    ],
    [
      `metadataByTypeUuid=${T.robot}&metadataByTypeUuid=${T.location}`,
      ['alpha_front.bag', 'alpha_lidar.mcap'],
    ],
    [`metadataByTypeUuid[x]=${T.robot}`, ['alpha_lidar.mcap']],
    [`metadataByTypeUuid=${UNKNOWN}`, []],
  ])('GET /files?%s', async (query, filenames) => {
    const body = (await send(url, `/files?${query}`, { headers: AUTH })).json();
    expect(body.data.map((f: { filename: string }) => f.filename)).toEqual(filenames);
    expect(body.count).toBe(filenames.length);
  });
});

describe('seed: false', () => {
  it('starts empty', async () => {
    const empty = await startReferenceBackend({ seed: false });
    try {
      const body = (await send(empty.url, '/metadata-types', { headers: AUTH })).json();
      expect(body).toEqual({ data: [], count: 0, skip: 0, take: 100 });
      expect((await send(empty.url, '/api/health')).headers['service-version']).toBe('0.60.0');
    } finally {
      await empty.close();
    }
  });
});

describe('compress: true', () => {
  let zipped: RunningReferenceBackend;
  beforeAll(async () => {
    zipped = await startReferenceBackend({ compress: true });
  });
  afterAll(() => zipped.close());

  it('gzips JSON over 1 KiB when accepted', async () => {
    const plain = await send(zipped.url, '/files', { headers: AUTH });
    expect(plain.body.length).toBeGreaterThan(1024);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers.vary).toBe('Accept-Encoding');

    const res = await send(zipped.url, '/files', { headers: { ...AUTH, 'accept-encoding': 'gzip, br' } });
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(res.headers.vary).toBe('Accept-Encoding');
    expect(Number(res.headers['content-length'])).toBe(res.body.length);
    expect(gunzipSync(res.body).equals(plain.body)).toBe(true);
    expect(res.headers.etag).not.toBe(plain.headers.etag);
  });

  it.each([['gzip;q=0'], ['identity'], ['br']])('does not gzip for Accept-Encoding %j', async (accept) => {
    const res = await send(zipped.url, '/files', { headers: { ...AUTH, 'accept-encoding': accept } });
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.json().count).toBe(5);
  });

  it('leaves small bodies alone', async () => {
    const res = await send(zipped.url, '/user/me', { headers: { ...AUTH, 'accept-encoding': 'gzip' } });
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.headers.vary).toBeUndefined();
  });
});
