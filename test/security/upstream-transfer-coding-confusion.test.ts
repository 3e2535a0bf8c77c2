/**
 * Attack: a response framed with a transfer coding the shim does not remove (raw probes of upstream
 * response heads, 2026-11-26; fix 116).
 *
 * An upstream (or whatever answers in its place) that sends `Transfer-Encoding: gzip` — alone,
 * `chunked, gzip` or `gzip, chunked` — frames its body in a coding that Node's parser does not undo:
 * it removes the chunked framing, if any, and hands on the coded bytes. The shim relayed them as a
 * plain body, chunked again, with `Transfer-Encoding` dropped as hop-by-hop: the client got compressed
 * bytes that no field named (and a legacy client a body the patch could not read). RFC 9112 §6.1
 * defines `chunked` as the only coding a recipient must remove; nginx's proxy answers any other 502
 * ("upstream sent unknown Transfer-Encoding"), and so does the shim now
 * (src/proxy/upstream-error.ts `relayableTransferCoding`), counted as an invalid upstream response,
 * its connection never reused.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { answerEachRequest } from '../helpers/http1-frames.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

/** An upstream that answers each complete request with `reply(method)`, closing after it when told to. */
async function scriptedUpstream(reply: (method: string) => string, closeAfter: boolean) {
  const answer = answerEachRequest((request) => reply(request.method));
  const upstream = await startRawUpstream((socket, received) => {
    const written = socket.bytesWritten;
    answer(socket, received);
    if (closeAfter && socket.bytesWritten > written) socket.end();
  });
  upstreams.push(upstream);
  return upstream;
}

const invalidCount = async (stack: Stack) =>
  Number(
    /shim_upstream_errors_total\{kind="invalid"\} (\d+)/.exec(await stack.metrics.registry.metrics())?.[1] ??
      0,
  );

describe('an upstream body in a transfer coding the shim does not remove', () => {
  const GZIP_BYTES = '\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03';
  const cases: Array<[string, string]> = [
    ['Transfer-Encoding: gzip (delimited by the close)', `Transfer-Encoding: gzip\r\n\r\n${GZIP_BYTES}`],
    ['Transfer-Encoding: chunked, gzip', `Transfer-Encoding: chunked, gzip\r\n\r\n${GZIP_BYTES}`],
    [
      'Transfer-Encoding: gzip, chunked',
      `Transfer-Encoding: gzip, chunked\r\n\r\n${GZIP_BYTES.length.toString(16)}\r\n${GZIP_BYTES}\r\n0\r\n\r\n`,
    ],
    [
      'two field lines: chunked, then gzip',
      'Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n[]',
    ],
  ];

  it.each(cases)('%s: a 502 JSON, counted invalid, for current and legacy clients alike', async (_, rest) => {
    const upstream = await scriptedUpstream(
      () => `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n${rest}`,
      true,
    );
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    for (const headers of [CURRENT, LEGACY]) {
      const before = await invalidCount(stack);
      const reply = await send(stack.url, 'GET', '/missions', headers);
      expect(reply.status).toBe(502);
      expect(reply.json()).toMatchObject({ statusCode: 502, error: 'Bad Gateway' });
      expect(reply.text).not.toContain('\x1f\x8b');
      expect(await invalidCount(stack)).toBe(before + 1);
    }
    expect(
      stack
        .logs()
        .filter((line) => line.msg === 'request completed')
        .map((line) => line.upstreamError),
    ).toEqual(['ESHIMTRANSFERCODING', 'ESHIMTRANSFERCODING']);
  });

  it('chunked alone, in any case, and a HEAD naming a coding are relayed as before', async () => {
    const upstream = await scriptedUpstream(
      (method) =>
        method === 'HEAD'
          ? 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n'
          : 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n',
      false,
    );
    const stack = await startStack({ UPSTREAM_URL: upstream.url });
    stacks.push(stack);
    const get = await send(stack.url, 'GET', '/missions', CURRENT);
    expect(get.status).toBe(200);
    expect(get.text).toBe('[]');
    const head = await send(stack.url, 'HEAD', '/missions', CURRENT);
    expect(head.status).toBe(200);
    expect(await invalidCount(stack)).toBe(0);
  });
});
