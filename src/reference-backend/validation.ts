/**
 * Whitelisting validation of query strings and JSON bodies, with the messages a NestJS
 * `ValidationPipe({ whitelist: true, forbidNonWhitelisted: true })` and class-validator produce
 * (`property tags should not exist`, `name must be a string`, `skip must be an integer number`, …).
 * Every function throws {@link HttpError} 400 on the first problem; unknown names are reported before
 * wrong types, so an alias leaking through the shim always fails with the whitelisting message. UUIDs
 * are matched case-insensitively and returned in lower case (as a database `uuid` column reads them).
 */
import { HttpError } from './http-error.ts';

/** A UUID in the 8-4-4-4-12 hexadecimal form (class-validator `@IsUUID('all')`), case-insensitive. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** One query parameter, under the name before any `[` (`tags[]`, `tags[x]` → `tags`). */
export interface QueryParam {
  /** Decoded values in order of appearance. */
  readonly values: string[];
  /** `true` when the parameter was repeated or used a bracket form: it parses as an array/object. */
  structured: boolean;
}

/** Parsed query: base name → parameter, in order of first appearance. */
export type QueryParams = ReadonlyMap<string, QueryParam>;

/** A parsed JSON request body (always an object; see {@link parseJsonObject}). */
export type JsonObject = Record<string, unknown>;

/** A metadata value as the service accepts it. */
export type MetadataInputValue = string | number | boolean;

function decodeComponent(text: string): string {
  if (!text.includes('%') && !text.includes('+')) return text;
  const spaced = text.replaceAll('+', ' ');
  try {
    return decodeURIComponent(spaced);
  } catch {
    // Like `qs`: a malformed escape is kept as sent rather than rejected.
    return spaced;
  }
}

/**
 * Parses a raw query string the way Express' extended parser (`qs`) names parameters: `&`-separated
 * `name=value` pairs, `+` and percent-escapes decoded, a pair without `=` has the value `''`, empty names
 * are ignored, and a bracket suffix (`tags[]`, `tags[x]`) is folded into the base name.
 *
 * @param rawQuery The query without the leading `?` (`''` for none).
 * @returns Base name → {@link QueryParam}.
 * @example
 * parseQuery('tags[]=a&tags[]=b&skip=1').get('tags'); // { values: ['a', 'b'], structured: true }
 */
export function parseQuery(rawQuery: string): Map<string, QueryParam> {
  const params = new Map<string, QueryParam>();
  if (rawQuery === '') return params;
  for (const pair of rawQuery.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decodeComponent(eq === -1 ? pair : pair.slice(0, eq));
    const value = eq === -1 ? '' : decodeComponent(pair.slice(eq + 1));
    const bracket = name.indexOf('[');
    const base = bracket > 0 ? name.slice(0, bracket) : name;
    if (base === '') continue;
    const existing = params.get(base);
    if (existing === undefined) {
      params.set(base, { values: [value], structured: bracket > 0 });
    } else {
      existing.values.push(value);
      existing.structured = true;
    }
  }
  return params;
}

/**
 * Rejects the first query parameter whose base name is not allowed (`forbidNonWhitelisted`).
 * @throws {HttpError} 400 `property <name> should not exist`.
 */
export function assertKnownParams(query: QueryParams, allowed: ReadonlySet<string>): void {
  for (const name of query.keys()) {
    if (!allowed.has(name)) throw new HttpError(400, `property ${name} should not exist`);
  }
}

/**
 * Reads an optional non-negative integer query parameter (`@Type(() => Number) @IsInt() @Min() @Max()`).
 * @param bounds `fallback` when absent; inclusive `min`/`max`.
 * @returns The integer.
 * @throws {HttpError} 400 `<name> must be an integer number`, `<name> must not be less than <min>`,
 *   `<name> must not be greater than <max>`.
 */
export function intParam(
  query: QueryParams,
  name: string,
  bounds: { readonly fallback: number; readonly min: number; readonly max: number },
): number {
  const param = query.get(name);
  if (param === undefined) return bounds.fallback;
  const text = param.values[0] ?? '';
  if (param.structured || !/^-?\d{1,16}$/.test(text)) {
    throw new HttpError(400, `${name} must be an integer number`);
  }
  const value = Number(text);
  if (value < bounds.min) throw new HttpError(400, `${name} must not be less than ${bounds.min}`);
  if (value > bounds.max) throw new HttpError(400, `${name} must not be greater than ${bounds.max}`);
  return value;
}

/**
 * Reads a single UUID query parameter (`@IsUUID()`); UUIDs are returned in lower case.
 * @returns The UUID, or `undefined` when absent and not `required`.
 * @throws {HttpError} 400 `<name> must be a UUID` (absent and required, repeated, or malformed).
 */
export function uuidParam(query: QueryParams, name: string, required: boolean): string | undefined {
  const param = query.get(name);
  if (param === undefined && !required) return undefined;
  const value = param?.values[0];
  if (param === undefined || param.structured || value === undefined || !UUID_PATTERN.test(value)) {
    throw new HttpError(400, `${name} must be a UUID`);
  }
  return value.toLowerCase();
}

/**
 * Reads a UUID-list query parameter: `name=a`, repeated `name=a&name=b`, or the bracket forms
 * `name[]=a`, `name[x]=a` (`@IsUUID('all', { each: true })`).
 * @returns The UUIDs in order, or `undefined` when absent.
 * @throws {HttpError} 400 `each value in <name> must be a UUID` (or `<name> must be a UUID` for one value).
 */
export function uuidListParam(query: QueryParams, name: string): string[] | undefined {
  const param = query.get(name);
  if (param === undefined) return undefined;
  for (const value of param.values) {
    if (!UUID_PATTERN.test(value)) {
      throw new HttpError(
        400,
        param.structured ? `each value in ${name} must be a UUID` : `${name} must be a UUID`,
      );
    }
  }
  return param.values.map((value) => value.toLowerCase());
}

/**
 * Whether a `Content-Type` names JSON: `application/json` or `application/*+json` (parameters ignored).
 * @param contentType The raw header value.
 */
export function isJsonMediaType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const semicolon = contentType.indexOf(';');
  const type = (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
  return type === 'application/json' || /^application\/[a-z0-9!#$&^_.-]+\+json$/.test(type);
}

/**
 * Parses a request body as a JSON object. An empty body is `{}` (as Express' JSON parser gives).
 * @param text The body decoded as UTF-8.
 * @returns The object.
 * @throws {HttpError} 400 with the JSON parser's message for malformed JSON, or
 *   `request body must be a JSON object` for any other top-level value.
 */
export function parseJsonObject(text: string): JsonObject {
  if (text.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new HttpError(400, (error as Error).message);
  }
  if (!isPlainObject(value)) throw new HttpError(400, 'request body must be a JSON object');
  return value;
}

/** class-validator's `isObject`: a non-null object that is not an array. */
export function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Rejects the first body member that is not allowed (`forbidNonWhitelisted`, top level).
 * @throws {HttpError} 400 `property <name> should not exist`.
 */
export function assertKnownFields(body: JsonObject, allowed: ReadonlySet<string>): void {
  for (const name of Object.keys(body)) {
    if (!allowed.has(name)) throw new HttpError(400, `property ${name} should not exist`);
  }
}

/** `@IsOptional()`: `null` and `undefined` both mean absent. */
function absent(value: unknown): value is null | undefined {
  return value === undefined || value === null;
}

/**
 * Reads a required non-empty string member (`@IsString() @IsNotEmpty()`).
 * @throws {HttpError} 400 `<name> must be a string` or `<name> should not be empty`.
 */
export function requiredString(body: JsonObject, name: string): string {
  const value = body[name];
  if (typeof value !== 'string') throw new HttpError(400, `${name} must be a string`);
  if (value.trim() === '') throw new HttpError(400, `${name} should not be empty`);
  return value;
}

/**
 * Reads an optional string member (`@IsOptional() @IsString()`).
 * @throws {HttpError} 400 `<name> must be a string`.
 */
export function optionalString(body: JsonObject, name: string): string | undefined {
  const value = body[name];
  if (absent(value)) return undefined;
  if (typeof value !== 'string') throw new HttpError(400, `${name} must be a string`);
  return value;
}

/**
 * Reads a required UUID member (`@IsUUID()`).
 * @throws {HttpError} 400 `<name> must be a UUID`.
 */
export function requiredUuid(body: JsonObject, name: string): string {
  const value = body[name];
  if (typeof value !== 'string' || !UUID_PATTERN.test(value))
    throw new HttpError(400, `${name} must be a UUID`);
  return value.toLowerCase();
}

/**
 * Reads an optional boolean member (`@IsOptional() @IsBoolean()`); strings like `"true"` are rejected.
 * @throws {HttpError} 400 `<name> must be a boolean value`.
 */
export function optionalBoolean(body: JsonObject, name: string): boolean | undefined {
  const value = body[name];
  if (absent(value)) return undefined;
  if (typeof value !== 'boolean') throw new HttpError(400, `${name} must be a boolean value`);
  return value;
}

/**
 * Reads an array-of-UUIDs member (`@IsArray() @IsUUID('all', { each: true })`).
 * @param required When `false`, `null`/absent gives `undefined`.
 * @throws {HttpError} 400 `<name> must be an array` or `each value in <name> must be a UUID`.
 */
export function uuidArray(body: JsonObject, name: string, required: boolean): string[] | undefined {
  const value = body[name];
  if (!required && absent(value)) return undefined;
  if (!Array.isArray(value)) throw new HttpError(400, `${name} must be an array`);
  for (const item of value) {
    if (typeof item !== 'string' || !UUID_PATTERN.test(item)) {
      throw new HttpError(400, `each value in ${name} must be a UUID`);
    }
  }
  return (value as string[]).map((item) => item.toLowerCase());
}

/**
 * Reads a metadata member: an object mapping metadata-type UUID → string | number | boolean
 * (`@IsObject()` plus a value check). Which types exist is the store's concern.
 * @param required When `false`, `null`/absent gives `undefined`.
 * @returns `[metadataTypeUuid, value]` pairs in member order.
 * @throws {HttpError} 400 `<name> must be an object`, `each key in <name> must be a metadata type UUID`,
 *   `each value in <name> must be a string, number or boolean`.
 */
export function metadataObject(
  body: JsonObject,
  name: string,
  required: boolean,
): Array<[string, MetadataInputValue]> | undefined {
  const value = body[name];
  if (!required && absent(value)) return undefined;
  if (!isPlainObject(value)) throw new HttpError(400, `${name} must be an object`);
  const entries: Array<[string, MetadataInputValue]> = [];
  for (const [key, item] of Object.entries(value)) {
    if (!UUID_PATTERN.test(key)) throw new HttpError(400, `each key in ${name} must be a metadata type UUID`);
    if (
      typeof item !== 'string' &&
      typeof item !== 'boolean' &&
      !(typeof item === 'number' && Number.isFinite(item))
    ) {
      throw new HttpError(400, `each value in ${name} must be a string, number or boolean`);
    }
    entries.push([key.toLowerCase(), item]);
  }
  return entries;
}

/**
 * Validates a `:uuid` path parameter (NestJS `ParseUUIDPipe`).
 * @param raw The raw path segment (percent-decoded here).
 * @returns The UUID.
 * @throws {HttpError} 400 `Validation failed (uuid is expected)`.
 */
export function uuidPathParam(raw: string | undefined): string {
  let value = raw ?? '';
  try {
    value = decodeURIComponent(value);
  } catch {
    // A malformed escape cannot be a UUID; fall through to the rejection below.
  }
  if (!UUID_PATTERN.test(value)) throw new HttpError(400, 'Validation failed (uuid is expected)');
  return value.toLowerCase();
}
