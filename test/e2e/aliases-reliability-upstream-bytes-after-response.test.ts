/**
 * Upstream fault, for a legacy client: bytes after a complete response (RFC 9112 §6.3). An upstream that sends a body longer
 * than its `Content-Length`, or a body after a 204, leaves bytes that start no valid response: Node's
 * client fails the connection after the response has been read whole. The response goes on to the
 * client, counted as an invalid upstream response; the connection is not reused.
 *
 * Found by an audit (2026-11-25): for a legacy client the shim answered 502 and then wrote the upstream's
 * buffered body into its finished response, an unhandled `ERR_STREAM_WRITE_AFTER_END` that ended the
 * process (every exchange in flight with it). The core's own cases: upstream-bytes-after-response.test.ts.
 * Goes with `src/aliases/` at 1.0.
 */

import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { getOutcome, send } from '../helpers/http.ts';
import { closeAll, stackWithReply as stackWith } from '../helpers/one-shot-upstream.ts';
import { CURRENT, LEGACY, type Stack } from '../helpers/stack.ts';

afterEach(closeAll);

const MISSION = '{"uuid":"m1","metadata":[1],"name":"x"}';

const invalidCount = async (stack: Stack) =>
  Number(
    /shim_upstream_errors_total\{kind="invalid"\} (\d+)/.exec(await stack.metrics.registry.metrics())?.[1] ??
      0,
  );

describe('bytes after a complete upstream response', () => {
  it.each([['a legacy client (patched)', LEGACY, `${MISSION.slice(0, -1)},"tags":[1]}`]])(
    'a body one byte longer than its Content-Length: %s gets the response whole',
    async (_who, headers, body) => {
      const stack = await stackWith(
        () =>
          `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${MISSION.length}\r\n\r\n${MISSION}X`,
      );
      const reply = await send(stack.url, 'GET', '/missions/m1', headers);
      expect(reply.status).toBe(200);
      expect(reply.body.toString()).toBe(body);
      expect(await invalidCount(stack)).toBe(1);
      // The shim goes on serving (the crash ended the process here).
      expect((await send(stack.url, 'GET', '/health', CURRENT)).status).toBe(200);
    },
  );

  it.each([['a legacy client', LEGACY]])(
    'a 204 followed by a body: %s gets the 204',
    async (_who, headers) => {
      const stack = await stackWith(() => 'HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello');
      const reply = await send(stack.url, 'GET', '/missions/m1', headers);
      expect(reply.status).toBe(204);
      expect(reply.body.length).toBe(0);
      expect((await send(stack.url, 'GET', '/health', CURRENT)).status).toBe(200);
    },
  );

  it('a chunked JSON response cut by an invalid chunk size: a legacy client gets 502 (or, once bytes went out, an abort), and the shim goes on', async () => {
    const first = MISSION.slice(0, 20);
    const stack = await stackWith(
      () =>
        `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n` +
        `${first.length.toString(16)}\r\n${first}\r\nZZZ\r\n`,
    );
    // One write from the upstream, usually one read: nothing has reached the client when the parser fails.
    const reply = await send(stack.url, 'GET', '/missions/m1', LEGACY).catch((err: Error) => err);
    if (reply instanceof Error) expect(reply.message).toMatch(/socket hang up|aborted|ECONNRESET/);
    else {
      expect(reply.status).toBe(502);
      expect(reply.json()).toMatchObject({ statusCode: 502, error: 'Bad Gateway' });
    }
    expect((await send(stack.url, 'GET', '/health', CURRENT)).status).toBe(200);
  });

  it('a gzip body that does not decode, with a byte past its end: the client is not left waiting', async () => {
    const gzip = gzipSync(Buffer.from(`[${MISSION},${MISSION},${MISSION}]`));
    const cut = gzip.subarray(0, gzip.length - 12); // no gzip trailer: the decoder fails at the end
    const stack = await stackWith(
      () =>
        `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: ${cut.length}\r\n\r\n${cut.toString('latin1')}X`,
    );
    // The connection's error comes first (the response is whole), the decoder's after it: the second
    // must still end the client's response (an abort, or a 502 when nothing was sent).
    const outcome = await getOutcome(`${stack.url}/missions`, { ...LEGACY, 'accept-encoding': 'gzip' });
    expect(outcome.status === 502 || !outcome.complete).toBe(true);
    expect((await send(stack.url, 'GET', '/health', CURRENT)).status).toBe(200);
  });
});
