/**
 * The API-key rule the credential gate admits on and the consumer attribution identifies callers by
 * (src/core/api-key.ts; SPEC §3 step 5).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import { apiKeyOf } from '../../../src/core/api-key.ts';

describe('apiKeyOf', () => {
  it.each<[IncomingHttpHeaders, string | undefined]>([
    [{ 'x-api-key': 'k' }, 'k'],
    [{ 'x-api-key': ' k \t' }, 'k'],
    [{ 'x-api-key': 'a b' }, 'a b'],
    [{}, undefined],
    [{ 'x-api-key': '' }, undefined],
    [{ 'x-api-key': ' \t' }, undefined],
    // A no-break space survives HTTP's field parsing (RFC 9110 §5.5) but is no key (fix 20).
    [{ 'x-api-key': '\u00a0' }, undefined],
    // Named by Connection: the forwarder drops it, so it admits nothing (fix 46).
    [{ 'x-api-key': 'k', connection: 'x-api-key' }, undefined],
    [{ 'x-api-key': 'k', connection: 'keep-alive, X-Api-Key' }, undefined],
    [{ 'x-api-key': 'k', connection: 'keep-alive' }, 'k'],
  ])('%j → %j', (headers, expected) => expect(apiKeyOf(headers, 'x-api-key')).toBe(expected));

  it('reads the configured header only', () => {
    expect(apiKeyOf({ 'x-api-key': 'k' }, 'x-token')).toBeUndefined();
    expect(apiKeyOf({ 'x-token': 'k' }, 'x-token')).toBe('k');
  });

  it('refuses a value that is not one string', () => {
    const headers = { 'x-api-key': ['a', 'b'] } as unknown as IncomingHttpHeaders;
    expect(apiKeyOf(headers, 'x-api-key')).toBeUndefined();
  });
});
