/**
 * Attack surface: pipelined requests behind a rewritten body (RFC 9112 §9.3.2). A legacy client's
 * `POST /missions` is read whole and rewritten before it is forwarded; the shim handed the `GET` parsed
 * behind it to the pipeline at once, so the GET reached the upstream first and listed the missions
 * without the new one. Pipelined requests are handled one at a time (src/proxy/server.ts
 * `pipelineInOrder`). Goes with `src/aliases/` at 1.0; the core's case is in request-smuggling.test.ts.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { sendRawUntilClose, statusesIn } from '../helpers/http.ts';
import { answerEachRequest, frameRequests } from '../helpers/http1-frames.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterAll(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

const AUTH = 'Host: shim.test\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n';

describe('pipelined requests behind a rewritten body', () => {
  it('a GET pipelined behind a rewritten POST reaches the upstream after it', async () => {
    const upstream = await startRawUpstream(answerEachRequest());
    upstreams.push(upstream);
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    const body = JSON.stringify({ name: 'm', tags: {} });
    const raw = await sendRawUntilClose(
      stack.url,
      `POST /missions HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 0.59.0\r\nX-Api-Key: k\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
        `GET /missions HTTP/1.1\r\n${AUTH}Connection: close\r\n\r\n`,
    );
    expect(statusesIn(raw)).toEqual([200, 200]);
    const requests = upstream.received.flatMap((r) => frameRequests(r).requests);
    expect(requests.map((r) => `${r.method} ${r.target}`)).toEqual(['POST /missions', 'GET /missions']);
    expect(requests[0]?.body).toBe(JSON.stringify({ name: 'm', metadata: {} }));
  });
});
