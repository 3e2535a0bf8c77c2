/**
 * Rules of SPEC §4–§6 that held in the clause-by-clause audit (docs/spec-conformance.md) but that no
 * end-to-end test pinned, and fix 63: the shim in front of the reference backend, real sockets.
 *
 * - fix 63: an `ALIAS_DOCS_URL` written as an IRI (`€`) is a valid URL, yet Node refused the `Link`
 *   field built from it: every legacy request that used an alias lost its response (connection closed,
 *   `ERR_INVALID_CHAR` logged at error). Now the URL is sent percent-encoded (RFC 3987 §3.1);
 * - `Link: <ALIAS_SUNSET_POLICY_URL>; rel="sunset"` beside the deprecation link (RFC 8594 §3);
 * - a client version with build metadata (`0.59.0+build.7`, SemVer 2.0) is a legacy client;
 * - `MAX_REWRITE_BODY` is inclusive: a body of exactly that many bytes is rewritten, one more → 413,
 *   declared or chunked.
 *
 * Delete this file with `src/aliases/` at 1.0 (docs/removing-the-alias-layer.md).
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Reply, send } from '../helpers/http.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const MISSION = 'c0000000-0000-4000-8000-000000000001';
const LIMIT = 256;

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    ALIAS_DOCS_URL: 'https://docs.example/migración/€',
    ALIAS_SUNSET_POLICY_URL: 'https://docs.example/sunset-policy',
    MAX_REWRITE_BODY: String(LIMIT),
  });
});
afterAll(() => stack.close());

const postProject = (body: string, headers: OutgoingHttpHeaders = {}) =>
  send(stack.url, 'POST', '/projects', { ...LEGACY, 'content-type': 'application/json', ...headers }, body);

/** `POST /projects` JSON of exactly `bytes` bytes that uses the alias `requiredTags`. */
function projectOfSize(bytes: number): string {
  const empty = JSON.stringify({ name: '', requiredTags: [] });
  const body = JSON.stringify({ name: 'p'.repeat(bytes - empty.length), requiredTags: [] });
  expect(Buffer.byteLength(body)).toBe(bytes);
  return body;
}

/** Sends `body` to `POST /projects` with `Transfer-Encoding: chunked`, in two chunks. */
function postChunked(body: string): Promise<Reply> {
  const headers = { ...LEGACY, 'content-type': 'application/json', 'transfer-encoding': 'chunked' };
  return send(stack.url, 'POST', '/projects', headers, [body.slice(0, 10), body.slice(10)]);
}

describe('deprecation links (SPEC §5)', () => {
  it('an ALIAS_DOCS_URL written as an IRI goes out percent-encoded; the response is not lost (fix 63)', async () => {
    const reply = await postProject(JSON.stringify({ name: 'iri', requiredTags: [] }));
    expect(reply.status, reply.text).toBe(201);
    const links = reply.rawHeaders.filter((_, i) => i % 2 === 1 && reply.rawHeaders[i - 1] === 'Link');
    expect(links).toEqual([
      '<https://docs.example/migraci%C3%B3n/%E2%82%AC>; rel="deprecation"',
      '<https://docs.example/sunset-policy>; rel="sunset"',
    ]);
    expect(stack.logs().filter((l) => l.level === 50)).toEqual([]);
  });
});

describe('client versions with build metadata (SPEC §3 step 4, §5)', () => {
  it('0.59.0+build.7 is a legacy client: its responses carry tags', async () => {
    const reply = await send(stack.url, 'GET', `/missions/${MISSION}`, {
      ...LEGACY,
      'service-client-version': '0.59.0+build.7',
    });
    expect(reply.status).toBe(200);
    const mission = reply.json<{ metadata: unknown; tags: unknown }>();
    expect(mission.tags).toEqual(mission.metadata);
    expect(reply.headers.vary).toMatch(/Service-Client-Version/);
  });
});

describe('MAX_REWRITE_BODY is inclusive (SPEC §2, §5)', () => {
  it.each([
    ['declared', postProject],
    ['chunked', postChunked],
  ] as const)('%s: exactly the limit is rewritten, one byte more → 413', async (_framing, post) => {
    const at = await post(projectOfSize(LIMIT));
    expect(at.status, at.text).toBe(201);
    expect(at.json()).toHaveProperty('requiredTags', []);

    const over = await post(projectOfSize(LIMIT + 1));
    expect(over.status).toBe(413);
    expect(over.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(over.json()).toEqual({
      statusCode: 413,
      message: expect.stringContaining('MAX_REWRITE_BODY'),
      error: 'Payload Too Large',
    });
  });
});
