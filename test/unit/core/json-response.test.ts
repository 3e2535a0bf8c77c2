/**
 * The admin listener's small JSON documents (src/core/json-response.ts; SPEC §8): exact length, JSON
 * type, never stored. A stand-in response records what was written; no socket.
 */
import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { JSON_CONTENT_TYPE } from '../../../src/core/errors.ts';
import { sendJson } from '../../../src/core/json-response.ts';

function recordingResponse() {
  const written: { status?: number; headers?: Record<string, unknown>; body?: string } = {};
  const res = {
    writeHead(status: number, headers: Record<string, unknown>) {
      written.status = status;
      written.headers = headers;
      return this;
    },
    end(body: string) {
      written.body = body;
      return this;
    },
  } as unknown as ServerResponse;
  return { res, written };
}

describe('sendJson', () => {
  it('writes the document with its byte length, the JSON type and no-store', () => {
    const { res, written } = recordingResponse();
    sendJson(res, 503, { status: 'draining', note: 'é' });
    expect(written.status).toBe(503);
    expect(written.body).toBe('{"status":"draining","note":"é"}');
    expect(written.headers).toEqual({
      'content-type': JSON_CONTENT_TYPE,
      'content-length': Buffer.byteLength(written.body ?? ''),
      'cache-control': 'no-store',
    });
    expect(written.headers?.['content-length']).toBe(33);
  });

  it('throws before writing anything for a value JSON cannot hold', () => {
    const { res, written } = recordingResponse();
    expect(() => sendJson(res, 200, { n: 1n })).toThrow(TypeError);
    expect(written.status).toBeUndefined();
  });
});
