/**
 * docs/migration-guide.md is generated from the alias table (issue 11 item 4) and cannot go stale.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderMigrationGuide } from '../../../src/aliases/migration-guide.ts';
import { ALIAS_TABLE, type AliasRow } from '../../../src/aliases/table.ts';

const committed = readFileSync(new URL('../../../docs/migration-guide.md', import.meta.url), 'utf8');

describe('docs/migration-guide.md', () => {
  it('is the guide generated from the alias table (run `npm run docs:aliases` when this fails)', () => {
    expect(committed).toBe(renderMigrationGuide(ALIAS_TABLE));
  });

  it('has one section per row of the table', () => {
    const sections = committed.split('\n').filter((l) => l.startsWith('### '));
    expect(sections).toHaveLength(ALIAS_TABLE.length);
    for (const row of ALIAS_TABLE) {
      expect(sections.some((s) => s.includes(`\`${row.alias}\` → \`${row.canonical}\``))).toBe(true);
    }
  });

  it('shows the rename the layer makes: the alias before, the canonical name after', () => {
    const row = ALIAS_TABLE.find((r) => r.where === 'body' && r.alias === 'ignoreTags')!;
    const guide = renderMigrationGuide([row]);
    const project = '"projectUUID":"b0000000-0000-4000-8000-000000000002"';
    expect(guide).toContain(`{"name":"example",${project},"ignoreTags":true}`);
    expect(guide).toContain(`{"name":"example",${project},"ignoreMissingMetadata":true}`);
    const query = renderMigrationGuide([
      ALIAS_TABLE.find((r) => r.where === 'query' && r.path === '/files')!,
    ]);
    expect(query).toMatch(/GET \/files\?tags=a0000000-0000-4000-8000-000000000003&take=10 HTTP\/1\.1/);
    expect(query).toMatch(
      /GET \/files\?metadataByTypeUuid=a0000000-0000-4000-8000-000000000003&take=10 HTTP\/1\.1/,
    );
  });

  it('would notice a new row', () => {
    const extra: AliasRow = {
      where: 'body',
      method: 'POST',
      path: '/labels',
      canonical: 'metadata',
      alias: 'labels',
    };
    expect(renderMigrationGuide([...ALIAS_TABLE, extra])).not.toBe(committed);
  });
});
