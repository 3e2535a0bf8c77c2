/**
 * Consumer attribution (issue 11 item 1): gateway identity, keyed API-key fingerprint, `session`; bounded
 * and sanitised values; never the key itself.
 */
import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  consumerOf,
  countsAsUse,
  keyFingerprint,
  MAX_CONSUMER_CHARS,
  SESSION_CONSUMER,
  sanitizeId,
  UNKEYED_CONSUMER,
  userAgentProduct,
} from '../../../src/aliases/consumer.ts';
import { checkCredentials, parseCookies } from '../../../src/gates/credentials.ts';

const KEY = 'fingerprint-key-0123456789';
const rules = { apiKeyHeader: 'x-api-key', fingerprintKey: KEY, consumerHeader: 'x-consumer-id' };

describe('consumerOf', () => {
  it('prefers the gateway identity header', () => {
    expect(consumerOf({ 'x-consumer-id': 'team-a', 'x-api-key': 'k' }, rules)).toBe('team-a');
  });

  it('falls back to the first 16 hex digits of HMAC-SHA-256(key, API key)', () => {
    const expected = createHmac('sha256', KEY).update('sk_live_abc').digest('hex').slice(0, 16);
    expect(consumerOf({ 'x-api-key': 'sk_live_abc' }, rules)).toBe(expected);
    expect(keyFingerprint(KEY, 'sk_live_abc')).toMatch(/^[0-9a-f]{16}$/);
    expect(consumerOf({ 'x-consumer-id': ' ', 'x-api-key': 'sk_live_abc' }, rules)).toBe(expected);
  });

  it('names cookie sessions `session` and unkeyed API keys `api-key`', () => {
    expect(consumerOf({ cookie: 'authtoken=a; refreshtoken=b' }, rules)).toBe(SESSION_CONSUMER);
    expect(consumerOf({ 'x-api-key': 'sk_live_abc' }, { apiKeyHeader: 'x-api-key' })).toBe(UNKEYED_CONSUMER);
  });

  it('agrees with the credential gate on whether a key was sent: a whitespace key (NBSP too) is a cookie session', () => {
    const cookie = 'authtoken=a; refreshtoken=b';
    for (const blank of ['\u00a0', ' \u00a0\t', '\u2003', '\ufeff']) {
      const headers = { 'x-api-key': blank, cookie };
      const gate = checkCredentials(
        { headers, rawHeaders: ['x-api-key', blank, 'cookie', cookie] },
        () => parseCookies(cookie),
        { apiKeyHeader: 'x-api-key', cookies: ['authtoken', 'refreshtoken'] },
      );
      expect(gate).toBe('cookies');
      expect(consumerOf(headers, rules)).toBe(SESSION_CONSUMER);
    }
  });

  it('fingerprints the key as the gate reads it: trimmed', () => {
    const expected = keyFingerprint(KEY, 'sk_live_abc');
    expect(consumerOf({ 'x-api-key': '\u00a0sk_live_abc\t' }, rules)).toBe(expected);
    expect(consumerOf({ 'x-api-key': ' sk_live_abc ' }, rules)).toBe(expected);
  });

  it('names a key-based consumer exactly when the gate admits the request by its key', () => {
    const spaces = fc.constantFrom(' ', '\t', '\u00a0', '\u2003', '\u3000', 'k', '_');
    fc.assert(
      fc.property(
        fc.array(spaces, { maxLength: 6 }).map((cs) => cs.join('')),
        (apiKey) => {
          const gate = checkCredentials(
            { headers: { 'x-api-key': apiKey }, rawHeaders: ['x-api-key', apiKey] },
            () => ({}),
            { apiKeyHeader: 'x-api-key', cookies: ['authtoken'] },
          );
          expect(consumerOf({ 'x-api-key': apiKey }, rules) !== SESSION_CONSUMER).toBe(gate === 'api-key');
        },
      ),
    );
  });

  it('never returns a byte sequence of the API key longer than chance allows', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 20, maxLength: 80 }), (apiKey) => {
        for (const r of [rules, { apiKeyHeader: 'x-api-key' }]) {
          const id = consumerOf({ 'x-api-key': apiKey }, r);
          expect(apiKey.includes(id) && id.length > 8).toBe(false);
        }
      }),
    );
  });
});

describe('countsAsUse (a request counts once the upstream answered it, not with 401, 403 or 5xx)', () => {
  it.each([200, 201, 204, 206, 301, 304, 400, 404, 409, 413, 422, 429, 499])('%i counts', (status) => {
    expect(countsAsUse(status)).toBe(true);
  });

  it.each([401, 403, 500, 501, 502, 503, 504, 599])('%i does not', (status) => {
    expect(countsAsUse(status)).toBe(false);
  });
});

describe('sanitizeId', () => {
  it('keeps visible ASCII, replaces the rest, and cuts to 64 characters', () => {
    expect(sanitizeId('team-a/ci@example.com')).toBe('team-a/ci@example.com');
    expect(sanitizeId('a b"c\\d,e;f\u00e9\n')).toBe('a_b_c_d_e_f_');
    expect(sanitizeId('x'.repeat(10_000))).toBe('x'.repeat(MAX_CONSUMER_CHARS));
    expect(sanitizeId('   ')).toBeUndefined();
  });

  it('bounds every input', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 500 }), (s) => {
        const id = sanitizeId(s);
        if (id !== undefined) expect(id).toMatch(/^[\x21-\x7e]{1,64}$/);
      }),
    );
  });
});

describe('userAgentProduct', () => {
  it.each<[string | undefined, string]>([
    ['kleinkram-cli/0.59.0 python-requests/2.31', 'kleinkram-cli/0.59.0'],
    ['python-requests/2.31.0', 'python-requests/2.31.0'],
    ['curl', 'curl'],
    ['Mozilla/5.0 (X11; Linux x86_64)', 'Mozilla/5.0'],
    [undefined, 'unknown'],
    ['', 'unknown'],
    ['(no product)', 'unknown'],
    [`${'a'.repeat(200)}/1`, 'a'.repeat(64)],
  ])('%j → %s', (ua, product) => {
    expect(userAgentProduct(ua)).toBe(product);
  });
});
