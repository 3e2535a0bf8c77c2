/**
 * A shim whose standard output has lost its reader (a log pipe's consumer that died: `node … | shipper`,
 * a supervisor's pipe, journald restarted under a service's stream) must still exit on SIGTERM. The
 * logger's exit handler flushed with sonic-boom's `flushSync`, which retries every write error but
 * EAGAIN forever: on `EPIPE` the process stayed alive after its drain, deaf to further signals, until a
 * SIGKILL (docs/reliability.md fix 73).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/poll.ts';
import { type ShimProcess, spawnShim } from '../helpers/spawn-shim.ts';

const running: ShimProcess[] = [];
const upstream = http.createServer((_req, res) => res.end('{}'));

afterAll(async () => {
  for (const shim of running) if (shim.child.exitCode === null) shim.child.kill('SIGKILL');
  await new Promise((r) => upstream.close(r));
});

describe('SIGTERM with standard output gone', () => {
  it('the drain ends the process', async () => {
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const { port } = upstream.address() as AddressInfo;
    const shim = await spawnShim({ UPSTREAM_URL: `http://127.0.0.1:${port}`, SHUTDOWN_TIMEOUT_MS: '2000' });
    running.push(shim);
    // The reader of both pipes goes away: every write of the shim's log now fails with EPIPE.
    shim.child.stdout?.destroy();
    shim.child.stderr?.destroy();
    shim.child.kill('SIGTERM');
    // The drain has nothing in flight; the backstop would end it after SHUTDOWN_TIMEOUT_MS + 5 s.
    await waitFor(() => shim.child.exitCode !== null || shim.child.signalCode !== null, {
      timeoutMs: 15_000,
      what: 'the shim to exit',
    });
    expect(shim.child.exitCode).toBe(0);
  });
});
