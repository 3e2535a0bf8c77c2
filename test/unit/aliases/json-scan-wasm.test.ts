/**
 * The committed WebAssembly build of the JSON scanner (src/aliases/json-scan-wasm.ts) is the build of
 * the committed C source (src/aliases/json-scan.c): a change to the C file without
 * `node src/aliases/json-scan-build.ts` fails here (test/deploy/aliases-json-scan-wasm.test.ts
 * reproduces the build itself where clang is installed).
 */
import { describe, expect, it } from 'vitest';
import { sourceSha256 } from '../../../src/aliases/json-scan-build.ts';
import { JSON_SCAN_WASM, SOURCE_SHA256 } from '../../../src/aliases/json-scan-wasm.ts';

describe('json-scan-wasm.ts', () => {
  it('was built from json-scan.c as it is', () => {
    expect(SOURCE_SHA256).toBe(sourceSha256());
  });

  it('is a WebAssembly module with 128-bit SIMD that exports what json-scan.ts calls', () => {
    const bytes = Buffer.from(JSON_SCAN_WASM, 'base64');
    expect(bytes.subarray(0, 4).toString('latin1')).toBe('\0asm');
    const { Module } = (globalThis as unknown as { WebAssembly: { Module: WebAssemblyModuleApi } })
      .WebAssembly;
    const exports = Module.exports(new Module(bytes)).map((e) => e.name);
    expect(exports.sort()).toEqual(
      [
        'events_address',
        'input_address',
        'insert_lone',
        'key_address',
        'lone_address',
        'memory',
        'names_address',
        'names_loaded',
        'result_address',
        'scan',
        'stack_address',
        'staged_address',
        'state_address',
      ].sort(),
    );
  });
});

interface WebAssemblyModuleApi {
  new (bytes: Uint8Array): object;
  exports(module: object): { name: string }[];
}
