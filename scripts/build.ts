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
 *
 * What keeps the bundle's idle memory down besides (all checked by test/deploy/bundle.test.ts):
 * - Node's built-in modules are loaded with `require`, not ESM `import` ({@link builtinsByRequire});
 * - zod is imported as `import * as z from 'zod'` (src/config.ts and every plugin's config schema), so that
 *   esbuild keeps only the parts used: `import { z }` keeps the whole namespace, 40-odd locales
 *   included (1.9 MB bundle instead of 1.4 MB, +7 MiB idle RSS);
 * - iconv-lite without its double-byte code pages ({@link withoutDoubleByteCodePages});
 * - prom-client without its Pushgateway, and so without `node:https`/`node:tls` ({@link withoutPushgateway}).
 */
import { builtinModules } from 'node:module';
import { dirname } from 'node:path';
import { type BuildOptions, build, type Plugin } from 'esbuild';

/** CommonJS dependencies call `require` (node builtins): give the ESM bundle one. */
const REQUIRE_SHIM =
  "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);";

/** Names of Node's public built-in modules, without the `node:` prefix (`http`, `fs/promises`, …). */
const BUILTINS = new Set(builtinModules.filter((name) => !name.startsWith('_')));

/**
 * esbuild plugin: an ESM `import` of a Node built-in in the sources (`import http from 'node:http'`)
 * becomes a `require` in the bundle. Each built-in becomes a CommonJS module of one line,
 * `module.exports = require('node:x')`, which esbuild evaluates where the importing module is
 * evaluated (src/demo.ts's `node:child_process` only in demo mode, its module being loaded on demand); named
 * imports read its properties, a default import is the module itself.
 *
 * Why: an ESM import of a built-in makes Node build its ESM facade, which reads every export, lazy
 * getters included, and so loads what those getters hide: `node:http` pulls in http2, undici, web
 * streams and worker_threads (`http.WebSocket` and friends), `node:fs` readline and the REPL history
 * (`fs.promises`), `node:util` worker_threads, `node:crypto` webcrypto. Measured with Node 24.21:
 * `import` of http, fs, util, crypto and child_process idles at 60 MiB, `require` of the same at
 * 49 MiB; in the shim, -3 to -4 MiB of idle RSS (docs/operations.md "Footprint").
 * Imports of anything else, and `require` calls of dependencies, are left to esbuild.
 */
export const builtinsByRequire: Plugin = {
  name: 'builtins-by-require',
  setup(b) {
    b.onResolve({ filter: /^node:|^[a-z_/0-9]+$/ }, (args) => {
      // The `require('node:x')` inside the one-line module: left to Node at run time.
      if (args.namespace === 'builtin-cjs') return { path: args.path, external: true };
      const name = args.path.replace(/^node:/, '');
      if (args.kind !== 'import-statement' || !BUILTINS.has(name)) return undefined;
      return { path: `node:${name}`, namespace: 'builtin-cjs' };
    });
    b.onLoad({ filter: /.*/, namespace: 'builtin-cjs' }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: 'js',
    }));
  },
};

/**
 * esbuild plugin: iconv-lite (express → body-parser, raw-body) keeps every encoding but the
 * double-byte code pages (Shift_JIS, EUC-JP, GBK/GB18030, Big5, EUC-KR: ~450 KB of tables, a third of
 * the bundle); Unicode, Node's own and the single-byte code pages (latin1, windows-125x, koi8-r, …)
 * stay. The shim never decodes a body with iconv-lite: it reads and forwards bytes itself
 * (src/proxy/) and mounts none of express's body parsers, which are its only callers. Were one
 * mounted, a body in a dropped code page would get body-parser's 415 `unsupported charset`.
 * Measured: -2 to -3 MiB of idle RSS (docs/operations.md "Footprint"). The module replaced is
 * iconv-lite 0.7's `encodings/index.js`: the same merge of its modules, without `dbcs-codec` and
 * `dbcs-data`.
 */
export const withoutDoubleByteCodePages: Plugin = {
  name: 'iconv-lite-without-double-byte-code-pages',
  setup(b) {
    b.onLoad({ filter: /[/\\]iconv-lite[/\\]encodings[/\\]index\.js$/ }, (args) => ({
      contents: [
        '"use strict";',
        'var mergeModules = require("../lib/helpers/merge-exports");',
        'var modules = [require("./internal"), require("./utf32"), require("./utf16"), require("./utf7"),',
        '  require("./sbcs-codec"), require("./sbcs-data"), require("./sbcs-data-generated")];',
        'for (var i = 0; i < modules.length; i++) mergeModules(exports, modules[i]);',
      ].join('\n'),
      loader: 'js',
      resolveDir: dirname(args.path),
    }));
  },
};

/**
 * esbuild plugin: prom-client's `Pushgateway` (for batch jobs that push their metrics; the shim is
 * scraped) is replaced by a class whose constructor throws. prom-client's index loads every module,
 * and `lib/pushgateway.js` requires `node:https`, which loads `node:tls`: ~3 MiB of idle RSS that an
 * `http:` upstream never needs (the shim loads them itself for an `https:` upstream only:
 * src/proxy/upstream-agent.ts). Measured: 75.3 → 72.4 MiB idle (docs/operations.md "Footprint").
 */
export const withoutPushgateway: Plugin = {
  name: 'prom-client-without-pushgateway',
  setup(b) {
    b.onLoad({ filter: /[/\\]prom-client[/\\]lib[/\\]pushgateway\.js$/ }, () => ({
      contents: [
        '"use strict";',
        'module.exports = class Pushgateway {',
        '  constructor() { throw new Error("prom-client Pushgateway is not in the compat-shim bundle (scripts/build.ts)"); }',
        '};',
      ].join('\n'),
      loader: 'js',
    }));
  },
};

/**
 * The esbuild options of `dist/main.js` (also read by test/deploy/bundle.test.ts, which builds in
 * memory with them). Paths are absolute, so the build runs from any working directory.
 */
export const BUILD_OPTIONS = {
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
  plugins: [builtinsByRequire, withoutDoubleByteCodePages, withoutPushgateway],
} satisfies BuildOptions;

if (import.meta.main) {
  const result = await build(BUILD_OPTIONS);
  const bytes = Object.values(result.metafile.outputs).reduce((sum, o) => sum + o.bytes, 0);
  if (process.argv.includes('--verbose'))
    process.stdout.write(`dist/main.js: ${(bytes / 1024).toFixed(0)} KiB\n`);
}
