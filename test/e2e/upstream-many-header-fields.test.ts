/**
 * An upstream response with more than 1,000 header fields (raw probes of upstream response heads,
 * 2026-11-26; fix 121).
 *
 * Node's HTTP client keeps the first 1,000 fields of a response head and drops the rest without an
 * error (`maxHeadersCount`, 2,000 names and values): the shim relayed a 200 whose later fields were
 * gone — here `Cache-Control: private` and `Vary: Cookie`, without which a cache in front may store
 * one user's response for everyone. nginx keeps every field its buffer holds. The shim now reads every
 * field (src/proxy/upstream-attempt.ts), the head still bounded by the parser's size limit: a head
 * beyond it is a malformed response, 502.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { sendRawUntilClose } from '../helpers/http.ts';
import { answerEachRequest } from '../helpers/http1-frames.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

/** A shim in front of an upstream whose 200 carries `fields` short fields, then the two that matter. */
async function stackAnsweringWith(fields: number): Promise<Stack> {
  const filler = Array.from({ length: fields }, (_, i) => `X-F${i}: v\r\n`).join('');
  const upstream = await startRawUpstream(
    answerEachRequest(
      () =>
        `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n${filler}` +
        'Cache-Control: private\r\nVary: Cookie\r\nContent-Length: 2\r\n\r\n{}',
    ),
  );
  upstreams.push(upstream);
  const stack = await startStack({ UPSTREAM_URL: upstream.url });
  stacks.push(stack);
  return stack;
}

/** The raw response to a current client's GET, on a connection of its own. */
function get(stack: Stack): Promise<string> {
  const head = Object.entries(CURRENT)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return sendRawUntilClose(
    stack.url,
    `GET /missions HTTP/1.1\r\nHost: shim.test\r\n${head}Connection: close\r\n\r\n`,
  );
}

describe('an upstream response head with many fields', () => {
  it('is relayed with every field, the ones after the 1,000th included', async () => {
    const response = await get(await stackAnsweringWith(1_500));
    const head = response.slice(0, response.indexOf('\r\n\r\n'));
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    expect(head.match(/^X-F\d+: v$/gm)).toHaveLength(1_500);
    expect(head).toMatch(/^Cache-Control: private$/m);
    expect(head).toMatch(/^Vary: Cookie, Service-Client-Version$/m);
    expect(response.endsWith('\r\n\r\n{}')).toBe(true);
  });

  it('beyond the parser’s size limit is a malformed response: 502 JSON, counted as invalid', async () => {
    const stack = await stackAnsweringWith(10_000);
    const response = await get(stack);
    expect(response).toMatch(/^HTTP\/1\.1 502 /);
    expect(JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4))).toMatchObject({ statusCode: 502 });
    const { values } = await stack.metrics.upstreamErrors.get();
    expect(values.find((v) => v.labels.kind === 'invalid')?.value).toBe(1);
  });
});
