/**
 * The migration guide for client authors (issue 11 item 4), generated from THE alias table: one section
 * per row with a before/after example whose "after" is produced by the layer's own functions
 * (`rewriteBody`, `rewriteQuery`, `patchJson`), so the guide cannot describe a rename the shim does not
 * make. `npm run docs:aliases` writes `docs/migration-guide.md`; `test/unit/aliases/migration-guide.test.ts`
 * fails when the committed guide is stale. Deleted with the layer (docs/removing-the-alias-layer.md).
 *
 * Run directly (`node src/aliases/migration-guide.ts`) it writes the guide.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { patchJson } from './patch-json.ts';
import { rewriteBody } from './rewrite-body.ts';
import { rewriteQuery } from './rewrite-query.ts';
import { ALIAS_TABLE, type AliasRow } from './table.ts';

const TYPE_UUID = 'a0000000-0000-4000-8000-000000000003';
/**
 * The examples name the reference backend's seed data (`npm start`'s demo), so that each one runs as
 * shown there: a mission, a project without required metadata (a mission created in it needs none).
 */
const MISSION_UUID = 'c0000000-0000-4000-8000-000000000001';
const PROJECT_UUID = 'b0000000-0000-4000-8000-000000000002';

/**
 * The other members or parameters an example request needs besides the renamed one, by `METHOD /path`
 * (the reference backend, like the service's whitelisting validation pipe, refuses unknown ones and
 * requires its own): none unless listed.
 */
const EXAMPLE_CONTEXT: Readonly<Record<string, { body?: Record<string, unknown>; query?: string }>> = {
  'POST /missions': { body: { name: 'example', projectUUID: PROJECT_UUID } },
  'POST /projects': { body: { name: 'example' } },
  'GET /files': { query: 'take=10' },
};

/**
 * An example value for a member, from its canonical name's shape (service document part 9): lists of
 * UUIDs, one UUID, flags, metadata maps.
 */
function exampleValue(canonical: string): unknown {
  if (/UUIDs$/i.test(canonical)) return [TYPE_UUID];
  if (/UUID$/i.test(canonical) || /ByTypeUuid$/.test(canonical)) return TYPE_UUID;
  if (/^ignore/.test(canonical)) return true;
  if (/Types$/.test(canonical)) return [TYPE_UUID];
  return { [TYPE_UUID]: 'sunny' };
}

/** A concrete path for a route pattern (`:uuid` → a seeded mission's or project's UUID). */
function concretePath(pattern: string): string {
  return pattern.replace(
    /\/(\w+)\/:[A-Za-z_][A-Za-z0-9_]*/g,
    (_, collection: string) => `/${collection}/${collection === 'projects' ? PROJECT_UUID : MISSION_UUID}`,
  );
}

function anchor(row: AliasRow): string {
  return `${row.where}-${row.method ?? ''}-${row.path ?? ''}-${row.alias}`
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
}

function title(row: AliasRow): string {
  const where =
    row.where === 'response' ? 'every JSON response' : `${row.method} \`${row.path}\`, ${row.where}`;
  return `\`${row.alias}\` → \`${row.canonical}\` (${where})`;
}

function section(row: AliasRow): string[] {
  const lines = [`### ${title(row)}`, ''];
  if (row.where === 'body') {
    const context = EXAMPLE_CONTEXT[`${row.method} ${row.path}`]?.body ?? {};
    const before = Buffer.from(JSON.stringify({ ...context, [row.alias]: exampleValue(row.canonical) }));
    const after = rewriteBody([row], before).body.toString();
    const path = concretePath(row.path!);
    lines.push(
      `Send \`${row.canonical}\` in the JSON body of \`${row.method} ${row.path}\` instead of \`${row.alias}\`. If a request carries both, the shim keeps \`${row.canonical}\` and drops \`${row.alias}\`; after the sunset the backend rejects \`${row.alias}\` with \`400 property ${row.alias} should not exist\`.`,
      '',
      'Before (deprecated):',
      '',
      '```http',
      `${row.method} ${path} HTTP/1.1`,
      'Content-Type: application/json',
      '',
      before.toString(),
      '```',
      '',
      'After (canonical; what the shim forwards today):',
      '',
      '```http',
      `${row.method} ${path} HTTP/1.1`,
      'Content-Type: application/json',
      '',
      after,
      '```',
      '',
    );
  } else if (row.where === 'query') {
    const value = exampleValue(row.canonical);
    const context = EXAMPLE_CONTEXT[`${row.method} ${row.path}`]?.query;
    const before = `${row.alias}=${encodeURIComponent(String(value))}${context ? `&${context}` : ''}`;
    const after = rewriteQuery([row], before).query;
    const path = concretePath(row.path!);
    lines.push(
      `Send the query parameter \`${row.canonical}\` instead of \`${row.alias}\` (bracket forms too: \`${row.alias}[]=…\` → \`${row.canonical}[]=…\`). Values and the other parameters are unchanged. Until you do, separate parameters with \`&\` only: the proxy refuses (400) a query with a raw \`;\` next to \`${row.alias}\`, which some servers read as another separator.`,
      '',
      'Before (deprecated):',
      '',
      '```http',
      `${row.method} ${path}?${before} HTTP/1.1`,
      '```',
      '',
      'After (canonical; what the shim forwards today):',
      '',
      '```http',
      `${row.method} ${path}?${after} HTTP/1.1`,
      '```',
      '',
    );
  } else {
    const upstream = Buffer.from(
      JSON.stringify({ uuid: MISSION_UUID, name: 'example', [row.canonical]: exampleValue(row.canonical) }),
    );
    const result = patchJson([row], upstream) as { body?: Buffer };
    const patched = (result.body ?? upstream).toString();
    lines.push(
      `Read \`${row.canonical}\` wherever you read \`${row.alias}\`, at any depth of any JSON response. Today the shim copies \`${row.canonical}\` into \`${row.alias}\` for clients below the sunset version; after the sunset only \`${row.canonical}\` is there.`,
      '',
      'Before (what a legacy client receives through the shim today):',
      '',
      '```json',
      patched,
      '```',
      '',
      'After (what every client receives after the sunset):',
      '',
      '```json',
      upstream.toString(),
      '```',
      '',
    );
  }
  return lines;
}

/**
 * Renders the migration guide.
 * @param table The alias table (default: {@link ALIAS_TABLE}).
 * @returns Markdown text ending in a newline: an introduction, a summary table, one section per row.
 * @throws Nothing for the default table; for a malformed row, what the layer's functions throw on
 *   building its example (e.g. an `Error` from `renameKeyNames`, rename-names.ts, when a row's alias
 *   equals its canonical name).
 */
export function renderMigrationGuide(table: readonly AliasRow[] = ALIAS_TABLE): string {
  const lines = [
    '# Migration guide: deprecated field names → canonical names',
    '',
    '<!-- Generated from the alias table (src/aliases/table.ts) by `npm run docs:aliases`; do not edit. -->',
    '',
    'The service renamed `tags` to `metadata` and tag types to metadata types (service document, part 9).',
    'Clients below the sunset version (`ALIAS_SUNSET_VERSION`, default `1.0.0`) still work because the',
    'compat-shim translates the old names; at the sunset the translation is deleted and every old name',
    'below fails (requests: `400 property <name> should not exist`; responses: the old member is absent).',
    '',
    'How to tell whether your client is affected: responses to a request that used an old name carry',
    '`Warning: 299 - "<alias> is deprecated; use <canonical>"`, and, when the operator configured them,',
    '`Deprecation` (RFC 9745), `Sunset` (RFC 8594), `Link: <this guide>; rel="deprecation"` and',
    '`Link: <sunset policy>; rel="sunset"`. Before the sunset the operator may schedule **brownouts**:',
    'windows during which the translation is already off, so that you see the failures early; those',
    'responses carry `Warning: 299 - "… aliases are browned out until <end> …"`.',
    '',
    "A web page on another origin can read these headers from script wherever the service's CORS policy",
    'admits its origin: the compat-shim adds their names to `Access-Control-Expose-Headers` on every',
    "response that carries `Access-Control-Allow-Origin` (the service's CORS policy decides which origins).",
    '',
    '## Summary',
    '',
    '| deprecated | canonical | where |',
    '|---|---|---|',
    ...table.map(
      (row) =>
        `| [\`${row.alias}\`](#${anchor(row)}) | \`${row.canonical}\` | ${row.where === 'response' ? 'every JSON response, any depth' : `${row.method} \`${row.path}\`, ${row.where}`} |`,
    ),
    '',
    '## Changes',
    '',
  ];
  for (const row of table) lines.push(`<a id="${anchor(row)}"></a>`, '', ...section(row));
  return `${lines.join('\n').trimEnd()}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const target = new URL('../../docs/migration-guide.md', import.meta.url);
  writeFileSync(target, renderMigrationGuide());
  process.stdout.write(`wrote ${fileURLToPath(target)}\n`);
}
