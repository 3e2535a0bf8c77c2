/**
 * `node:https` and `node:tls` (~3 MiB of idle RSS, docs/operations.md "Footprint") are loaded by an
 * `https:` upstream only (src/proxy/upstream-agent.ts). Checked as the image runs it: the transport
 * module bundled with the build script's own options (built-ins by `require`: an ESM `import` of
 * `node:http` alone loads `node:tls`), run in a fresh Node process, which reports what it has loaded
 * (`process.moduleLoadList`).
 */
import { execFileSync } from 'node:child_process';
import { build } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';
import { BUILD_OPTIONS } from '../../scripts/build.ts';

let bundle: string;

beforeAll(async () => {
  const entry = `
    import { createUpstreamTransport, upstreamRequest } from './src/proxy/upstream-agent.ts';
    const url = new URL(process.argv[1]);
    createUpstreamTransport(url).agent.destroy();
    upstreamRequest(url.protocol);
    console.log(JSON.stringify(process.moduleLoadList.filter((m) => /^NativeModule (https|tls)$/.test(m))));
  `;
  const { entryPoints: _, outfile: __, ...options } = BUILD_OPTIONS;
  const result = await build({
    ...options,
    stdin: { contents: entry, resolveDir: process.cwd(), sourcefile: 'entry.ts', loader: 'ts' },
    write: false,
    logLevel: 'silent',
  });
  bundle = result.outputFiles[0]?.text ?? '';
});

/** The TLS modules the bundled transport loaded for `upstream`. */
function tlsModulesLoadedFor(upstream: string): string[] {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', bundle, upstream], {
    encoding: 'utf8',
  });
  return JSON.parse(out) as string[];
}

describe('TLS modules load only for an https: upstream (the bundle)', () => {
  it('an http: upstream loads neither node:https nor node:tls', () => {
    expect(tlsModulesLoadedFor('http://upstream.internal:3000')).toEqual([]);
  });

  it('an https: upstream loads both', () => {
    expect(tlsModulesLoadedFor('https://upstream.internal').sort()).toEqual([
      'NativeModule https',
      'NativeModule tls',
    ]);
  });
});
