/**
 * Upstream fault: bytes after a complete response (RFC 9112 §6.3). An upstream that sends a body longer
 * than its `Content-Length`, or a body after a 204, leaves bytes that start no valid response: Node's
 * client fails the connection after the response has been read whole. The response goes on to the
 * client, counted as an invalid upstream response; the connection is not reused.
 *
 * Found by an audit (2026-11-25): a current client got an empty reply. (A legacy client's patched
 * response, which ended the process, is in aliases-reliability-upstream-bytes-after-response.test.ts.)
 */
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { closeAll, stackWithReply as stackWith } from '../helpers/one-shot-upstream.ts';
import { CURRENT, type Stack } from '../helpers/stack.ts';

afterEach(closeAll);

const MISSION = '{"uuid":"m1","metadata":[1],"name":"x"}';

const invalidCount = async (stack: Stack) =>
  Number(
    /shim_upstream_errors_total\{kind="invalid"\} (\d+)/.exec(await stack.metrics.registry.metrics())?.[1] ??
      0,
  );

describe('bytes after a complete upstream response', () => {
  it.each([['a current client', CURRENT, MISSION]])(
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

  it.each([['a current client', CURRENT]])(
    'a 204 followed by a body: %s gets the 204',
    async (_who, headers) => {
      const stack = await stackWith(() => 'HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello');
      const reply = await send(stack.url, 'GET', '/missions/m1', headers);
      expect(reply.status).toBe(204);
      expect(reply.body.length).toBe(0);
      expect((await send(stack.url, 'GET', '/health', CURRENT)).status).toBe(200);
    },
  );
});
