import { describe, expect, it } from 'vitest';
import { unsupportedNode } from '../../src/node-version.ts';

describe('unsupportedNode (package.json engines: Node 24)', () => {
  it.each(['24.0.0', '24.21.0', '25.1.0', '30.0.0'])('%s runs the shim', (version) => {
    expect(unsupportedNode(version)).toBeUndefined();
  });

  it.each(['20.20.2', '22.12.0', '23.11.1', '0.10.48'])('%s gets one line saying what to run', (version) => {
    expect(unsupportedNode(version)).toBe(
      `compat-shim needs Node 24 or later; this is Node ${version}. Run it with the pinned Node 24 (\`npx node dist/main.js\`, from the node@24 devDependency; \`npm start\` for the demo) or the container image.`,
    );
  });
});
