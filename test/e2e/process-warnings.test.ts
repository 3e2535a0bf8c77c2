/**
 * Node's process warnings as log lines (src/main.ts): a dependency's deprecation (Express's
 * `url.parse()`, DEP0169, printed by the bundle at the first absolute-form target) or any other
 * warning goes to the log as one JSON line at `warn`, never as Node's plain text among the JSON lines.
 * The warning comes from a preload that emits one on SIGUSR2, once the shim runs.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/poll.ts';
import { type ShimProcess, spawnShim } from '../helpers/spawn-shim.ts';

const EMIT_ON_SIGUSR2 =
  'data:text/javascript,process.on("SIGUSR2",()=>process.emitWarning("a test warning","DeprecationWarning","DEP_TEST"))';

let shim: ShimProcess | undefined;
afterEach(async () => {
  await shim?.stop();
  shim = undefined;
});

describe('process warnings', () => {
  it('are JSON log lines at warn with their name and code, not Node’s text on stderr', async () => {
    shim = await spawnShim({ UPSTREAM_URL: 'http://127.0.0.1:9' }, [], ['--import', EMIT_ON_SIGUSR2]);
    shim.child.kill('SIGUSR2');
    const lines = () => shim!.output().split('\n').filter(Boolean);
    await waitFor(() => lines().some((l) => l.includes('DEP_TEST')), { what: 'the warning in the output' });
    const warning = lines().find((l) => l.includes('DEP_TEST'))!;
    expect(JSON.parse(warning)).toMatchObject({
      level: 40,
      msg: 'a test warning',
      warning: { name: 'DeprecationWarning', code: 'DEP_TEST' },
    });
    expect(lines().filter((l) => !l.startsWith('{'))).toEqual([]);
  });
});
