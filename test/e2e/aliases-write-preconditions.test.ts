/**
 * A legacy client's write preconditions reach the upstream (RFC 9110 §13.1.2, §13.2.1). `If-None-Match`
 * on a `PUT` or `DELETE` asks the origin not to perform the method when the resource's current tag is
 * listed ("not over that version"), and a false condition is answered 412. The shim maps the client's
 * tags for a patching exchange so that a `GET`'s 304 never hands a legacy client another variant's copy
 * (fix 92). It applied that mapping to every method, so the unmarked tags of a write's `If-None-Match`
 * were dropped and the write it asked to have refused went through: found by a probe of the shim against
 * an upstream that evaluates the condition (2026-11-26, docs/reliability.md fix 123).
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { CURRENT, LEGACY, type Stack, startStack } from '../helpers/stack.ts';

/** A one-document store that evaluates `If-None-Match` as an origin must (weak comparison, `*`). */
interface DocumentUpstream {
  readonly url: string;
  /** The document's version: how many writes were performed. */
  version(): number;
  /** The `If-None-Match` of each request received, in order (`undefined`: none). */
  readonly conditions: Array<string | undefined>;
  close(): Promise<void>;
}

/** @param suffix Appended to the tag's opaque part (an upstream whose own tags end in `+patched`). */
function startDocumentUpstream(suffix = ''): Promise<DocumentUpstream> {
  let version = 1;
  const conditions: Array<string | undefined> = [];
  const etag = () => `"doc-v${version}${suffix}"`;
  const listed = (headers: IncomingHttpHeaders) => {
    const value = headers['if-none-match'];
    if (value === undefined) return false;
    return value.split(',').some((tag) => {
      const opaque = tag.trim().replace(/^W\//, '');
      return opaque === '*' || opaque === etag();
    });
  };
  const server: Server = createServer((req, res) => {
    conditions.push(req.headers['if-none-match']);
    req.resume();
    req.on('end', () => {
      const json = (status: number, body: string) => {
        res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', ETag: etag() });
        res.end(body);
      };
      if (req.method !== 'GET' && req.method !== 'HEAD' && listed(req.headers)) {
        json(412, '{"statusCode":412,"message":"Precondition Failed"}');
        return;
      }
      if (req.method === 'PUT' || req.method === 'DELETE') version++;
      json(200, `{"uuid":"d1","version":${version},"metadata":{"color":"red"}}`);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        version: () => version,
        conditions,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

let stack: Stack | undefined;
let upstream: DocumentUpstream | undefined;
afterEach(async () => {
  await stack?.close();
  await upstream?.close();
  stack = undefined;
  upstream = undefined;
});

async function start(suffix = ''): Promise<{ url: string; upstream: DocumentUpstream }> {
  upstream = await startDocumentUpstream(suffix);
  stack = await startStack({ UPSTREAM_URL: upstream.url });
  return { url: stack.url, upstream };
}

const BODY = '{"metadata":{"color":"blue"}}';
const json = { 'content-type': 'application/json' };

describe("a legacy client's If-None-Match on a write (RFC 9110 §13.1.2)", () => {
  it.each(['PUT', 'DELETE'])(
    '%s with the current tag of an unpatched copy is refused 412 by the upstream, not performed',
    async (method) => {
      const { url, upstream } = await start();
      // The tag as a current client (or an unpatched response) has it.
      const current = await send(url, 'GET', '/docs/1', CURRENT);
      const tag = String(current.headers.etag);
      expect(tag).toBe('"doc-v1"');
      const write = await send(url, method, '/docs/1', { ...LEGACY, ...json, 'if-none-match': tag }, BODY);
      expect(write.status).toBe(412);
      expect(upstream.conditions.at(-1)).toBe('"doc-v1"');
      expect(upstream.version()).toBe(1);
    },
  );

  it("PUT with the client's own patched tag goes as the upstream's tag: refused 412", async () => {
    const { url, upstream } = await start();
    const own = await send(url, 'GET', '/docs/1', LEGACY);
    expect(String(own.body)).toContain('"tags":{"color":"red"}');
    const tag = String(own.headers.etag);
    expect(tag).toBe('W/"doc-v1+patched"');
    const write = await send(url, 'PUT', '/docs/1', { ...LEGACY, ...json, 'if-none-match': tag }, BODY);
    expect(write.status).toBe(412);
    expect(upstream.conditions.at(-1)).toBe('"doc-v1", W/"doc-v1", W/"doc-v1+patched"');
    expect(upstream.version()).toBe(1);
  });

  // The strong spelling of a patched tag is the shim's too (fix 159), but it also goes as sent: an
  // upstream whose own tag is `"doc-v1+patched"` must still refuse the write (review of fix 159).
  it.each(['W/"doc-v1+patched"', '"doc-v1+patched"'])(
    "PUT with %s, the upstream's own current tag, is refused 412: the precondition is never weakened",
    async (tag) => {
      const { url, upstream } = await start('+patched');
      const write = await send(url, 'PUT', '/docs/1', { ...LEGACY, ...json, 'if-none-match': tag }, BODY);
      expect(write.status).toBe(412);
      expect(upstream.conditions.at(-1)).toBe(`"doc-v1", W/"doc-v1", ${tag}`);
      expect(upstream.version()).toBe(1);
    },
  );

  it('PUT with a list of stale tags is performed, every tag forwarded', async () => {
    const { url, upstream } = await start();
    const write = await send(
      url,
      'PUT',
      '/docs/1',
      { ...LEGACY, ...json, 'if-none-match': '"doc-v0", W/"doc-v7+patched"' },
      BODY,
    );
    expect(write.status).toBe(200);
    expect(upstream.conditions.at(-1)).toBe('"doc-v0", "doc-v7", W/"doc-v7", W/"doc-v7+patched"');
    expect(upstream.version()).toBe(2);
  });

  it("a GET's unmarked tag is still not asked about (another variant's copy: fix 92)", async () => {
    const { url, upstream } = await start();
    const read = await send(url, 'GET', '/docs/1', { ...LEGACY, 'if-none-match': '"doc-v1"' });
    expect(read.status).toBe(200);
    expect(String(read.body)).toContain('"tags":{"color":"red"}');
    expect(upstream.conditions.at(-1)).toBeUndefined();
  });
});
