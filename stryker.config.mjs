/**
 * StrykerJS mutation testing of the admission gates and the alias layer's request rewriters, against
 * the unit tier only (docs/testing.md "Mutation testing"). Stryker is deliberately not a
 * devDependency: it is an occasional audit, not a CI step. Run it with
 *   npm i --no-save @stryker-mutator/core@10.1.1 @stryker-mutator/vitest-runner@10.1.1 && npx stryker run
 * Reports: reports/mutation/ (HTML and JSON; git-ignored), sandboxes in .stryker-tmp/.
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: 'vitest',
  plugins: ['@stryker-mutator/vitest-runner'],
  vitest: { configFile: 'stryker.vitest.config.mjs', related: false },
  coverageAnalysis: 'perTest',
  // The machine has 2 cores shared with other work.
  concurrency: 1,
  mutate: [
    'src/gates/*.ts',
    'src/aliases/rewrite-query.ts',
    'src/aliases/rewrite-body.ts',
    'src/aliases/rename-names.ts',
    'src/aliases/route-match.ts',
    'src/aliases/version-gate.ts',
    'src/aliases/media-type.ts',
    'src/aliases/brownout.ts',
    'src/aliases/deprecation.ts',
  ],
  // Copied into each sandbox: what the unit tier reads. Not the system tier's fixtures and builds.
  ignorePatterns: ['dist', 'coverage', 'reports', 'bench/tmp', '.fuzz', 'reference-backend/dist'],
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  thresholds: { high: 90, low: 80, break: null },
  timeoutMS: 20_000,
  cleanTempDir: 'always',
};
