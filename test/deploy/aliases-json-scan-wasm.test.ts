/**
 * The committed WebAssembly build of the JSON scanner is what clang builds from the committed C source,
 * byte for byte (src/aliases/json-scan-build.ts). Needs the clang the module was built with (its
 * header names it; another version emits other bytes) with wasm-ld, native or `@yowasp/clang`; skipped
 * where there is none (CI has none: test/unit/aliases/json-scan-wasm.test.ts still checks there that
 * the build matches the source's SHA-256).
 */
import { describe, expect, it } from 'vitest';
import { compile, recordedCompiler } from '../../src/aliases/json-scan-build.ts';
import { JSON_SCAN_WASM } from '../../src/aliases/json-scan-wasm.ts';

async function build(): Promise<string | undefined> {
  try {
    const { wasm, compiler } = await compile();
    return compiler === recordedCompiler() ? wasm.toString('base64') : undefined;
  } catch {
    return undefined;
  }
}

const built = await build();

describe('src/aliases/json-scan-wasm.ts', () => {
  it.skipIf(built === undefined)('is what clang builds from json-scan.c, byte for byte', () => {
    expect(built).toBe(JSON_SCAN_WASM);
  });
});
