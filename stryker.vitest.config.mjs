/**
 * The vitest configuration StrykerJS runs (stryker.config.mjs, docs/testing.md "Mutation testing"): the
 * `unit` project of vitest.config.ts alone — test/unit and test/fuzz, pure and fast — with the
 * settings it shares with the system project (the fixed fast-check seed of test/setup/fast-check.ts).
 * The Stryker vitest runner takes a config file, not a `--project`; this one reuses the unit project's
 * own entries, so the two cannot drift apart.
 */
import { defineConfig } from 'vitest/config';
import shared from './vitest.config.ts';

const { projects, coverage: _coverage, ...common } = shared.test;
const unit = projects.find((project) => project.test?.name === 'unit');
if (unit === undefined) throw new Error('vitest.config.ts has no project named "unit"');

export default defineConfig({
  test: {
    ...common,
    ...unit.test,
  },
});
