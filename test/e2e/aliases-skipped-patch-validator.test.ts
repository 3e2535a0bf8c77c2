/**
 * A legacy response whose patch was skipped before its first byte went out carries the upstream's own
 * head, not the patched one (docs/reliability.md fix 162). The patched head marks the tag
 * (`W/"x+patched"`, validators.ts) as the patched representation's; a body sent without `tags` under
 * it (the patch skipped for a full buffer budget, `budget_exhausted`) was stored by client caches
 * (CacheControl, got's cacheable-request, curl `--etag-compare`) and revalidated with that tag: the
 * shim asked the upstream with `"x"`, the upstream said 304, and the cache kept the body without `tags`
 * until the upstream's representation changed. A short overload became a lasting loss of the aliases.
 *
 * Goes with the alias layer (`src/aliases/`): deleted with it (docs/removing-the-alias-layer.md).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

/** A canonical value larger than the whole budget: the patch cannot hold it (`budget_exhausted`). */
const BIG = JSON.stringify({ metadata: 'x'.repeat(8_000) });
const SMALL = JSON.stringify({ metadata: ['m'] });

let upstream: http.Server;
let stack: Stack;
const conditions: Array<string | undefined> = [];
beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    const big = req.url === '/big';
    const etag = big ? '"v1big"' : '"v1small"';
    conditions.push(req.headers['if-none-match']);
    const inm = req.headers['if-none-match'];
    const matches = inm?.split(',').some((t) => t.trim().replace(/^W\//, '') === etag) ?? false;
    const head = { 'Content-Type': 'application/json', ETag: etag, 'Cache-Control': 'max-age=2' };
    const body = big ? BIG : SMALL;
    if (matches) res.writeHead(304, head).end();
    else res.writeHead(200, { ...head, 'Content-Length': String(body.length) }).end(body);
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  stack = await startStack({
    UPSTREAM_URL: `http://127.0.0.1:${port}`,
    MAX_BUFFERED_BYTES: '4kb',
    MAX_REWRITE_BODY: '1kb',
    REQUEST_BUFFER_BYTES: '1kb',
  });
});
afterAll(async () => {
  await stack.close();
  upstream.closeAllConnections();
  await new Promise((resolve) => upstream.close(resolve));
});

describe('a patch skipped before the first byte (budget_exhausted)', () => {
  it("sends the upstream's head: its own tag and length, so no cache keeps the body under the patched tag", async () => {
    const reply = await send(stack.url, 'GET', '/big', LEGACY);
    expect(reply.status).toBe(200);
    expect(reply.text).toBe(BIG); // unpatched: the value did not fit the budget
    expect(reply.headers.etag).toBe('"v1big"');
    expect(reply.headers['content-length']).toBe(String(BIG.length));
    expect(reply.headers['transfer-encoding']).toBeUndefined();
    expect(String(reply.headers.vary)).toMatch(/Service-Client-Version/i);
    const skipped = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    expect(skipped).toMatch(/shim_response_patches_skipped_total\{reason="budget_exhausted"\} [1-9]/);

    // A cache revalidates with what it stored: the upstream's tag, which names no patched copy, so the
    // shim asks the upstream without it and the client gets the full body again (never a 304 that keeps
    // a body without `tags`).
    const again = await send(stack.url, 'GET', '/big', { ...LEGACY, 'if-none-match': '"v1big"' });
    expect(again.status).toBe(200);
    expect(conditions.at(-1)).toBeUndefined();
  });

  it('a patched response of the same shim still carries the patched head', async () => {
    const reply = await send(stack.url, 'GET', '/small', LEGACY);
    expect(reply.text).toBe('{"metadata":["m"],"tags":["m"]}');
    expect(reply.headers.etag).toBe('W/"v1small+patched"');
    expect(reply.headers['content-length']).toBeUndefined();
  });
});
