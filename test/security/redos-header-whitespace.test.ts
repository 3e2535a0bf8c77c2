/**
 * Attack: ReDoS through optional whitespace (docs/reliability.md fix 82). The shim trims SP and HTAB
 * around `Transfer-Encoding` (hygiene gate, before any credential check) and around each element of a
 * client's `X-Forwarded-Host` and `X-Forwarded-Proto` (forwarder). The trim was `/^[ \t]+|[ \t]+$/g`,
 * which tries `[ \t]+$` from every position of a run of whitespace that something other than the
 * end follows: quadratic in the run. One head of 16 KiB, `Transfer-Encoding: a<16,000 spaces>b,
 * chunked` to the public `/api/health` without credentials, held the event loop for ~120 ms (a normal
 * request of that size: 2 ms).
 *
 * Each case sends the same number of attack and ordinary requests of the same size and compares the
 * CPU time the (in-process) shim spent on them: linear work costs the same; the old trim cost about
 * 50 times more.
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

/** Requests of each kind per case. */
const REQUESTS = 8;
/** Length of the run of whitespace: the head stays under the shim's 16 KiB. */
const RUN = MAX_HEADER_BYTES - 512;
const run = ' '.repeat(RUN);
const same = 'a'.repeat(RUN);

const send = (head: string, body = '') =>
  sendRawUntilClose(
    stack.url,
    Buffer.from(`${head}Host: shim.test\r\nConnection: close\r\n\r\n${body}`, 'latin1'),
  );

/** CPU ms for {@link REQUESTS} requests of `head`, and the statuses they got. */
async function cost(head: string, body?: string) {
  const { result, ms } = await cpuOfEach(REQUESTS, () => send(head, body));
  return { ms, statuses: result.flatMap(statusesIn) };
}

describe('a long run of whitespace inside a trimmed value costs what its bytes cost', () => {
  it('Transfer-Encoding: a<spaces>b, chunked to a public path, no credentials → 400 as before, linear', async () => {
    const attack = await cost(
      `POST /api/health HTTP/1.1\r\nTransfer-Encoding: a${run}b, chunked\r\n`,
      '0\r\n\r\n',
    );
    const normal = await cost(
      `POST /api/health HTTP/1.1\r\nTransfer-Encoding: chunked\r\nX-Padding: a${same}b\r\n`,
      '0\r\n\r\n',
    );
    expect(attack.statuses).toEqual(Array(REQUESTS).fill(400));
    expect(normal.statuses).toEqual(Array(REQUESTS).fill(200));
    expect(attack.ms).toBeLessThan(100 + 4 * normal.ms);
  });

  it.each([
    ['X-Forwarded-Host', 'shim.test'],
    ['X-Forwarded-Proto', 'http'],
  ])('%s: a<spaces>b from an admitted client → dropped as invalid as before, linear', async (name, own) => {
    const since = markRequests(upstream.received);
    const version = 'Service-Client-Version: 1.0.0\r\nx-api-key: k\r\n';
    const attack = await cost(`GET /user/me HTTP/1.1\r\n${version}${name}: a${run}b\r\n`);
    const forwarded = since();
    const normal = await cost(`GET /user/me HTTP/1.1\r\n${version}X-Padding: a${same}b\r\n`);
    expect(attack.statuses).toEqual(Array(REQUESTS).fill(200));
    expect(normal.statuses).toEqual(Array(REQUESTS).fill(200));
    // The client's value is not a host (or scheme): this hop's alone goes upstream (fix 25).
    const values = forwarded.map((r) =>
      r.headers.filter(([n]) => n.toLowerCase() === name.toLowerCase()).map(([, v]) => v),
    );
    expect(values).toEqual(Array(REQUESTS).fill([own]));
    expect(attack.ms).toBeLessThan(100 + 4 * normal.ms);
  });
});
