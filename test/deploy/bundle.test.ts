/**
 * The shape of the bundle `dist/main.js` that keeps its idle memory down (scripts/build.ts,
 * docs/operations.md "Footprint"), checked on a build in memory with the build script's own options.
 */
import { build } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';
import { BUILD_OPTIONS } from '../../scripts/build.ts';

let code: string;
let inputs: string[];

beforeAll(async () => {
  const result = await build({ ...BUILD_OPTIONS, write: false, logLevel: 'silent' });
  const [output] = result.outputFiles;
  code = output?.text ?? '';
  // The sources esbuild kept code of (tree-shaken ones are listed with 0 bytes).
  inputs = Object.values(result.metafile.outputs).flatMap((o) =>
    Object.entries(o.inputs)
      .filter(([, input]) => input.bytesInOutput > 0)
      .map(([path]) => path),
  );
});

describe('dist/main.js', () => {
  it('imports no built-in module with ESM import: only the require shim (node:module)', () => {
    const imports = code.match(/^import\b[^;]*;/gm) ?? [];
    expect(imports).toEqual(["import { createRequire as __createRequire } from 'node:module';"]);
    // The sources' built-ins are there, loaded by require.
    for (const name of ['node:http', 'node:fs', 'node:util', 'node:crypto', 'node:zlib']) {
      expect(code).toContain(`require(${JSON.stringify(name)})`);
    }
  });

  it("holds zod's English messages but none of its other locales", () => {
    const locales = inputs.filter((path) => path.includes('node_modules/zod/v4/locales/'));
    expect(locales).toEqual(['node_modules/zod/v4/locales/en.js']);
  });

  it('is self-contained ESM, whitespace-minified, under 1.6 MB', () => {
    expect(code.length).toBeGreaterThan(500_000);
    expect(code.length).toBeLessThan(1_600_000);
    expect(code).not.toMatch(/^\s{2,}\S/m);
  });
});
