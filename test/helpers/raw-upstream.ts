/**
 * A raw TCP "upstream" for tests: records every byte it receives and answers with a scripted reply,
 * to see framing exactly as the shim wrote it or to misbehave in ways no HTTP server library would.
 */
import { once } from 'node:events';
import net from 'node:net';

/** A running raw upstream. */
export interface RawUpstream {
  url: string;
  /** Every byte received, per connection, in order of connection. */
  received: string[];
  /** Number of TCP connections accepted. */
  connections(): number;
  /** Number of those still open. */
  open(): number;
  close(): Promise<void>;
}

/**
 * Starts a raw upstream.
 * @param onData Called with the connection's socket and all bytes received on it so far; write a
 * reply when a complete request has arrived.
 */
export async function startRawUpstream(
  onData: (socket: net.Socket, received: string, index: number) => void,
): Promise<RawUpstream> {
  const received: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    const index = received.push('') - 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.on('data', (d) => {
      received[index] += d.toString('latin1');
      onData(socket, received[index] as string, index);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    connections: () => received.length,
    open: () => sockets.size,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A minimal valid HTTP/1.1 response with a JSON body. */
export function jsonResponse(body: string, extra = ''): string {
  return `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;
}
