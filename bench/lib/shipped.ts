/**
 * How the shim ships: the Node flags of `npm start` (package.json `scripts.start`, the same as the
 * image's ENTRYPOINT — test/deploy/dockerfile.test.ts checks that they agree), so that the benchmark
 * runs the bundle exactly as `npm start` and the image do.
 */
import { readFileSync } from 'node:fs';

/**
 * The Node flags before `dist/main.js` in an `npm start` script.
 * @param start e.g. `npm run build --silent && exec node --max-semi-space-size=2 dist/main.js --demo`
 * @returns e.g. `['--max-semi-space-size=2']`; `[]` without flags.
 * @throws {Error} when the script does not run `node … dist/main.js`.
 */
export function nodeFlagsOf(start: string): string[] {
  const m = /(?:^|&&\s*|\s)node((?:\s+-\S+)*)\s+dist\/main\.js\b/.exec(start);
  if (m === null) throw new Error(`npm start does not run node … dist/main.js: ${start}`);
  return m[1]!.split(/\s+/).filter((flag) => flag !== '');
}

/** The Node flags of this checkout's `npm start` (read from package.json in the working directory). */
export function shippedNodeFlags(): string[] {
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts?: { start?: string } };
  return nodeFlagsOf(pkg.scripts?.start ?? '');
}
