/**
 * The alias layer end to end (SPEC §5, §6; service document part 9): a legacy client, modelled on a real
 * client of the service, talks through the shim to the strict canonical-only reference backend. Every row
 * of the alias table is exercised; an alias that leaked through would be answered by the backend with
 * 400 `property <alias> should not exist`.
 *
 * Delete this file with `src/aliases/` at 1.0 (docs/removing-the-alias-layer.md).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Reply, send } from '../helpers/http.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const TYPES = {
  location: 'a0000000-0000-4000-8000-000000000001',
  robot: 'a0000000-0000-4000-8000-000000000002',
  weather: 'a0000000-0000-4000-8000-000000000003',
  temperature: 'a0000000-0000-4000-8000-000000000004',
} as const;
const PROJECTS = {
  demo: 'b0000000-0000-4000-8000-000000000001',
  open: 'b0000000-0000-4000-8000-000000000002',
} as const;
const MISSIONS = {
  alpha: 'c0000000-0000-4000-8000-000000000001',
  beta: 'c0000000-0000-4000-8000-000000000002',
} as const;
const file = (n: number) => `d0000000-0000-4000-8000-00000000000${n}`;

interface MetadataEntry {
  value: unknown;
  metadataType: { uuid: string };
}
interface Mission {
  uuid: string;
  name: string;
  metadata: MetadataEntry[];
  tags?: MetadataEntry[];
}
interface Project {
  uuid: string;
  requiredMetadataTypes: Array<{ uuid: string }>;
  requiredTags?: Array<{ uuid: string }>;
}
interface Page<T> {
  data: T[];
  count: number;
}

const sendJson = (stack: Stack, method: string, path: string, body: unknown, headers: object = LEGACY) =>
  send(
    stack.url,
    method,
    path,
    { ...headers, 'content-type': 'application/json' },
    typeof body === 'string' ? body : JSON.stringify(body),
  );

/** Values of every `Warning` header of a reply, in order. */
const warningsOf = (reply: Reply): string[] =>
  reply.rawHeaders.flatMap((value, i) =>
    i % 2 === 1 && reply.rawHeaders[i - 1]!.toLowerCase() === 'warning' ? [value] : [],
  );
const aliasWarnings = (reply: Reply) => warningsOf(reply).filter((w) => w.includes(' is deprecated; use '));

const values = (entries: MetadataEntry[]) =>
  Object.fromEntries(entries.map((e) => [e.metadataType.uuid, e.value]));

/** Asserts the response carries the aliases next to the canonical members (SPEC §6). */
function expectMissionAliases(mission: Mission): void {
  expect(mission.tags).toBeDefined();
  expect(mission.tags).toEqual(mission.metadata);
}
function expectProjectAliases(project: Project): void {
  expect(project.requiredTags).toBeDefined();
  expect(project.requiredTags).toEqual(project.requiredMetadataTypes);
}

/** Creates a project that requires nothing, so tests that change required types stay independent. */
async function newProject(s: Stack, name: string): Promise<string> {
  const reply = await sendJson(s, 'POST', '/projects', { name });
  expect(reply.status, reply.text).toBe(201);
  return reply.json<Project>().uuid;
}

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.close());

// One session of a legacy client, step by step: each step uses what the one before created (the
// mission, the project), so the steps keep their order even in a shuffled run.
describe('a legacy client session, one alias-table row at a time', { shuffle: false }, () => {
  // Its own backend: the lists it reads back hold exactly what this session created.
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());
  let missionUuid = '';
  let projectUuid = '';

  it('POST /missions with tags and ignoreTags creates the mission (metadata, ignoreMissingMetadata)', async () => {
    // The demo project requires location and robot; only location is given, so ignoreTags must arrive
    // as ignoreMissingMetadata for the backend to accept it.
    const reply = await sendJson(stack, 'POST', '/missions', {
      name: 'legacy-mission',
      projectUUID: PROJECTS.demo,
      tags: { [TYPES.location]: 'Bern' },
      ignoreTags: true,
    });
    expect(reply.status, reply.text).toBe(201);
    const mission = reply.json<Mission>();
    expect(values(mission.metadata)).toEqual({ [TYPES.location]: 'Bern' });
    expectMissionAliases(mission);
    expect(aliasWarnings(reply)).toEqual([
      '299 - "tags is deprecated; use metadata"',
      '299 - "ignoreTags is deprecated; use ignoreMissingMetadata"',
    ]);
    missionUuid = mission.uuid;
  });

  it('POST /missions with tags but without ignoreTags gets the backend’s missing-metadata 400', async () => {
    const reply = await sendJson(stack, 'POST', '/missions', {
      name: 'incomplete',
      projectUUID: PROJECTS.demo,
      tags: { [TYPES.location]: 'Bern' },
    });
    expect(reply.status).toBe(400);
    expect(reply.json().message).toMatch(/requires metadata that is missing: robot/);
  });

  it('GET /missions/:uuid reads the mission back with tags', async () => {
    const reply = await send(stack.url, 'GET', `/missions/${missionUuid}`, LEGACY);
    expect(reply.status).toBe(200);
    const mission = reply.json<Mission>();
    expect(mission.name).toBe('legacy-mission');
    expect(values(mission.metadata)).toEqual({ [TYPES.location]: 'Bern' });
    expectMissionAliases(mission);
    // A read that used no alias gets no deprecation warning for one.
    expect(aliasWarnings(reply)).toEqual([]);
  });

  it('POST /missions/:uuid/metadata with tags replaces the metadata', async () => {
    const reply = await sendJson(stack, 'POST', `/missions/${missionUuid}/metadata`, {
      tags: { [TYPES.location]: 'Zurich', [TYPES.robot]: 'ANYmal', [TYPES.temperature]: 1.5 },
    });
    expect(reply.status, reply.text).toBe(201);
    expectMissionAliases(reply.json<Mission>());
    expect(aliasWarnings(reply)).toEqual(['299 - "tags is deprecated; use metadata"']);
    const back = (await send(stack.url, 'GET', `/missions/${missionUuid}`, LEGACY)).json<Mission>();
    expect(values(back.metadata)).toEqual({
      [TYPES.location]: 'Zurich',
      [TYPES.robot]: 'ANYmal',
      [TYPES.temperature]: 1.5,
    });
    expectMissionAliases(back);
  });

  it('POST /projects with requiredTags creates the project (requiredMetadataTypes)', async () => {
    const reply = await sendJson(stack, 'POST', '/projects', {
      name: 'legacy-project',
      description: 'made by a 0.59 client',
      requiredTags: [TYPES.weather],
    });
    expect(reply.status, reply.text).toBe(201);
    const project = reply.json<Project>();
    expect(project.requiredMetadataTypes.map((t) => t.uuid)).toEqual([TYPES.weather]);
    expectProjectAliases(project);
    expect(aliasWarnings(reply)).toEqual(['299 - "requiredTags is deprecated; use requiredMetadataTypes"']);
    projectUuid = project.uuid;
  });

  it('PUT /projects/:uuid/metadata-types with tagTypeUUIDs replaces the required types', async () => {
    const reply = await sendJson(stack, 'PUT', `/projects/${projectUuid}/metadata-types`, {
      tagTypeUUIDs: [TYPES.location, TYPES.robot],
    });
    expect(reply.status, reply.text).toBe(200);
    const project = reply.json<Project>();
    expect(project.requiredMetadataTypes.map((t) => t.uuid)).toEqual([TYPES.location, TYPES.robot]);
    expectProjectAliases(project);
    expect(aliasWarnings(reply)).toEqual(['299 - "tagTypeUUIDs is deprecated; use metadataTypeUUIDs"']);
  });

  it('POST /projects/:uuid/metadata-types?tagTypeUUID= adds one required type', async () => {
    const reply = await send(
      stack.url,
      'POST',
      `/projects/${projectUuid}/metadata-types?tagTypeUUID=${TYPES.temperature}`,
      LEGACY,
    );
    expect(reply.status, reply.text).toBe(201);
    const project = reply.json<Project>();
    expect(project.requiredMetadataTypes.map((t) => t.uuid)).toEqual([
      TYPES.location,
      TYPES.robot,
      TYPES.temperature,
    ]);
    expectProjectAliases(project);
    expect(aliasWarnings(reply)).toEqual(['299 - "tagTypeUUID is deprecated; use metadataTypeUUID"']);
  });

  it('GET /projects/:uuid and GET /projects read projects back with requiredTags', async () => {
    const one = (await send(stack.url, 'GET', `/projects/${projectUuid}`, LEGACY)).json<Project>();
    expect(one.requiredMetadataTypes).toHaveLength(3);
    expectProjectAliases(one);
    const list = await send(stack.url, 'GET', '/projects', LEGACY);
    expect(list.status).toBe(200);
    const page = list.json<Page<Project>>();
    expect(page.data.map((p) => p.uuid)).toEqual([PROJECTS.demo, PROJECTS.open, projectUuid]);
    for (const project of page.data) expectProjectAliases(project);
    // The empty list of the open project gets its alias too.
    expect(page.data[1]!.requiredTags).toEqual([]);
  });

  it('GET /missions lists every mission with tags', async () => {
    const page = (await send(stack.url, 'GET', '/missions', LEGACY)).json<Page<Mission>>();
    expect(page.data.map((m) => m.uuid)).toEqual([MISSIONS.alpha, MISSIONS.beta, missionUuid]);
    for (const mission of page.data) expectMissionAliases(mission);
  });

  it('GET /files?tags=<uuid> filters files by metadata type (metadataByTypeUuid)', async () => {
    const reply = await send(stack.url, 'GET', `/files?tags=${TYPES.weather}`, LEGACY);
    expect(reply.status, reply.text).toBe(200);
    const page = reply.json<Page<{ uuid: string; metadata: MetadataEntry[]; tags?: unknown }>>();
    expect(page.data.map((f) => f.uuid)).toEqual([file(3), file(4)]);
    for (const f of page.data) expect(f.tags).toEqual(f.metadata);
    expect(aliasWarnings(reply)).toEqual(['299 - "tags is deprecated; use metadataByTypeUuid"']);
  });

  it('GET /files?tags[]=a&tags[]=b filters by several types', async () => {
    const reply = await send(
      stack.url,
      'GET',
      `/files?tags[]=${TYPES.location}&tags[]=${TYPES.robot}&take=10`,
      LEGACY,
    );
    expect(reply.status, reply.text).toBe(200);
    const page = reply.json<Page<{ uuid: string }>>();
    expect(page.data.map((f) => f.uuid)).toEqual([file(1), file(2)]);
    expect(aliasWarnings(reply)).toEqual(['299 - "tags is deprecated; use metadataByTypeUuid"']);
  });

  it('GET /files?tags[x]=a and percent-encoded brackets filter too', async () => {
    for (const query of [`tags[x]=${TYPES.temperature}`, `tags%5B%5D=${TYPES.temperature}`]) {
      const reply = await send(stack.url, 'GET', `/files?${query}`, LEGACY);
      expect(reply.status, `${query}: ${reply.text}`).toBe(200);
      expect(reply.json<Page<{ uuid: string }>>().data.map((f) => f.uuid)).toEqual([file(4)]);
    }
  });
});

describe('canonical wins when a request carries both names', () => {
  it('POST /missions: metadata over tags, ignoreMissingMetadata over ignoreTags', async () => {
    const created = await sendJson(stack, 'POST', '/missions', {
      name: 'both',
      projectUUID: PROJECTS.open,
      tags: { [TYPES.weather]: 'snow' },
      metadata: { [TYPES.weather]: 'rain' },
    });
    expect(created.status, created.text).toBe(201);
    const uuid = created.json<Mission>().uuid;
    const back = (await send(stack.url, 'GET', `/missions/${uuid}`, LEGACY)).json<Mission>();
    expect(values(back.metadata)).toEqual({ [TYPES.weather]: 'rain' });
    expect(values(back.tags!)).toEqual({ [TYPES.weather]: 'rain' });
    // Both used names are still reported to the client.
    expect(aliasWarnings(created)).toEqual(['299 - "tags is deprecated; use metadata"']);

    // ignoreMissingMetadata:false wins over ignoreTags:true → the demo project's requirement holds.
    const refused = await sendJson(stack, 'POST', '/missions', {
      name: 'both-flags',
      projectUUID: PROJECTS.demo,
      ignoreTags: true,
      ignoreMissingMetadata: false,
    });
    expect(refused.status).toBe(400);
    expect(refused.json().message).toMatch(/requires metadata that is missing/);
  });

  it('POST /missions/:uuid/metadata: metadata over tags', async () => {
    const reply = await sendJson(stack, 'POST', `/missions/${MISSIONS.beta}/metadata`, {
      metadata: { [TYPES.weather]: 'fog' },
      tags: { [TYPES.weather]: 'hail', [TYPES.robot]: 'x' },
    });
    expect(reply.status, reply.text).toBe(201);
    const back = (await send(stack.url, 'GET', `/missions/${MISSIONS.beta}`, LEGACY)).json<Mission>();
    expect(values(back.metadata)).toEqual({ [TYPES.weather]: 'fog' });
  });

  it('POST /projects: requiredMetadataTypes over requiredTags', async () => {
    const reply = await sendJson(stack, 'POST', '/projects', {
      requiredTags: [TYPES.robot],
      name: 'both-project',
      requiredMetadataTypes: [TYPES.weather],
    });
    expect(reply.status, reply.text).toBe(201);
    const uuid = reply.json<Project>().uuid;
    const back = (await send(stack.url, 'GET', `/projects/${uuid}`, LEGACY)).json<Project>();
    expect(back.requiredMetadataTypes.map((t) => t.uuid)).toEqual([TYPES.weather]);
  });

  it('PUT /projects/:uuid/metadata-types: metadataTypeUUIDs over tagTypeUUIDs', async () => {
    const uuid = await newProject(stack, 'put-both');
    const reply = await sendJson(stack, 'PUT', `/projects/${uuid}/metadata-types`, {
      metadataTypeUUIDs: [TYPES.temperature],
      tagTypeUUIDs: [TYPES.location],
    });
    expect(reply.status, reply.text).toBe(200);
    const back = (await send(stack.url, 'GET', `/projects/${uuid}`, LEGACY)).json<Project>();
    expect(back.requiredMetadataTypes.map((t) => t.uuid)).toEqual([TYPES.temperature]);
  });

  it('POST /projects/:uuid/metadata-types: ?metadataTypeUUID= over ?tagTypeUUID=', async () => {
    const uuid = await newProject(stack, 'add-both');
    const reply = await send(
      stack.url,
      'POST',
      `/projects/${uuid}/metadata-types?tagTypeUUID=${TYPES.location}&metadataTypeUUID=${TYPES.robot}`,
      LEGACY,
    );
    expect(reply.status, reply.text).toBe(201);
    expect(reply.json<Project>().requiredMetadataTypes.map((t) => t.uuid)).toEqual([TYPES.robot]);
  });

  it('GET /files: metadataByTypeUuid over every form of tags', async () => {
    const reply = await send(
      stack.url,
      'GET',
      `/files?tags=${TYPES.weather}&metadataByTypeUuid=${TYPES.location}&tags[]=${TYPES.robot}`,
      LEGACY,
    );
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json<Page<{ uuid: string }>>().data.map((f) => f.uuid)).toEqual([file(1)]);
  });
});

describe('paths match case-insensitively with one trailing slash (as the upstream’s router does)', () => {
  it.each([
    ['POST', '/MISSIONS/'],
    ['POST', '/Missions'],
  ])('%s %s renames tags', async (method, path) => {
    const reply = await sendJson(stack, method, path, {
      name: 'cased',
      projectUUID: PROJECTS.open,
      tags: { [TYPES.weather]: 'sleet' },
    });
    expect(reply.status, reply.text).toBe(201);
    expect(values(reply.json<Mission>().metadata)).toEqual({ [TYPES.weather]: 'sleet' });
  });

  it('POST /Missions/:uuid/METADATA/, PUT /Projects/:uuid/Metadata-Types/, GET /Files/', async () => {
    const meta = await sendJson(stack, 'POST', `/Missions/${MISSIONS.alpha}/METADATA/`, {
      tags: { [TYPES.robot]: 'Spot' },
    });
    expect(meta.status, meta.text).toBe(201);
    const project = await newProject(stack, 'cased');
    const put = await sendJson(stack, 'PUT', `/Projects/${project}/Metadata-Types/`, {
      tagTypeUUIDs: [TYPES.robot],
    });
    expect(put.status, put.text).toBe(200);
    const add = await send(
      stack.url,
      'POST',
      `/PROJECTS/${project}/metadata-types/?tagTypeUUID=${TYPES.weather}`,
      LEGACY,
    );
    expect(add.status, add.text).toBe(201);
    expect(add.json<Project>().requiredMetadataTypes.map((t) => t.uuid)).toEqual([
      TYPES.robot,
      TYPES.weather,
    ]);
    const files = await send(stack.url, 'GET', `/Files/?tags=${TYPES.robot}`, LEGACY);
    expect(files.status, files.text).toBe(200);
    expect(files.json<Page<{ uuid: string }>>().data.map((f) => f.uuid)).toEqual([file(2)]);
  });

  it('a path with two trailing slashes is renamed as the route (fix 152: Tomcat merges them); this backend rejects it as unknown', async () => {
    const reply = await sendJson(stack, 'POST', '/missions//', {
      name: 'x',
      projectUUID: PROJECTS.open,
      tags: {},
    });
    expect(reply.status).toBe(404);
    expect(aliasWarnings(reply)).toEqual(['299 - "tags is deprecated; use metadata"']);
  });
});

describe('what the layer leaves alone', () => {
  it('a non-JSON body on an alias route is forwarded unchanged (the backend judges it)', async () => {
    const reply = await send(
      stack.url,
      'POST',
      '/missions',
      { ...LEGACY, 'content-type': 'text/plain' },
      '{"tags":{}}',
    );
    // Nest's JSON parser skips a text/plain body, so the DTO sees no members at all.
    expect(reply.status).toBe(400);
    expect(reply.json().message).toEqual(expect.arrayContaining(['name must be a string']));
    expect(reply.json().message).not.toContain('property tags should not exist');
    expect(aliasWarnings(reply)).toEqual([]);
  });

  it('nested members named tags are not renamed (only top-level members are)', async () => {
    const reply = await sendJson(stack, 'POST', '/missions', {
      name: 'nested',
      projectUUID: PROJECTS.open,
      metadata: { [TYPES.weather]: 'clear' },
      extra: { tags: 1 },
    });
    // The backend sees the unknown member `extra` (with its nested `tags` untouched) and says so.
    expect(reply.status).toBe(400);
    expect(reply.json().message).toEqual(['property extra should not exist']);
  });

  it('a request without aliases gets responses patched but no alias warning', async () => {
    const reply = await send(stack.url, 'GET', `/missions/${MISSIONS.alpha}`, LEGACY);
    expect(reply.json<Mission>().tags).toBeDefined();
    expect(aliasWarnings(reply)).toEqual([]);
    expect(reply.headers.deprecation).toBeUndefined();
  });
});

describe('deprecation signals (SPEC §5)', () => {
  let configured: Stack;
  beforeAll(async () => {
    configured = await startStack({
      ALIAS_DEPRECATED_AT: '2026-01-01T00:00:00Z',
      ALIAS_SUNSET_AT: '2026-07-01T00:00:00Z',
      ALIAS_DOCS_URL: 'https://docs.example.com/removing-tags',
    });
  });
  afterAll(() => configured.close());

  it('one Warning per alias used; no Deprecation/Sunset/Link unless configured', async () => {
    const reply = await sendJson(stack, 'POST', '/missions', {
      name: 'w',
      projectUUID: PROJECTS.open,
      tags: {},
      ignoreTags: false,
    });
    expect(reply.status, reply.text).toBe(201);
    expect(aliasWarnings(reply)).toEqual([
      '299 - "tags is deprecated; use metadata"',
      '299 - "ignoreTags is deprecated; use ignoreMissingMetadata"',
    ]);
    expect(reply.headers.deprecation).toBeUndefined();
    expect(reply.headers.sunset).toBeUndefined();
    expect(reply.headers.link).toBeUndefined();
  });

  it('Deprecation (RFC 9745), Sunset (RFC 8594) and Link rel="deprecation" when configured', async () => {
    const reply = await sendJson(configured, 'POST', '/projects', { name: 'p', requiredTags: [] });
    expect(reply.status, reply.text).toBe(201);
    expect(reply.headers.deprecation).toBe(`@${Date.UTC(2026, 0, 1) / 1000}`);
    expect(reply.headers.sunset).toBe('Wed, 01 Jul 2026 00:00:00 GMT');
    expect(reply.headers.link).toBe('<https://docs.example.com/removing-tags>; rel="deprecation"');
    expect(aliasWarnings(reply)).toEqual(['299 - "requiredTags is deprecated; use requiredMetadataTypes"']);
    // Sent once, however many aliases the request used.
    const two = await sendJson(configured, 'POST', '/missions', {
      name: 'm',
      projectUUID: PROJECTS.open,
      tags: {},
      ignoreTags: true,
    });
    expect(two.rawHeaders.filter((h) => h.toLowerCase() === 'deprecation')).toHaveLength(1);
    expect(aliasWarnings(two)).toHaveLength(2);
  });

  it('no deprecation headers on a request that used no alias', async () => {
    const reply = await send(configured.url, 'GET', '/projects', LEGACY);
    expect(reply.status).toBe(200);
    expect(reply.headers.deprecation).toBeUndefined();
    expect(reply.headers.sunset).toBeUndefined();
    expect(reply.headers.link).toBeUndefined();
  });

  it('the signals also reach a legacy client whose aliased request the backend refused', async () => {
    const reply = await sendJson(configured, 'POST', '/missions', {
      name: 'x',
      projectUUID: PROJECTS.demo,
      tags: {},
    });
    expect(reply.status).toBe(400);
    expect(reply.headers.deprecation).toBeDefined();
    expect(aliasWarnings(reply)).toEqual(['299 - "tags is deprecated; use metadata"']);
  });

  it('the outdated-client warning sits next to the alias warnings', async () => {
    const reply = await send(stack.url, 'GET', `/files?tags=${TYPES.weather}`, LEGACY);
    expect(warningsOf(reply)).toContain('299 - "client 0.59.0 is older than service 0.60.0; please upgrade"');
    expect(aliasWarnings(reply)).toHaveLength(1);
  });
});

describe('telling operators who still uses aliases (SPEC §8)', () => {
  // A fresh shim per test: its counters and log hold only that test's requests.
  let counted: Stack;
  beforeEach(async () => {
    counted = await startStack();
  });
  afterEach(() => counted.close());

  const uses = async (s: Stack) => {
    const metric = s.metrics.registry.getSingleMetric('shim_alias_uses_total');
    expect(metric).toBeDefined();
    const out: Record<string, number> = {};
    for (const v of (await metric!.get()).values)
      out[`${v.labels.alias} ${v.labels.direction} ${v.labels.client}`] = v.value;
    return out;
  };

  it('counts shim_alias_uses_total{alias,direction,client} per request and per patched response', async () => {
    await sendJson(counted, 'POST', '/missions', {
      name: 'm',
      projectUUID: PROJECTS.open,
      tags: { [TYPES.weather]: 'x' },
      ignoreTags: true,
    });
    await send(counted.url, 'GET', `/files?tags=${TYPES.weather}&tags[]=${TYPES.robot}`, {
      ...LEGACY,
      'service-client-version': '0.58.3',
    });
    await send(counted.url, 'GET', '/projects', LEGACY);
    expect(await uses(counted)).toEqual({
      'tags request 0.59': 1,
      'ignoreTags request 0.59': 1,
      // the created mission's response carried tags
      'tags response 0.59': 1,
      'tags request 0.58': 1,
      'tags response 0.58': 1,
      'requiredTags response 0.59': 1,
    });
  });

  it('exposes the metric on the registry the admin listener serves', async () => {
    await send(counted.url, 'GET', `/files?tags=${TYPES.weather}`, LEGACY);
    const text = await counted.metrics.registry.metrics();
    expect(text).toMatch(/shim_alias_uses_total\{alias="tags",direction="request",client="0\.59"\} \d/);
  });

  it('logs the aliases a request used in the request line’s `aliases` field', async () => {
    await sendJson(counted, 'POST', '/missions', {
      name: 'm',
      projectUUID: PROJECTS.open,
      tags: { [TYPES.weather]: 'x' },
      ignoreTags: true,
    });
    const put = await sendJson(counted, 'PUT', `/projects/${PROJECTS.open}/metadata-types`, {
      tagTypeUUIDs: [],
    });
    expect(put.status, put.text).toBe(200);
    await send(counted.url, 'GET', `/missions/${MISSIONS.alpha}`, LEGACY);
    const lines = counted.logs().filter((l) => l.msg === 'request completed');
    const putLine = lines.find((l) => (l.req as { method: string }).method === 'PUT');
    expect(putLine?.aliases).toEqual(['tagTypeUUIDs']);
    expect(putLine?.clientVersion).toBe('0.59.0');
    const post = lines.find((l) => (l.req as { path: string }).path === '/missions');
    expect(post?.aliases).toEqual(['tags', 'ignoreTags']);
    const read = lines.findLast((l) => (l.req as { path: string }).path === `/missions/${MISSIONS.alpha}`);
    expect(read).toBeDefined();
    expect(read?.aliases).toBeUndefined();
    // The API key never reaches the log.
    expect(counted.rawLogs()).not.toContain('test-key');
  });
});
