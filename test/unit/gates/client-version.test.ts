/**
 * The client-version gate (SPEC §3 step 4, §6): strict SemVer 2.0 plus the Python dev form.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import fc from 'fast-check';
import { compare, parse, type SemVer } from 'semver';
import { describe, expect, it } from 'vitest';
import { ShimError } from '../../../src/core/errors.ts';
import { createExchangeState, type ExchangeState, stateOf } from '../../../src/core/exchange.ts';
import {
  clientVersionGate,
  isBelow,
  KNOWN_VERSIONS_LIMIT,
  outdatedClientWarning,
  parseClientVersion,
} from '../../../src/gates/client-version.ts';
import { anyCodePoint } from '../../fuzz/code-points.ts';

const v = (text: string): SemVer => {
  const parsed = parse(text);
  if (!parsed) throw new Error(`bad test version ${text}`);
  return parsed;
};

/**
 * A gate on `Service-Client-Version` with `minimum`, and a function that runs one request carrying
 * `value` through it and returns the version it recorded (throws the gate's {@link ShimError}).
 */
function admitter(
  minimum: SemVer | undefined,
): (value: string) => ExchangeState['exchange']['clientVersion'] {
  const gate = clientVersionGate({
    header: 'service-client-version',
    headerDisplayName: 'Service-Client-Version',
    minimum,
  });
  return (value) => {
    const req = {
      url: '/',
      method: 'GET',
      headers: { 'service-client-version': value },
      rawHeaders: ['Service-Client-Version', value],
    };
    const state = createExchangeState(req as unknown as IncomingMessage, 0);
    gate(req as unknown as IncomingMessage, state);
    return state.exchange.clientVersion;
  };
}

describe('parseClientVersion', () => {
  it.each<[string, string, (string | number)[], string[]]>([
    ['0.59.0', '0.59.0', [], []],
    ['0.59.0-rc.1', '0.59.0-rc.1', ['rc', 1], []],
    ['0.59.0+build', '0.59.0', [], ['build']],
    ['0.59.0-rc.1+build.5', '0.59.0-rc.1', ['rc', 1], ['build', '5']],
    ['1.0.0-rc.1', '1.0.0-rc.1', ['rc', 1], []],
    ['1.0.0-alpha-1.0a', '1.0.0-alpha-1.0a', ['alpha-1', '0a'], []],
    ['0.0.0', '0.0.0', [], []],
    ['10.20.30', '10.20.30', [], []],
    ['0.59.0.dev20260101', '0.59.0-dev.20260101', ['dev', 20260101], []],
    ['0.59.0.dev0', '0.59.0-dev.0', ['dev', 0], []],
    ['10.20.30.dev7', '10.20.30-dev.7', ['dev', 7], []],
  ])('accepts %j as %s', (text, version, prerelease, build) => {
    const parsed = parseClientVersion(text);
    expect(parsed?.version).toBe(version);
    expect(parsed?.prerelease).toEqual(prerelease);
    expect(parsed?.build).toEqual(build);
  });

  it.each<[string, string | string[] | undefined]>([
    ['absent', undefined],
    ['empty', ''],
    ['v prefix', 'v0.59.0'],
    ['= prefix', '=0.59.0'],
    ['two parts', '0.59'],
    ['one part', '1'],
    ['four numeric parts', '0.59.0.1'],
    ['leading space', ' 0.59.0'],
    ['trailing space', '0.59.0 '],
    ['trailing newline', '0.59.0\n'],
    ['leading zero major', '01.2.3'],
    ['leading zero minor', '1.02.3'],
    ['leading zero patch', '1.2.03'],
    ['leading zero numeric prerelease', '1.2.3-01'],
    ['empty prerelease', '1.2.3-'],
    ['empty prerelease identifier', '1.2.3-rc..1'],
    ['empty build', '1.2.3+'],
    ['wildcard', '1.2.x'],
    ['range', '^1.2.3'],
    ['negative', '-1.2.3'],
    ['dev form without number', '0.59.0.dev'],
    ['dev form with v', 'v0.59.0.dev1'],
    ['dev form twice', '0.59.0.dev1.dev2'],
    ['dev form with negative number', '0.59.0.dev-1'],
    ['major above MAX_SAFE_INTEGER', '9007199254740993.0.0'],
    ['longer than 256 characters', `1.0.0-${'a'.repeat(260)}`],
    ['array (repeated header)', ['0.59.0', '0.59.0']],
    ['array of one dev form', ['0.59.0.dev1']],
    ['empty array', []],
  ])('rejects %s (%j)', (_name, value) => {
    expect(parseClientVersion(value)).toBeUndefined();
  });

  it('accepts up to 256 characters (the bound before any expression, docs/reliability.md)', () => {
    const of = (length: number) => `1.0.0-${'a'.repeat(length - '1.0.0-'.length)}`;
    expect(parseClientVersion(of(256))?.version).toBe(of(256));
    expect(parseClientVersion(of(257))).toBeUndefined();
  });

  describe('properties', () => {
    /** Semver.org's reference regex for SemVer 2.0.0 (https://semver.org/#is-there-a-suggested-regular-expression-regex-to-check-a-semver-string). */
    const SEMVER_ORG =
      /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

    /** The reference: semver.org's grammar, numbers within semver's safe range, the dev form mapped. */
    function reference(text: string): string | undefined {
      const dev = /^(\d+\.\d+\.\d+)\.dev(\d+)$/.exec(text);
      const candidate = dev ? `${dev[1]}-dev.${dev[2]}` : text;
      if (!SEMVER_ORG.test(candidate)) return undefined;
      const [major, minor, patch] = candidate.split(/[-+]/)[0]!.split('.').map(Number);
      if ([major, minor, patch].some((n) => n === undefined || n > Number.MAX_SAFE_INTEGER)) return undefined;
      return candidate.replace(/\+.*$/, '');
    }

    const numeric = fc.oneof(
      fc.nat(1000).map(String),
      fc.constantFrom('0', '00', '01', '007', '9007199254740991', '9007199254740992', '99999999999999999'),
    );
    const identifier = fc.oneof(
      numeric,
      fc.string({ unit: fc.constantFrom(...'abzAZ09-'.split('')), minLength: 0, maxLength: 6 }),
    );
    const generated = fc
      .record({
        prefix: fc.constantFrom('', '', '', 'v', '=', ' ', '\t'),
        core: fc.array(numeric, { minLength: 1, maxLength: 4 }),
        pre: fc.option(fc.array(identifier, { minLength: 0, maxLength: 3 })),
        build: fc.option(fc.array(identifier, { minLength: 0, maxLength: 3 })),
        dev: fc.option(numeric),
        suffix: fc.constantFrom('', '', '', ' ', '\n'),
      })
      .map(({ prefix, core, pre, build, dev, suffix }) => {
        let text = prefix + core.join('.');
        if (pre) text += `-${pre.join('.')}`;
        if (build) text += `+${build.join('.')}`;
        if (dev !== null) text += `.dev${dev}`;
        return text + suffix;
      });

    it('agrees with the semver.org grammar on generated version-like strings', () => {
      fc.assert(
        fc.property(generated, (text) => {
          expect(parseClientVersion(text)?.version, text).toBe(reference(text));
        }),
        { numRuns: 3000 },
      );
    });

    it('agrees with the reference on arbitrary strings over the version alphabet', () => {
      fc.assert(
        fc.property(
          fc.string({ unit: fc.constantFrom(...'0123.-+vdea '.split('')), maxLength: 16 }),
          (text) => {
            expect(parseClientVersion(text)?.version, text).toBe(reference(text));
          },
        ),
        { numRuns: 3000 },
      );
    });

    it('orders like semver for every accepted version', () => {
      fc.assert(
        fc.property(generated, generated, (a, b) => {
          const pa = parseClientVersion(a);
          const pb = parseClientVersion(b);
          if (!pa || !pb) return;
          const expected = compare(v(reference(a)!), v(reference(b)!));
          expect(compare(pa, pb)).toBe(expected);
          expect(isBelow(pa, pb)).toBe(expected < 0);
        }),
        { numRuns: 1000 },
      );
    });

    it('never throws on arbitrary strings', () => {
      fc.assert(
        fc.property(fc.string({ unit: anyCodePoint, maxLength: 300 }), (text) => {
          parseClientVersion(text);
        }),
      );
    });
  });
});

describe('isBelow', () => {
  it.each<[string, string | undefined, boolean]>([
    ['0.59.0', undefined, false],
    ['0.59.0', '0.60.0', true],
    ['0.60.0', '0.60.0', false],
    ['0.61.0', '0.60.0', false],
    ['1.0.0-rc.1', '1.0.0', true],
    ['1.0.0-alpha', '1.0.0-beta', true],
    ['1.0.0-rc.2', '1.0.0-rc.10', true],
    ['1.0.0', '1.0.0-rc.1', false],
    ['0.59.0-dev.20260101', '0.59.0', true],
    ['0.59.0+build', '0.59.0', false],
    ['0.9.0', '0.10.0', true],
  ])('%s below %s → %s', (version, minimum, expected) => {
    expect(isBelow(v(version), minimum === undefined ? undefined : v(minimum))).toBe(expected);
  });
});

describe('outdatedClientWarning', () => {
  it('warns a client older than the service', () => {
    expect(outdatedClientWarning(v('0.59.0'), v('0.60.0'))).toBe(
      '299 - "client 0.59.0 is older than service 0.60.0; please upgrade"',
    );
  });

  it('warns a prerelease of the service version', () => {
    expect(outdatedClientWarning(v('0.60.0-rc.1'), v('0.60.0'))).toBe(
      '299 - "client 0.60.0-rc.1 is older than service 0.60.0; please upgrade"',
    );
  });

  it.each<[string | undefined, string | undefined]>([
    ['0.60.0', '0.60.0'],
    ['0.60.0+build', '0.60.0'],
    ['0.61.0', '0.60.0'],
    ['1.0.0', '0.60.0'],
    [undefined, '0.60.0'],
    ['0.59.0', undefined],
    [undefined, undefined],
  ])('is undefined for client %s and service %s', (client, service) => {
    expect(
      outdatedClientWarning(client ? v(client) : undefined, service ? v(service) : undefined),
    ).toBeUndefined();
  });
});

describe('clientVersionGate', () => {
  function run(
    headers: Record<string, string | string[]>,
    minimum?: string,
    unchecked?: ExchangeState['unchecked'],
  ): { state: ExchangeState; error: unknown; nextCalled: boolean } {
    const rawHeaders = Object.entries(headers).flatMap(([name, value]) =>
      (Array.isArray(value) ? value : [value]).flatMap((one) => [name, one]),
    );
    const joined = Object.fromEntries(
      Object.entries(headers).map(([name, value]) => [name, Array.isArray(value) ? value.join(', ') : value]),
    );
    const req = {
      url: '/missions',
      method: 'GET',
      headers: joined,
      rawHeaders,
    } as unknown as IncomingMessage;
    const state = createExchangeState(req, 0);
    state.unchecked = unchecked;
    const res = { locals: { shim: state } } as unknown as ServerResponse;
    const gate = clientVersionGate({
      header: 'service-client-version',
      headerDisplayName: 'Service-Client-Version',
      minimum: minimum === undefined ? undefined : v(minimum),
    });
    let nextCalled = false;
    let error: unknown;
    try {
      gate(req, stateOf(res)!);
      nextCalled = true;
    } catch (err) {
      error = err;
    }
    return { state, error, nextCalled };
  }

  it('stores the parsed version and continues', () => {
    const { state, error, nextCalled } = run({ 'service-client-version': '0.59.0.dev20260101' });
    expect(error).toBeUndefined();
    expect(nextCalled).toBe(true);
    expect(state.exchange.clientVersion?.version).toBe('0.59.0-dev.20260101');
  });

  it.each<[string, Record<string, string>, string | undefined]>([
    ['missing', {}, undefined],
    ['empty', { 'service-client-version': '' }, undefined],
    ['malformed', { 'service-client-version': 'v0.59.0' }, undefined],
    ['below the minimum', { 'service-client-version': '0.49.9' }, '0.50.0'],
    ['a prerelease of the minimum', { 'service-client-version': '0.50.0-rc.1' }, '0.50.0'],
  ])('answers 426 when the version is %s', (_name, headers, minimum) => {
    const { error, nextCalled } = run(headers, minimum);
    expect(nextCalled).toBe(false);
    expect(error).toBeInstanceOf(ShimError);
    expect((error as ShimError).statusCode).toBe(426);
    expect((error as ShimError).message).toMatch(/Service-Client-Version|0\.50\.0/);
  });

  it.each<[string, Record<string, string | string[]>, RegExp]>([
    ['missing', {}, /^Send the header Service-Client-Version with/],
    ['empty', { 'service-client-version': '' }, /^Send the header Service-Client-Version with/],
    [
      'named by Connection',
      { 'service-client-version': '0.59.0', connection: 'Service-Client-Version' },
      /^Send the header Service-Client-Version with/,
    ],
    [
      'sent twice',
      { 'service-client-version': ['0.59.0', '1.0.0'] },
      /^Send exactly one Service-Client-Version header\.$/,
    ],
    [
      'prefixed',
      { 'service-client-version': 'v0.59.0' },
      /must be your client's semantic version, MAJOR\.MINOR\.PATCH/,
    ],
    ['two parts', { 'service-client-version': '0.59' }, /must be your client's semantic version/],
  ])('says what is wrong when the version is %s', (_name, headers, message) => {
    const { error } = run(headers);
    expect((error as ShimError).statusCode).toBe(426);
    expect((error as ShimError).message).toMatch(message);
  });

  it('admits the minimum itself', () => {
    expect(run({ 'service-client-version': '0.50.0' }, '0.50.0').nextCalled).toBe(true);
  });

  it.each(['preflight', 'public'] as const)(
    'lets an unchecked (%s) request pass without a version',
    (why) => {
      const { state, error, nextCalled } = run({}, '1.0.0', why);
      expect(error).toBeUndefined();
      expect(nextCalled).toBe(true);
      expect(state.exchange.clientVersion).toBeUndefined();
    },
  );

  it('parses a version seen before once, and still judges every request', () => {
    const admit = admitter(v('0.50.0'));
    const first = admit('0.59.0');
    expect(admit('0.59.0')).toBe(first);
    expect(first?.version).toBe('0.59.0');
    expect(() => admit('0.49.0')).toThrow(ShimError);
    expect(() => admit('0.49.0')).toThrow(ShimError);
    expect(() => admit('nope')).toThrow(ShimError);
    // More distinct versions than it remembers: each still parsed and judged correctly.
    for (let i = 0; i < KNOWN_VERSIONS_LIMIT + 10; i++) expect(admit(`1.${i}.0`)?.version).toBe(`1.${i}.0`);
    expect(admit('0.59.0')?.version).toBe('0.59.0');
  });

  it('remembers at most KNOWN_VERSIONS_LIMIT versions, then starts over', () => {
    const admit = admitter(undefined);
    const first = admit('0.59.0');
    // Invalid values take no place in the memory.
    for (let i = 0; i < KNOWN_VERSIONS_LIMIT; i++) expect(() => admit(`v${i}`)).toThrow(ShimError);
    for (let i = 1; i < KNOWN_VERSIONS_LIMIT; i++) admit(`1.${i}.0`);
    // Full (KNOWN_VERSIONS_LIMIT valid versions): all remembered.
    expect(admit('0.59.0')).toBe(first);
    // One more: the memory starts over, and the first is parsed again.
    admit('2.0.0');
    const again = admit('0.59.0');
    expect(again).not.toBe(first);
    expect(again?.version).toBe('0.59.0');
  });
});
