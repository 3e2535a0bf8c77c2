/**
 * Attack: a flood of malformed percent-escapes in a legacy client's query (docs/reliability.md fix 83).
 * The query rewrite percent-decodes each parameter's name to compare it with the aliases; it did so
 * with `decodeURIComponent` in a `try`, and a malformed escape (`%`, `%ff`, `%e0%80`) made it throw: one
 * exception per parameter, ~10 µs each. A 16 KiB head with 7,900 parameters `%&%&…` (any API key)
 * held the event loop ~85 ms; a query of the same size with valid escapes, 3 ms.
 *
 * Compares the CPU time the (in-process) shim spends on requests whose queries differ only in the
 * escapes' validity: the same with the fix, about 10 times more without it. The query still goes
 * upstream byte for byte.
 *
 * Goes with the alias layer (`src/aliases/`): deleted with it (docs/removing-the-alias-layer.md).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_HEADER_BYTES } from '../../src/proxy/server.ts';
import { cpuOfEach } from '../helpers/cpu.ts';
import { sendRawUntilClose, statusesIn } from '../helpers/http.ts';
import { answerEachRequest, markRequests } from '../helpers/http1-frames.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

let upstream: RawUpstream;
let stack: Stack;
beforeAll(async () => {
  upstream = await startRawUpstream(answerEachRequest());
  stack = await startStack({ UPSTREAM_URL: upstream.url, LOG_LEVEL: 'warn' });
});
afterAll(async () => {
  await stack.close();
  await upstream.close();
});

/** Requests of each kind. */
const REQUESTS = 16;
/** Parameters per query: `%XX&` four bytes each, the head under the shim's 16 KiB. */
const PARAMETERS = Math.floor((MAX_HEADER_BYTES - 512) / 4);

/** A legacy `GET /files` (a route with a query alias) with `query`; CPU ms, statuses, targets forwarded. */
async function cost(query: string) {
  const since = markRequests(upstream.received);
  const head = `GET /files?${query} HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 0.59.0\r\nx-api-key: k\r\nConnection: close\r\n\r\n`;
  const { result, ms } = await cpuOfEach(REQUESTS, () => sendRawUntilClose(stack.url, head));
  return { ms, statuses: result.flatMap(statusesIn), targets: since().map((r) => r.target) };
}

describe('a query of malformed escapes costs what a query of valid ones costs', () => {
  it.each(['%', '%ff', '%e0'])('%s escapes: forwarded unchanged, linear', async (bad) => {
    const attack = Array(PARAMETERS)
      .fill(`${bad}${'x'.repeat(3 - bad.length)}`)
      .join('&');
    const normal = Array(PARAMETERS).fill('%41').join('&');
    await cost(attack); // the first requests compile the paths they take
    await cost(normal);
    const a = await cost(attack);
    const n = await cost(normal);
    expect(a.statuses).toEqual(Array(REQUESTS).fill(200));
    expect(n.statuses).toEqual(Array(REQUESTS).fill(200));
    expect(a.targets).toEqual(Array(REQUESTS).fill(`/files?${attack}`));
    expect(a.ms).toBeLessThan(50 + 3 * n.ms);
  });
});
