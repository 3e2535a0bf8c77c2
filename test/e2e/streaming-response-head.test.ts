/**
 * A response whose body comes later than its head — server-sent events before their first event, a
 * long poll — reaches the client with its status and headers at once (src/proxy/head-hold.ts,
 * `RESPONSE_HEAD_HOLD_MS`), as nginx with `proxy_buffering off` and Envoy send them: before it, the
 * shim held every head until the body's first byte, and an `EventSource` opened only with the first
 * event. Real sockets; each upstream sends its body only once the client has the head, so a head that
 * waited for the body never arrives and the test fails at its deadline (nothing here measures time).
 * A legacy client's patched responses: aliases-streaming-response-head.test.ts.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { headFirstPeers } from '../helpers/head-first.ts';
import { waitFor } from '../helpers/poll.ts';
import { CURRENT, LEGACY } from '../helpers/stack.ts';

const { headFirstUpstream, get, stackFor, closeAll } = headFirstPeers();
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) c.kill();
  await closeAll();
});

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
