/**
 * An upstream address whose connections are never established, as a host that drops SYNs (a partition,
 * a dead node, a firewall) looks: test/e2e/upstream-faults.test.ts, test/e2e/vanished-peers.test.ts.
 */
import { once } from 'node:events';
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import { waitFor } from './poll.ts';

/** An upstream whose connections never complete. */
export interface UnconnectableUpstream {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** Frees the listener's thread and its two queued connections. */
  close(): Promise<void>;
}

/**
 * Starts a listener on a thread that is blocked (it accepts nothing) with its accept queue filled
 * (backlog 1: two connections on Linux), so that the kernel drops every later SYN (`ListenOverflows`)
 * and a connect stays pending, retransmitting, until the caller gives up. Real sockets, no timer.
 * @returns Its URL and a `close`.
 */
export async function startUnconnectableUpstream(): Promise<UnconnectableUpstream> {
  const gate = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     const server = require('node:net').createServer();
     server.listen({ host: '127.0.0.1', port: 0, backlog: 1 }, () => {
       parentPort.postMessage(server.address().port);
       Atomics.wait(workerData, 0, 0);
     });`,
    { eval: true, workerData: gate },
  );
  const [port] = (await once(worker, 'message')) as [number];
  const fillers: net.Socket[] = [];
  let connected = 0;
  for (let i = 0; i < 2; i++) {
    const filler = net.connect(port, '127.0.0.1', () => connected++);
    filler.on('error', () => {});
    fillers.push(filler);
  }
  await waitFor(() => connected === 2, { what: 'the accept queue filled' });
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      for (const filler of fillers) filler.destroy();
      Atomics.store(gate, 0, 1);
      Atomics.notify(gate, 0);
      await worker.terminate();
    },
  };
}
