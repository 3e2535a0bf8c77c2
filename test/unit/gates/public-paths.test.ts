/**
 * Public paths and CORS preflights (SPEC §3 steps 2 and 3).
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config.ts';
import { createExchangeState, type ExchangeState, stateOf } from '../../../src/core/exchange.ts';
import { isPreflight, publicPathGate, publicPathMatcher } from '../../../src/gates/public-paths.ts';

describe('publicPathMatcher', () => {
  const isPublic = publicPathMatcher({ exact: ['/api/health', '/docs/'], prefixes: ['/static/'] });

  it.each<[string, boolean]>([
    ['/api/health', true],
    ['/api/health/', true],
    ['/api/health//', false],
    ['/api/health/x', false],
    ['/api/healthz', false],
    ['/api/heal', false],
    ['/API/health', false],
    ['/api/Health', false],
    ['//api/health', false],
    ['/api', false],
    ['/docs', true],
    ['/docs/', true],
    ['/docs//', false],
    ['/static/', true],
    ['/static/app.js', true],
    ['/static/img/logo.png', true],
    ['/Static/app.js', false],
    ['/staticfile', false],
    ['/x/static/app.js', false],
    ['/', false],
    ['', false],
  ])('%j → %s', (path, expected) => {
    expect(isPublic(path)).toBe(expected);
  });

  it('matches exactly the root when "/" is public', () => {
    const root = publicPathMatcher({ exact: ['/'], prefixes: [] });
    expect(root('/')).toBe(true);
    expect(root('//')).toBe(false);
    expect(root('/a')).toBe(false);
    expect(root('')).toBe(false);
  });

  it('matches nothing without entries', () => {
    const none = publicPathMatcher({ exact: [], prefixes: [] });
    expect(none('/')).toBe(false);
    expect(none('/api/health')).toBe(false);
  });

  it('uses PUBLIC_PATHS as loadConfig splits it', () => {
    const { publicPaths } = loadConfig({ PUBLIC_PATHS: '/api/health,/static/*' });
    const fromConfig = publicPathMatcher(publicPaths);
    expect(fromConfig('/api/health/')).toBe(true);
    expect(fromConfig('/static/a.css')).toBe(true);
    expect(fromConfig('/static')).toBe(false);
    expect(fromConfig('/user/me')).toBe(false);
  });
});

describe('isPreflight', () => {
  const preflightHeaders = { origin: 'https://app.example.com', 'access-control-request-method': 'POST' };

  it.each<[string, IncomingHttpHeaders, boolean]>([
    ['OPTIONS', preflightHeaders, true],
    ['OPTIONS', { ...preflightHeaders, 'access-control-request-headers': 'x-api-key' }, true],
    ['OPTIONS', { origin: 'https://app.example.com' }, false],
    ['OPTIONS', { 'access-control-request-method': 'POST' }, false],
    ['OPTIONS', {}, false],
    ['GET', preflightHeaders, false],
    ['POST', preflightHeaders, false],
    ['options', preflightHeaders, false],
    // A body: not a browser's preflight, checked. The forwarder's rule (hasRequestBody) decides.
    ['OPTIONS', { ...preflightHeaders, 'content-length': '0' }, true],
    ['OPTIONS', { ...preflightHeaders, 'content-length': '00' }, true],
    ['OPTIONS', { ...preflightHeaders, 'content-length': '1' }, false],
    ['OPTIONS', { ...preflightHeaders, 'transfer-encoding': 'chunked' }, false],
  ])('%s %j → %s', (method, headers, expected) => {
    expect(isPreflight(method, headers)).toBe(expected);
  });
});

describe('publicPathGate', () => {
  function unchecked(
    method: string,
    url: string,
    headers: IncomingHttpHeaders = {},
  ): ExchangeState['unchecked'] {
    const req = { method, url, headers } as unknown as IncomingMessage;
    const state = createExchangeState(req, 0);
    const res = { locals: { shim: state } } as unknown as ServerResponse;
    let nextCalled = false;
    publicPathGate({ exact: ['/api/health'], prefixes: ['/static/'] })(req, stateOf(res)!);
    nextCalled = true;
    expect(nextCalled).toBe(true);
    return state.unchecked;
  }

  it.each<[string, string, IncomingHttpHeaders, ExchangeState['unchecked']]>([
    ['GET', '/api/health', {}, 'public'],
    ['GET', '/api/health?verbose=1', {}, 'public'],
    ['GET', '/api/health/?x', {}, 'public'],
    ['POST', '/static/upload', {}, 'public'],
    ['GET', '/user/me', {}, undefined],
    ['GET', '/user/me?next=/api/health', {}, undefined],
    [
      'OPTIONS',
      '/user/me',
      { origin: 'https://a.example', 'access-control-request-method': 'GET' },
      'preflight',
    ],
    ['OPTIONS', '/user/me', { origin: 'https://a.example' }, undefined],
    [
      'OPTIONS',
      '/api/health',
      { origin: 'https://a.example', 'access-control-request-method': 'GET' },
      'preflight',
    ],
  ])('%s %s %j → %s', (method, url, headers, expected) => {
    expect(unchecked(method, url, headers)).toBe(expected);
  });
});
