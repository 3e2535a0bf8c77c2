/**
 * The build step: one self-contained ESM bundle of the shim, `dist/main.js`, with esbuild (pinned in
 * devDependencies). `npm start` and the Dockerfile run it; the image then needs no node_modules at all.
 *
 *   npm run build                      (node scripts/build.ts)
 *
 * Why a bundle (docs/operations.md "Footprint"): Node's type stripping and ~300 CommonJS files cost
 * idle memory; the bundle starts with one script and no resolution. Whitespace is minified (identifiers
 * are not: names stay readable in stack traces): measured, it is what lowers idle RSS most (~10 MiB);
 * full minification was worse. The reference backend is not in the bundle: demo mode starts it as a
 * child process from its own files (src/demo.ts).
 */
import { build } from 'esbuild';

/** CommonJS dependencies call `require` (node builtins): give the ESM bundle one. */
const REQUIRE_SHIM =
  "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);";

const result = await build({
  entryPoints: [new URL('../src/main.ts', import.meta.url).pathname],
  outfile: new URL('../dist/main.js', import.meta.url).pathname,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  minifyWhitespace: true,
  legalComments: 'none',
  banner: { js: REQUIRE_SHIM },
  logLevel: 'warning',
  metafile: true,
});
const bytes = Object.values(result.metafile.outputs).reduce((sum, o) => sum + o.bytes, 0);
if (process.argv.includes('--verbose'))
  process.stdout.write(`dist/main.js: ${(bytes / 1024).toFixed(0)} KiB\n`);
