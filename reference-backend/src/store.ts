/**
 * In-memory data of the reference backend: metadata types, projects, missions, files and the demo user,
 * under their canonical names only (the shim adds the deprecated aliases; this store never has `tags`
 * or `requiredTags`). Seeded deterministically so tests and benchmarks can name fixed UUIDs.
 */
import { randomUUID } from 'node:crypto';
import { BadRequestException, NotFoundException } from '@nestjs/common';

/** A metadata value as the service accepts it. */
export type MetadataInputValue = string | number | boolean;

/** How a metadata type's values are meant to be read. */
export type MetadataDatatype = 'string' | 'number' | 'boolean';

/** Definition of a metadata value (used to be called a tag type). */
export interface MetadataType {
  readonly uuid: string;
  readonly name: string;
  readonly datatype: MetadataDatatype;
}

/** One metadata value attached to a mission or file (used to be called a tag). */
export interface MetadataEntry {
  readonly uuid: string;
  readonly value: MetadataInputValue;
  readonly metadataType: MetadataType;
}

/** A project and the metadata types its missions must carry. */
export interface Project {
  readonly uuid: string;
  readonly name: string;
  readonly description: string;
  requiredMetadataTypes: MetadataType[];
  readonly createdAt: string;
}

/** A mission and its metadata. */
export interface Mission {
  readonly uuid: string;
  readonly name: string;
  readonly projectUuid: string;
  metadata: MetadataEntry[];
  readonly createdAt: string;
}

/** A stored file (size in bytes) and its metadata. */
export interface FileEntity {
  readonly uuid: string;
  readonly filename: string;
  readonly size: number;
  readonly missionUuid: string;
  readonly metadata: MetadataEntry[];
}

/** The current user (`GET /user/me`). */
export interface User {
  readonly uuid: string;
  readonly name: string;
  readonly email: string;
  readonly role: string;
}

/** A page of a list: `{data, count, skip, take}`; `count` is the number of matches before paging. */
export interface Page<T> {
  readonly data: T[];
  readonly count: number;
  readonly skip: number;
  readonly take: number;
}

/** Fixed UUIDs of the seeded entities. */
export const SEED_IDS = Object.freeze({
  metadataTypes: Object.freeze({
    location: 'a0000000-0000-4000-8000-000000000001',
    robot: 'a0000000-0000-4000-8000-000000000002',
    weather: 'a0000000-0000-4000-8000-000000000003',
    temperature: 'a0000000-0000-4000-8000-000000000004',
  }),
  projects: Object.freeze({
    /** Requires `location` and `robot`. */
    demo: 'b0000000-0000-4000-8000-000000000001',
    /** Requires nothing. */
    open: 'b0000000-0000-4000-8000-000000000002',
  }),
  missions: Object.freeze({
    alpha: 'c0000000-0000-4000-8000-000000000001',
    beta: 'c0000000-0000-4000-8000-000000000002',
  }),
});

/** The fixed demo user returned by `GET /user/me`. */
export const DEMO_USER: User = Object.freeze({
  uuid: 'f0000000-0000-4000-8000-000000000001',
  name: 'Demo User',
  email: 'demo@example.com',
  role: 'USER',
});

/** Most projects (and, separately, missions) kept; the oldest are dropped beyond it so load tests stay flat. */
export const MAX_ENTITIES = 100_000;

const SEED_TIME = '2025-01-01T00:00:00.000Z';

function seedUuid(prefix: string, n: number): string {
  return `${prefix}0000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`;
}

function evictOldest<T>(map: Map<string, T>): void {
  if (map.size <= MAX_ENTITIES) return;
  const oldest = map.keys().next();
  if (oldest.done !== true) map.delete(oldest.value);
}

/** Pages `items` (in insertion order) after filtering; counts every match. */
function page<T>(items: Iterable<T>, keep: (item: T) => boolean, skip: number, take: number): Page<T> {
  const data: T[] = [];
  let count = 0;
  for (const item of items) {
    if (!keep(item)) continue;
    if (count >= skip && data.length < take) data.push(item);
    count++;
  }
  return { data, count, skip, take };
}

const keepAll = (): boolean => true;

/** Input of {@link Store.createMission}, already type-checked. */
export interface MissionInput {
  readonly name: string;
  readonly projectUUID: string;
  readonly metadata?: ReadonlyArray<readonly [string, MetadataInputValue]> | undefined;
  readonly ignoreMissingMetadata?: boolean | undefined;
}

/** Input of {@link Store.createProject}, already type-checked. */
export interface ProjectInput {
  readonly name: string;
  readonly description?: string | undefined;
  readonly requiredMetadataTypes?: readonly string[] | undefined;
}

/**
 * The in-memory data set. Methods throw Nest's `HttpException`s: 404 for an unknown project or mission,
 * 400 for an unknown metadata type or missing required metadata.
 */
export class Store {
  readonly metadataTypes = new Map<string, MetadataType>();
  readonly projects = new Map<string, Project>();
  readonly missions = new Map<string, Mission>();
  readonly files = new Map<string, FileEntity>();

  /** @param seed When `true`, loads the deterministic seed ({@link SEED_IDS}); otherwise starts empty. */
  constructor(seed: boolean) {
    if (seed) this.seed();
  }

  private seed(): void {
    const ids = SEED_IDS.metadataTypes;
    const types: MetadataType[] = [
      { uuid: ids.location, name: 'location', datatype: 'string' },
      { uuid: ids.robot, name: 'robot', datatype: 'string' },
      { uuid: ids.weather, name: 'weather', datatype: 'string' },
      { uuid: ids.temperature, name: 'temperature', datatype: 'number' },
    ];
    for (const type of types) this.metadataTypes.set(type.uuid, Object.freeze(type));
    const type = (uuid: string): MetadataType => this.metadataTypes.get(uuid)!;
    let entry = 0;
    const meta = (typeUuid: string, value: MetadataInputValue): MetadataEntry => ({
      uuid: seedUuid('e', ++entry),
      value,
      metadataType: type(typeUuid),
    });

    this.projects.set(SEED_IDS.projects.demo, {
      uuid: SEED_IDS.projects.demo,
      name: 'demo-project',
      description: 'Missions must name their location and robot.',
      requiredMetadataTypes: [type(ids.location), type(ids.robot)],
      createdAt: SEED_TIME,
    });
    this.projects.set(SEED_IDS.projects.open, {
      uuid: SEED_IDS.projects.open,
      name: 'open-project',
      description: 'No required metadata.',
      requiredMetadataTypes: [],
      createdAt: SEED_TIME,
    });
    this.missions.set(SEED_IDS.missions.alpha, {
      uuid: SEED_IDS.missions.alpha,
      name: 'mission-alpha',
      projectUuid: SEED_IDS.projects.demo,
      metadata: [meta(ids.location, 'Zurich'), meta(ids.robot, 'ANYmal')],
      createdAt: SEED_TIME,
    });
    this.missions.set(SEED_IDS.missions.beta, {
      uuid: SEED_IDS.missions.beta,
      name: 'mission-beta',
      projectUuid: SEED_IDS.projects.open,
      metadata: [meta(ids.weather, 'sunny'), meta(ids.temperature, 21.5)],
      createdAt: SEED_TIME,
    });
    const files: Array<[string, number, string, MetadataEntry[]]> = [
      ['alpha_front.bag', 1_048_576, SEED_IDS.missions.alpha, [meta(ids.location, 'Zurich')]],
      ['alpha_lidar.mcap', 5_242_880, SEED_IDS.missions.alpha, [meta(ids.robot, 'ANYmal')]],
      ['beta_imu.bag', 262_144, SEED_IDS.missions.beta, [meta(ids.weather, 'sunny')]],
      [
        'beta_camera.mcap',
        10_485_760,
        SEED_IDS.missions.beta,
        [meta(ids.weather, 'sunny'), meta(ids.temperature, 21.5)],
      ],
      ['beta_notes.txt', 2_048, SEED_IDS.missions.beta, []],
    ];
    files.forEach(([filename, size, missionUuid, metadata], i) => {
      const uuid = seedUuid('d', i + 1);
      this.files.set(uuid, { uuid, filename, size, missionUuid, metadata });
    });
  }

  /** @throws {BadRequestException} 400 `metadata type <uuid> does not exist`. */
  metadataType(uuid: string): MetadataType {
    const type = this.metadataTypes.get(uuid);
    if (type === undefined) throw new BadRequestException(`metadata type ${uuid} does not exist`);
    return type;
  }

  private metadataTypeList(uuids: readonly string[]): MetadataType[] {
    const unique = [...new Set(uuids)];
    return unique.map((uuid) => this.metadataType(uuid));
  }

  private metadataEntries(pairs: ReadonlyArray<readonly [string, MetadataInputValue]>): MetadataEntry[] {
    return pairs.map(([typeUuid, value]) => ({
      uuid: randomUUID(),
      value,
      metadataType: this.metadataType(typeUuid),
    }));
  }

  /** @throws {NotFoundException} 404 `Project <uuid> not found`. */
  project(uuid: string): Project {
    const project = this.projects.get(uuid);
    if (project === undefined) throw new NotFoundException(`Project ${uuid} not found`);
    return project;
  }

  /** @throws {NotFoundException} 404 `Mission <uuid> not found`. */
  mission(uuid: string): Mission {
    const mission = this.missions.get(uuid);
    if (mission === undefined) throw new NotFoundException(`Mission ${uuid} not found`);
    return mission;
  }

  /**
   * Creates a project.
   * @throws {BadRequestException} 400 for an unknown metadata type in `requiredMetadataTypes`.
   */
  createProject(input: ProjectInput): Project {
    const project: Project = {
      uuid: randomUUID(),
      name: input.name,
      description: input.description ?? '',
      requiredMetadataTypes: this.metadataTypeList(input.requiredMetadataTypes ?? []),
      createdAt: new Date().toISOString(),
    };
    this.projects.set(project.uuid, project);
    evictOldest(this.projects);
    return project;
  }

  /**
   * Replaces a project's required metadata types (`PUT /projects/:uuid/metadata-types`).
   * @throws {NotFoundException} 404 unknown project; 400 unknown metadata type.
   */
  setProjectMetadataTypes(projectUuid: string, metadataTypeUuids: readonly string[]): Project {
    const project = this.project(projectUuid);
    project.requiredMetadataTypes = this.metadataTypeList(metadataTypeUuids);
    return project;
  }

  /**
   * Adds one required metadata type to a project; adding one already required changes nothing.
   * @throws {NotFoundException} 404 unknown project; 400 unknown metadata type.
   */
  addProjectMetadataType(projectUuid: string, metadataTypeUuid: string): Project {
    const project = this.project(projectUuid);
    const type = this.metadataType(metadataTypeUuid);
    if (!project.requiredMetadataTypes.some((t) => t.uuid === type.uuid)) {
      project.requiredMetadataTypes = [...project.requiredMetadataTypes, type];
    }
    return project;
  }

  /**
   * Creates a mission. Every metadata type the project requires must be given in `metadata` unless
   * `ignoreMissingMetadata` is `true` (service document §9: `ignoreMissingMetadata`).
   * @throws {NotFoundException} 404 unknown project; 400 unknown metadata type or missing required metadata.
   */
  createMission(input: MissionInput): Mission {
    const project = this.project(input.projectUUID);
    const metadata = this.metadataEntries(input.metadata ?? []);
    if (input.ignoreMissingMetadata !== true) {
      const given = new Set(metadata.map((entry) => entry.metadataType.uuid));
      const missing = project.requiredMetadataTypes.filter((type) => !given.has(type.uuid));
      if (missing.length > 0) {
        const names = missing.map((type) => `${type.name} (${type.uuid})`).join(', ');
        throw new BadRequestException(
          `project ${project.name} requires metadata that is missing: ${names}; ` +
            'provide it in metadata or set ignoreMissingMetadata to true',
        );
      }
    }
    const mission: Mission = {
      uuid: randomUUID(),
      name: input.name,
      projectUuid: project.uuid,
      metadata,
      createdAt: new Date().toISOString(),
    };
    this.missions.set(mission.uuid, mission);
    evictOldest(this.missions);
    return mission;
  }

  /**
   * Replaces a mission's metadata (`POST /missions/:uuid/metadata`).
   * @throws {NotFoundException} 404 unknown mission; 400 unknown metadata type.
   */
  setMissionMetadata(
    missionUuid: string,
    pairs: ReadonlyArray<readonly [string, MetadataInputValue]>,
  ): Mission {
    const mission = this.mission(missionUuid);
    mission.metadata = this.metadataEntries(pairs);
    return mission;
  }

  /** Lists missions, optionally of one project. */
  listMissions(projectUuid: string | undefined, skip: number, take: number): Page<Mission> {
    const keep = projectUuid === undefined ? keepAll : (m: Mission) => m.projectUuid === projectUuid;
    return page(this.missions.values(), keep, skip, take);
  }

  /** Lists projects. */
  listProjects(skip: number, take: number): Page<Project> {
    return page(this.projects.values(), keepAll, skip, take);
  }

  /** Lists metadata types. */
  listMetadataTypes(skip: number, take: number): Page<MetadataType> {
    return page(this.metadataTypes.values(), keepAll, skip, take);
  }

  /** Lists files; with `metadataTypeUuids`, only files having metadata of any of those types. */
  listFiles(metadataTypeUuids: readonly string[] | undefined, skip: number, take: number): Page<FileEntity> {
    if (metadataTypeUuids === undefined) return page(this.files.values(), keepAll, skip, take);
    const wanted = new Set(metadataTypeUuids);
    const keep = (file: FileEntity) => file.metadata.some((entry) => wanted.has(entry.metadataType.uuid));
    return page(this.files.values(), keep, skip, take);
  }
}
