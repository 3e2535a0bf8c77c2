/**
 * Request DTOs of the reference backend (SPEC §9; service document part 4), canonical names only. The
 * global `ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true })` validates
 * bodies and queries against them, so any member or query parameter not declared here — an alias such
 * as `tags`, `ignoreTags`, `requiredTags`, `tagTypeUUIDs` or `tagTypeUUID` that leaked through the
 * shim — is answered with Nest's own 400 `property <name> should not exist`.
 */
import { Transform, Type } from 'class-transformer';
import {
  IsArray,
  IsBoolean,
  IsInt,
  IsNotEmpty,
  IsObject,
  IsOptional,
  IsString,
  IsUUID,
  Max,
  Min,
  ValidateBy,
  type ValidationOptions,
} from 'class-validator';

/** Default page size (`take`) of every list. */
export const DEFAULT_TAKE = 100;
/** Largest page size (`take`) of every list. */
export const MAX_TAKE = 10_000;

/** A UUID in the 8-4-4-4-12 hexadecimal form, case-insensitive. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A metadata map: metadata-type UUID → string | finite number | boolean (the types themselves are
 * checked against the store by the handler).
 */
function IsMetadataMap(options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'isMetadataMap',
      validator: {
        validate: (value: unknown): boolean =>
          typeof value === 'object' &&
          value !== null &&
          !Array.isArray(value) &&
          Object.entries(value).every(
            ([key, item]) =>
              UUID_PATTERN.test(key) &&
              (typeof item === 'string' ||
                typeof item === 'boolean' ||
                (typeof item === 'number' && Number.isFinite(item))),
          ),
        defaultMessage: (args) =>
          `${args?.property ?? 'value'} must map metadata type UUIDs to strings, numbers or booleans`,
      },
    },
    options,
  );
}

/** A route that takes no query parameter: any parameter is rejected by the whitelist. */
export class NoQuery {}

/** `?skip=&take=` of every list. */
export class PagingQuery {
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(0)
  skip: number = 0;

  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(0)
  @Max(MAX_TAKE)
  take: number = DEFAULT_TAKE;
}

/** `GET /missions?projectUuid=&skip=&take=`. */
export class ListMissionsQuery extends PagingQuery {
  @IsOptional()
  @IsUUID('all')
  projectUuid?: string;
}

/**
 * One value, or several as the extended query parser gives them: repeated (`a=1&a=2`) or bracketed
 * (`a[]=1`, `a[x]=1`) → an array of the values.
 */
function toList(value: unknown): unknown[] {
  if (Array.isArray(value)) return value;
  if (typeof value === 'object' && value !== null) return Object.values(value);
  return [value];
}

/** `GET /files?metadataByTypeUuid=&skip=&take=`; the parameter may be repeated (`a=1&a=2`, `a[]=1`). */
export class ListFilesQuery extends PagingQuery {
  @IsOptional()
  @Transform(({ value }) => toList(value))
  @IsUUID('all', { each: true })
  metadataByTypeUuid?: string[];
}

/** `POST /projects/:uuid/metadata-types?metadataTypeUUID=`. */
export class AddMetadataTypeQuery {
  @IsUUID('all')
  metadataTypeUUID: string;
}

/** Body of `POST /missions`. */
export class CreateMissionDto {
  @IsString()
  @IsNotEmpty()
  name: string;

  @IsUUID('all')
  projectUUID: string;

  @IsOptional()
  @IsObject()
  @IsMetadataMap()
  metadata?: Record<string, string | number | boolean>;

  @IsOptional()
  @IsBoolean()
  ignoreMissingMetadata?: boolean;
}

/** Body of `POST /missions/:uuid/metadata`. */
export class SetMissionMetadataDto {
  @IsObject()
  @IsMetadataMap()
  metadata: Record<string, string | number | boolean>;
}

/** Body of `POST /projects`. */
export class CreateProjectDto {
  @IsString()
  @IsNotEmpty()
  name: string;

  @IsOptional()
  @IsString()
  description?: string;

  @IsOptional()
  @IsArray()
  @IsUUID('all', { each: true })
  requiredMetadataTypes?: string[];
}

/** Body of `PUT /projects/:uuid/metadata-types`. */
export class SetMetadataTypesDto {
  @IsArray()
  @IsUUID('all', { each: true })
  metadataTypeUUIDs: string[];
}
