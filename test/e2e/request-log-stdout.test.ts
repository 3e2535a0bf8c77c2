/**
 * The request log as the process writes it: on standard output, the lines of one event-loop turn
 * joined and written together (src/observability/logger.ts `stdoutPerTurn`), each line made by
 * `lineWriter`. Many responses finishing in the same turns must still give one whole line each.
 */
import { once } from 'node:events';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/poll.ts';
import { type ShimProcess, spawnShim } from '../helpers/spawn-shim.ts';

let shim: ShimProcess | undefined;
let upstream: Server | undefined;
afterEach(async () => {
  await shim?.stop();
  shim = undefined;
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
  upstream = undefined;
});

/** A GET through the shim on a connection of its own; resolves with the status once the body is read. */
function get(url: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, {
      agent: false,
      headers: { 'x-api-key': 'k', 'service-client-version': '1.0.0' },
    });
    req.once('response', (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
    });
    req.once('error', reject);
    req.end();
  });
}

describe('request log on standard output', () => {
  it('writes one whole line per request when hundreds finish together, and the last ones at exit', async () => {
    upstream = createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end('{"ok":true}');
    });
    upstream.listen(0, '127.0.0.1');
    await once(upstream, 'listening');
    shim = await spawnShim({ UPSTREAM_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}` });
    const running = shim;
    const count = 400; // ~130 KB of lines: several writes of TURN_BUFFER_LENGTH within a turn
    const paths = Array.from({ length: count }, (_, i) => `/missions/m-${i}?secret=q-${i}`);
    const statuses = await Promise.all(paths.map((path) => get(running.url, path)));
    expect(statuses.every((s) => s === 200)).toBe(true);
    const completed = () =>
      running
        .output()
        .split('\n')
        .filter((l) => l.includes('"msg":"request completed"'));
    await waitFor(() => completed().length >= count, { what: `${count} request lines` });
    const lines = completed().map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(count);
    expect(new Set(lines.map((l) => l.reqId)).size).toBe(count);
    expect(new Set(lines.map((l) => (l.req as { path: string }).path))).toEqual(
      new Set(paths.map((p) => p.replace(/\?.*/, ''))),
    );
    for (const line of lines)
      expect(line).toMatchObject({ level: 30, service: 'compat-shim', res: { statusCode: 200 } });
    expect(running.output()).not.toContain('secret=');
    expect(await running.stop()).toBe(0);
    expect(running.output()).toContain('"msg":"stopped"');
  });
});
