/**
 * The shape of the bundle `dist/main.js` that keeps its idle memory down (scripts/build.ts,
 * docs/operations.md "Footprint"), checked on a build in memory with the build script's own options.
 */
import { createRequire } from 'node:module';
import { build } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';
import { BUILD_OPTIONS, withoutDoubleByteCodePages } from '../../scripts/build.ts';

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
    // Paths are relative to the working directory: `…/node_modules/` when node_modules is a link (the
    // alias-removal proof runs in a copy whose node_modules points back to the checkout's).
    const locales = inputs
      .filter((path) => path.includes('node_modules/zod/v4/locales/'))
      .map((path) => path.slice(path.indexOf('node_modules/')));
    expect(locales).toEqual(['node_modules/zod/v4/locales/en.js']);
  });

  it("holds iconv-lite's encodings but not its double-byte code-page tables", () => {
    const iconv = inputs.filter((path) => path.includes('node_modules/iconv-lite/encodings/'));
    expect(iconv.some((path) => path.endsWith('/internal.js'))).toBe(true);
    expect(iconv.some((path) => path.endsWith('/sbcs-data-generated.js'))).toBe(true);
    expect(iconv.filter((path) => /tables|dbcs/.test(path))).toEqual([]);
  });

  it("holds prom-client's metrics but not its Pushgateway, so nothing requires node:https at start", () => {
    expect(inputs.some((path) => path.endsWith('prom-client/lib/histogram.js'))).toBe(true);
    expect(code).toContain('prom-client Pushgateway is not in the compat-shim bundle');
    // src/proxy/upstream-agent.ts loads node:https through its own require, for an https: upstream only.
    expect(code).not.toContain('require("https")');
    expect(code).not.toContain('require("node:https")');
    expect(code).not.toContain('require("node:tls")');
  });

  it("runs signals.ts right after the Node version check, before the shim's other modules (fix 132)", () => {
    // A stop signal is held from there on (src/signals.ts); run after the rest, as a sorted import once
    // made it, a SIGTERM 0.12–0.16 s after the spawn still took Node's default action (exit 143).
    const versionCheck = code.indexOf('compat-shim needs Node');
    const signals = code.indexOf('held.splice(0)');
    const shim = code.indexOf('function createShim(');
    expect(versionCheck).toBeGreaterThan(0);
    expect(signals).toBeGreaterThan(versionCheck);
    expect(signals).toBeLessThan(shim);
  });

  it('is self-contained ESM, whitespace-minified, under 1.6 MB', () => {
    expect(code.length).toBeGreaterThan(500_000);
    expect(code.length).toBeLessThan(1_600_000);
    expect(code).not.toMatch(/^\s{2,}\S/m);
  });
});

describe('withoutDoubleByteCodePages', () => {
  it('leaves iconv-lite decoding and encoding Unicode and single-byte encodings, and refusing double-byte ones', async () => {
    const result = await build({
      stdin: {
        contents: "module.exports = require('iconv-lite');",
        resolveDir: new URL('../../', import.meta.url).pathname,
      },
      bundle: true,
      platform: 'node',
      format: 'cjs',
      write: false,
      logLevel: 'silent',
      plugins: [withoutDoubleByteCodePages],
    });
    const module = { exports: {} as Record<string, unknown> };
    new Function('require', 'module', 'exports', result.outputFiles[0]?.text ?? '')(
      createRequire(import.meta.url),
      module,
      module.exports,
    );
    const iconv = module.exports as unknown as {
      decode(buffer: Buffer, encoding: string): string;
      encode(text: string, encoding: string): Buffer;
      encodingExists(encoding: string): boolean;
    };
    expect(iconv.decode(Buffer.from('h\u00e9llo \u20ac', 'utf8'), 'utf-8')).toBe('h\u00e9llo \u20ac');
    expect(iconv.decode(Buffer.from([0xe9]), 'latin1')).toBe('\u00e9');
    expect(iconv.encode('\u00e9', 'utf-16le')).toEqual(Buffer.from([0xe9, 0]));
    expect(iconv.decode(Buffer.from([0xfe, 0xff, 0, 0x41]), 'utf-16')).toBe('A');
    expect(iconv.decode(Buffer.from([0x80]), 'windows-1252')).toBe('\u20ac');
    for (const encoding of [
      'utf8',
      'ucs2',
      'utf16',
      'utf32',
      'utf7',
      'base64',
      'hex',
      'iso-8859-1',
      'koi8-r',
    ]) {
      expect(iconv.encodingExists(encoding)).toBe(true);
    }
    for (const encoding of ['shift_jis', 'euc-jp', 'gbk', 'gb18030', 'big5', 'euc-kr']) {
      expect(iconv.encodingExists(encoding)).toBe(false);
    }
  });
});
