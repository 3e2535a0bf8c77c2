/**
 * Attack: parameter cloaking behind a raw `;` (CVE-2021-23336's class; docs/reliability.md fix 158).
 * The query rewrite splits parameters on `&` only, as Express does; Twisted 22.4 (`parse_qs`), Rack 2,
 * CherryPy and Go before 1.17 split on `;` as well. Before the fix, a legacy client's `?x=1;tags=a`
 * reached such an upstream with the deprecated `tags` it never renamed (and the request was not counted
 * as alias use), and `?tags=a;metadataByTypeUuid=m` gave it both values where the canonical one must win
 * (service document part 9, rule 1). Now the shim refuses such a query with its 400 (`hygiene`), and
 * forwards nothing.
 *
 * The upstream is a real `node:http` server that parses the query as Twisted's `parse_qs` does.
 *
 * Goes with the alias layer (`src/aliases/`): deleted with it (docs/removing-the-alias-layer.md).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { rejected } from '../helpers/refused-upload.ts';
import { CURRENT, LEGACY, type Stack, startStack } from '../helpers/stack.ts';

/**
 * Twisted 22.4's `parse_qs` with its defaults: pieces split on `&` and `;`, those without `=` or with
 * an empty value skipped, `+` as a space, names and values percent-decoded (a malformed escape kept as
 * it is, as Python's `unquote` does).
 */
function parseLikeTwisted(query: string): Record<string, string[]> {
  const unquote = (s: string) =>
    s.replaceAll('+', ' ').replace(/(%[0-9a-f]{2})+/gi, (escapes) => {
      try {
        return decodeURIComponent(escapes);
      } catch {
        return escapes;
      }
    });
  const parsed: Record<string, string[]> = {};
  for (const piece of query.split(/[&;]/)) {
    const eq = piece.indexOf('=');
    if (eq < 0 || eq === piece.length - 1) continue;
    const name = unquote(piece.slice(0, eq));
    const values = parsed[name] ?? [];
    values.push(unquote(piece.slice(eq + 1)));
    parsed[name] = values;
  }
  return parsed;
}

let upstream: http.Server;
const targets: string[] = [];
let stack: Stack;
beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    const target = req.url ?? '/';
    targets.push(target);
    const at = target.indexOf('?');
    const body = JSON.stringify({ query: parseLikeTwisted(at < 0 ? '' : target.slice(at + 1)) });
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  stack = await startStack({ UPSTREAM_URL: `http://127.0.0.1:${port}`, LOG_LEVEL: 'warn' });
});
afterAll(async () => {
  await stack.close();
  await new Promise((resolve) => upstream.close(resolve));
});

const hygieneRejections = () => rejected(stack, 'hygiene');

describe('a legacy query with an alias cloaked behind a raw `;`', () => {
  it.each([
    '/files?x=1;tags=U1',
    '/files?take=10&x;tags=U1',
    '/files?x=1;t%61gs[]=U1',
    '/files?tags=U1;metadataByTypeUuid=U2',
    '/files?x=1;metadataByTypeUuid=U2&tags=U1',
    '/files?metadataByTypeUuid=U2&tags=U1;take=10', // dropping `tags=U1;take=10` would drop Twisted's `take`
  ])('%s: the shim 400, nothing upstream', async (target) => {
    const before = targets.length;
    const rejections = await hygieneRejections();
    const reply = await send(stack.url, 'GET', target, LEGACY);
    expect(reply.status).toBe(400);
    expect(reply.headers['cache-control']).toBe('no-store');
    expect(reply.json()).toMatchObject({ statusCode: 400, error: 'Bad Request' });
    expect(reply.json<{ message: string }>().message).toContain(
      "';' next to the deprecated parameter 'tags'",
    );
    expect(targets.length).toBe(before);
    expect(await hygieneRejections()).toBe(rejections + 1);
  });
});

describe('what a `;`-splitting upstream reads of the queries the shim forwards', () => {
  it.each([
    // A `;` beside no alias is a value's byte to `&` parsers and a separator to this one: both agree.
    ['/files?tags=U1;b=2', { metadataByTypeUuid: ['U1'], b: ['2'] }],
    ['/files?tags=U1;take=10&skip=0', { metadataByTypeUuid: ['U1'], take: ['10'], skip: ['0'] }],
    ['/files?x=1%3Btags=U1&tags=U2', { x: ['1;tags=U1'], metadataByTypeUuid: ['U2'] }],
    ['/files?tags=U1&metadataByTypeUuid=U2', { metadataByTypeUuid: ['U2'] }],
  ])('legacy %s', async (target, query) => {
    const reply = await send(stack.url, 'GET', target, LEGACY);
    expect(reply.status).toBe(200);
    expect(reply.json()).toEqual({ query });
  });

  it('a current client’s query goes as sent: no alias layer for it', async () => {
    const reply = await send(stack.url, 'GET', '/files?x=1;tags=U1', CURRENT);
    expect(reply.status).toBe(200);
    expect(targets.at(-1)).toBe('/files?x=1;tags=U1');
  });
});
