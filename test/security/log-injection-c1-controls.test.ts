/**
 * Attack: log injection with C1 control characters (CWE-117). Node reads header values as Latin-1, so
 * the bytes 0x80–0x9f of a field value arrive as U+0080–U+009F — CSI (U+009B) starts a terminal
 * escape sequence as ESC `[` does, NEL (U+0085) is a line break — and JSON escapes only what is below
 * U+0020. A client without credentials sent `User-Agent: probe\x9b2J\x9b1;31mFAKE\x85next` and its 426's
 * log line held them raw: a terminal tailing the log cleared its screen and coloured what followed
 * (docs/reliability.md fix 175, found by a nikto and raw-socket probe). CR, LF, ESC and DEL never got
 * that far (Node's parser refuses them with 400), and `X-Request-Id` and `traceparent` are checked
 * before they are logged; the `User-Agent` of a refusal was the one way in.
 *
 * Now a client's `User-Agent` is logged with everything outside visible ASCII and space, and `\` itself, written `\xNN`,
 * as nginx's access log escapes it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendRawUntilClose } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.close());

/** A refused request's line, found by the marker its User-Agent starts with. */
async function lineOf(marker: string): Promise<Record<string, unknown>> {
  return waitFor(() =>
    stack.logs().find((l) => l.msg === 'request completed' && String(l.userAgent ?? '').startsWith(marker)),
  );
}

describe('log injection with C1 control characters in User-Agent', () => {
  it('the refusal’s line holds them escaped, never raw', async () => {
    const marker = 'c1-probe';
    // Latin-1 bytes on the wire: 0x9b is CSI, 0x85 is NEL.
    const head = Buffer.concat([
      Buffer.from(`GET /missions HTTP/1.1\r\nHost: shim.test\r\nUser-Agent: ${marker} `, 'latin1'),
      Buffer.from([0x9b, 0x32, 0x4a, 0x9b, 0x31, 0x3b, 0x33, 0x31, 0x6d]),
      Buffer.from('FAKE', 'latin1'),
      Buffer.from([0x85]),
      Buffer.from('next é\r\nConnection: close\r\n\r\n', 'latin1'),
    ]);
    const raw = await sendRawUntilClose(stack.url, head);
    expect(raw).toContain('426');
    const line = await lineOf(marker);
    expect(line.userAgent).toBe(`${marker} \\x9b2J\\x9b1;31mFAKE\\x85next \\xe9`);
    expect(String(line.userAgent)).not.toMatch(/[\u0080-\u009f]/);
  });

  it('a literal backslash is escaped too: a forged `\\x9b` never reads like an escaped byte', async () => {
    const marker = 'forged-probe';
    await sendRawUntilClose(
      stack.url,
      `GET /missions HTTP/1.1\r\nHost: shim.test\r\nUser-Agent: ${marker} a\\x9b b\r\nConnection: close\r\n\r\n`,
    );
    expect((await lineOf(marker)).userAgent).toBe(`${marker} a\\x5cx9b b`);
  });

  it('a plain User-Agent is logged as sent', async () => {
    const marker = 'plain-probe/1.0 (x; y)';
    await sendRawUntilClose(
      stack.url,
      `GET /missions HTTP/1.1\r\nHost: shim.test\r\nUser-Agent: ${marker}\r\nConnection: close\r\n\r\n`,
    );
    expect((await lineOf(marker)).userAgent).toBe(marker);
  });
});
