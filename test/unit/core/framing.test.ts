/**
 * Whether a request has a body (src/core/framing.ts; RFC 9112 §6.1–6.3).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import { hasRequestBody } from '../../../src/core/framing.ts';

describe('hasRequestBody', () => {
  it.each<[IncomingHttpHeaders, boolean]>([
    [{}, false],
    [{ 'content-length': '0' }, false],
    [{ 'content-length': '1' }, true],
    [{ 'transfer-encoding': 'chunked' }, true],
  ])('%j → %s', (headers, expected) => expect(hasRequestBody(headers)).toBe(expected));
});
