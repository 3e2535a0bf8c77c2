/**
 * A response whose body comes later than its head — server-sent events before their first event, a
 * long poll — reaches the client with its status and headers at once (src/proxy/head-hold.ts,
 * `RESPONSE_HEAD_HOLD_MS`), as nginx with `proxy_buffering off` and Envoy send them: before it, the
 * shim held every head until the body's first byte, and an `EventSource` opened only with the first
 * event. Real sockets; each upstream sends its body only once the client has the head, so a head that
 * waited for the body never arrives and the test fails at its deadline (nothing here measures time).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/poll.ts';
import { CURRENT, LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const servers: http.Server[] = [];
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) c.kill();
  for (const s of stacks.splice(0)) await s.close();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

/** The client's side of one exchange: the head as it came, then the body, or the abort. */
interface Seen {
  status?: number;
  headers?: http.IncomingHttpHeaders;
  body: Buffer[];
  ended: boolean;
  aborted: boolean;
}

/**
 * An upstream that sends a head at once (`flushHeaders`), then waits for `bodyGo` before its body.
 * @returns Its URL and the function that lets the body go.
 */
async function headFirstUpstream(
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
}

function get(url: string, headers: http.OutgoingHttpHeaders): Seen {
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
}

async function stackFor(upstreamUrl: string, env: Record<string, string> = {}): Promise<Stack> {
  const stack = await startStack({ UPSTREAM_URL: upstreamUrl, ...env });
  stacks.push(stack);
  return stack;
}

const EVENTS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };

describe('a head whose body comes later reaches the client at once', () => {
  it.each([
    ['current', CURRENT],
    ['legacy', LEGACY],
  ])('server-sent events, %s client: status and headers before the first event', async (_who, client) => {
    const up = await headFirstUpstream(EVENTS, (res) => res.end('data: first\n\n'));
    const stack = await stackFor(up.url);
    const seen = get(`${stack.url}/missions/events`, client);
    await waitFor(() => seen.status, { what: 'the response head before any event was sent' });
    expect(seen.status).toBe(200);
    expect(seen.headers?.['content-type']).toBe('text/event-stream');
    expect(seen.body).toEqual([]);
    up.release();
    await waitFor(() => seen.ended, { what: 'the event and the end' });
    expect(Buffer.concat(seen.body).toString()).toBe('data: first\n\n');
  });

  it('a long poll on a patched route: the patched head first, then the patched body', async () => {
    const up = await headFirstUpstream({ 'content-type': 'application/json', etag: '"v1"' }, (res) =>
      res.end('{"id":"m1","metadata":{"a":1}}'),
    );
    const stack = await stackFor(up.url);
    const seen = get(`${stack.url}/missions/m1`, LEGACY);
    await waitFor(() => seen.status, { what: 'the patched head before the body' });
    // The patched response's head: no length, the validator weakened (the body will be patched).
    expect(seen.headers?.['content-length']).toBeUndefined();
    expect(seen.headers?.etag).toMatch(/^W\//);
    up.release();
    await waitFor(() => seen.ended, { what: 'the patched body' });
    expect(Buffer.concat(seen.body).toString()).toBe('{"id":"m1","metadata":{"a":1},"tags":{"a":1}}');
  });

  it('a gzip body on a patched route: the head first, then the body patched and encoded again', async () => {
    const up = await headFirstUpstream(
      { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      (res) => res.end(zlib.gzipSync('{"id":"m1","requiredMetadataTypes":["x"]}')),
    );
    const stack = await stackFor(up.url);
    const seen = get(`${stack.url}/missions/m1`, { ...LEGACY, 'accept-encoding': 'gzip' });
    await waitFor(() => seen.status, { what: 'the head before the coded body' });
    expect(seen.headers?.['content-encoding']).toBe('gzip');
    up.release();
    await waitFor(() => seen.ended, { what: 'the coded body' });
    expect(zlib.gunzipSync(Buffer.concat(seen.body)).toString()).toBe(
      '{"id":"m1","requiredMetadataTypes":["x"],"requiredTags":["x"]}',
    );
  });

  it('after the head went alone, an upstream that then stays silent aborts the response; log and metric agree', async () => {
    const up = await headFirstUpstream(EVENTS, () => undefined);
    const stack = await stackFor(up.url, { UPSTREAM_TIMEOUT_MS: '1000' });
    const seen = get(`${stack.url}/missions/events`, CURRENT);
    await waitFor(() => seen.status, { what: 'the head' });
    // Told before the timeout: the client has the head, so the silence ends in an abort, not a 504.
    await waitFor(() => seen.aborted, { what: 'the abort after UPSTREAM_TIMEOUT_MS of silence' });
    expect(seen.status).toBe(200);
    expect(seen.ended).toBe(false);
    expect(await stack.metrics.registry.metrics()).toMatch(/shim_upstream_errors_total\{kind="timeout"\} 1/);
    const line = await waitFor(() => stack.logs().find((l) => l.msg === 'request completed'), {
      what: 'the request line',
    });
    // The upstream's failure, at error as its 504 would have been (info before: an abort looked like
    // any client's); the route's label as far as it is known (`unknown` before, on every abort).
    expect(line).toMatchObject({
      res: { statusCode: 200 },
      upstreamError: 'ESHIMTIMEDOUT',
      aborted: true,
      level: 50,
      route: 'other',
    });
  });
});

describe('the hold reads what arrived before it acts', () => {
  it('an upstream reset that came while the event loop stalled past the hold is still a 502', async () => {
    // The upstream is another process, so that it sends its head, then resets, while this one (the
    // shim's) is blocked. A plain timer sent the head alone when the loop woke up, before the reset was
    // read: the client got 200 and an abort instead of the 502 of fix 113 (the review of fix 138).
    const child = spawn(
      process.execPath,
      [
        '-e',
        `require('node:net').createServer((s) => s.once('data', () => {
          s.write('HTTP/1.1 200 OK\\r\\nContent-Type: application/octet-stream\\r\\nContent-Length: 1000\\r\\n\\r\\n');
          console.log('head');
          setTimeout(() => s.resetAndDestroy(), 200);
        })).listen(0, '127.0.0.1', function () { console.log(this.address().port); });`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(child);
    const lines: string[] = [];
    child.stdout.setEncoding('utf8').on('data', (d: string) => lines.push(...d.trim().split('\n')));
    await waitFor(() => lines.length > 0, { what: 'the upstream listening' });
    const stack = await stackFor(`http://127.0.0.1:${lines[0]}`, { RESPONSE_HEAD_HOLD_MS: '100' });
    const seen = get(`${stack.url}/missions/x`, CURRENT);
    await waitFor(() => lines.includes('head'), { what: 'the upstream head sent' });
    // Time for the shim to read the head and arm its hold, then a stall past the hold and the reset.
    await new Promise((resolve) => setTimeout(resolve, 50));
    // In the check phase: the next turn then runs its due timers before it reads the sockets.
    await new Promise<void>((resolve) =>
      setImmediate(() => {
        const until = performance.now() + 600;
        while (performance.now() < until);
        resolve();
      }),
    );
    await waitFor(() => seen.ended || seen.aborted, { what: 'the answer' });
    expect(seen.status).toBe(502);
    expect(seen.ended).toBe(true);
    expect(JSON.parse(Buffer.concat(seen.body).toString())).toMatchObject({ statusCode: 502 });
  });
});
