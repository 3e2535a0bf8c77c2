import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * Two tiers (docs/testing.md):
 * - `unit`: pure functions, no sockets, timers, clocks or child processes; parallel across workers
 *   (`npm run test:unit`, a few seconds). test/unit/tier-rules.test.ts keeps it that way.
 * - `system`: real sockets and processes (the shim in front of the reference backend, attacks, faults,
 *   deploy artefacts), files run one at a time so that timing and memory limits measure the shim,
 *   not its neighbours (`npm run test:system`).
 * `npm test` runs both.
 */
export default defineConfig({
  test: {
    setupFiles: ['test/setup/fast-check.ts'],
    coverage: {
      provider: 'v8',
      include: ['src/**/*.ts'],
      reporter: ['text-summary'],
    },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/fuzz/**/*.test.ts'],
          pool: 'threads',
          // Pure tests share no state (checked by running them shuffled, docs/testing.md), so one module
          // graph per worker is enough: 8 s instead of 40 s on 2 cores.
          isolate: false,
          testTimeout: 20_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'system',
          include: ['test/e2e/**/*.test.ts', 'test/security/**/*.test.ts', 'test/deploy/**/*.test.ts'],
          pool: 'forks',
          fileParallelism: false,
          // One worker process for all files instead of a fresh one per file (about a second each on 2
          // cores: process start, vitest, express, pino, Nest): every test starts its own stack, process
          // or upstream and closes it, and the files pass in any order (`--sequence.shuffle`,
          // docs/testing.md); no test mocks modules or changes globals.
          isolate: false,
          env: {
            // Shim and backend child processes (a few dozen) reuse V8's compiled code of the sources
            // and node_modules: about 0.2 s less each to start (Node's module compile cache).
            NODE_COMPILE_CACHE:
              process.env.NODE_COMPILE_CACHE ??
              fileURLToPath(new URL('node_modules/.cache/node-compile-cache', import.meta.url)),
          },
          testTimeout: 30_000,
          hookTimeout: 30_000,
        },
      },
    ],
  },
});
