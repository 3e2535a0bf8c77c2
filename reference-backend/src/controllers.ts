/**
 * The service API of the reference backend (SPEC §9; service document part 4), one controller per
 * entity. Path `:uuid`s go through Nest's `ParseUUIDPipe` (400 `Validation failed (uuid is expected)`);
 * bodies and queries through the global whitelisting `ValidationPipe` (see `dto.ts`). POST handlers
 * answer 201 (Nest's default), the others 200. UUIDs are looked up in lower case.
 */
import { Body, Controller, Get, Param, ParseUUIDPipe, Post, Put, Query } from '@nestjs/common';
import { Public } from './credentials.guard';
import {
  AddMetadataTypeQuery,
  CreateMissionDto,
  CreateProjectDto,
  ListFilesQuery,
  ListMissionsQuery,
  NoQuery,
  PagingQuery,
  SetMetadataTypesDto,
  SetMissionMetadataDto,
} from './dto';
import {
  DEMO_USER,
  type FileEntity,
  type MetadataInputValue,
  type MetadataType,
  type Mission,
  type Page,
  type Project,
  Store,
  type User,
} from './store';

const lower = (uuid: string): string => uuid.toLowerCase();

function pairs(
  metadata: Record<string, MetadataInputValue> | undefined,
): Array<[string, MetadataInputValue]> | undefined {
  return metadata === undefined || metadata === null
    ? undefined
    : Object.entries(metadata).map(([key, value]) => [lower(key), value]);
}

/** `GET /api/health`: public. */
@Controller('api')
export class HealthController {
  @Public()
  @Get('health')
  health(): { status: string } {
    return { status: 'ok' };
  }
}

/** `GET /user/me`. */
@Controller('user')
export class UserController {
  @Get('me')
  me(@Query() _query: NoQuery): User {
    return DEMO_USER;
  }
}

/** `GET /metadata-types`. */
@Controller('metadata-types')
export class MetadataTypesController {
  constructor(private readonly store: Store) {}

  @Get()
  list(@Query() query: PagingQuery): Page<MetadataType> {
    return this.store.listMetadataTypes(query.skip, query.take);
  }
}

/** Missions and their metadata. */
@Controller('missions')
export class MissionsController {
  constructor(private readonly store: Store) {}

  @Post()
  create(@Query() _query: NoQuery, @Body() body: CreateMissionDto): Mission {
    return this.store.createMission({
      name: body.name,
      projectUUID: lower(body.projectUUID),
      metadata: pairs(body.metadata),
      ignoreMissingMetadata: body.ignoreMissingMetadata ?? undefined,
    });
  }

  @Get()
  list(@Query() query: ListMissionsQuery): Page<Mission> {
    const project = query.projectUuid === undefined ? undefined : lower(query.projectUuid);
    return this.store.listMissions(project, query.skip, query.take);
  }

  @Get(':uuid')
  get(@Param('uuid', ParseUUIDPipe) uuid: string, @Query() _query: NoQuery): Mission {
    return this.store.mission(lower(uuid));
  }

  @Post(':uuid/metadata')
  setMetadata(
    @Param('uuid', ParseUUIDPipe) uuid: string,
    @Query() _query: NoQuery,
    @Body() body: SetMissionMetadataDto,
  ): Mission {
    return this.store.setMissionMetadata(lower(uuid), pairs(body.metadata) ?? []);
  }
}

/** Projects and their required metadata types. */
@Controller('projects')
export class ProjectsController {
  constructor(private readonly store: Store) {}

  @Post()
  create(@Query() _query: NoQuery, @Body() body: CreateProjectDto): Project {
    return this.store.createProject({
      name: body.name,
      description: body.description ?? undefined,
      requiredMetadataTypes: body.requiredMetadataTypes?.map(lower),
    });
  }

  @Get()
  list(@Query() query: PagingQuery): Page<Project> {
    return this.store.listProjects(query.skip, query.take);
  }

  @Get(':uuid')
  get(@Param('uuid', ParseUUIDPipe) uuid: string, @Query() _query: NoQuery): Project {
    return this.store.project(lower(uuid));
  }

  @Put(':uuid/metadata-types')
  setMetadataTypes(
    @Param('uuid', ParseUUIDPipe) uuid: string,
    @Query() _query: NoQuery,
    @Body() body: SetMetadataTypesDto,
  ): Project {
    return this.store.setProjectMetadataTypes(lower(uuid), body.metadataTypeUUIDs.map(lower));
  }

  @Post(':uuid/metadata-types')
  addMetadataType(@Param('uuid', ParseUUIDPipe) uuid: string, @Query() query: AddMetadataTypeQuery): Project {
    return this.store.addProjectMetadataType(lower(uuid), lower(query.metadataTypeUUID));
  }
}

/** `GET /files`, filtered by metadata type. */
@Controller('files')
export class FilesController {
  constructor(private readonly store: Store) {}

  @Get()
  list(@Query() query: ListFilesQuery): Page<FileEntity> {
    return this.store.listFiles(query.metadataByTypeUuid?.map(lower), query.skip, query.take);
  }
}
