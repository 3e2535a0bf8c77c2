/**
 * `loadConfig` (SPEC §2): defaults, one clear line per invalid variable, frozen result; the composition
 * of the core's schema with plugins' schemas (issue 11 item 6), the unknown-variable warning and the
 * generated docs/configuration.md. Knows no plugin by name except through `PLUGINS`, so it survives the
 * removal of any plugin.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { renderConfigurationDoc } from '../../scripts/docs-config.ts';
import { PLUGINS } from '../../src/app.ts';
import {
  CONFIG_VARIABLES,
  type Config,
  ConfigError,
  configVariables,
  loadConfig,
  nearMiss,
  type PluginDefinition,
  parseByteSize,
  parseInstant,
  parsers,
  UPSTREAM_URL_REQUIRED,
  unknownVariableWarnings,
} from '../../src/config.ts';

/** A plugin with two variables and a cross-variable rule, to test the composition without a real plugin. */
const FAKE: PluginDefinition<{ low: number; high: number; label?: string }> = {
  name: 'fake',
  description: 'A test plugin.',
  config: {
    variables: {
      FAKE_LOW: { schema: parsers.count(1, 100), default: '1', meaning: 'Lower bound.' },
      FAKE_HIGH: { schema: parsers.count(10, 100), default: '10', meaning: 'Upper bound.' },
      FAKE_LABEL: { schema: parsers.optionalStr.pipe(z.string().max(5).optional()), meaning: 'A label.' },
    },
    build(values, problems) {
      const v = values as { FAKE_LOW: number; FAKE_HIGH: number; FAKE_LABEL?: string };
      if (v.FAKE_HIGH < v.FAKE_LOW) problems.push('FAKE_HIGH: must not be below FAKE_LOW');
      return { low: v.FAKE_LOW, high: v.FAKE_HIGH, ...(v.FAKE_LABEL && { label: v.FAKE_LABEL }) };
    },
  },
  create: () => ({ name: 'fake', onRequest: () => undefined }),
};

/**
 * The core's variables of SPEC §2's table (plugins declare the rest), `FORWARDED_HEADERS`: the
 * front-door case SPEC §4's "appended" leaves open (docs/operations.md "Forwarded headers"),
 * `CORS_ALLOWED_ORIGINS`: the browser clients SPEC §7's shim-made responses leave open, and
 * `REQUEST_BUFFER_BYTES`: small bodies held whole, as nginx buffers them (slow clients), and
 * `MAX_STREAMING_UPLOADS`: the upstream pool's share for bodies still arriving (slow chunked clients), and
 * `RESPONSE_HEAD_HOLD_MS`: how long a head waits for its body (event streams, long polls), and
 * `UPSTREAM_MAX_CONNECTIONS`: the pool those streams hold.
 */
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
  'CORS_ALLOWED_ORIGINS',
  'API_KEY_HEADER',
  'MAX_REWRITE_BODY',
  'REQUEST_BUFFER_BYTES',
  'MAX_STREAMING_UPLOADS',
  'MAX_BUFFERED_BYTES',
  'BODY_TIMEOUT_MS',
  'UPSTREAM_CA_FILE',
  'UPSTREAM_TIMEOUT_MS',
  'RESPONSE_HEAD_HOLD_MS',
  'UPSTREAM_IDLE_TIMEOUT_MS',
  'UPSTREAM_CONNECT_TIMEOUT_MS',
  'UPSTREAM_MAX_CONNECTIONS',
  'FORWARDED_HEADERS',
  'SHUTDOWN_TIMEOUT_MS',
  'LOG_LEVEL',
];

/** The problems `loadConfig` reports for `env`, or `[]` when it accepts it. */
function problemsOf(env: NodeJS.ProcessEnv, plugins: readonly PluginDefinition[] = []): string[] {
  try {
    loadConfig(env, plugins);
    return [];
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
}

describe('loadConfig defaults', () => {
  const config = loadConfig({});

  it('reads exactly the core variables of SPEC §2', () => {
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
    ['MAX_REWRITE_BODY', (c) => c.maxRewriteBody, 1024 * 1024],
    ['MAX_BUFFERED_BYTES', (c) => c.maxBufferedBytes, 64 * 1024 * 1024],
    ['BODY_TIMEOUT_MS', (c) => c.bodyTimeoutMs, 30_000],
    ['REQUEST_BUFFER_BYTES', (c) => c.requestBufferBytes, 64 * 1024],
    ['MAX_STREAMING_UPLOADS', (c) => c.maxStreamingUploads, 512],
    ['UPSTREAM_CA_FILE', (c) => c.upstreamCa, undefined],
    ['UPSTREAM_TIMEOUT_MS', (c) => c.upstreamTimeoutMs, 60_000],
    ['RESPONSE_HEAD_HOLD_MS', (c) => c.responseHeadHoldMs, 250],
    ['UPSTREAM_IDLE_TIMEOUT_MS', (c) => c.upstreamIdleTimeoutMs, 4_000],
    ['UPSTREAM_CONNECT_TIMEOUT_MS', (c) => c.upstreamConnectTimeoutMs, 5_000],
    ['UPSTREAM_MAX_CONNECTIONS', (c) => c.upstreamMaxConnections, 1024],
    ['FORWARDED_HEADERS', (c) => c.forwardedHeaders, 'append'],
    ['SHUTDOWN_TIMEOUT_MS', (c) => c.shutdownTimeoutMs, 10_000],
    ['LOG_LEVEL', (c) => c.logLevel, 'info'],
  ])('%s defaults', (_name, read, expected) => {
    expect(read(config)).toEqual(expected);
  });

  it('MAX_STREAMING_UPLOADS unset is half of a smaller pool; set, it must fit the pool', () => {
    expect(loadConfig({ UPSTREAM_MAX_CONNECTIONS: '2' }).maxStreamingUploads).toBe(1);
    expect(loadConfig({ UPSTREAM_MAX_CONNECTIONS: '101' }).maxStreamingUploads).toBe(51);
    expect(loadConfig({ UPSTREAM_MAX_CONNECTIONS: '4096' }).maxStreamingUploads).toBe(512);
    expect(
      loadConfig({ UPSTREAM_MAX_CONNECTIONS: '100', MAX_STREAMING_UPLOADS: '100' }).maxStreamingUploads,
    ).toBe(100);
    expect(() => loadConfig({ UPSTREAM_MAX_CONNECTIONS: '100', MAX_STREAMING_UPLOADS: '101' })).toThrow(
      /MAX_STREAMING_UPLOADS: must be at most UPSTREAM_MAX_CONNECTIONS \(100\)/,
    );
  });

  it('HOST takes addresses and names as Docker, Compose and Kubernetes give them', () => {
    for (const host of [
      '10.244.1.17',
      '::',
      '::ffff:127.0.0.1',
      'localhost',
      'my_service',
      'shim.default.svc.cluster.local.',
    ]) {
      expect(loadConfig({ HOST: host }).host).toBe(host);
    }
  });

  it('warns when PUBLIC_PATHS makes every path public', () => {
    expect(loadConfig({ PUBLIC_PATHS: '/api/health,/*' }).warnings).toContainEqual(
      expect.stringMatching(/PUBLIC_PATHS includes "\/\*": every path is public/),
    );
    expect(loadConfig({ PUBLIC_PATHS: '/api/health,/static/*' }).warnings).toEqual([]);
  });

  it('treats an empty variable as unset', () => {
    const c = loadConfig({
      PORT: '',
      MAX_REWRITE_BODY: '',
      UPSTREAM_URL: '',
      SERVICE_VERSION: '',
    });
    expect(c.port).toBe(8080);
    expect(c.maxRewriteBody).toBe(1024 * 1024);
    expect(c.upstreamUrl).toBeUndefined();
    expect(c.serviceVersion).toBeUndefined();
  });

  it.each(['optionalStr', 'semver', 'optionalHeaderName', 'date', 'url'] as const)(
    'parsers.%s reads an empty value as unset',
    (name) => {
      expect(parsers[name].parse('')).toBeUndefined();
      expect(parsers[name].parse(undefined)).toBeUndefined();
    },
  );

  it('parsers.str reads an empty value as unset: its default', () => {
    expect(parsers.str('d').parse('')).toBe('d');
    expect(parsers.str('d').parse(undefined)).toBe('d');
    expect(parsers.str('d').parse('v')).toBe('v');
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
      MAX_REWRITE_BODY: '512kb',
      MAX_BUFFERED_BYTES: '2mb',
      BODY_TIMEOUT_MS: '5000',
      REQUEST_BUFFER_BYTES: '0',
      MAX_STREAMING_UPLOADS: '1024',
      UPSTREAM_TIMEOUT_MS: '1500',
      UPSTREAM_IDLE_TIMEOUT_MS: '2000',
      FORWARDED_HEADERS: 'replace',
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
    expect(c.maxRewriteBody).toBe(512 * 1024);
    expect(c.maxBufferedBytes).toBe(2 * 1024 * 1024);
    expect(c.requestBufferBytes).toBe(0);
    expect(c.maxStreamingUploads).toBe(1024);
    expect(c.bodyTimeoutMs).toBe(5000);
    expect(c.upstreamTimeoutMs).toBe(1500);
    expect(c.upstreamIdleTimeoutMs).toBe(2000);
    expect(c.forwardedHeaders).toBe('replace');
    expect(c.shutdownTimeoutMs).toBe(250);
    expect(c.logLevel).toBe('debug');
  });

  it('splits PUBLIC_PATHS into exact entries and prefixes (entries ending in /*)', () => {
    const c = loadConfig({ PUBLIC_PATHS: '/api/health, /static/*,/docs/ ,/assets/img/*,,' });
    expect(c.publicPaths.exact).toEqual(['/api/health', '/docs/']);
    expect(c.publicPaths.prefixes).toEqual(['/static/', '/assets/img/']);
  });

  it('returns a deeply frozen config', () => {
    const c = loadConfig({ PUBLIC_PATHS: '/a,/b/*' });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.publicPaths)).toBe(true);
    expect(Object.isFrozen(c.publicPaths.exact)).toBe(true);
    expect(Object.isFrozen(c.publicPaths.prefixes)).toBe(true);
    expect(Object.isFrozen(c.authCookies)).toBe(true);
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
    ['UPSTREAM_URL', { UPSTREAM_URL: 'http://x:0' }],
    ['UPSTREAM_URL', { UPSTREAM_URL: 'https://x:00/api' }],
    ['CLIENT_VERSION_HEADER', { CLIENT_VERSION_HEADER: 'bad header' }],
    ['SERVICE_VERSION_HEADER', { SERVICE_VERSION_HEADER: 'x:y' }],
    ['HOST', { HOST: 'not a host' }],
    ['HOST', { HOST: 'http://0.0.0.0' }],
    ['HOST', { HOST: '0.0.0.0:8080' }],
    // WHATWG URLs have no IPv6 zone id: the container's health check could not reach it.
    ['HOST', { HOST: 'fe80::1%eth0' }],
    ['API_KEY_HEADER', { API_KEY_HEADER: 'x y' }],
    // Headers every request carries, or the shim's own: the credential gate would let any request in.
    ['API_KEY_HEADER', { API_KEY_HEADER: 'Service-Client-Version' }],
    ['API_KEY_HEADER', { API_KEY_HEADER: 'x-client-version', CLIENT_VERSION_HEADER: 'X-Client-Version' }],
    ['API_KEY_HEADER', { API_KEY_HEADER: 'Host' }],
    ['API_KEY_HEADER', { API_KEY_HEADER: 'cookie' }],
    ['API_KEY_HEADER', { API_KEY_HEADER: 'Content-Length' }],
    ['API_KEY_HEADER', { API_KEY_HEADER: 'x-forwarded-for' }],
    // Headers the upstream, which checks the key, never receives as sent: the gate would admit a key
    // that goes nowhere (Proxy-Authorization is hop-by-hop; Proxy is httpoxy's; Script_Name is a CGI
    // meta-variable; If-None-Match is mapped for legacy clients).
    ['API_KEY_HEADER', { API_KEY_HEADER: 'Proxy-Authorization' }],
    ['API_KEY_HEADER', { API_KEY_HEADER: 'proxy' }],
    ['API_KEY_HEADER', { API_KEY_HEADER: 'script_name' }],
    ['API_KEY_HEADER', { API_KEY_HEADER: 'If-None-Match' }],
    ['SERVICE_VERSION', { SERVICE_VERSION: '1.0' }],
    ['MIN_CLIENT_VERSION', { MIN_CLIENT_VERSION: 'v1' }],
    ['PUBLIC_PATHS', { PUBLIC_PATHS: 'api/health' }],
    ['AUTH_COOKIES', { AUTH_COOKIES: ' , ' }],
    ['AUTH_COOKIES', { AUTH_COOKIES: 'a b' }],
    ['CORS_ALLOWED_ORIGINS', { CORS_ALLOWED_ORIGINS: 'https://app.example/' }],
    ['CORS_ALLOWED_ORIGINS', { CORS_ALLOWED_ORIGINS: 'https://App.example' }],
    ['CORS_ALLOWED_ORIGINS', { CORS_ALLOWED_ORIGINS: 'https://app.example:443' }],
    ['CORS_ALLOWED_ORIGINS', { CORS_ALLOWED_ORIGINS: '*' }],
    ['CORS_ALLOWED_ORIGINS', { CORS_ALLOWED_ORIGINS: 'ftp://files.example' }],
    ['CORS_ALLOWED_ORIGINS', { CORS_ALLOWED_ORIGINS: 'app.example' }],
    ['MAX_REWRITE_BODY', { MAX_REWRITE_BODY: 'lots' }],
    ['MAX_REWRITE_BODY', { MAX_REWRITE_BODY: '0' }],
    ['MAX_BUFFERED_BYTES', { MAX_BUFFERED_BYTES: '-1mb' }],
    // Three quarters of 2 MiB hold less than a 1 MiB body as sent and decoded.
    ['MAX_BUFFERED_BYTES', { MAX_BUFFERED_BYTES: '2mb' }],
    ['MAX_BUFFERED_BYTES', { MAX_BUFFERED_BYTES: '64mb', MAX_REWRITE_BODY: '25mb' }],
    ['BODY_TIMEOUT_MS', { BODY_TIMEOUT_MS: '0' }],
    ['REQUEST_BUFFER_BYTES', { REQUEST_BUFFER_BYTES: 'small' }],
    ['REQUEST_BUFFER_BYTES', { REQUEST_BUFFER_BYTES: '-1' }],
    // Above the three quarters of the budget that request bodies may hold.
    [
      'REQUEST_BUFFER_BYTES',
      { REQUEST_BUFFER_BYTES: '4mb', MAX_BUFFERED_BYTES: '4mb', MAX_REWRITE_BODY: '1kb' },
    ],
    ['MAX_STREAMING_UPLOADS', { MAX_STREAMING_UPLOADS: '0' }],
    // More than the upstream pool's connections (UPSTREAM_MAX_CONNECTIONS, 1024 by default).
    ['MAX_STREAMING_UPLOADS', { MAX_STREAMING_UPLOADS: '1025' }],
    ['MAX_STREAMING_UPLOADS', { MAX_STREAMING_UPLOADS: '512', UPSTREAM_MAX_CONNECTIONS: '100' }], // set above the pool
    ['UPSTREAM_MAX_CONNECTIONS', { UPSTREAM_MAX_CONNECTIONS: '0' }],
    ['UPSTREAM_MAX_CONNECTIONS', { UPSTREAM_MAX_CONNECTIONS: '65536' }],
    ['UPSTREAM_MAX_CONNECTIONS', { UPSTREAM_MAX_CONNECTIONS: 'many' }],
    ['MAX_STREAMING_UPLOADS', { MAX_STREAMING_UPLOADS: 'half' }],
    ['UPSTREAM_CA_FILE', { UPSTREAM_CA_FILE: '/nonexistent/ca.pem' }],
    ['UPSTREAM_TIMEOUT_MS', { UPSTREAM_TIMEOUT_MS: '0' }],
    ['UPSTREAM_TIMEOUT_MS', { UPSTREAM_TIMEOUT_MS: '10s' }],
    ['UPSTREAM_IDLE_TIMEOUT_MS', { UPSTREAM_IDLE_TIMEOUT_MS: '0' }],
    ['FORWARDED_HEADERS', { FORWARDED_HEADERS: 'overwrite' }],
    ['FORWARDED_HEADERS', { FORWARDED_HEADERS: 'Replace' }],
    ['SHUTDOWN_TIMEOUT_MS', { SHUTDOWN_TIMEOUT_MS: '1.5' }],
    ['LOG_LEVEL', { LOG_LEVEL: 'loud' }],
  ])('%s in %j', (variable, env) => {
    const problems = problemsOf(env);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^${variable}(\\.\\d+)?: \\S`));
    expect(problems[0]).not.toContain('\n');
  });

  it('refuses an UPSTREAM_URL with a user name or password, without echoing the password (fix 64)', () => {
    // The shim never sent them (it forwards the client's credentials), and it logged the URL at start.
    for (const url of [
      'http://user:s3cret@backend:3000',
      'http://user@backend:3000',
      'http://:s3cret@b:99999',
    ]) {
      const problems = problemsOf({ UPSTREAM_URL: url });
      expect(problems).toEqual([
        expect.stringMatching(/^UPSTREAM_URL: must not contain a user name or password/),
      ]);
      expect(problems[0]).not.toContain('s3cret');
    }
    expect(loadConfig({ UPSTREAM_URL: 'http://backend:3000/api@v2' }).upstreamUrl?.host).toBe('backend:3000');
  });

  it('says what a numeric variable accepts, never in zod’s own words (fix 65)', () => {
    // SPEC §2: one clear line per problem. Out of range or beyond 2^53 read "Too big: expected int to
    // be <=9007199254740991" before.
    for (const name of [
      'PORT',
      'ADMIN_PORT',
      'BODY_TIMEOUT_MS',
      'UPSTREAM_TIMEOUT_MS',
      'SHUTDOWN_TIMEOUT_MS',
    ]) {
      for (const value of name.endsWith('PORT')
        ? ['99999', '99999999999999999999']
        : ['99999999999999999999']) {
        const problems = problemsOf({ [name]: value }).filter((p) => p.startsWith(`${name}:`));
        expect(problems, `${name}=${value}`).toHaveLength(1);
        expect(problems[0]).not.toMatch(/Too big|Too small|expected/);
      }
    }
    expect(problemsOf({ ADMIN_PORT: '65536' })).toEqual(['ADMIN_PORT: must be a port number (0 to 65535)']);
  });

  it('parsers.url gives a URI that fits a header field: as written, or percent-encoded (fix 63)', () => {
    expect(parsers.url.parse('https://docs.example.com')).toBe('https://docs.example.com');
    expect(parsers.url.parse('https://docs.example.com/a%20b?x=1#y')).toBe(
      'https://docs.example.com/a%20b?x=1#y',
    );
    // An IRI, and characters a URI cannot hold: percent-encoded (RFC 3987 §3.1), as `new URL` serializes.
    expect(parsers.url.parse('https://docs.example/€uro')).toBe('https://docs.example/%E2%82%ACuro');
    expect(parsers.url.parse('https://docs.example/a b>c')).toBe('https://docs.example/a%20b%3Ec');
  });

  it('reads CORS_ALLOWED_ORIGINS as a list of origins, none when unset', () => {
    expect(loadConfig({}).corsAllowedOrigins).toEqual([]);
    expect(
      loadConfig({ CORS_ALLOWED_ORIGINS: 'https://app.example, http://localhost:5173,http://[::1]:8080' })
        .corsAllowedOrigins,
    ).toEqual(['https://app.example', 'http://localhost:5173', 'http://[::1]:8080']);
  });

  it.each([
    [{ BODY_TIMEOUT_MS: '0' }, 'BODY_TIMEOUT_MS: must be at least 1 ms'],
    [
      { UPSTREAM_TIMEOUT_MS: '2147483648' },
      'UPSTREAM_TIMEOUT_MS: must be at most 2147483647 ms (about 24.8 days)',
    ],
  ])('says what a millisecond variable accepts: %j', (env, problem) => {
    expect(problemsOf(env)).toEqual([problem]);
  });

  it('reports several invalid values on several lines, one per variable', () => {
    const problems = problemsOf({ PORT: 'abc', ADMIN_PORT: 'x', MAX_REWRITE_BODY: 'lots', LOG_LEVEL: 'x' });
    expect(problems).toHaveLength(4);
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual(
      ['ADMIN_PORT', 'LOG_LEVEL', 'MAX_REWRITE_BODY', 'PORT'].sort(),
    );
  });

  it('puts every problem in the error message, one per line', () => {
    try {
      loadConfig({ PORT: 'abc', ADMIN_PORT: 'x' });
      expect.unreachable();
    } catch (err) {
      const lines = (err as Error).message.split('\n');
      expect(lines).toHaveLength(3);
      expect(lines[1]).toContain('PORT');
      expect(lines[2]).toContain('ADMIN_PORT');
    }
  });

  // Regression: the cross-variable checks (a plugin's, PORT equal to ADMIN_PORT) ran only when every
  // single variable parsed; SPEC §2 asks for one line per problem at once.
  it('reports a plugin cross-variable problem together with a core per-variable one', () => {
    const problems = problemsOf({ PORT: 'abc', FAKE_LOW: '5', FAKE_HIGH: '1' }, [FAKE]);
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual(['FAKE_HIGH', 'PORT']);
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

describe('parseInstant: the one ISO 8601 instant parser', () => {
  it.each<[string, number | undefined, number | undefined]>([
    // text, with allowDate, without
    ['2027-01-12', Date.UTC(2027, 0, 12), undefined],
    ['2027-01-12T14:00Z', Date.UTC(2027, 0, 12, 14), Date.UTC(2027, 0, 12, 14)],
    ['2027-01-12T14:00:00.1234Z', Date.UTC(2027, 0, 12, 14, 0, 0, 123), Date.UTC(2027, 0, 12, 14, 0, 0, 123)],
    [
      '2027-01-12T15:00:30.5+01:00',
      Date.UTC(2027, 0, 12, 14, 0, 30, 500),
      Date.UTC(2027, 0, 12, 14, 0, 30, 500),
    ],
    ['2027-01-12t14:00z', Date.UTC(2027, 0, 12, 14), Date.UTC(2027, 0, 12, 14)],
    // A date-time without its zone would be read in the host's TZ.
    ['2027-01-12T14:00', undefined, undefined],
    ['2027-01-12T14:00:60Z', undefined, undefined],
    // A day the month does not have: Date.parse rolled it over (2026-02-30 was 2 March).
    ['2026-02-30', undefined, undefined],
    ['2026-02-29T00:00Z', undefined, undefined],
    ['2026-04-31T12:00Z', undefined, undefined],
    ['2026-02-00', undefined, undefined],
    ['2024-02-29', Date.UTC(2024, 1, 29), undefined],
    // Years 0–99 as written (Date.UTC would read 0000 as 1900, not a leap year).
    ['0000-02-29', Date.parse('0000-02-29'), undefined],
    ['0100-02-29', undefined, undefined],
    // The date as written, not as UTC (2024-03-01T04:30Z).
    ['2024-02-29T23:30-05:00', Date.UTC(2024, 2, 1, 4, 30), Date.UTC(2024, 2, 1, 4, 30)],
    ['2024-02-29T12:00+02:00', Date.UTC(2024, 1, 29, 10), Date.UTC(2024, 1, 29, 10)],
    ['2026-12-31T23:59Z', Date.UTC(2026, 11, 31, 23, 59), Date.UTC(2026, 11, 31, 23, 59)],
    ['Jan 12 2027', undefined, undefined],
    ['', undefined, undefined],
  ])('%j', (text, withDate, withoutDate) => {
    expect(parseInstant(text, { allowDate: true })).toBe(withDate);
    expect(parseInstant(text, { allowDate: false })).toBe(withoutDate);
  });
});

describe('UPSTREAM_URL required outside demo mode (fail closed)', () => {
  const REQUIRED = /^UPSTREAM_URL: required/;

  it('is a problem when required and unset or empty', () => {
    for (const env of [{}, { UPSTREAM_URL: '' }]) {
      expect(() => loadConfig(env, [], { requireUpstream: true })).toThrow(ConfigError);
      try {
        loadConfig(env, [], { requireUpstream: true });
      } catch (err) {
        expect((err as ConfigError).problems).toEqual([UPSTREAM_URL_REQUIRED]);
      }
    }
  });

  it('is reported with the other problems, once, and not on top of an invalid value', () => {
    try {
      loadConfig({ PORT: 'abc' }, [], { requireUpstream: true });
      expect.unreachable();
    } catch (err) {
      expect((err as ConfigError).problems).toEqual([
        expect.stringMatching(/^PORT: /),
        expect.stringMatching(REQUIRED),
      ]);
    }
    try {
      loadConfig({ UPSTREAM_URL: 'ftp://x' }, [], { requireUpstream: true });
      expect.unreachable();
    } catch (err) {
      expect((err as ConfigError).problems).toEqual([expect.stringMatching(/^UPSTREAM_URL: must be/)]);
    }
  });

  it('is no problem when set, or when not required (demo mode, defaults)', () => {
    expect(
      loadConfig({ UPSTREAM_URL: 'http://b:3000' }, [], { requireUpstream: true }).upstreamUrl?.href,
    ).toBe('http://b:3000/');
    expect(loadConfig({}).upstreamUrl).toBeUndefined();
  });
});

describe("loadConfig composes the plugins' schemas (issue 11 item 6)", () => {
  it("parses a plugin's variables into Config.plugins[name], defaults included", () => {
    expect(loadConfig({}, [FAKE]).plugins).toEqual({ fake: { low: 1, high: 10 } });
    expect(loadConfig({ FAKE_LOW: '3', FAKE_LABEL: 'abc' }, [FAKE]).plugins).toEqual({
      fake: { low: 3, high: 10, label: 'abc' },
    });
  });

  it('without the plugin, its variables are not read: no settings, and they are named in a warning', () => {
    const c = loadConfig({ FAKE_LOW: 'not even a number', FAKE_HIGH: '1' });
    expect(c.plugins).toEqual({});
    expect(c.warnings).toHaveLength(1);
    expect(c.warnings[0]).toContain('FAKE_HIGH, FAKE_LOW');
  });

  it("reports a plugin's invalid value with one line naming its variable", () => {
    expect(problemsOf({ FAKE_LOW: 'x' }, [FAKE])).toEqual([expect.stringMatching(/^FAKE_LOW: \S/)]);
    expect(problemsOf({ FAKE_LABEL: 'toolong' }, [FAKE])).toEqual([expect.stringMatching(/^FAKE_LABEL: \S/)]);
  });

  it("lists the core variables first, then each plugin's", () => {
    expect(configVariables([FAKE])).toEqual([...CONFIG_VARIABLES, 'FAKE_LOW', 'FAKE_HIGH', 'FAKE_LABEL']);
  });

  it('refuses two schemas that declare the same variable', () => {
    const clash: PluginDefinition = {
      ...FAKE,
      name: 'clash',
      config: { ...FAKE.config, variables: { PORT: FAKE.config.variables.FAKE_LOW! } },
    };
    expect(() => loadConfig({}, [clash])).toThrow(/PORT is declared twice/);
  });

  it('freezes the plugin settings', () => {
    expect(Object.isFrozen(loadConfig({}, [FAKE]).plugins.fake)).toBe(true);
  });
});

describe('unknownVariableWarnings', () => {
  it('names upper-snake variables nothing reads, sorted, in one line', () => {
    const env = { OLD_PLUGIN_SETTING: 'x', PORT: '1', ZZ: 'y', lower_case: 'z' };
    expect(unknownVariableWarnings(env, ['PORT'])).toEqual([
      expect.stringContaining(': OLD_PLUGIN_SETTING, ZZ;'),
    ]);
  });

  it('names the variable a misspelt one likely meant (at most two edits, five characters or more)', () => {
    const known = configVariables([FAKE]);
    const env = { ALIASE: 'off', LOG_LEVL: 'debug', UPSTRAEM_URL: 'http://x', ZZ: 'y', PORTX: '1' };
    expect(unknownVariableWarnings(env, [...known, 'ALIASES'])).toEqual([
      expect.stringContaining(
        ': ALIASE (did you mean ALIASES?), LOG_LEVL (did you mean LOG_LEVEL?), PORTX (did you mean PORT?), UPSTRAEM_URL (did you mean UPSTREAM_URL?), ZZ;',
      ),
    ]);
    expect(nearMiss('FOO_BAR_BAZ', known)).toBeUndefined();
    expect(nearMiss('PORTS', ['PORT'])).toBe('PORT');
    expect(nearMiss('POR', ['PORT'])).toBeUndefined();
  });

  it('a configuration that fails names the near misses among its errors (UPSTREAM_URL required, UPSTREM_URL set)', () => {
    let problems: string[] = [];
    try {
      loadConfig({ UPSTREM_URL: 'http://127.0.0.1:3000' }, [], { requireUpstream: true });
    } catch (err) {
      problems = (err as ConfigError).problems;
    }
    expect(problems).toEqual([
      expect.stringMatching(/^UPSTREAM_URL: required/),
      'UPSTREM_URL: not read by this shim; did you mean UPSTREAM_URL?',
    ]);
  });

  it('ignores platform variables (shell, Node/npm, Kubernetes service links, CI)', () => {
    const env = {
      PATH: '/bin',
      HOME: '/root',
      HOSTNAME: 'pod-1',
      NODE_ENV: 'production',
      NODE_OPTIONS: '',
      KUBERNETES_SERVICE_HOST: '10.0.0.1',
      BACKEND_SERVICE_HOST: '10.0.0.2',
      BACKEND_SERVICE_PORT_HTTP: '80',
      BACKEND_PORT: 'tcp://10.0.0.2:80',
      BACKEND_PORT_80_TCP_ADDR: '10.0.0.2',
      LC_ALL: 'C',
      CI: 'true',
      GITHUB_SHA: 'abc',
      npm_config_cache: '/tmp',
      // Proxies, CA bundles and toolchains of base images
      HTTPS_PROXY: 'http://proxy:3128',
      NO_PROXY: 'localhost',
      SSL_CERT_FILE: '/etc/ssl/certs/ca-certificates.crt',
      SSL_CERT_DIR: '/etc/ssl/certs',
      CURL_CA_BUNDLE: '/etc/ssl/certs/ca-certificates.crt',
      REQUESTS_CA_BUNDLE: '/etc/ssl/certs/ca-certificates.crt',
      DEBIAN_FRONTEND: 'noninteractive',
      PYTHON_VERSION: '3.11',
      PYENV_ROOT: '/root/.pyenv',
      // Seen on a developer machine (the docs audit of the thirteenth session)
      PYTHONUNBUFFERED: '1',
      // Set by npm for `npm start`, and by Google Cloud SDK images
      NODE: '/usr/local/bin/node',
      COLOR: '0',
      CLOUD_SDK_VERSION: '500.0.0',
      PYTHONDONTWRITEBYTECODE: '1',
      RUSTUP_AUTO_INSTALL: '0',
      GIT_SSL_CAINFO: '/etc/ssl/certs/ca-certificates.crt',
      NIX_SSL_CERT_FILE: '/etc/ssl/certs/ca-certificates.crt',
      HTTPLIB2_CA_CERTS: '/etc/ssl/certs/ca-certificates.crt',
      GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: '/etc/ssl/certs/ca-certificates.crt',
      CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE: '/etc/ssl/certs/ca-certificates.crt',
    };
    expect(unknownVariableWarnings(env, [])).toEqual([]);
  });

  it('is empty for a clean environment', () => {
    expect(loadConfig({ PORT: '8081' }).warnings).toEqual([]);
  });
});

describe('docs/configuration.md', () => {
  const committed = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');

  it('is the page generated from the composed schema (run `npm run docs:config` when this fails)', () => {
    expect(committed).toBe(renderConfigurationDoc(PLUGINS));
  });

  it('would notice a change of the schema', () => {
    expect(renderConfigurationDoc([...PLUGINS, FAKE])).not.toBe(committed);
    expect(renderConfigurationDoc([FAKE])).toContain('| `FAKE_LOW` | `1` | Lower bound. |');
  });

  it('shows defaults that give the same configuration as leaving the variable unset', () => {
    const implicit = loadConfig({}, PLUGINS);
    const rows = [...committed.matchAll(/^\| `([A-Z][A-Z0-9_]*)` \| ([^|]*?) \|/gm)].map(
      (m) => [m[1]!, m[2]!] as const,
    );
    expect(rows.map(([name]) => name)).toEqual(configVariables(PLUGINS));
    for (const [name, fallback] of rows) {
      const literal = /^`([^`]*)`$/.exec(fallback);
      const value = fallback === 'unset' ? '' : literal?.[1];
      expect(value, `${name}: default must be \`value\` or unset`).toBeDefined();
      expect(loadConfig({ [name]: value }, PLUGINS), name).toEqual(implicit);
    }
  });
});
