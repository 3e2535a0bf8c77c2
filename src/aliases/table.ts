/**
 * THE alias table: every deprecated field name the shim still understands, as data. One row per line of
 * the table in the service document, part 9 ("Deprecated field names"), repeated in SPEC §5 and §6.
 *
 * Adding an alias is adding one row; the rewrite and patch functions are generic over this table.
 * Deleting the whole `aliases/` folder at 1.0 deletes this knowledge with it (SPEC §10).
 */

/** Where an alias is accepted (request body, request query) or added (JSON response). */
export type AliasWhere = 'body' | 'query' | 'response';

/** One deprecated name and the canonical name that replaces it. */
export interface AliasRename {
  /** The name the backend knows, e.g. `metadata`. */
  readonly canonical: string;
  /** The deprecated name legacy clients send and expect, e.g. `tags`. */
  readonly alias: string;
}

/** One row of the alias table. */
export interface AliasRow extends AliasRename {
  /** `body`/`query`: renamed in requests to {@link method} {@link path}; `response`: added to every JSON response. */
  readonly where: AliasWhere;
  /** Request method (upper case); only for `body` and `query` rows. */
  readonly method?: string;
  /** Route pattern relative to the base URL; `:uuid` stands for one non-empty path segment. */
  readonly path?: string;
}

/**
 * The alias table (service document part 9; SPEC §5 and §6).
 *
 * @example
 * ALIAS_TABLE.filter((row) => row.where === 'response'); // metadata→tags, requiredMetadataTypes→requiredTags
 */
export const ALIAS_TABLE: readonly AliasRow[] = Object.freeze([
  { where: 'response', canonical: 'metadata', alias: 'tags' },
  { where: 'response', canonical: 'requiredMetadataTypes', alias: 'requiredTags' },
  { where: 'body', method: 'POST', path: '/missions', canonical: 'metadata', alias: 'tags' },
  {
    where: 'body',
    method: 'POST',
    path: '/missions',
    canonical: 'ignoreMissingMetadata',
    alias: 'ignoreTags',
  },
  { where: 'body', method: 'POST', path: '/missions/:uuid/metadata', canonical: 'metadata', alias: 'tags' },
  {
    where: 'body',
    method: 'POST',
    path: '/projects',
    canonical: 'requiredMetadataTypes',
    alias: 'requiredTags',
  },
  { where: 'query', method: 'GET', path: '/files', canonical: 'metadataByTypeUuid', alias: 'tags' },
  {
    where: 'body',
    method: 'PUT',
    path: '/projects/:uuid/metadata-types',
    canonical: 'metadataTypeUUIDs',
    alias: 'tagTypeUUIDs',
  },
  {
    where: 'query',
    method: 'POST',
    path: '/projects/:uuid/metadata-types',
    canonical: 'metadataTypeUUID',
    alias: 'tagTypeUUID',
  },
] satisfies AliasRow[]);

/**
 * The response rows of a table as canonical/alias pairs, in table order: the input of `patchJson`.
 * @param table Alias rows (default: {@link ALIAS_TABLE}).
 * @returns A frozen array, e.g. `[{canonical:'metadata', alias:'tags'}, …]`.
 * @throws Nothing.
 */
export function responsePairs(table: readonly AliasRow[] = ALIAS_TABLE): readonly AliasRename[] {
  return Object.freeze(
    table
      .filter((row) => row.where === 'response')
      .map((row) => Object.freeze({ canonical: row.canonical, alias: row.alias })),
  );
}
