/**
 * Upstream faults injected at the HTTP-client level with nock (SPEC §4): errors a real server cannot
 * produce on demand (`ECONNRESET`, `ECONNREFUSED` from the client library) map to 502, and the shim
 * serves the next request. Kept apart from upstream-faults.test.ts, whose raw TCP upstreams must run
 * over real sockets: nock intercepts every socket of the process while it is active.
 */
import nock from 'nock';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
// nock activates itself when first imported; in a worker that already ran this file it is restored.
beforeAll(() => {
  if (!nock.isActive()) nock.activate();
});
afterEach(async () => {
  nock.cleanAll();
  for (const s of stacks.splice(0)) await s.close();
});
afterAll(() => nock.restore());

describe('faults injected with nock', () => {
  it('maps ECONNRESET and ECONNREFUSED from the HTTP client to 502, then serves normally', async () => {
    const stack = await startStack({ UPSTREAM_URL: 'http://upstream.test' });
    stacks.push(stack);
    // The shim keeps the client's Host header, and nock matches on it. Delays are tested with raw
    // upstreams above: nock 15 intercepts at the socket level, and destroying a delayed intercepted
    // request also aborts the test client's own pass-through connection.
    const headers = { ...CURRENT, host: 'upstream.test' };
    // An Error object, not a plain one: nock 14+ hangs on plain objects (nock/nock#2789, #2899).
    nock('http://upstream.test')
      .get('/missions')
      .replyWithError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    const reset = await send(stack.url, 'GET', '/missions', headers);
    expect(reset.status).toBe(502);
    nock('http://upstream.test')
      .get('/missions')
      .replyWithError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
    const refused = await send(stack.url, 'GET', '/missions', headers);
    expect(refused.status).toBe(502);
    nock('http://upstream.test')
      .get('/missions')
      .reply(200, '{"data":[]}', { 'content-type': 'application/json' });
    const ok = await send(stack.url, 'GET', '/missions', headers);
    expect(ok.status).toBe(200);
    expect(ok.text).toBe('{"data":[]}');
  });
});
