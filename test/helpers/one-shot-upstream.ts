/**
 * Raw upstreams with a shim stack in front: the keep-alive reuse race, staged (an upstream that answers
 * one request per connection and drops the connection on the next), for the keep-alive reuse tests
 * (`test/e2e/reliability-keepalive-reuse.test.ts`, `test/e2e/aliases-reliability-keepalive-reuse.test.ts`);
 * and an upstream with a scripted reply ({@link stackWithReply}) for the upstream-fault tests.
 *
 * What the helpers start (and what is passed to {@link closeLater}) is closed by {@link closeAll}; call
 * it from the test file's `afterEach`.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { type Reply, send } from './http.ts';
import { frameRequests } from './http1-frames.ts';
import { type RawUpstream, startRawUpstream } from './raw-upstream.ts';
import { CURRENT, type Stack, startStack } from './stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];

/**
 * Registers an upstream started elsewhere to be closed by {@link closeAll}.
 * @returns `upstream`.
 */
export function closeLater(upstream: RawUpstream): RawUpstream {
  upstreams.push(upstream);
  return upstream;
}

/** Closes every stack from {@link stackOn}, then every upstream from {@link oneShotUpstream} or {@link closeLater}. */
export async function closeAll(): Promise<void> {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
}

/**
 * An upstream that answers the first request on each connection keep-alive (no `Keep-Alive` hint),
 * and drops the connection without answering when a second request arrives on it — what the shim sees
 * when the upstream closed the idle connection just as the request was written.
 *
 * Its answer is `200` with the JSON `{ method, target, body }` of the request as it arrived (no body
 * for `HEAD`). Closed by {@link closeAll}.
 */
export async function oneShotUpstream(): Promise<RawUpstream> {
  const upstream = await startRawUpstream((socket, received) => {
    const { requests } = frameRequests(received);
    const answered = (socket as { answered?: number }).answered ?? 0;
    if (requests.length === answered) return;
    if (answered >= 1) {
      socket.destroy();
      return;
    }
    (socket as { answered?: number }).answered = 1;
    const r = requests[0];
    const body = JSON.stringify({ method: r?.method, target: r?.target, body: r?.body });
    const content = r?.method === 'HEAD' ? '' : body;
    socket.write(
      `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${content}`,
    );
  });
  return closeLater(upstream);
}

/**
 * A shim stack in front of `upstream` (no reference backend), closed by {@link closeAll}.
 * @param env More environment for the shim's configuration.
 */
export async function stackOn(upstream: RawUpstream, env: Record<string, string> = {}): Promise<Stack> {
  const stack = await startStack({ UPSTREAM_URL: upstream.url, ...env });
  stacks.push(stack);
  return stack;
}

/**
 * Sends a request on a pooled upstream connection: a `GET /warm` first leaves one in the shim's pool,
 * which a {@link oneShotUpstream} closes as the next request reuses it (the keep-alive race).
 * @returns The reply to the second request.
 */
export async function sendOnPooledConnection(
  stack: Stack,
  method: string,
  path: string,
  headers: OutgoingHttpHeaders,
  body?: string,
): Promise<Reply> {
  await send(stack.url, 'GET', '/warm', CURRENT);
  return send(stack.url, method, path, headers, body);
}

/**
 * Every request the upstream received, framed strictly, with the connection it came on (the index of
 * the connection in order of acceptance).
 */
export function requestsByConnection(
  upstream: RawUpstream,
): Array<{ connection: number; method: string; target: string; body: string }> {
  return upstream.received.flatMap((r, connection) =>
    frameRequests(r).requests.map((q) => ({ connection, method: q.method, target: q.target, body: q.body })),
  );
}

/**
 * A shim stack in front of a raw upstream that answers `GET /health` with `{}` and every other request
 * head with `reply()`, in one write (the requests carry no body); both closed by {@link closeAll}.
 * @param reply The upstream's bytes for a request, as it would misbehave (e.g. bytes past its end).
 * @param env More environment for the shim's configuration.
 */
export async function stackWithReply(
  reply: () => string | Buffer,
  env: Record<string, string> = {},
): Promise<Stack> {
  const upstream = await startRawUpstream((socket, received) => {
    if (!received.endsWith('\r\n\r\n')) return;
    if (received.startsWith('GET /health ')) {
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
    } else socket.write(reply());
  });
  return stackOn(closeLater(upstream), env);
}
