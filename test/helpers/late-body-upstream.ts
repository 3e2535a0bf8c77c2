/**
 * A raw upstream that writes a body its response must not have (after a HEAD, a 204) late: just before
 * its answer to the next request on the same connection, the order a server's late write produces
 * (gunicorn 20.1 writes what a WSGI application returns whatever the method or status). Bytes that
 * arrive once the shim has reused the connection are read as the next request's response: the tests
 * of response queue poisoning need no Python and no race.
 */
import type net from 'node:net';
import { type FramedRequest, frameRequests } from './http1-frames.ts';
import { type RawUpstream, startRawUpstream } from './raw-upstream.ts';

/** The attacker's stored body: a complete HTTP response of its own, `{"forged":true}`. */
export const FORGED_BODY = '{"forged":true}';
export const FORGED = `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${FORGED_BODY.length}\r\n\r\n${FORGED_BODY}`;

/** A 200 whose JSON body names the request's target, `{"target":"/x"}`. */
export function targetEcho(target: string): string {
  const body = JSON.stringify({ target });
  return `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
}

/** What the upstream writes for one request: its response now, and bytes it owes the connection. */
export interface LateReply {
  readonly now: string;
  /** Written just before the answer to the next request on the same connection. */
  readonly late?: string;
}

/**
 * Starts the upstream (keep-alive).
 * @param reply The answer to each complete request, in order.
 */
export async function startLateBodyUpstream(
  reply: (request: FramedRequest) => LateReply,
): Promise<RawUpstream> {
  const answered = new WeakMap<net.Socket, number>();
  const owed = new WeakMap<net.Socket, string>();
  return startRawUpstream((socket, received) => {
    const { requests } = frameRequests(received);
    for (let i = answered.get(socket) ?? 0; i < requests.length; i++) {
      const request = requests[i];
      if (request === undefined) continue;
      const late = owed.get(socket);
      if (late !== undefined) {
        socket.write(late);
        owed.delete(socket);
      }
      const { now, late: next } = reply(request);
      socket.write(now);
      if (next !== undefined) owed.set(socket, next);
    }
    answered.set(socket, requests.length);
  });
}
