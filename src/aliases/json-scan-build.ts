/**
 * Builds the JSON scanner's WebAssembly module: compiles src/aliases/json-scan.c with clang (≥ 16, with
 * wasm-ld; Debian: `apt-get install clang-16 lld-16`) and writes src/aliases/json-scan-wasm.ts, the
 * module as base64 with the SHA-256 of the C source it was built from. Both files are committed, so
 * that neither `npm ci`, `npm run build` nor the image needs a C compiler (as undici commits llhttp's
 * WebAssembly build); test/unit/aliases/json-scan-wasm.test.ts fails when the C source changed without a
 * rebuild.
 *
 *   node src/aliases/json-scan-build.ts          (CLANG=… and WASM_LD=… to choose the tools)
 *
 * Where the machine has no such clang, Node alone builds it: with the npm package `@yowasp/clang`
 * (clang and wasm-ld compiled to WebAssembly, ~100 MB, so not a devDependency) installed beside the
 * project — `npm install --no-save @yowasp/clang@21.1.4-3`, then the command above — the
 * build runs inside Node (~6 s; the same bytes every time). Another clang emits other bytes that scan
 * alike (the scanner's tests hold for both; bench/RESULTS.md, twenty-seventh session).
 *
 * Deleted with the alias layer.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The C source. */
export const SOURCE = fileURLToPath(new URL('./json-scan.c', import.meta.url));
/** The generated module. */
export const OUTPUT = fileURLToPath(new URL('./json-scan-wasm.ts', import.meta.url));

/** The functions json-scan.ts calls. */
const EXPORTS = [
  'scan',
  'input_address',
  'events_address',
  'state_address',
  'result_address',
  'names_address',
  'key_address',
  'stack_address',
  'names_loaded',
  'lone_address',
  'staged_address',
  'insert_lone',
];

/**
 * The compiler flags: 32-bit WebAssembly with 128-bit SIMD and bulk memory (both in Node since 16), no
 * libc and no entry point; a 4 KiB C stack (nothing recurses, nothing large lives on it), so that the
 * nesting stack starts near the static data.
 */
const FLAGS = [
  '--target=wasm32',
  '-O3',
  '-msimd128',
  '-mbulk-memory',
  '-nostdlib',
  '-Wall',
  '-Wextra',
  '-Werror',
  '-Wl,--no-entry',
  '-Wl,-z,stack-size=4096',
  '-Wl,--strip-all',
  ...EXPORTS.map((name) => `-Wl,--export=${name}`),
];

/**
 * SHA-256 (hex) of the C source as it is now.
 * @returns 64 lower-case hex digits.
 * @throws {Error} the file system's (e.g. `ENOENT`) when src/aliases/json-scan.c cannot be read.
 */
export function sourceSha256(): string {
  return createHash('sha256').update(readFileSync(SOURCE)).digest('hex');
}

/** The lowest LLVM major version that builds the module (wasm SIMD and bulk memory as used). */
const MINIMUM_LLVM = 16;

/** The major version in a tool's `--version` output (`Debian clang version 16.0.6 …`, `LLD 16.0.6`), or 0. */
function majorVersion(command: string): number {
  const match = /(\d+)\.\d+\.\d+/.exec(execFileSync(command, ['--version'], { encoding: 'utf8' }));
  return match === null ? 0 : Number(match[1]);
}

/**
 * The absolute path (clang's -fuse-ld wants one) of the first of `name-20` … `name-16`, then `name`,
 * on the PATH whose LLVM version is at least {@link MINIMUM_LLVM}: a machine's plain `clang` may be an
 * older one beside a versioned `clang-16` (Debian 12's `clang` is 14).
 * @throws {Error} when there is none.
 */
function llvmCommand(name: string): string {
  const candidates = ['-20', '-19', '-18', '-17', '-16', ''].map((suffix) => `${name}${suffix}`);
  for (const command of candidates) {
    for (const dir of (process.env.PATH ?? '').split(delimiter)) {
      const path = join(dir, command);
      if (existsSync(path) && majorVersion(path) >= MINIMUM_LLVM) return path;
    }
  }
  throw new Error(
    `none of ${candidates.join(', ')} on the PATH is LLVM ≥ ${MINIMUM_LLVM}: install clang-16 and lld-16, or set CLANG and WASM_LD`,
  );
}

/**
 * The compiler the committed module was built with, read back from the header {@link moduleText}
 * writes (`// <clang --version's first line>; <n> bytes.`).
 * @returns That version line, e.g. `Debian clang version 16.0.6 (15~deb12u1)`; `undefined` when the
 *   module is missing or has no such header.
 * @throws {Error} the file system's when the module exists but cannot be read (e.g. `EACCES`).
 */
export function recordedCompiler(): string | undefined {
  if (!existsSync(OUTPUT)) return undefined;
  return /^\/\/ (.*); \d+ bytes\.$/m.exec(readFileSync(OUTPUT, 'utf8'))?.[1];
}

/** The version of `@yowasp/clang` the fallback was checked with (README and the module comment). */
export const YOWASP_CLANG = '21.1.4-3';

/** The part of `@yowasp/clang`'s API the fallback uses (its lib/api.d.ts). */
interface YowaspClang {
  runClang(
    args: string[],
    files: Record<string, string | Uint8Array>,
    options: { stdout?: (bytes: Uint8Array | null) => void; fetchProgress?: () => void },
  ): Promise<Record<string, unknown>>;
}

/** `@yowasp/clang` when it is installed, else `undefined`. */
async function yowaspClang(): Promise<YowaspClang | undefined> {
  // A name in a variable: the package is optional, neither the type checker nor the bundle needs it.
  const specifier = '@yowasp/clang';
  try {
    return (await import(specifier)) as YowaspClang;
  } catch {
    return undefined;
  }
}

/**
 * The native clang and wasm-ld: `CLANG`/`WASM_LD`, else the first LLVM ≥ {@link MINIMUM_LLVM} on the
 * PATH; `undefined` when there is none and neither variable is set.
 */
function nativeTools(): { clang: string; linker: string } | undefined {
  try {
    return {
      clang: process.env.CLANG ?? llvmCommand('clang'),
      linker: process.env.WASM_LD ?? llvmCommand('wasm-ld'),
    };
  } catch (error) {
    if (process.env.CLANG !== undefined || process.env.WASM_LD !== undefined) throw error;
    return undefined;
  }
}

/**
 * Compiles the C source with {@link FLAGS}: with the native clang and wasm-ld ({@link nativeTools}),
 * else with `@yowasp/clang` when it is installed (see the module comment).
 * @returns The module's bytes and the compiler's version line (recorded in the generated module).
 * @throws {Error} when there is neither a native clang and wasm-ld ≥ 16 on the PATH (or `CLANG`/`WASM_LD`
 *   name a missing one) nor `@yowasp/clang`, or when the source does not compile (warnings are errors).
 */
export async function compile(): Promise<{ wasm: Buffer; compiler: string }> {
  const native = nativeTools();
  if (native !== undefined) return compileNative(native.clang, native.linker);
  const yowasp = await yowaspClang();
  if (yowasp === undefined) {
    throw new Error(
      `no clang and wasm-ld ≥ ${MINIMUM_LLVM} on the PATH (apt-get install clang-16 lld-16), and no @yowasp/clang (npm install --no-save @yowasp/clang@${YOWASP_CLANG})`,
    );
  }
  let version = '';
  const decoder = new TextDecoder();
  const quiet = { fetchProgress: () => {} };
  await yowasp.runClang(
    ['clang', '--version'],
    {},
    {
      ...quiet,
      stdout: (bytes) => {
        if (bytes !== null) version += decoder.decode(bytes, { stream: true });
      },
    },
  );
  const files = await yowasp.runClang(
    ['clang', ...FLAGS, '-o', 'json-scan.wasm', 'json-scan.c'],
    { 'json-scan.c': readFileSync(SOURCE) },
    quiet,
  );
  const wasm = files['json-scan.wasm'];
  if (!(wasm instanceof Uint8Array)) throw new Error('@yowasp/clang wrote no json-scan.wasm');
  return { wasm: Buffer.from(wasm), compiler: `${version.split('\n')[0]!.trim()} (@yowasp/clang)` };
}

/** {@link compile} with a clang and wasm-ld of the machine's. */
function compileNative(clang: string, linker: string): { wasm: Buffer; compiler: string } {
  const compiler = execFileSync(clang, ['--version'], { encoding: 'utf8' }).split('\n')[0]!.trim();
  const scratch = mkdtempSync(join(tmpdir(), 'json-scan-wasm-'));
  try {
    const out = join(scratch, 'json-scan.wasm');
    execFileSync(clang, [...FLAGS, `-fuse-ld=${linker}`, '-o', out, SOURCE], { stdio: 'inherit' });
    return { wasm: readFileSync(out), compiler };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * The generated module's text: a header naming the compiler and size, `SOURCE_SHA256`, and
 * `JSON_SCAN_WASM` as base64 in lines of 100 characters.
 * @param wasm The module's bytes.
 * @param compiler The compiler's version line, recorded in the header ({@link recordedCompiler}).
 * @param sha256 SHA-256 (hex) of the C source it was built from ({@link sourceSha256}).
 * @returns The TypeScript source of src/aliases/json-scan-wasm.ts.
 * @throws Nothing.
 */
export function moduleText(wasm: Buffer, compiler: string, sha256: string): string {
  const base64 = wasm.toString('base64');
  const lines: string[] = [];
  for (let k = 0; k < base64.length; k += 100) lines.push(`  '${base64.slice(k, k + 100)}',`);
  return [
    '// Generated by src/aliases/json-scan-build.ts from src/aliases/json-scan.c: do not edit.',
    `// ${compiler}; ${wasm.length} bytes.`,
    '',
    '/** SHA-256 (hex) of src/aliases/json-scan.c as built (test/unit/aliases/json-scan-wasm.test.ts). */',
    `export const SOURCE_SHA256 = '${sha256}';`,
    '',
    '/** The WebAssembly module, base64. */',
    'export const JSON_SCAN_WASM = [',
    ...lines,
    "].join('');",
    '',
  ].join('\n');
}

if (import.meta.main) {
  const { wasm, compiler } = await compile();
  writeFileSync(OUTPUT, moduleText(wasm, compiler, sourceSha256()));
  process.stdout.write(`${OUTPUT}: ${wasm.length} bytes (${compiler})\n`);
}
