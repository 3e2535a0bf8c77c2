/**
 * Static properties of the Dockerfile that the container smoke test (scripts/container-smoke.sh,
 * which needs podman) relies on, checked on every test run.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';

const read = (name: string) => readFileSync(new URL(`../../${name}`, import.meta.url), 'utf8');
const dockerfile = read('Dockerfile');
/** Instructions with continuation lines joined, comments dropped. */
const instructions = dockerfile
  .replace(/\\\n/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '' && !l.startsWith('#'));
const finalStage = instructions.slice(instructions.findLastIndex((l) => l.startsWith('FROM ')));
const final = (keyword: string) => finalStage.filter((l) => l.startsWith(`${keyword} `));

describe('Dockerfile', () => {
  it('is multi-stage on node:24-bookworm-slim', () => {
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24-bookworm-slim$/m);
    expect(instructions.filter((l) => /^FROM \$\{NODE_IMAGE\}/.test(l))).toHaveLength(2);
  });

  it('installs production dependencies only, from the lockfile', () => {
    expect(dockerfile).toContain('npm ci --omit=dev');
    expect(dockerfile).toContain('test ! -e node_modules/node');
    // The final stage copies the installed tree and the sources; it installs nothing itself.
    expect(final('RUN')).toEqual([]);
    expect(final('COPY')).toEqual([
      'COPY --from=deps /app/node_modules ./node_modules',
      'COPY package.json ./',
      'COPY src ./src',
    ]);
  });

  it('runs node src/main.ts as PID 1 as the node user', () => {
    expect(final('USER')).toEqual(['USER node']);
    expect(final('ENTRYPOINT')).toEqual(['ENTRYPOINT ["node", "--expose-gc", "src/main.ts"]']);
  });

  it('exposes the default ports and checks /healthz on the admin port with fetch', () => {
    const config = loadConfig({});
    expect(final('EXPOSE')).toEqual([`EXPOSE ${config.port} ${config.adminPort}`]);
    const [healthcheck] = final('HEALTHCHECK');
    expect(healthcheck).toContain('fetch(');
    expect(healthcheck).toContain('/healthz');
    expect(healthcheck).toContain(`process.env.ADMIN_PORT||${config.adminPort}`);
  });

  it('carries OCI labels', () => {
    for (const key of ['title', 'description', 'version', 'revision', 'created'])
      expect(dockerfile).toContain(`org.opencontainers.image.${key}=`);
  });
});

describe('.dockerignore', () => {
  it('sends only the manifest, the lockfile and src/ to the build', () => {
    const lines = read('.dockerignore')
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.startsWith('#'));
    expect(lines).toEqual(['**', '!package.json', '!package-lock.json', '!src/**']);
  });
});
