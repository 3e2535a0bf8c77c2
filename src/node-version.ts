/**
 * Stops at once, with one line, on a Node older than 24 (`package.json` `engines`): the shim uses Node
 * 24's zstd, type stripping and HTTP parser behaviour, and an older Node would fail later with a stack
 * trace that names none of this (`promisify(zlib.zstdDecompress)` on Node 20). Imported first by
 * `main.ts`, so it runs before any other module.
 */

/** The oldest Node major version the shim runs on (`package.json` `engines`). */
const MIN_NODE_MAJOR = 24;

/**
 * Why a Node version cannot run the shim.
 * @param version `process.versions.node`, e.g. `20.20.2`.
 * @returns The one-line message, or `undefined` for Node 24 or later.
 * @throws Nothing.
 * @example unsupportedNode('20.20.2') // → 'compat-shim needs Node 24 or later; this is Node 20.20.2. …'
 */
export function unsupportedNode(version: string): string | undefined {
  if (Number(version.split('.')[0]) >= MIN_NODE_MAJOR) return undefined;
  return `compat-shim needs Node ${MIN_NODE_MAJOR} or later; this is Node ${version}. Run it with the pinned Node 24 (\`npx node dist/main.js\`, from the node@24 devDependency; \`npm start\` for the demo) or the container image.`;
}

const problem = unsupportedNode(process.versions.node);
if (problem !== undefined) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}
