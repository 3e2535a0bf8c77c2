import { describe, expect, it } from 'vitest';
import { ALIAS_TABLE, responsePairs } from '../../../src/aliases/table.ts';

/** The table of the service document, part 9, transcribed line by line. */
const SERVICE_DOCUMENT_PART_9 = [
  ['response', undefined, undefined, 'metadata', 'tags'],
  ['response', undefined, undefined, 'requiredMetadataTypes', 'requiredTags'],
  ['body', 'POST', '/missions', 'metadata', 'tags'],
  ['body', 'POST', '/missions', 'ignoreMissingMetadata', 'ignoreTags'],
  ['body', 'POST', '/missions/:uuid/metadata', 'metadata', 'tags'],
  ['body', 'POST', '/projects', 'requiredMetadataTypes', 'requiredTags'],
  ['query', 'GET', '/files', 'metadataByTypeUuid', 'tags'],
  ['body', 'PUT', '/projects/:uuid/metadata-types', 'metadataTypeUUIDs', 'tagTypeUUIDs'],
  ['query', 'POST', '/projects/:uuid/metadata-types', 'metadataTypeUUID', 'tagTypeUUID'],
] as const;

describe('ALIAS_TABLE', () => {
  it('has exactly one row per line of the service document table', () => {
    const rows = ALIAS_TABLE.map((r) => [r.where, r.method, r.path, r.canonical, r.alias]);
    expect(rows).toEqual(SERVICE_DOCUMENT_PART_9.map((r) => [...r]));
  });

  it('is frozen', () => {
    expect(Object.isFrozen(ALIAS_TABLE)).toBe(true);
  });
});

describe('responsePairs', () => {
  it('lists the response rows as canonical/alias pairs', () => {
    expect(responsePairs()).toEqual([
      { canonical: 'metadata', alias: 'tags' },
      { canonical: 'requiredMetadataTypes', alias: 'requiredTags' },
    ]);
  });

  it('accepts another table', () => {
    expect(responsePairs([{ where: 'response', canonical: 'a', alias: 'b' }])).toEqual([
      { canonical: 'a', alias: 'b' },
    ]);
  });
});
