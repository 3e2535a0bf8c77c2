/**
 * Attack: header abuse — headers crafted so that the shim's admission decision and what the upstream
 * reads differ, or so that the shim spends memory on them.
 *
 * - Oversized heads (one huge header, thousands of small ones, a huge cookie): must end in 431 before
 *   any buffering or forwarding (RFC 6585 §5), on both sides — a huge upstream head is a 502.
 * - CR, LF, NUL and other control characters in header values (header injection, CWE-113): rejected
 *   by the parser, never re-emitted upstream as a second header line.
 * - Duplicate credential headers (`x-api-key` twice, one empty), duplicate `Host`, duplicate client
 *   versions: a shim that reads the first and an upstream that reads the last would disagree.
 * - Cookies with empty or repeated names (`authtoken=; authtoken=x`), quoted or percent-encoded empty
 *   values, names in another case, `__proto__` as a cookie name.
 * - An `x-api-key` of only whitespace, which must not count as a credential.
 * - Host header injection: a `Host` that is not a host and port (`evil.test/reset`, `a@evil.test`,
 *   markup), which an upstream building links or redirects from `Host` / `X-Forwarded-Host` would
 *   echo: 400 (RFC 9112 §3.2), nothing forwarded; a valid host and port still pass through.
 *
 * The upstream is a raw TCP server recording every byte; each case checks the status the client got
 * and exactly what reached the upstream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_HEADER_BYTES } from '../../src/proxy/server.ts';
import { send, sendRawUntilClose, statusesIn } from '../helpers/http.ts';
import { answerEachRequest, type FramedRequest, markRequests } from '../helpers/http1-frames.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

let upstream: RawUpstream;
let stack: Stack;
beforeAll(async () => {
  upstream = await startRawUpstream(answerEachRequest());
  stack = await startStack({ UPSTREAM_URL: upstream.url });
});
afterAll(async () => {
  await stack.close();
  await upstream.close();
});

/**
 * Sends `GET /user/me` with a version header and `headers` (raw lines, latin1 bytes).
 * @returns The statuses, and the requests the upstream received meanwhile.
 */
async function sendHead(headers: string, version = 'Service-Client-Version: 1.0.0\r\n') {
  const since = markRequests(upstream.received);
  const raw = await sendRawUntilClose(
    stack.url,
    Buffer.from(
      `GET /user/me HTTP/1.1\r\nHost: shim.test\r\nConnection: close\r\n${version}${headers}\r\n`,
      'latin1',
    ),
  );
  return { statuses: statusesIn(raw), raw, forwarded: since() };
}

const header = (r: FramedRequest, name: string) => r.headers.filter(([n]) => n === name).map(([, v]) => v);

describe('oversized heads', () => {
  const big = MAX_HEADER_BYTES + 1024;
  it.each([
    ['one huge header', `X-Padding: ${'a'.repeat(big)}\r\n`],
    ['thousands of small headers', Array.from({ length: big / 8 }, (_, i) => `X${i}: y\r\n`).join('')],
    ['a huge cookie', `Cookie: authtoken=${'a'.repeat(big)}; refreshtoken=r\r\n`],
    ['a huge target', ''],
  ])('%s → 431, nothing forwarded, connection closed', async (name, headers) => {
    const since = markRequests(upstream.received);
    const raw =
      name === 'a huge target'
        ? await sendRawUntilClose(
            stack.url,
            `GET /user/me?${'q'.repeat(big)} HTTP/1.1\r\nHost: shim.test\r\n\r\n`,
          )
        : (await sendHead(headers)).raw;
    expect(statusesIn(raw)).toEqual([431]);
    expect(raw).toMatch(/Connection: close/i);
    expect(since()).toEqual([]);
  });

  it('a head just under the limit is served', async () => {
    const { statuses, forwarded } = await sendHead(
      `X-Api-Key: k\r\nX-Padding: ${'a'.repeat(MAX_HEADER_BYTES - 512)}\r\n`,
    );
    expect(statuses).toEqual([200]);
    expect(forwarded).toHaveLength(1);
  });

  it("2,100 tiny headers (past Node's 2,000-header cap) → 431, never a silently truncated list", async () => {
    // Were the list cut at 2,000, a credential after the cut would be judged absent by the shim while
    // a tolerant upstream saw it; the parser's per-header accounting refuses the head first.
    const { statuses, forwarded } = await sendHead(`${'a: b\r\n'.repeat(2100)}X-Api-Key: k\r\n`);
    expect(statuses).toEqual([431]);
    expect(forwarded).toEqual([]);
  });

  it('an upstream response head over the limit → 502, and the next request works', async () => {
    const huge = await startRawUpstream((socket) => {
      socket.end(`HTTP/1.1 200 OK\r\nX-Padding: ${'a'.repeat(big)}\r\nContent-Length: 2\r\n\r\n{}`);
    });
    const other = await startStack({ UPSTREAM_URL: huge.url });
    try {
      const reply = await send(other.url, 'GET', '/missions', CURRENT);
      expect(reply.status).toBe(502);
      expect(reply.rawHeaders.join('\n')).not.toContain('aaaa');
    } finally {
      await other.close();
      await huge.close();
    }
  });
});

describe('control characters in header values', () => {
  it.each([
    ['bare LF (a second header line)', 'X-Note: a\nX-Api-Key: injected\r\n'],
    ['bare CR', 'X-Note: a\rX-Api-Key: injected\r\n'],
    ['NUL', 'X-Api-Key: a\x00b\r\n'],
    ['vertical tab', 'X-Api-Key: \x0b\r\n'],
    ['form feed', 'X-Api-Key: \x0c\r\n'],
    ['DEL', 'X-Api-Key: \x7f\r\n'],
    ['CR LF inside a cookie', 'Cookie: authtoken=a\r\r\nrefreshtoken=r\r\n'],
  ])('%s → 400, nothing forwarded', async (_name, headers) => {
    const { statuses, forwarded } = await sendHead(headers);
    expect(statuses).toEqual([400]);
    expect(forwarded).toEqual([]);
  });

  it('a percent-encoded CR LF in the target stays encoded: one request upstream, no extra header', async () => {
    const since = markRequests(upstream.received);
    const { statuses, forwarded } = await sendRawUntilClose(
      stack.url,
      'GET /user/me?x=%0d%0aX-Api-Key:%20evil HTTP/1.1\r\nHost: shim.test\r\nConnection: close\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n\r\n',
    ).then((raw) => ({ statuses: statusesIn(raw), forwarded: since() }));
    expect(statuses).toEqual([200]);
    expect(forwarded[0]?.target).toBe('/user/me?x=%0d%0aX-Api-Key:%20evil');
    expect(header(forwarded[0] as FramedRequest, 'x-api-key')).toEqual(['k']);
  });
});

describe('duplicate headers', () => {
  it.each([
    ['two API keys', 'X-Api-Key: a\r\nX-Api-Key: b\r\n'],
    ['an API key and an empty one', 'X-Api-Key: a\r\nX-Api-Key: \r\n'],
    ['an empty API key and a real one', 'X-Api-Key: \r\nX-Api-Key: a\r\n'],
    ['API keys in different cases', 'X-Api-Key: a\r\nx-api-key: b\r\n'],
  ])('%s → 401, nothing forwarded', async (_name, headers) => {
    const { statuses, raw, forwarded } = await sendHead(headers);
    expect(statuses).toEqual([401]);
    expect(raw).toContain('Send exactly one x-api-key header.');
    expect(forwarded).toEqual([]);
  });

  it('two client versions → 426 (never read as the first or the last)', async () => {
    const { statuses, forwarded } = await sendHead(
      'X-Api-Key: k\r\n',
      'Service-Client-Version: 1.0.0\r\nService-Client-Version: 0.59.0\r\n',
    );
    expect(statuses).toEqual([426]);
    expect(forwarded).toEqual([]);
  });

  it('two Host headers → 400 (RFC 9112 §3.2), nothing forwarded', async () => {
    const { statuses, raw, forwarded } = await sendHead('Host: internal.test\r\nX-Api-Key: k\r\n');
    expect(statuses).toEqual([400]);
    expect(raw).toContain('Send exactly one Host header.');
    expect(forwarded).toEqual([]);
  });

  it.each([
    'evil.test/reset?to=attacker',
    'a@evil.test',
    'shim.test:80:80',
    'shim.test x',
    'x"><script>alert(1)</script>',
    '[::1',
  ])('Host header injection: Host: %s → 400, nothing forwarded', async (host) => {
    const since = markRequests(upstream.received);
    const raw = await sendRawUntilClose(
      stack.url,
      Buffer.from(
        `GET /api/health HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n\r\n`,
        'latin1',
      ),
    );
    expect(statusesIn(raw)).toEqual([400]);
    expect(raw).toContain('The Host header must be a host name or address with an optional port');
    expect(since()).toEqual([]);
  });

  it('a valid Host with a port reaches the upstream as sent, and in X-Forwarded-Host', async () => {
    const since = markRequests(upstream.received);
    const raw = await sendRawUntilClose(
      stack.url,
      Buffer.from(
        'GET /api/health HTTP/1.1\r\nHost: [::1]:8443\r\nConnection: close\r\nService-Client-Version: 1.0.0\r\nX-Api-Key: k\r\n\r\n',
        'latin1',
      ),
    );
    expect(statusesIn(raw)).toEqual([200]);
    const forwarded = since();
    expect(forwarded.map((r) => [header(r, 'host'), header(r, 'x-forwarded-host')])).toEqual([
      [['[::1]:8443'], ['[::1]:8443']],
    ]);
  });

  it('two Cookie headers are forwarded as the one cookie string the shim judged', async () => {
    const { statuses, forwarded } = await sendHead('Cookie: authtoken=a\r\nCookie: refreshtoken=r\r\n');
    expect(statuses).toEqual([200]);
    expect(forwarded.map((r) => header(r, 'cookie'))).toEqual([['authtoken=a; refreshtoken=r']]);
  });
});

describe('cookies with empty or repeated names', () => {
  it.each([
    ['an empty first occurrence', 'authtoken=; authtoken=x; refreshtoken=r', 401],
    ['a quoted empty value', 'authtoken=""; refreshtoken=r', 401],
    ['a percent-encoded space', 'authtoken=%20; refreshtoken=r', 401],
    ['a value of spaces', 'authtoken=   ; refreshtoken=r', 401],
    ['names in another case', 'AuthToken=a; RefreshToken=r', 401],
    ['only one of the two', 'authtoken=a; authtoken=b', 401],
    ['an empty name beside real ones', '=x; authtoken=a; refreshtoken=r', 200],
    ['a later empty repeat (first wins, as upstream)', 'authtoken=a; refreshtoken=r; authtoken=', 200],
    [
      '__proto__ and hasOwnProperty as names',
      '__proto__=a; hasOwnProperty=b; authtoken=a; refreshtoken=r',
      200,
    ],
    ['__proto__ alone', '__proto__=authtoken; constructor=refreshtoken', 401],
  ])('%s → %i', async (_name, cookie, status) => {
    const { statuses, forwarded } = await sendHead(`Cookie: ${cookie}\r\n`);
    expect(statuses).toEqual([status]);
    expect(forwarded).toHaveLength(status === 200 ? 1 : 0);
    if (status === 200) expect(header(forwarded[0] as FramedRequest, 'cookie')).toEqual([cookie]);
  });

  it('a cookie parse of __proto__ does not pollute Object.prototype', async () => {
    await sendHead('Cookie: __proto__=polluted; constructor=x\r\n');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('an API key of only whitespace', () => {
  it.each([
    ['spaces', '     '],
    ['tabs', '\t\t'],
    ['spaces and tabs', ' \t \t '],
    ['NBSP (latin1 0xA0)', '\xa0\xa0'],
  ])('%s → 401, nothing forwarded', async (_name, value) => {
    const { statuses, forwarded } = await sendHead(`X-Api-Key: ${value}\r\n`);
    expect(statuses).toEqual([401]);
    expect(forwarded).toEqual([]);
  });

  it('a whitespace key next to valid cookies is admitted by the cookies', async () => {
    const { statuses, forwarded } = await sendHead(
      'X-Api-Key:    \r\nCookie: authtoken=a; refreshtoken=r\r\n',
    );
    expect(statuses).toEqual([200]);
    expect(forwarded).toHaveLength(1);
  });
});
