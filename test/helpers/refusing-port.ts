/**
 * A loopback port that refuses connections and that no other test can take while it is held: what the
 * tests of an upstream that is down need (502 `refused`, a readiness probe's `ECONNREFUSED`).
 *
 * A port freed by closing a listener is not enough: the test files run in parallel, and the next
 * `listen(0)` of another one may be given it before the shim connects (upstream-faults.test.ts once got
 * another test's server's 431 instead of its 502). Here the port is the local end of an open client
 * connection: the kernel neither offers it to `listen(0)` nor lets a server bind it while that socket
 * is bound (it has no `SO_REUSEADDR`), and nothing listens on it, so a SYN to it is answered with a
 * reset (Linux `inet_csk_bind_conflict`; the same on every system with BSD sockets).
 */
import { once } from 'node:events';
import net from 'node:net';

/** A held port where connections are refused. */
export interface RefusingPort {
  readonly port: number;
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** Closes the connection that holds the port (and its listener): the port is free again. */
  close(): Promise<void>;
}

/**
 * Holds a refusing loopback port (see the module's comment).
 * @returns The port, its URL and `close`.
 */
export async function holdRefusingPort(): Promise<RefusingPort> {
  const accepted: net.Socket[] = [];
  const server = net.createServer((socket) => accepted.push(socket)).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await once(client, 'connect');
  const port = client.localPort!;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    async close() {
      client.destroy();
      for (const socket of accepted) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
