/**
 * Fuzzing the hygiene gate (SPEC §3 step 1) with arbitrary and adversarial request targets and
 * framing headers: it terminates, never throws, and what it accepts is safe — no dot segment, encoded
 * slash, backslash or NUL survives any number of decodings it inspects, and a target it accepts that
 * the public-path rule calls public is public for a normalizing upstream too (no admission bypass).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkFraming, checkHost, checkRequestTarget, checkSingleHost } from '../../src/gates/hygiene.ts';
import { publicPathMatcher } from '../../src/gates/public-paths.ts';
import { FUZZ_TIMEOUT_MS, fuzzParams } from './budget.ts';
import { anyCodePoint } from './code-points.ts';

/** Pieces attackers combine; weighted towards encodings of `.`, `/`, `\` and NUL. */
const FRAGMENT = fc.constantFrom(
  '/',
  '//',
  '.',
  '..',
  '%2e',
  '%2E',
  '%252e',
  '%25252e',
  '%2f',
  '%2F',
  '%252f',
  '%5c',
  '%5C',
  '%255c',
  '\\',
  '%00',
  '%2500',
  ';',
  ';x',
  '?',
  '#',
  '%',
  '%2',
  '%25',
  '%%32%65',
  '%u002e',
  '%c0%ae',
  'api',
  'health',
  'static',
  'user',
  'me',
  'a',
  '%61',
  '~',
  ' ',
  '\t',
  '\0',
  'é',
);
const attackTarget = fc
  .tuple(
    fc.constantFrom('/', '/api/health', '/static/', '', 'http://h', '*'),
    fc.array(FRAGMENT, { maxLength: 12 }),
  )
  .map(([start, parts]) => start + parts.join(''));
const anyTarget = fc.oneof(
  attackTarget,
  fc.string({ unit: anyCodePoint, maxLength: 200 }),
  fc.string({ unit: 'grapheme', maxLength: 80 }).map((s) => `/${s}`),
);

/** Percent-decodes every `%XX` to its Latin-1 character (as the gate does), once. */
const decodeOnce = (s: string) =>
  s.replace(/%([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)));

/** RFC 3986 §5.2.4 remove_dot_segments, with `\` read as `/` (as Windows and some routers do). */
function removeDotSegments(path: string): string {
  const out: string[] = [];
  for (const segment of path.replaceAll('\\', '/').split('/').slice(1)) {
    const bare = segment.split(';')[0]; // Tomcat-style path parameters: `..;x` is `..`
    if (bare === '..') out.pop();
    else if (bare !== '.') out.push(segment);
  }
  const last = path.split(/[/\\]/).at(-1)?.split(';')[0];
  return `/${out.join('/')}${last === '.' || last === '..' ? '/' : ''}`;
}

/**
 * How an upstream that decodes up to four times and normalizes after each round reads a path: it
 * drops tabs and line breaks as WHATWG URL parsing does, then removes dot segments (RFC 3986).
 */
function upstreamView(path: string): string {
  let p = path;
  for (let i = 0; i < 5; i++) {
    p = removeDotSegments(p.replace(/[\t\n\r]/g, ''));
    const next = decodeOnce(p);
    if (next === p) break;
    p = next;
  }
  return p;
}

describe('checkRequestTarget', () => {
  it(
    'terminates and never throws on any input; verdicts are undefined or a message',
    () => {
      fc.assert(
        fc.property(anyTarget, (target) => {
          const verdict = checkRequestTarget(target);
          expect(verdict === undefined || (typeof verdict === 'string' && verdict.length > 0)).toBe(true);
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'accepts only origin-form paths in which no decoding round shows a dot segment, slash, backslash or NUL',
    () => {
      fc.assert(
        fc.property(anyTarget, (target) => {
          if (checkRequestTarget(target) !== undefined) return;
          expect(target.startsWith('/')).toBe(true);
          expect(target).not.toContain('#');
          const q = target.indexOf('?');
          let path = q === -1 ? target : target.slice(0, q);
          for (let round = 0; round < 4; round++) {
            expect(path).not.toMatch(/[\\\0]/);
            expect(path).not.toMatch(/%(2f|5c|00)/i);
            for (const segment of path.split('/')) {
              expect(['.', '..']).not.toContain(segment.split(';')[0]?.replace(/%2e/gi, '.'));
            }
            path = decodeOnce(path);
          }
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'an accepted target the shim calls public is public for a normalizing upstream too',
    () => {
      const isPublic = publicPathMatcher({ exact: ['/api/health'], prefixes: ['/static/'] });
      fc.assert(
        fc.property(attackTarget, (target) => {
          if (checkRequestTarget(target) !== undefined) return;
          const q = target.indexOf('?');
          const path = q === -1 ? target : target.slice(0, q);
          if (!isPublic(path)) return;
          const seen = upstreamView(path);
          expect(
            seen === '/api/health' || seen === '/api/health/' || seen.startsWith('/static/'),
            `${target} → upstream reads ${seen}`,
          ).toBe(true);
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'the query never changes the verdict on the path',
    () => {
      fc.assert(
        fc.property(attackTarget, fc.string({ maxLength: 30 }), (target, query) => {
          if (target.includes('?') || target.includes('#') || query.includes('#')) return;
          expect(checkRequestTarget(`${target}?${query}`) === undefined).toBe(
            checkRequestTarget(target) === undefined,
          );
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );
});

describe('checkFraming, checkSingleHost and checkHost', () => {
  const headerValue = fc.oneof(
    fc.constantFrom(
      'chunked',
      'Chunked',
      ' chunked ',
      '\tchunked',
      'chunked\u00a0',
      'chunked, identity',
      'gzip',
      '',
    ),
    fc.string({ unit: anyCodePoint, maxLength: 20 }),
  );
  it(
    'accepts Transfer-Encoding only as exactly "chunked" (OWS aside) and never beside Content-Length',
    () => {
      fc.assert(
        fc.property(fc.option(headerValue), fc.option(fc.stringMatching(/^\d{1,6}$/)), (te, cl) => {
          const headers: Record<string, string> = {};
          if (te !== null) headers['transfer-encoding'] = te;
          if (cl !== null) headers['content-length'] = cl;
          const verdict = checkFraming(headers);
          if (te === null) expect(verdict).toBeUndefined();
          else if (cl !== null) expect(verdict).toBeDefined();
          else expect(verdict === undefined).toBe(/^[ \t]*chunked[ \t]*$/i.test(te));
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'rejects exactly the raw header lists with more than one Host, in any case',
    () => {
      const name = fc.constantFrom('Host', 'host', 'HOST', 'hOsT', 'X-Host', 'Hosts', 'x-api-key');
      fc.assert(
        fc.property(fc.array(fc.tuple(name, fc.string({ maxLength: 5 })), { maxLength: 8 }), (pairs) => {
          const hosts = pairs.filter(([n]) => n.toLowerCase() === 'host').length;
          expect(checkSingleHost(pairs.flat()) === undefined).toBe(hosts <= 1);
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  const port = fc.option(
    fc.integer({ min: 0, max: 65535 }).map((p) => `:${p}`),
    { nil: '' },
  );
  const name = fc.oneof(fc.domain(), fc.ipV4());

  it(
    'accepts every DNS name, IPv4 address and bracketed IPv6 address, with or without a port',
    () => {
      fc.assert(
        fc.property(
          fc.oneof(
            name,
            fc.ipV6().map((a) => `[${a}]`),
          ),
          port,
          (host, p) => {
            expect(checkHost(`${host}${p}`)).toBeUndefined();
          },
        ),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'rejects a host name with any character outside the grammar, wherever it is (Host header injection)',
    () => {
      // Not in RFC 3986's reg-name nor a port: what would let an upstream read a path, a user or markup;
      // and the comma, which is, but would make X-Forwarded-Host's one element two (RFC 9110 §5.6.1).
      const stray = fc.oneof(
        fc.constantFrom(...' /\\?#@"<>[]^`{|},\t\r\n\u0000\u007f\u00a0'.split('')),
        anyCodePoint.filter((c) => c.codePointAt(0)! > 0x7f),
      );
      fc.assert(
        fc.property(name, port, stray, fc.nat(), (host, p, c, at) => {
          const whole = `${host}${p}`;
          const k = at % (whole.length + 1);
          expect(checkHost(`${whole.slice(0, k)}${c}${whole.slice(k)}`)).toBeDefined();
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );
});
