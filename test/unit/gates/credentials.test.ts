/**
 * The credential gate (SPEC §3 step 5): a non-empty API key, or every auth cookie present and non-empty.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { ShimError } from '../../../src/core/errors.ts';
import { createExchangeState, type ExchangeState, stateOf } from '../../../src/core/exchange.ts';
import {
  type CredentialRules,
  type CredentialVerdict,
  checkCredentials,
  credentialGate,
  credentialIdentity,
  parseCookies,
} from '../../../src/gates/credentials.ts';

const DEFAULT_RULES: CredentialRules = { cookies: ['authtoken', 'refreshtoken'], apiKeyHeader: 'x-api-key' };

/** A request stand-in built from raw headers, the way Node builds `headers` (joinDuplicateHeaders: false). */
function requestOf(rawHeaders: string[]): Pick<IncomingMessage, 'headers' | 'rawHeaders'> {
  const headers: Record<string, string> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    const value = rawHeaders[i + 1] as string;
    const prior = headers[name];
    headers[name] = prior === undefined ? value : `${prior}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  return { headers, rawHeaders };
}

/** Parses the `Cookie` header the way the gate does. */
function cookiesOf(req: Pick<IncomingMessage, 'headers'>): () => Record<string, unknown> {
  return () => parseCookies(req.headers.cookie as string | undefined);
}

function verdict(rawHeaders: string[], rules: CredentialRules = DEFAULT_RULES): CredentialVerdict {
  const req = requestOf(rawHeaders);
  return checkCredentials(req, cookiesOf(req), rules);
}

describe('checkCredentials', () => {
  it.each<[string, string[], CredentialVerdict | 'problem']>([
    ['an API key', ['X-API-Key', 'k-123'], 'api-key'],
    ['an API key with spaces around it', ['x-api-key', ' k '], 'api-key'],
    ['an empty API key', ['x-api-key', ''], 'problem'],
    ['an API key of spaces only', ['x-api-key', '   '], 'problem'],
    ['an API key of a tab only', ['x-api-key', '\t'], 'problem'],
    ['an API key of a no-break space only', ['x-api-key', '\u00a0'], 'problem'],
    ['a duplicated API key', ['x-api-key', 'a', 'X-Api-Key', 'b'], 'problem'],
    ['a duplicated API key, one empty', ['x-api-key', 'a', 'x-api-key', ''], 'problem'],
    ['both cookies', ['Cookie', 'authtoken=a; refreshtoken=r'], 'cookies'],
    ['both cookies among others', ['Cookie', 'theme=dark; authtoken=a; x=1; refreshtoken=r'], 'cookies'],
    ['both cookies in two Cookie headers', ['Cookie', 'authtoken=a', 'Cookie', 'refreshtoken=r'], 'cookies'],
    ['a URL-encoded cookie value', ['Cookie', 'authtoken=a%20b; refreshtoken=r'], 'cookies'],
    ['refreshtoken missing', ['Cookie', 'authtoken=a'], 'problem'],
    ['authtoken missing', ['Cookie', 'refreshtoken=r'], 'problem'],
    ['authtoken empty', ['Cookie', 'authtoken=; refreshtoken=r'], 'problem'],
    ['authtoken ""', ['Cookie', 'authtoken=""; refreshtoken=r'], 'problem'],
    // Percent-decoded as the upstream's Express reads it: spaces only are empty.
    ['authtoken percent-encoded spaces', ['Cookie', 'authtoken=%20%20; refreshtoken=r'], 'problem'],
    ['authtoken of a quoted space', ['Cookie', 'authtoken=" "; refreshtoken=r'], 'problem'],
    ['a JSON-looking authtoken (j:)', ['Cookie', 'authtoken=j:{"a":1}; refreshtoken=r'], 'cookies'],
    ['an invalid JSON-looking authtoken (j:)', ['Cookie', 'authtoken=j:{; refreshtoken=r'], 'cookies'],
    ['a signed-looking authtoken (s:)', ['Cookie', 'authtoken=s:abc.def; refreshtoken=r'], 'cookies'],
    ['a malformed percent escape', ['Cookie', 'authtoken=%E0%A4%A; refreshtoken=r'], 'cookies'],
    ['cookie names in another case', ['Cookie', 'AuthToken=a; RefreshToken=r'], 'problem'],
    ['no credentials', ['Host', 'x'], 'problem'],
    ['an empty Cookie header', ['Cookie', ''], 'problem'],
    [
      'an empty API key but both cookies',
      ['x-api-key', '', 'Cookie', 'authtoken=a; refreshtoken=r'],
      'cookies',
    ],
    [
      'a spaces-only API key but both cookies',
      ['x-api-key', ' ', 'Cookie', 'authtoken=a; refreshtoken=r'],
      'cookies',
    ],
    ['an API key and both cookies', ['x-api-key', 'k', 'Cookie', 'authtoken=a; refreshtoken=r'], 'api-key'],
    [
      'a duplicated API key even with both cookies',
      ['x-api-key', 'a', 'x-api-key', 'b', 'Cookie', 'authtoken=a; refreshtoken=r'],
      'problem',
    ],
    ['the key in another header', ['Authorization', 'Bearer k'], 'problem'],
  ])('%s', (_name, raw, expected) => {
    const result = verdict(raw);
    if (expected === 'problem') {
      expect(result).toEqual({ problem: expect.any(String) });
    } else {
      expect(result).toBe(expected);
    }
  });

  it('names the missing or empty cookies in the problem', () => {
    expect(verdict(['Cookie', 'authtoken=; theme=x'])).toEqual({
      problem:
        'Authenticate with the cookies authtoken and refreshtoken or a non-empty x-api-key header (missing or empty: authtoken, refreshtoken).',
    });
    expect(verdict(['Cookie', 'authtoken=a'])).toEqual({
      problem: expect.stringContaining('empty: refreshtoken)'),
    });
  });

  it('asks for exactly one API key when it is duplicated', () => {
    expect(verdict(['x-api-key', 'a', 'x-api-key', 'a'])).toEqual({
      problem: 'Send exactly one x-api-key header.',
    });
  });

  it('does not parse cookies when a valid API key is sent', () => {
    const req = requestOf(['x-api-key', 'k', 'Cookie', 'authtoken=a']);
    let parsed = false;
    const result = checkCredentials(
      req,
      () => {
        parsed = true;
        return {};
      },
      DEFAULT_RULES,
    );
    expect(result).toBe('api-key');
    expect(parsed).toBe(false);
  });

  it('ignores inherited properties of the cookie jar', () => {
    const req = requestOf([]);
    const jar = Object.create({ authtoken: 'a', refreshtoken: 'r' }) as Record<string, unknown>;
    expect(checkCredentials(req, () => jar, DEFAULT_RULES)).toEqual({ problem: expect.any(String) });
  });

  describe('custom names', () => {
    const rules: CredentialRules = { cookies: ['session'], apiKeyHeader: 'x-service-token' };

    it.each<[string, string[], CredentialVerdict | 'problem']>([
      ['the custom cookie', ['Cookie', 'session=s'], 'cookies'],
      ['the custom header', ['X-Service-Token', 't'], 'api-key'],
      ['the default cookies only', ['Cookie', 'authtoken=a; refreshtoken=r'], 'problem'],
      ['the default header only', ['x-api-key', 'k'], 'problem'],
      ['the custom header duplicated', ['x-service-token', 't', 'X-SERVICE-TOKEN', 'u'], 'problem'],
      ['an empty custom cookie', ['Cookie', 'session='], 'problem'],
    ])('%s', (_name, raw, expected) => {
      const result = verdict(raw, rules);
      if (expected === 'problem') expect(result).toEqual({ problem: expect.any(String) });
      else expect(result).toBe(expected);
    });

    it('names the custom cookie and header in the problem', () => {
      expect(verdict([], rules)).toEqual({
        problem:
          'Authenticate with the cookies session or a non-empty x-service-token header (missing or empty: session).',
      });
    });
  });
});

describe('parseCookies', () => {
  it.each<[string | undefined, Record<string, string>]>([
    [undefined, {}],
    ['', {}],
    ['a=1', { a: '1' }],
    [' a = 1 ;b=2;;c', { a: '1', b: '2' }],
    ['a=1; a=2', { a: '1' }],
    ['a="q v"', { a: 'q v' }],
    ['a="', { a: '' }],
    ['a=x=y', { a: 'x=y' }],
    ['a=j:{"k":[1,2]}', { a: 'j:{"k":[1,2]}' }],
    ['a=s:v.sig', { a: 's:v.sig' }],
    ['a=%41', { a: 'A' }],
    ['a=%E0%A4%A', { a: '%E0%A4%A' }],
    ['=v; b=1', { '': 'v', b: '1' }],
  ])('%j → %j', (header, jar) => {
    expect({ ...parseCookies(header) }).toEqual(jar);
  });

  it('inherits nothing: a cookie named __proto__ is dropped, constructor is a plain name', () => {
    const jar = parseCookies('__proto__=x; constructor=y');
    expect(Object.getPrototypeOf(jar)).toBeNull();
    expect(Object.hasOwn(jar, '__proto__')).toBe(false);
    expect(jar.constructor).toBe('y');
    expect(jar.toString).toBeUndefined();
    expect(parseCookies('a=1').constructor).toBeUndefined();
  });
});

describe('credentialIdentity', () => {
  const of = (raw: string[]) => credentialIdentity(requestOf(raw), DEFAULT_RULES);

  it('is the API key, else the auth cookies, else undefined', () => {
    expect(of(['x-api-key', ' k '])).toBe('key:k');
    expect(of(['x-api-key', '\u00a0', 'Cookie', 'authtoken=a; refreshtoken=r'])).toBe('cookies:a;r');
    expect(of(['x-api-key', 'k', 'Cookie', 'authtoken=a; refreshtoken=r'])).toBe('key:k');
    expect(of(['Cookie', 'authtoken=a; refreshtoken=r; theme=x'])).toBe('cookies:a;r');
    expect(of(['Cookie', 'theme=x'])).toBeUndefined();
    expect(of([])).toBeUndefined();
  });

  it('is the auth cookies present when only some are sent, and none when all are blank', () => {
    // The cookies' values, each or empty (a public path's request need not carry all of them).
    expect(of(['Cookie', 'authtoken=a'])).toBe('cookies:a;');
    expect(of(['Cookie', 'refreshtoken=r'])).toBe('cookies:;r');
    // Blank values are no credential, as for the gate (checkCredentials): `" "` is a space once unquoted.
    expect(of(['Cookie', 'authtoken=" "; refreshtoken=" "'])).toBeUndefined();
    expect(of(['x-api-key', ' ', 'Cookie', 'authtoken=%20'])).toBeUndefined();
  });

  it('tells consumers apart', () => {
    expect(of(['x-api-key', 'a'])).not.toBe(of(['x-api-key', 'b']));
    expect(of(['Cookie', 'authtoken=a; refreshtoken=r'])).not.toBe(
      of(['Cookie', 'authtoken=b; refreshtoken=r']),
    );
  });
});

describe('credentialGate', () => {
  function run(
    rawHeaders: string[],
    unchecked?: ExchangeState['unchecked'],
  ): { state: ExchangeState; error: unknown; nextCalled: boolean } {
    const { headers } = requestOf(rawHeaders);
    const req = { url: '/user/me', method: 'GET', headers, rawHeaders } as unknown as IncomingMessage;
    const state = createExchangeState(req, 0);
    state.unchecked = unchecked;
    const res = { locals: { shim: state } } as unknown as ServerResponse;
    let nextCalled = false;
    let error: unknown;
    try {
      credentialGate(DEFAULT_RULES)(req, stateOf(res)!);
      nextCalled = true;
    } catch (err) {
      error = err;
    }
    return { state, error, nextCalled };
  }

  it.each<[string[], 'api-key' | 'cookies']>([
    [['x-api-key', 'k'], 'api-key'],
    [['Cookie', 'authtoken=a; refreshtoken=r'], 'cookies'],
  ])('admits %j and records the credential kind', (raw, kind) => {
    const { state, error, nextCalled } = run(raw);
    expect(error).toBeUndefined();
    expect(nextCalled).toBe(true);
    expect(state.exchange.logFields.credential).toBe(kind);
  });

  it.each([[[]], [['x-api-key', ' ']], [['Cookie', 'authtoken=a']], [['x-api-key', 'a', 'x-api-key', 'b']]])(
    'answers 401 for %j',
    (raw) => {
      const { error, nextCalled } = run(raw);
      expect(nextCalled).toBe(false);
      expect(error).toBeInstanceOf(ShimError);
      expect((error as ShimError).statusCode).toBe(401);
      expect((error as ShimError).reason).toBe('credentials');
    },
  );

  it.each(['preflight', 'public'] as const)(
    'lets an unchecked (%s) request pass without credentials',
    (why) => {
      const { error, nextCalled } = run([], why);
      expect(error).toBeUndefined();
      expect(nextCalled).toBe(true);
    },
  );
});
