/**
 * The service API of the reference backend (SPEC §9), as data: method, path, the whitelisted query
 * parameters and body members, and a handler from validated input to a reply. The server applies the
 * whitelists (`property <name> should not exist`) before any handler runs, so every handler only
 * checks types.
 */
import type { RouteShape } from './router.ts';
import { DEMO_USER, type Store } from './store.ts';
import {
  intParam,
  type JsonObject,
  metadataObject,
  optionalBoolean,
  optionalString,
  type QueryParams,
  requiredString,
  requiredUuid,
  uuidArray,
  uuidListParam,
  uuidParam,
  uuidPathParam,
} from './validation.ts';

/** Default and largest page size of every list (`take`). */
export const DEFAULT_TAKE = 100;
export const MAX_TAKE = 10_000;

/** Validated-enough input of an API handler. */
export interface ApiContext {
  readonly store: Store;
  /** `:param` segments in order, still percent-encoded. */
  readonly params: readonly string[];
  /** Parsed query; only whitelisted names remain. */
  readonly query: QueryParams;
  /** Parsed JSON body (`{}` for routes without one); only whitelisted members remain. */
  readonly body: JsonObject;
}

/** An API handler's result: status and a JSON-serializable payload. */
export interface Reply {
  readonly status: number;
  readonly payload: unknown;
}

/** One route of the service API. */
export interface ApiRoute extends RouteShape {
  readonly kind: 'api';
  readonly method: 'GET' | 'POST' | 'PUT';
  /** Served without credentials. */
  readonly public?: boolean;
  /** Allowed query parameter names; `null` = the query is ignored. */
  readonly query: ReadonlySet<string> | null;
  /** Allowed body members; `null` = the route takes no body (any body is discarded). */
  readonly body: ReadonlySet<string> | null;
  /**
   * @throws {HttpError} 400 for a wrong type, 404 for an unknown entity.
   */
  handle(ctx: ApiContext): Reply;
}

const names = (...list: string[]): ReadonlySet<string> => new Set(list);
const PAGING = ['skip', 'take'];

function paging(query: QueryParams): { skip: number; take: number } {
  return {
    skip: intParam(query, 'skip', { fallback: 0, min: 0, max: Number.MAX_SAFE_INTEGER }),
    take: intParam(query, 'take', { fallback: DEFAULT_TAKE, min: 0, max: MAX_TAKE }),
  };
}

const ok = (payload: unknown): Reply => ({ status: 200, payload });
// NestJS answers every POST handler with 201 unless told otherwise.
const created = (payload: unknown): Reply => ({ status: 201, payload });

/** The service API routes, in matching order. */
export const API_ROUTES: readonly ApiRoute[] = [
  {
    kind: 'api',
    method: 'GET',
    path: '/api/health',
    public: true,
    query: null,
    body: null,
    handle: () => ok({ status: 'ok' }),
  },
  {
    kind: 'api',
    method: 'GET',
    path: '/user/me',
    query: names(),
    body: null,
    handle: () => ok(DEMO_USER),
  },
  {
    kind: 'api',
    method: 'GET',
    path: '/metadata-types',
    query: names(...PAGING),
    body: null,
    handle: ({ store, query }) => {
      const { skip, take } = paging(query);
      return ok(store.listMetadataTypes(skip, take));
    },
  },
  {
    kind: 'api',
    method: 'POST',
    path: '/missions',
    query: names(),
    body: names('name', 'projectUUID', 'metadata', 'ignoreMissingMetadata'),
    handle: ({ store, body }) =>
      created(
        store.createMission({
          name: requiredString(body, 'name'),
          projectUUID: requiredUuid(body, 'projectUUID'),
          metadata: metadataObject(body, 'metadata', false),
          ignoreMissingMetadata: optionalBoolean(body, 'ignoreMissingMetadata'),
        }),
      ),
  },
  {
    kind: 'api',
    method: 'GET',
    path: '/missions',
    query: names('projectUuid', ...PAGING),
    body: null,
    handle: ({ store, query }) => {
      const projectUuid = uuidParam(query, 'projectUuid', false);
      const { skip, take } = paging(query);
      return ok(store.listMissions(projectUuid, skip, take));
    },
  },
  {
    kind: 'api',
    method: 'GET',
    path: '/missions/:uuid',
    query: names(),
    body: null,
    handle: ({ store, params }) => ok(store.mission(uuidPathParam(params[0]))),
  },
  {
    kind: 'api',
    method: 'POST',
    path: '/missions/:uuid/metadata',
    query: names(),
    body: names('metadata'),
    handle: ({ store, params, body }) => {
      const uuid = uuidPathParam(params[0]);
      return created(store.setMissionMetadata(uuid, metadataObject(body, 'metadata', true)!));
    },
  },
  {
    kind: 'api',
    method: 'POST',
    path: '/projects',
    query: names(),
    body: names('name', 'description', 'requiredMetadataTypes'),
    handle: ({ store, body }) =>
      created(
        store.createProject({
          name: requiredString(body, 'name'),
          description: optionalString(body, 'description'),
          requiredMetadataTypes: uuidArray(body, 'requiredMetadataTypes', false),
        }),
      ),
  },
  {
    kind: 'api',
    method: 'GET',
    path: '/projects',
    query: names(...PAGING),
    body: null,
    handle: ({ store, query }) => {
      const { skip, take } = paging(query);
      return ok(store.listProjects(skip, take));
    },
  },
  {
    kind: 'api',
    method: 'GET',
    path: '/projects/:uuid',
    query: names(),
    body: null,
    handle: ({ store, params }) => ok(store.project(uuidPathParam(params[0]))),
  },
  {
    kind: 'api',
    method: 'PUT',
    path: '/projects/:uuid/metadata-types',
    query: names(),
    body: names('metadataTypeUUIDs'),
    handle: ({ store, params, body }) => {
      const uuid = uuidPathParam(params[0]);
      return ok(store.setProjectMetadataTypes(uuid, uuidArray(body, 'metadataTypeUUIDs', true)!));
    },
  },
  {
    kind: 'api',
    method: 'POST',
    path: '/projects/:uuid/metadata-types',
    query: names('metadataTypeUUID'),
    body: null,
    handle: ({ store, params, query }) => {
      const uuid = uuidPathParam(params[0]);
      return created(store.addProjectMetadataType(uuid, uuidParam(query, 'metadataTypeUUID', true)!));
    },
  },
  {
    kind: 'api',
    method: 'GET',
    path: '/files',
    query: names('metadataByTypeUuid', ...PAGING),
    body: null,
    handle: ({ store, query }) => {
      const typeUuids = uuidListParam(query, 'metadataByTypeUuid');
      const { skip, take } = paging(query);
      return ok(store.listFiles(typeUuids, skip, take));
    },
  },
];
