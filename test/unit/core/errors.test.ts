/**
 * The error table and the shim's own error shape (SPEC §7).
 */
import { describe, expect, it } from 'vitest';
import {
  errorBody,
  errorHead,
  REJECTION_RETRY_AFTER,
  REJECTION_STATUS,
  type RejectionReason,
  ShimError,
} from '../../../src/core/errors.ts';

describe('errorBody', () => {
  it.each<[number, string]>([
    [400, 'Bad Request'],
    [401, 'Unauthorized'],
    [404, 'Not Found'],
    [413, 'Payload Too Large'],
    [426, 'Upgrade Required'],
    [431, 'Request Header Fields Too Large'],
    [501, 'Not Implemented'],
    [502, 'Bad Gateway'],
    [504, 'Gateway Timeout'],
  ])('%d has the reason phrase %j', (status, phrase) => {
    const body = errorBody(status, 'what is wrong and how to fix it');
    expect(JSON.parse(body.toString('utf8'))).toEqual({
      statusCode: status,
      message: 'what is wrong and how to fix it',
      error: phrase,
    });
  });

  it('serializes the members in the service order: statusCode, message, error', () => {
    expect(errorBody(401, 'Send credentials.').toString('utf8')).toBe(
      '{"statusCode":401,"message":"Send credentials.","error":"Unauthorized"}',
    );
  });

  it('falls back to "Error" for a status without a reason phrase', () => {
    expect(JSON.parse(errorBody(599, 'x').toString()).error).toBe('Error');
  });

  it('escapes the message as JSON and encodes UTF-8', () => {
    const body = errorBody(400, 'bad "quote" \\ and ü\n');
    expect(JSON.parse(body.toString('utf8')).message).toBe('bad "quote" \\ and ü\n');
    expect(body.includes(Buffer.from('ü', 'utf8'))).toBe(true);
  });
});

describe('errorHead', () => {
  it('gives the framing, no-store and the extra headers in order, and the body', () => {
    const { headers, body } = errorHead(502, 'x', ['Service-Version', '1.2.3']);
    expect(body).toEqual(errorBody(502, 'x'));
    expect(headers).toEqual([
      'Content-Type',
      'application/json; charset=utf-8',
      'Content-Length',
      String(body.length),
      'Cache-Control',
      'no-store',
      'Service-Version',
      '1.2.3',
    ]);
  });

  it('returns a new header list each time (callers append Connection: close)', () => {
    const extra = ['A', 'b'];
    const first = errorHead(400, 'x', extra);
    first.headers.push('Connection', 'close');
    expect(errorHead(400, 'x', extra).headers).not.toContain('Connection');
    expect(extra).toEqual(['A', 'b']);
  });
});

describe('ShimError', () => {
  it.each<[RejectionReason, number]>([
    ['http_version', 505],
    ['hygiene', 400],
    ['expectation', 417],
    ['body', 400],
    ['encoding', 415],
    ['credentials', 401],
    ['size', 413],
    ['version', 426],
    ['upgrade', 501],
    ['upstream_refused', 502],
    ['upstream_reset', 502],
    ['upstream_invalid', 502],
    ['upstream_timeout', 504],
    ['buffer_budget', 503],
    ['body_timeout', 408],
    ['streaming_uploads', 503],
    ['pool_full', 503],
    ['malformed', 400],
    ['header_size', 431],
    ['request_timeout', 408],
  ])('%s → %d', (reason, status) => {
    const err = new ShimError(reason, 'message');
    expect(err.statusCode).toBe(status);
    expect(err.reason).toBe(reason);
    expect(err.message).toBe('message');
    expect(err.name).toBe('ShimError');
    expect(err).toBeInstanceOf(Error);
  });

  it('has a status for every reason, and the table is frozen', () => {
    expect(Object.keys(REJECTION_STATUS)).toHaveLength(20);
    expect(Object.isFrozen(REJECTION_STATUS)).toBe(true);
  });

  it('asks for a retry later only where waiting helps (the buffer budget, the upload slots, the pool)', () => {
    expect(REJECTION_RETRY_AFTER).toEqual({ buffer_budget: 1, streaming_uploads: 1, pool_full: 1 });
    expect(Object.isFrozen(REJECTION_RETRY_AFTER)).toBe(true);
  });
});
