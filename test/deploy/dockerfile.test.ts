/**
 * Static properties of the Dockerfile that the container smoke test (scripts/container-smoke.sh,
 * which needs podman) relies on, checked on every test run.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { nodeFlagsOf } from '../../bench/lib/shipped.ts';
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
    const stages = instructions.filter((l) => l.startsWith('FROM '));
    // Every stage starts from the base image or from the build stage (the reference backend's).
    expect(stages.every((l) => /^FROM (\$\{NODE_IMAGE\}|build )/.test(l))).toBe(true);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Dockerfile syntax, not a template
    expect(stages[0]).toBe('FROM ${NODE_IMAGE} AS build');
    // The production image is the last stage, the default target, and has no name to pick by mistake.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Dockerfile syntax, not a template
    expect(stages.at(-1)).toBe('FROM ${NODE_IMAGE}');
  });

  it('bundles in a build stage from the lockfile', () => {
    expect(dockerfile).toContain('npm ci ');
    expect(dockerfile).toContain('RUN node scripts/build.ts');
  });

  it('copies the bundle alone into the final stage: no node_modules, no sources, no reference backend', () => {
    expect(final('COPY')).toEqual(['COPY --from=build /app/dist/main.js ./dist/main.js']);
    const copied = finalStage.filter((l) => !l.startsWith('RUN rm -rf '));
    expect(copied.join('\n')).not.toMatch(/node_modules|reference-backend|src\//);
  });

  it("removes the base image's package managers from the final stage, and runs nothing else there", () => {
    expect(final('RUN')).toHaveLength(1);
    const removed = final('RUN')[0]!.split(/\s+/).slice(3);
    for (const path of [
      '/usr/local/lib/node_modules',
      '/usr/local/bin/npm',
      '/usr/local/bin/npx',
      '/usr/local/bin/corepack',
      '/usr/local/bin/yarn',
    ])
      expect(removed).toContain(path);
  });

  it("sets no environment variable the shim would warn about as unknown (the image's own, on every start)", () => {
    const env: Record<string, string> = {};
    for (const line of final('ENV'))
      for (const [, name, value] of line.slice(4).matchAll(/([A-Za-z_][A-Za-z0-9_]*)=(\S+)/g))
        env[name!] = value!;
    expect(Object.keys(env)).toContain('MALLOC_ARENA_MAX');
    expect(loadConfig({ ...env, UPSTREAM_URL: 'http://upstream.test' }).warnings).toEqual([]);
  });

  it('runs node dist/main.js as PID 1 as the node user, with the documented V8 flags, without --demo and without --expose-gc', () => {
    // The node user by number, so that Kubernetes' runAsNonRoot can verify it.
    expect(final('USER')).toEqual(['USER 1000:1000']);
    // The V8 flags of npm start: docs/operations.md "Memory flags", docs/reliability.md "Memory while streaming".
    expect(final('ENTRYPOINT')).toEqual([
      'ENTRYPOINT ["node", "--max-semi-space-size=2", "--scavenger-max-new-space-capacity-mb=4", "--max-old-space-size=256", "dist/main.js"]',
    ]);
    expect(instructions.join('\n')).not.toContain('--expose-gc');
    expect(instructions.join('\n')).not.toContain('--demo');
  });

  it('runs the bundle with the same Node flags as npm start (what npm run bench measures)', () => {
    const [entrypoint] = final('ENTRYPOINT');
    const argv = JSON.parse(entrypoint!.slice('ENTRYPOINT '.length)) as string[];
    const start = (JSON.parse(read('package.json')) as { scripts: { start: string } }).scripts.start;
    expect(argv.slice(1, argv.indexOf('dist/main.js'))).toEqual(nodeFlagsOf(start));
    expect(start).toMatch(/ dist\/main\.js --demo$/);
  });

  it('npm start and npm run reference-backend exec node, so that a SIGTERM to npm reaches it (npm runs scripts with sh -c, which would not pass it on)', () => {
    const { scripts } = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(scripts.start).toMatch(/&& exec node /);
    expect(scripts['reference-backend']).toMatch(/^exec node /);
  });

  it('exposes the default ports and checks /healthz on the admin port with fetch', () => {
    const config = loadConfig({});
    expect(final('EXPOSE')).toEqual([`EXPOSE ${config.port} ${config.adminPort}`]);
    const [healthcheck] = final('HEALTHCHECK');
    expect(healthcheck).toContain('fetch(');
    expect(healthcheck).toContain('/healthz');
    expect(healthcheck).toContain(`process.env.ADMIN_PORT||${config.adminPort}`);
  });

  it.each([
    ['unset (every address)', undefined, '127.0.0.1'],
    ['0.0.0.0', '0.0.0.0', '127.0.0.1'],
    ['::', '::', '127.0.0.1'],
    ['::0 (every address, another spelling)', '::0', '127.0.0.1'],
    ['0:0:0:0:0:0:0:0', '0:0:0:0:0:0:0:0', '127.0.0.1'],
    ['one address', '127.0.0.2', '127.0.0.2'],
    ['one IPv6 address', '::1', '::1'],
  ])('the health check asks the admin listener where it listens: HOST %s', async (_what, host, listenOn) => {
    // A listener bound to one address is not reachable on 127.0.0.1: the container was unhealthy.
    const [healthcheck] = final('HEALTHCHECK');
    const argv = JSON.parse(healthcheck!.slice(healthcheck!.indexOf('CMD ') + 4)) as string[];
    expect(argv.slice(0, 2)).toEqual(['node', '-e']);
    const server = http.createServer((req, res) => res.writeHead(req.url === '/healthz' ? 200 : 404).end());
    server.listen(0, listenOn);
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const env = {
        PATH: process.env.PATH,
        ADMIN_PORT: String(port),
        ...(host !== undefined && { HOST: host }),
      };
      const child = spawn(process.execPath, ['-e', argv[2]!], { env, stdio: 'ignore' });
      const [code] = (await once(child, 'exit')) as [number];
      expect(code).toBe(0);
    } finally {
      server.close();
    }
  });

  it('carries OCI labels', () => {
    for (const key of ['title', 'description', 'version', 'revision', 'created', 'base.name'])
      expect(dockerfile).toContain(`org.opencontainers.image.${key}=`);
    // A documentation label is a URL (OCI image-spec annotations), which a relative path was not.
    expect(dockerfile).not.toContain('org.opencontainers.image.documentation="docs/');
  });
});

describe('.dockerignore', () => {
  it("sends only the manifests, the lockfile, the build script, src/ and the reference backend's sources", () => {
    const lines = read('.dockerignore')
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.startsWith('#'));
    expect(lines).toEqual([
      '**',
      '!package.json',
      '!package-lock.json',
      '!scripts/build.ts',
      '!src/**',
      '!reference-backend/package.json',
      '!reference-backend/tsconfig.json',
      '!reference-backend/src/**',
    ]);
  });

  it('copies nothing of the reference backend into the production stage', () => {
    const production = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    expect(production).not.toMatch(/reference-backend/);
    expect(production).toMatch(/COPY --from=build \/app\/dist\/main\.js/);
  });
});
