/**
 * Peers for the tests of a response head that comes before its body (src/proxy/head-hold.ts): an
 * upstream that sends its head at once and its body only when the test lets it go, a client that
 * records what arrived when, and the stacks in front of them, closed together.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Stack, startStack } from './stack.ts';

/** The client's side of one exchange: the head as it came, then the body, or the abort. */
export interface Seen {
  status?: number;
  headers?: http.IncomingHttpHeaders;
  body: Buffer[];
  ended: boolean;
  aborted: boolean;
}

/**
 * The peers of one test file; `closeAll` (in `afterEach`) closes every stack and upstream it made.
 * @returns `headFirstUpstream(head, body)`: an upstream that sends `head` at once (`flushHeaders`) and
 *   runs `body` once `release()` is called; `get(url, headers)`: a GET whose progress `Seen` records;
 *   `stackFor(upstreamUrl, env)`: a shim in front of it.
 */
export function headFirstPeers() {
  const stacks: Stack[] = [];
  const servers: http.Server[] = [];
  return {
    async headFirstUpstream(
      head: http.OutgoingHttpHeaders,
      body: (res: http.ServerResponse) => void,
    ): Promise<{ url: string; release: () => void }> {
      const { promise: go, resolve: release } = Promise.withResolvers<void>();
      const server = http.createServer((_req, res) => {
        res.writeHead(200, head);
        res.flushHeaders();
        void go.then(() => body(res));
      });
      servers.push(server);
      server.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, release };
    },
    get(url: string, headers: http.OutgoingHttpHeaders): Seen {
      const seen: Seen = { body: [], ended: false, aborted: false };
      http
        .get(url, { headers, agent: false }, (res) => {
          seen.status = res.statusCode;
          seen.headers = res.headers;
          res.on('data', (chunk: Buffer) => seen.body.push(chunk));
          res.on('end', () => {
            seen.ended = true;
          });
          res.on('aborted', () => {
            seen.aborted = true;
          });
          res.on('error', () => {
            seen.aborted = true;
          });
        })
        .on('error', () => {
          seen.aborted = true;
        });
      return seen;
    },
    async stackFor(upstreamUrl: string, env: Record<string, string> = {}): Promise<Stack> {
      const stack = await startStack({ UPSTREAM_URL: upstreamUrl, ...env });
      stacks.push(stack);
      return stack;
    },
    async closeAll(): Promise<void> {
      for (const s of stacks.splice(0)) await s.close();
      for (const s of servers.splice(0)) {
        s.closeAllConnections();
        await new Promise((resolve) => s.close(resolve));
      }
    },
  };
}
