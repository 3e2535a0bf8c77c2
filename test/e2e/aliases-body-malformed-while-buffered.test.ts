/**
 * A legacy body buffered for a rewrite turns malformed (a bad chunk size): the HTTP server answers
 * the request itself with its 400, and its socket lingers. The body read must end there: before, it
 * ran on to `BODY_TIMEOUT_MS`, whose 408 (written into a socket closed for writing, so never seen)
 * replaced the 400 in the request's log line and was counted as a `body_timeout` rejection beside the
 * `malformed` one (review of fix 156, 2026-11-27). Real sockets.
 *
 * Delete this file with `src/aliases/` at 1.0 (docs/removing-the-alias-layer.md).
 */
import { once } from 'node:events';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/poll.ts';
import { startRawUpstream } from '../helpers/raw-upstream.ts';
import { rejected } from '../helpers/refused-upload.ts';
import { LEGACY, startStack } from '../helpers/stack.ts';

describe('a legacy body buffered for a rewrite that turns malformed', () => {
  it("the server's 400 stands: no 408 at BODY_TIMEOUT_MS replaces it in the log or the metrics", async () => {
    const upstream = await startRawUpstream(() => {});
    const shim = await startStack({ UPSTREAM_URL: upstream.url, BODY_TIMEOUT_MS: '1000' });
    // A client that keeps its side open after the 400 and sends nothing more (the linger ends it).
    const client = net.connect({
      port: Number(new URL(shim.url).port),
      host: '127.0.0.1',
      allowHalfOpen: true,
    });
    client.on('error', () => {});
    let text = '';
    client.on('data', (d: Buffer) => {
      text += d.toString('latin1');
    });
    try {
      await once(client, 'connect');
      client.write(
        `POST /missions HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: ${LEGACY['service-client-version']}\r\n` +
          `X-Api-Key: ${LEGACY['x-api-key']}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{"\r\n`,
      );
      await waitFor(async () => (await rejected(shim, 'malformed')) === 0, { what: 'the stack' });
      client.write('zz\r\n');
      await waitFor(() => text.includes('\r\n\r\n{'), { what: 'the 400' });
      const line = () =>
        shim
          .logs()
          .find((l) => l.msg === 'request completed' && (l.req as { path?: string })?.path === '/missions');
      // The line comes when the linger ends (5 s), past BODY_TIMEOUT_MS.
      await waitFor(() => line() !== undefined, { what: "the request's log line", timeoutMs: 10_000 });
      expect(text.match(/HTTP\/1\.1 /g)).toEqual(['HTTP/1.1 ']);
      expect(text).toMatch(/^HTTP\/1\.1 400 /);
      expect((line()!.res as { statusCode: number }).statusCode).toBe(400);
      expect(line()!.rejection).toBeUndefined();
      expect(await rejected(shim, 'body_timeout')).toBe(0);
      expect(await rejected(shim, 'malformed')).toBe(1);
    } finally {
      client.destroy();
      await shim.close();
      await upstream.close();
    }
  }, 20_000);
});
