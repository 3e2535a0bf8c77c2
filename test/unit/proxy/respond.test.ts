/**
 * The CORS headers of the responses the shim makes itself (`CORS_ALLOWED_ORIGINS`; Fetch standard,
 * CORS protocol; RFC 9110 §12.5.5 Vary).
 */
import { describe, expect, it } from 'vitest';
import { ownCorsHeaders } from '../../../src/proxy/respond.ts';

const ALLOWED = new Set(['https://app.example', 'http://localhost:5173']);
const OWN = [
  'Service-Version',
  '0.60.0',
  'Vary',
  'Service-Client-Version',
  'Warning',
  '299 - "w"',
  'Retry-After',
  '1',
];

describe('ownCorsHeaders', () => {
  it('a listed origin may read the response with credentials, and its headers but Vary', () => {
    expect(ownCorsHeaders(ALLOWED, 'https://app.example', OWN)).toEqual([
      'Vary',
      'Origin',
      'Access-Control-Allow-Origin',
      'https://app.example',
      'Access-Control-Allow-Credentials',
      'true',
      'Access-Control-Expose-Headers',
      'Service-Version, Warning, Retry-After',
    ]);
  });

  it('no header to expose: no Access-Control-Expose-Headers', () => {
    expect(ownCorsHeaders(ALLOWED, 'http://localhost:5173', ['Vary', 'X'])).toEqual([
      'Vary',
      'Origin',
      'Access-Control-Allow-Origin',
      'http://localhost:5173',
      'Access-Control-Allow-Credentials',
      'true',
    ]);
  });

  it.each([
    ['absent', undefined],
    ['not listed', 'https://evil.example'],
    ['listed but spelled otherwise (origins compare exactly)', 'https://APP.example'],
    ['the opaque origin', 'null'],
  ])('an origin %s: only Vary: Origin', (_what, origin) => {
    expect(ownCorsHeaders(ALLOWED, origin, OWN)).toEqual(['Vary', 'Origin']);
  });
});
