/**
 * A legacy client's body held for a rewrite (`BODY_TIMEOUT_MS`) that the client sent while the shim was
 * stopped (SIGSTOP then SIGCONT: a VM live migration, a frozen cgroup) for longer than the timeout:
 * rewritten and forwarded, not refused with 408 for the shim's own pause (docs/reliability.md "Paused
 * and starved", fix 99). `paused-shim.test.ts` has the exchanges that need no alias.
 */
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { responseStatus } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { isStopped, SHIPPED_NODE_FLAGS, type ShimProcess, spawnShim } from '../helpers/spawn-shim.ts';

const TIMEOUT_MS = 1_000;

let shim: ShimProcess | undefined;
let upstream: Server | undefined;
afterAll(async () => {
  shim?.child.kill('SIGCONT');
  await shim?.stop();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
});

describe('a shim stopped longer than BODY_TIMEOUT_MS while a legacy client sends its body', () => {
  it('rewrites and forwards the body that arrived during the stop (not 408)', async () => {
    const bodies: string[] = [];
    upstream = http.createServer((req, res) => {
      let text = '';
      req.on('data', (d: Buffer) => {
        text += d.toString();
      });
      req.on('end', () => {
        if (req.url !== '/api/health') bodies.push(text);
        res.writeHead(201, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((r) => upstream?.listen(0, '127.0.0.1', r));
    shim = await spawnShim(
      {
        UPSTREAM_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
        BODY_TIMEOUT_MS: String(TIMEOUT_MS),
      },
      [],
      SHIPPED_NODE_FLAGS,
    );
    const running = shim;
    const body = JSON.stringify({
      name: 'm',
      tags: [{ name: 'a', value: 'b' }],
      note: 'n'.repeat(32 * 1024),
    });
    const url = new URL(running.url);
    const req = http.request({
      host: url.hostname,
      port: url.port,
      method: 'POST',
      path: '/missions',
      headers: {
        'service-client-version': '0.59.0',
        'x-api-key': 'k',
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        // The shim answers 100 once it holds the request for its rewrite: its body deadline runs.
        expect: '100-continue',
      },
      agent: false,
    });
    const status = responseStatus(req);
    await new Promise<void>((r) => req.once('continue', r));
    running.child.kill('SIGSTOP');
    const stoppedAt = performance.now();
    await waitFor(() => isStopped(running.child.pid), { what: 'the shim stopped' });
    req.end(body);
    await waitFor(() => req.writableFinished && performance.now() - stoppedAt > 2.5 * TIMEOUT_MS, {
      what: 'the body sent while the shim is stopped',
    });
    running.child.kill('SIGCONT');
    expect(await status).toBe(201);
    expect(bodies).toHaveLength(1);
    expect(JSON.parse(bodies[0] ?? '').metadata).toEqual([{ name: 'a', value: 'b' }]);
  });
});
