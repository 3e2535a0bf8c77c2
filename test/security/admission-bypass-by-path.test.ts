/**
 * Attack: admission bypass by path (path traversal / path confusion; CVE-2021-41773, the Spring
 * `..;/` and Tomcat `;jsessionid` confusions, nginx `merge_slashes` off).
 *
 * The shim lets public paths (`/api/health`, prefixes such as `/static/*`) and CORS preflights through
 * without the version and credential gates. If the shim and the upstream read a request target
 * differently, a target the shim thinks is public can reach a private upstream route:
 * `/api/health/../user/me`, its percent-encodings (`%2e%2e`, `%252e%252e` decoded twice), encoded
 * slashes and backslashes, `;` matrix parameters, doubled slashes, absolute-form
 * (`GET http://host/user/me`) and authority-form (`CONNECT host:port`) targets, or an `OPTIONS` that
 * only looks like a preflight.
 *
 * Every case is sent as raw bytes without credentials. The upstream is a raw TCP server that records
 * every request; each request it received is read the way a normalizing upstream would (WHATWG URL
 * path normalization, then percent-decoding) and must still be a public path — or a real preflight.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FUZZ_TIMEOUT_MS, fuzzParams } from '../fuzz/budget.ts';
import { send, sendRawUntilClose, statusesIn } from '../helpers/http.ts';
import { answerEachRequest, type FramedRequest, markRequests } from '../helpers/http1-frames.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

let upstream: RawUpstream;
let stack: Stack;
beforeAll(async () => {
  upstream = await startRawUpstream(answerEachRequest());
  stack = await startStack({ UPSTREAM_URL: upstream.url, PUBLIC_PATHS: '/api/health,/static/*' });
});
afterAll(async () => {
  await stack.close();
  await upstream.close();
});

/** How a normalizing upstream (Express behind a URL normalizer) would read a request target's path. */
function normalizedPath(target: string): string {
  let path = new URL(target, 'http://upstream.test').pathname;
  for (let i = 0; i < 4; i++) {
    try {
      const next = decodeURIComponent(path);
      if (next === path) break;
      path = new URL(next.replaceAll('\\', '/'), 'http://upstream.test').pathname;
    } catch {
      break;
    }
  }
  return path;
}

/** Whether an upstream request is one the shim may forward without credentials. */
function mayPassUnchecked(r: FramedRequest): boolean {
  const header = (name: string) => r.headers.find(([n]) => n === name)?.[1];
  if (r.method === 'OPTIONS' && header('origin') && header('access-control-request-method')) return true;
  const path = normalizedPath(r.target);
  return path === '/api/health' || path === '/api/health/' || path.startsWith('/static/');
}

/** Sends an unauthenticated request (a valid version, so only the credential gate stands). */
async function probe(target: string, method = 'GET', extra = ''): Promise<number[]> {
  const since = markRequests(upstream.received);
  const raw = await sendRawUntilClose(
    stack.url,
    // `Connection: close` ends the exchange at the response.
    `${method} ${target} HTTP/1.1\r\nHost: shim.test\r\nConnection: close\r\nService-Client-Version: 1.0.0\r\n${extra}\r\n`,
  );
  const forwarded = since();
  for (const r of forwarded)
    expect(mayPassUnchecked(r), `${target} reached the upstream as ${r.target}`).toBe(true);
  return statusesIn(raw);
}

describe('spellings of a step out of a public path', () => {
  it.each([
    '/api/health/..',
    '/api/health/../user/me',
    '/api/health/../../user/me',
    '/api/health/%2e%2e/user/me',
    '/api/health/%2E%2E/user/me',
    '/api/health/.%2e/user/me',
    '/api/health/%2e./user/me',
    '/api/health/%252e%252e/user/me',
    '/api/health/%25252e%25252e/user/me',
    '/api/health/%%32%65%%32%65/user/me',
    '/api/health/%2%65%2%65/user/me',
    '/api/health%2f..%2fuser%2fme',
    '/api/health%2F..%2Fuser%2Fme',
    '/api/health/..%2fuser/me',
    '/api/health/..%5cuser/me',
    '/api/health/..%255cuser/me',
    '/api/health\\..\\user\\me',
    '/api/health/..;/user/me',
    '/api/health;/../user/me',
    '/api/health/.;x/user/me',
    '/api/health/./../user/me',
    '/api/health/.',
    '/api/health/%2e',
    '/api/health/%00/../user/me',
    '/api/health%00',
    '/api/health%09',
    '/api/health%0a',
    '/api/health/%09../user/me',
    '/static/%0d%0a../user/me',
    '/static/../user/me',
    '/static/%2e%2e/user/me',
    '/static/a/..%2f..%2fuser/me',
    '/static/..;/user/me',
    '/static/%252e%252e/user/me',
    '/./user/me',
    '/user/./me',
  ])('%s → 400, nothing forwarded', async (target) => {
    expect(await probe(target)).toEqual([400]);
  });
});

describe('look-alikes of a public path are not public', () => {
  it.each([
    '//api/health',
    '///api/health',
    '/api//health',
    '/api/health//',
    '/api/health;x',
    '/api/health;jsessionid=1',
    '/API/health',
    '/api/HEALTH',
    '/%61pi/health',
    '/api/heal%74h',
    '/api/health%2e',
    '/api/health.',
    '/api/health..',
    '/api/health%20',
    '/api/healthz',
    '/api/health/x',
    '/api/health/%u002e%u002e/user/me',
    '/api/health/%c0%ae%c0%ae/user/me',
    '/static',
    '/user/me;/api/health',
    '/user/me?/api/health',
  ])('%s → 401, nothing forwarded', async (target) => {
    expect(await probe(target)).toEqual([401]);
  });

  it('a public path with a query that looks like a traversal is forwarded as the public path', async () => {
    expect(await probe('/api/health?/../../user/me')).toEqual([200]);
    expect(await probe('/api/health/?x=/../user/me')).toEqual([200]);
    expect(await probe('/static/app.js?../../user/me')).toEqual([200]);
  });

  it('a fragment is not accepted in a request target', async () => {
    expect(await probe('/api/health#/../user/me')).toEqual([400]);
  });
});

describe('request targets other than origin-form', () => {
  it.each([
    ['absolute-form to a private path', 'GET', 'http://shim.test/user/me'],
    ['absolute-form to a public path', 'GET', 'http://shim.test/api/health'],
    ['absolute-form with a traversal', 'GET', 'http://shim.test/api/health/../user/me'],
    ['https absolute-form', 'GET', 'https://shim.test/user/me'],
    ['asterisk-form', 'OPTIONS', '*'],
    ['authority-form on GET', 'GET', 'shim.test:80'],
  ])('%s → 400, nothing forwarded', async (_name, method, target) => {
    expect(await probe(target, method)).toEqual([400]);
  });

  it.each([
    ['authority-form', 'shim.test:443'],
    ['origin-form', '/user/me'],
  ])('CONNECT in %s → 400, nothing forwarded', async (_name, target) => {
    expect(await probe(target, 'CONNECT')).toEqual([400]);
  });
});

describe('OPTIONS that is not a real preflight', () => {
  it.each([
    ['no Origin, no Access-Control-Request-Method', ''],
    ['Origin only', 'Origin: https://app.test\r\n'],
    ['Access-Control-Request-Method only', 'Access-Control-Request-Method: DELETE\r\n'],
    [
      'a preflight with a body',
      'Origin: https://app.test\r\nAccess-Control-Request-Method: DELETE\r\nContent-Length: 2\r\n\r\n{}',
    ],
    [
      'a preflight with a chunked body',
      'Origin: https://app.test\r\nAccess-Control-Request-Method: DELETE\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n',
    ],
  ])('%s → 401, nothing forwarded', async (_name, extra) => {
    const since = markRequests(upstream.received);
    expect(await probe('/user/me', 'OPTIONS', extra)).toEqual([401]);
    expect(since()).toEqual([]);
  });

  it('a real preflight is forwarded unchecked, as OPTIONS', async () => {
    const since = markRequests(upstream.received);
    const statuses = await probe(
      '/user/me',
      'OPTIONS',
      'Origin: https://app.test\r\nAccess-Control-Request-Method: DELETE\r\n',
    );
    expect(statuses).toEqual([200]);
    expect(since().map((r) => [r.method, r.target])).toEqual([['OPTIONS', '/user/me']]);
  });

  it('a preflight spelled in another method case is not a preflight', async () => {
    expect(
      await probe(
        '/user/me',
        'options',
        'Origin: https://app.test\r\nAccess-Control-Request-Method: GET\r\n',
      ),
    ).not.toContain(200);
  });
});

describe('property: random targets built from traversal fragments', () => {
  const fragment = fc.constantFrom(
    '/',
    '//',
    '.',
    '..',
    '%2e',
    '%2E',
    '%252e',
    '%2f',
    '%5c',
    '\\',
    ';',
    ';x',
    'api',
    'health',
    'static',
    'user',
    'me',
    '%25',
    '%',
    '%61',
    '?',
    '#',
    '%00',
    '%09',
  );
  it(
    'an unauthenticated request only ever reaches the upstream at a public path',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom('/api/health', '/static/', '/'),
          fc.array(fragment, { maxLength: 8 }),
          async (start, parts) => {
            const target = start + parts.join('');
            if (/[\s]/.test(target)) return;
            const since = markRequests(upstream.received);
            const reply = await send(stack.url, 'GET', target, { 'service-client-version': '1.0.0' }).catch(
              () => undefined,
            );
            const forwarded = since();
            for (const r of forwarded) {
              expect(mayPassUnchecked(r), `${target} reached the upstream as ${r.target}`).toBe(true);
            }
            if (reply?.status === 200) expect(forwarded).toHaveLength(1);
          },
        ),
        fuzzParams(0.5),
      );
    },
    FUZZ_TIMEOUT_MS,
  );
});
