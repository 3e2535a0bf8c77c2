/**
 * The process entry with an invalid environment (SPEC §2): one `config error:` line per problem on
 * stderr, nothing on stdout, exit code 1. System tier: it starts `node src/main.ts`.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('node src/main.ts with an invalid environment', () => {
  it('exits 1 with one stderr line per problem', () => {
    const result = spawnSync(process.execPath, ['src/main.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, PORT: 'abc', ADMIN_PORT: 'x', UPSTREAM_URL: 'http://127.0.0.1:9' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).toBe(1);
    const lines = result.stderr.split('\n').filter((l) => l !== '');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/PORT: /);
    expect(lines[1]).toMatch(/ADMIN_PORT: /);
    expect(result.stdout).toBe('');
  });
});

describe('node src/main.ts without UPSTREAM_URL (fail closed)', () => {
  it('exits 1 naming UPSTREAM_URL, unless started with --demo', () => {
    const result = spawnSync(process.execPath, ['src/main.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/^config error: UPSTREAM_URL: required/m);
    expect(result.stdout).toBe('');
  });
});
