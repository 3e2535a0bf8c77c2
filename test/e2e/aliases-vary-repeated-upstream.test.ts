/**
 * Vary merging with an upstream that repeats a member (RFC 9110 §12.5.5): nginx in front of a backend
 * that compresses (Express' `compression`, which always sends `Vary: Accept-Encoding`) with `gzip on;
 * gzip_vary on;` adds a second `Vary: Accept-Encoding` line. Node joins the two lines, and the shim
 * merged its `Service-Client-Version` into `Accept-Encoding, Accept-Encoding, Service-Client-Version`:
 * a duplicate that its own merge promises never to send.
 *
 * Found with nginx behind the shim (2026-11-26): docs/reliability.md fix 53. The upstream here is a raw
 * TCP server answering as that nginx does (two Vary lines, chunked), so nginx need not be installed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { closeAll, stackWithReply } from '../helpers/one-shot-upstream.ts';
import { CURRENT, LEGACY, type Stack } from '../helpers/stack.ts';

afterEach(closeAll);

const MISSION = '{"uuid":"m1","metadata":[1],"name":"x"}';

/** What nginx 1.22 with `gzip_vary on` sends for a compressing backend's JSON (here uncompressed). */
function nginxLikeReply(varyLines: string[]): string {
  const chunk = `${Buffer.byteLength(MISSION).toString(16)}\r\n${MISSION}\r\n0\r\n\r\n`;
  return [
    'HTTP/1.1 200 OK',
    'Server: nginx/1.22.1',
    'Content-Type: application/json; charset=utf-8',
    'Transfer-Encoding: chunked',
    'Connection: keep-alive',
    ...varyLines.map((v) => `Vary: ${v}`),
    '',
    chunk,
  ].join('\r\n');
}

const stackWith = (varyLines: string[]): Promise<Stack> => stackWithReply(() => nginxLikeReply(varyLines));

const varyLinesOf = (rawHeaders: string[]): string[] =>
  rawHeaders.filter((_, i) => i % 2 === 1 && rawHeaders[i - 1]?.toLowerCase() === 'vary');

describe('an upstream Vary repeated on two lines (nginx gzip_vary in front of a compressing backend)', () => {
  it.each([
    ['a legacy client (patched)', LEGACY, ['Accept-Encoding', 'Accept-Encoding']],
    ['a current client (passed through)', CURRENT, ['Accept-Encoding', 'Accept-Encoding']],
    ['a legacy client, names in other cases', LEGACY, ['accept-encoding', 'Accept-Encoding, Origin']],
  ])('%s gets one Vary line, each member once', async (_who, headers, lines) => {
    const stack = await stackWith(lines);
    const reply = await send(stack.url, 'GET', '/missions/m1', headers);
    expect(reply.status).toBe(200);
    const vary = varyLinesOf(reply.rawHeaders);
    expect(vary).toHaveLength(1);
    const members = (vary[0] as string).split(',').map((m) => m.trim().toLowerCase());
    expect(new Set(members).size).toBe(members.length);
    expect(members).toContain('accept-encoding');
    expect(members).toContain('service-client-version');
    if (headers === LEGACY) expect(reply.json()).toMatchObject({ tags: [1], metadata: [1] });
  });
});
