/**
 * Keeps the one-way imports README "How a request flows through src/" describes: `core/` is
 * the shared kernel and imports nothing outside itself; the gates speak `core/` only; the proxy and
 * the observability modules build on `core/`; a plugin (any other folder of src/) sits on `core/`, the
 * logger's and the metrics' helpers and config.ts's schema helpers, and nothing but `app.ts`, the
 * composition root, imports it — so that deleting a plugin's folder touches one line outside it
 * (docs/removing-the-alias-layer.md). Reads every module's imports with TypeScript's own scan.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '..', '..', 'src');

/**
 * What each folder of the core may import besides itself: folders, or files at src/'s top. The files
 * at src/'s top (entry, runtime, composition root, configuration) may import anything.
 */
const CORE_ALLOWED: Readonly<Record<string, readonly string[]>> = {
  core: [],
  gates: ['core'],
  proxy: ['core', 'observability'],
  observability: ['core'],
};

/** What a plugin's folder may import besides itself (a plugin declares its variables with config.ts). */
const PLUGIN_ALLOWED: readonly string[] = ['core', 'observability', 'config.ts'];

/** The folder of src/ a module lives in, or `.` for the files at its top. */
function layerOf(file: string): string {
  const parts = relative(SRC, file).split(sep);
  return parts.length > 1 ? (parts[0] ?? '.') : '.';
}

const isPlugin = (layer: string): boolean => layer !== '.' && CORE_ALLOWED[layer] === undefined;

function modules(): string[] {
  return readdirSync(SRC, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name));
}

/**
 * Relative specifiers a module imports, resolved to files: TypeScript's own scan of its imports
 * (`import … from`, `import type`, side-effect `import '…'`, `export … from`, `import('…')`), so that no
 * spelling slips past a regular expression.
 */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.map((f) => f.fileName)
    .filter((name) => name.startsWith('.') || isAbsolute(name))
    .map((name) => resolve(dirname(file), name));
}

describe('imports between the folders of src/', () => {
  const files = modules();
  const edges = files.flatMap((from) => importsOf(from).map((to) => ({ from, to })));

  it('finds the modules and their imports', () => {
    expect(files.length).toBeGreaterThan(30);
    expect(edges.length).toBeGreaterThan(100);
  });

  it('go one way: each folder imports only the folders below it', () => {
    const offenders = edges
      .filter(({ from, to }) => {
        const a = layerOf(from);
        const b = layerOf(to);
        if (a === '.' || a === b) return false;
        const allowed = CORE_ALLOWED[a] ?? PLUGIN_ALLOWED;
        return !allowed.includes(b === '.' ? relative(SRC, to) : b);
      })
      .map(({ from, to }) => `${relative(SRC, from)} → ${relative(SRC, to)}`);
    expect(offenders).toEqual([]);
  });

  it('reach a plugin only from the composition root', () => {
    const offenders = edges
      .filter(({ from, to }) => isPlugin(layerOf(to)) && layerOf(from) !== layerOf(to))
      .map(({ from }) => relative(SRC, from))
      .filter((from) => from !== 'app.ts');
    expect(offenders).toEqual([]);
  });
});
