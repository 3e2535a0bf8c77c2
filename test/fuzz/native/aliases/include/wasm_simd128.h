/*
 * Native stand-in for clang's <wasm_simd128.h>, so that src/aliases/json-scan.c compiles for x86-64
 * under libFuzzer and the sanitizers, unchanged: the wasm_* intrinsics come from SIMDe's portable
 * translation (Debian: libsimde-dev), and the two WebAssembly memory builtins and `__heap_base` map to
 * the harness's emulation of the instance's memory (driver.c): a nesting stack that starts `HEAP_SLACK`
 * bytes before a 64 KiB page boundary and grows page by page, its unallocated pages poisoned for
 * AddressSanitizer.
 */
#ifndef FUZZ_WASM_SIMD128_SHIM_H
#define FUZZ_WASM_SIMD128_SHIM_H
#include <stddef.h>
#include <stdint.h>
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/wasm/simd128.h>

uint8_t *fuzz_heap_base(void);
size_t fuzz_memory_size(void);
size_t fuzz_memory_grow(size_t pages);
#define __heap_base (*fuzz_heap_base())
#define __builtin_wasm_memory_size(index) fuzz_memory_size()
#define __builtin_wasm_memory_grow(index, pages) fuzz_memory_grow(pages)
#endif
