/**
 * `loadConfig` (SPEC §2): defaults, one clear line per invalid variable, frozen result.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, type Config, ConfigError, loadConfig, parseByteSize } from '../../src/config.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The variables of SPEC §2's table. */
const SPEC_VARIABLES = [
  'PORT',
  'HOST',
  'UPSTREAM_URL',
  'ADMIN_PORT',
  'CLIENT_VERSION_HEADER',
  'SERVICE_VERSION_HEADER',
  'SERVICE_VERSION',
  'MIN_CLIENT_VERSION',
  'PUBLIC_PATHS',
  'AUTH_COOKIES',
  'API_KEY_HEADER',
  'ALIASES',
  'ALIAS_SUNSET_VERSION',
  'ALIAS_DEPRECATED_AT',
  'ALIAS_SUNSET_AT',
  'ALIAS_DOCS_URL',
  'MAX_REWRITE_BODY',
  'MAX_BUFFERED_BYTES',
  'BODY_TIMEOUT_MS',
  'UPSTREAM_CA_FILE',
  'UPSTREAM_TIMEOUT_MS',
  'SHUTDOWN_TIMEOUT_MS',
  'LOG_LEVEL',
];

/** The problems `loadConfig` reports for `env`, or `[]` when it accepts it. */
function problemsOf(env: NodeJS.ProcessEnv): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
}

describe('loadConfig defaults', () => {
  const config = loadConfig({});

  it('reads exactly the variables of SPEC §2', () => {
    expect([...CONFIG_VARIABLES].sort()).toEqual([...SPEC_VARIABLES].sort());
  });

  it.each<[string, (c: Config) => unknown, unknown]>([
    ['PORT', (c) => c.port, 8080],
    ['HOST', (c) => c.host, '0.0.0.0'],
    ['UPSTREAM_URL', (c) => c.upstreamUrl, undefined],
    ['ADMIN_PORT', (c) => c.adminPort, 9090],
    ['CLIENT_VERSION_HEADER', (c) => c.clientVersionHeader, 'Service-Client-Version'],
    ['SERVICE_VERSION_HEADER', (c) => c.serviceVersionHeader, 'Service-Version'],
    ['SERVICE_VERSION', (c) => c.serviceVersion, undefined],
    ['MIN_CLIENT_VERSION', (c) => c.minClientVersion, undefined],
    ['PUBLIC_PATHS', (c) => c.publicPaths, { exact: ['/api/health'], prefixes: [] }],
    ['AUTH_COOKIES', (c) => c.authCookies, ['authtoken', 'refreshtoken']],
    ['API_KEY_HEADER', (c) => c.apiKeyHeader, 'x-api-key'],
    ['ALIASES', (c) => c.aliases.enabled, true],
    ['ALIAS_SUNSET_VERSION', (c) => c.aliases.sunsetVersion.version, '1.0.0'],
    ['ALIAS_DEPRECATED_AT', (c) => c.aliases.deprecatedAt, undefined],
    ['ALIAS_SUNSET_AT', (c) => c.aliases.sunsetAt, undefined],
    ['ALIAS_DOCS_URL', (c) => c.aliases.docsUrl, undefined],
    ['MAX_REWRITE_BODY', (c) => c.maxRewriteBody, 1024 * 1024],
    ['MAX_BUFFERED_BYTES', (c) => c.maxBufferedBytes, 64 * 1024 * 1024],
    ['BODY_TIMEOUT_MS', (c) => c.bodyTimeoutMs, 30_000],
    ['UPSTREAM_CA_FILE', (c) => c.upstreamCa, undefined],
    ['UPSTREAM_TIMEOUT_MS', (c) => c.upstreamTimeoutMs, 60_000],
    ['SHUTDOWN_TIMEOUT_MS', (c) => c.shutdownTimeoutMs, 10_000],
    ['LOG_LEVEL', (c) => c.logLevel, 'info'],
  ])('%s defaults', (_name, read, expected) => {
    expect(read(config)).toEqual(expected);
  });

  it('treats an empty variable as unset', () => {
    const c = loadConfig({
      PORT: '',
      ALIASES: '',
      MAX_REWRITE_BODY: '',
      UPSTREAM_URL: '',
      SERVICE_VERSION: '',
    });
    expect(c.port).toBe(8080);
    expect(c.aliases.enabled).toBe(true);
    expect(c.maxRewriteBody).toBe(1024 * 1024);
    expect(c.upstreamUrl).toBeUndefined();
    expect(c.serviceVersion).toBeUndefined();
  });
});

describe('loadConfig with values', () => {
  it('parses every variable', () => {
    const c = loadConfig({
      PORT: '8081',
      HOST: '127.0.0.1',
      UPSTREAM_URL: 'https://backend.internal:3000/api',
      ADMIN_PORT: '9191',
      CLIENT_VERSION_HEADER: 'X-Client-Version',
      SERVICE_VERSION_HEADER: 'X-Service-Version',
      SERVICE_VERSION: '0.60.0',
      MIN_CLIENT_VERSION: '0.50.0',
      PUBLIC_PATHS: '/api/health, /static/*,/docs/',
      AUTH_COOKIES: 'session',
      API_KEY_HEADER: 'X-API-Key',
      ALIASES: 'off',
      ALIAS_SUNSET_VERSION: '2.0.0',
      ALIAS_DEPRECATED_AT: '2026-01-01T00:00:00Z',
      ALIAS_SUNSET_AT: '2026-07-01T00:00:00Z',
      ALIAS_DOCS_URL: 'https://docs.example.com/tags',
      MAX_REWRITE_BODY: '512kb',
      MAX_BUFFERED_BYTES: '2mb',
      BODY_TIMEOUT_MS: '5000',
      UPSTREAM_TIMEOUT_MS: '1500',
      SHUTDOWN_TIMEOUT_MS: '250',
      LOG_LEVEL: 'debug',
    });
    expect(c.port).toBe(8081);
    expect(c.host).toBe('127.0.0.1');
    expect(c.upstreamUrl?.href).toBe('https://backend.internal:3000/api');
    expect(c.adminPort).toBe(9191);
    expect(c.clientVersionHeader).toBe('X-Client-Version');
    expect(c.serviceVersionHeader).toBe('X-Service-Version');
    expect(c.serviceVersion?.version).toBe('0.60.0');
    expect(c.minClientVersion?.version).toBe('0.50.0');
    expect(c.authCookies).toEqual(['session']);
    expect(c.apiKeyHeader).toBe('x-api-key');
    expect(c.aliases.enabled).toBe(false);
    expect(c.aliases.sunsetVersion.version).toBe('2.0.0');
    expect(c.aliases.deprecatedAt?.toISOString()).toBe('2026-01-01T00:00:00.000Z');
    expect(c.aliases.sunsetAt?.toISOString()).toBe('2026-07-01T00:00:00.000Z');
    expect(c.aliases.docsUrl).toBe('https://docs.example.com/tags');
    expect(c.maxRewriteBody).toBe(512 * 1024);
    expect(c.maxBufferedBytes).toBe(2 * 1024 * 1024);
    expect(c.bodyTimeoutMs).toBe(5000);
    expect(c.upstreamTimeoutMs).toBe(1500);
    expect(c.shutdownTimeoutMs).toBe(250);
    expect(c.logLevel).toBe('debug');
  });

  it('splits PUBLIC_PATHS into exact entries and prefixes (entries ending in /*)', () => {
    const c = loadConfig({ PUBLIC_PATHS: '/api/health, /static/*,/docs/ ,/assets/img/*,,' });
    expect(c.publicPaths.exact).toEqual(['/api/health', '/docs/']);
    expect(c.publicPaths.prefixes).toEqual(['/static/', '/assets/img/']);
  });

  it('accepts equal deprecation and sunset dates', () => {
    const c = loadConfig({
      ALIAS_DEPRECATED_AT: '2026-01-01T00:00:00Z',
      ALIAS_SUNSET_AT: '2026-01-01T00:00:00Z',
    });
    expect(c.aliases.sunsetAt?.getTime()).toBe(c.aliases.deprecatedAt?.getTime());
  });

  it('returns a deeply frozen config', () => {
    const c = loadConfig({ PUBLIC_PATHS: '/a,/b/*' });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.publicPaths)).toBe(true);
    expect(Object.isFrozen(c.publicPaths.exact)).toBe(true);
    expect(Object.isFrozen(c.publicPaths.prefixes)).toBe(true);
    expect(Object.isFrozen(c.authCookies)).toBe(true);
    expect(Object.isFrozen(c.aliases)).toBe(true);
    expect(() => {
      (c as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(() => (c.authCookies as string[]).push('x')).toThrow(TypeError);
    expect(c.port).toBe(8080);
  });
});

describe('loadConfig rejects invalid values with one line naming the variable', () => {
  it.each<[string, NodeJS.ProcessEnv]>([
    ['PORT', { PORT: 'abc' }],
    ['PORT', { PORT: '-1' }],
    ['PORT', { PORT: '65536' }],
    ['PORT', { PORT: '80.5' }],
    ['ADMIN_PORT', { ADMIN_PORT: 'x' }],
    ['ADMIN_PORT', { PORT: '9090' }],
    ['UPSTREAM_URL', { UPSTREAM_URL: 'ftp://x' }],
    ['UPSTREAM_URL', { UPSTREAM_URL: 'not a url' }],
    ['UPSTREAM_URL', { UPSTREAM_URL: 'http://x/?a=1' }],
    ['UPSTREAM_URL', { UPSTREAM_URL: 'http://x/#frag' }],
    ['CLIENT_VERSION_HEADER', { CLIENT_VERSION_HEADER: 'bad header' }],
    ['SERVICE_VERSION_HEADER', { SERVICE_VERSION_HEADER: 'x:y' }],
    ['API_KEY_HEADER', { API_KEY_HEADER: 'x y' }],
    ['SERVICE_VERSION', { SERVICE_VERSION: '1.0' }],
    ['MIN_CLIENT_VERSION', { MIN_CLIENT_VERSION: 'v1' }],
    ['ALIAS_SUNSET_VERSION', { ALIAS_SUNSET_VERSION: 'soon' }],
    ['PUBLIC_PATHS', { PUBLIC_PATHS: 'api/health' }],
    ['AUTH_COOKIES', { AUTH_COOKIES: ' , ' }],
    ['AUTH_COOKIES', { AUTH_COOKIES: 'a b' }],
    ['ALIASES', { ALIASES: 'maybe' }],
    ['ALIASES', { ALIASES: 'true' }],
    ['ALIAS_DEPRECATED_AT', { ALIAS_DEPRECATED_AT: 'soon' }],
    ['ALIAS_SUNSET_AT', { ALIAS_SUNSET_AT: 'later' }],
    [
      'ALIAS_SUNSET_AT',
      { ALIAS_DEPRECATED_AT: '2026-02-01T00:00:00Z', ALIAS_SUNSET_AT: '2026-01-01T00:00:00Z' },
    ],
    ['ALIAS_DOCS_URL', { ALIAS_DOCS_URL: 'not a url' }],
    ['MAX_REWRITE_BODY', { MAX_REWRITE_BODY: 'lots' }],
    ['MAX_REWRITE_BODY', { MAX_REWRITE_BODY: '0' }],
    ['MAX_BUFFERED_BYTES', { MAX_BUFFERED_BYTES: '-1mb' }],
    ['BODY_TIMEOUT_MS', { BODY_TIMEOUT_MS: '0' }],
    ['UPSTREAM_CA_FILE', { UPSTREAM_CA_FILE: '/nonexistent/ca.pem' }],
    ['UPSTREAM_TIMEOUT_MS', { UPSTREAM_TIMEOUT_MS: '0' }],
    ['UPSTREAM_TIMEOUT_MS', { UPSTREAM_TIMEOUT_MS: '10s' }],
    ['SHUTDOWN_TIMEOUT_MS', { SHUTDOWN_TIMEOUT_MS: '1.5' }],
    ['LOG_LEVEL', { LOG_LEVEL: 'loud' }],
  ])('%s in %j', (variable, env) => {
    const problems = problemsOf(env);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^${variable}(\\.\\d+)?: \\S`));
    expect(problems[0]).not.toContain('\n');
  });

  it('reports several invalid values on several lines, one per variable', () => {
    const problems = problemsOf({ PORT: 'abc', ALIASES: 'maybe', MAX_REWRITE_BODY: 'lots', LOG_LEVEL: 'x' });
    expect(problems).toHaveLength(4);
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual(
      ['ALIASES', 'LOG_LEVEL', 'MAX_REWRITE_BODY', 'PORT'].sort(),
    );
  });

  it('puts every problem in the error message, one per line', () => {
    try {
      loadConfig({ PORT: 'abc', ALIASES: 'maybe' });
      expect.unreachable();
    } catch (err) {
      const lines = (err as Error).message.split('\n');
      expect(lines).toHaveLength(3);
      expect(lines[1]).toContain('PORT');
      expect(lines[2]).toContain('ALIASES');
    }
  });

  // Regression: the cross-variable checks (sunset before deprecation, PORT equal to ADMIN_PORT) ran only
  // when every single variable parsed; SPEC §2 asks for one line per problem at once.
  it('reports a cross-variable problem together with a per-variable one', () => {
    const problems = problemsOf({
      PORT: 'abc',
      ALIAS_DEPRECATED_AT: '2026-02-01T00:00:00Z',
      ALIAS_SUNSET_AT: '2026-01-01T00:00:00Z',
    });
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual(['ALIAS_SUNSET_AT', 'PORT']);
  });
});

describe('parseByteSize', () => {
  it.each<[string, number | undefined]>([
    ['1', 1],
    ['1048576', 1048576],
    ['1b', 1],
    ['1kb', 1024],
    ['512kb', 512 * 1024],
    ['1mb', 1024 ** 2],
    ['1MB', 1024 ** 2],
    ['32mb', 32 * 1024 ** 2],
    ['1gb', 1024 ** 3],
    ['1.5kb', 1536],
    ['1 mb', 1024 ** 2],
    [' 2kb ', 2048],
    ['0', undefined],
    ['0mb', undefined],
    ['0.1', undefined],
    ['', undefined],
    ['lots', undefined],
    ['-1', undefined],
    ['-1mb', undefined],
    ['1tb', undefined],
    ['1 m b', undefined],
    ['.5mb', undefined],
    ['1e6', undefined],
    ['0x10', undefined],
    ['99999999999gb', undefined],
  ])('%j → %s', (text, bytes) => {
    expect(parseByteSize(text)).toBe(bytes);
  });
});

describe('node src/main.ts with an invalid environment', () => {
  it('exits 1 with one stderr line per problem', () => {
    const result = spawnSync(process.execPath, ['src/main.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, PORT: 'abc', ALIASES: 'maybe' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).toBe(1);
    const lines = result.stderr.split('\n').filter((l) => l !== '');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/PORT: /);
    expect(lines[1]).toMatch(/ALIASES: /);
    expect(result.stdout).toBe('');
  });
});
