import { describe, expect, it } from 'vitest';
import { nodeFlagsOf } from '../../../bench/lib/shipped.ts';

describe('nodeFlagsOf', () => {
  it('reads the flags between node and dist/main.js', () => {
    expect(nodeFlagsOf('npm run build --silent && node --max-semi-space-size=2 dist/main.js --demo')).toEqual(
      ['--max-semi-space-size=2'],
    );
    expect(nodeFlagsOf('npm run build --silent && node -a --b=1 dist/main.js')).toEqual(['-a', '--b=1']);
  });

  it('returns no flags for a plain node dist/main.js', () => {
    expect(nodeFlagsOf('npm run build --silent && node dist/main.js --demo')).toEqual([]);
  });

  it('throws when the script does not run the bundle', () => {
    expect(() => nodeFlagsOf('node src/main.ts')).toThrow(/dist\/main\.js/);
    expect(() => nodeFlagsOf('')).toThrow();
  });
});
