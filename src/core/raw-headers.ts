/**
 * Reading a message's head as Node received it, shared by the gates and the forwarder: scans of the
 * flat raw header list (`IncomingMessage.rawHeaders`, names in their sent case, repeats kept), field
 * values' optional whitespace, and the protocol version.
 */
import type { IncomingMessage } from 'node:http';

/**
 * Whether a raw header name is `lowerName`, case-insensitively (RFC 9110 §5.1); the length is compared
 * first, so that most names are told apart without lower-casing them.
 * @param name A name as sent, e.g. `Content-Length`.
 * @param lowerName The name looked for, lower case.
 * @returns `true` when the names are equal ignoring case.
 * @throws Nothing.
 */
export function isHeaderName(name: string, lowerName: string): boolean {
  return name.length === lowerName.length && name.toLowerCase() === lowerName;
}

/**
 * Counts how often a header name occurs in `rawHeaders` (case-insensitive): Node keeps the first of
 * some repeated headers (`Host`) and joins other repeats with `, `, which would hide a duplicate.
 * @param rawHeaders Flat `[name, value, …]`.
 * @param lowerName The header name, lower case.
 * @returns The number of field lines with that name.
 * @throws Nothing.
 * @example
 * headerCount(['Host', 'a', 'host', 'b'], 'host') // → 2
 */
export function headerCount(rawHeaders: readonly string[], lowerName: string): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (isHeaderName(rawHeaders[i] as string, lowerName)) n++;
  return n;
}

/**
 * One header of a received message, read from its raw header list: exactly `message.headers[name]`,
 * without building the parsed headers object, which Node does lazily on first access and a
 * pass-through never needs otherwise (about 1 µs per response of 7 headers). A name that occurs more
 * than once (and `set-cookie`, always an array) is left to `message.headers`, so Node's own rules
 * (first kept, joined, or listed) decide.
 * @param message The upstream's response (`rawHeaders`, and `headers` for repeated names).
 * @param lowerName The header name, lower case.
 * @returns The value as `message.headers` has it, `undefined` when absent.
 * @throws Nothing.
 * @example
 * headerValue(upstreamRes, 'vary') // → 'Accept-Encoding' for a response with `Vary: Accept-Encoding`
 */
export function headerValue(
  message: Pick<IncomingMessage, 'rawHeaders' | 'headers'>,
  lowerName: string,
): string | string[] | undefined {
  if (lowerName === 'set-cookie') return message.headers[lowerName]; // always an array in Node's view
  const raw = message.rawHeaders;
  let found: number | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (!isHeaderName(raw[i] as string, lowerName)) continue;
    if (found !== undefined) return message.headers[lowerName];
    found = i + 1;
  }
  return found === undefined ? undefined : raw[found];
}

/**
 * A field's value as one line: its field lines combined in order, joined with `, `, as RFC 9110 §5.3
 * lets a recipient combine them; a value repeated verbatim (after its optional whitespace) counts once.
 * Node's parsed view keeps only the first line of a singleton field such as `Content-Type` and drops
 * the others, so a second line with another value is invisible there; combined, it reads as the list a
 * recipient that joins or takes the last line would see (RFC 9110 §8.3: "sometimes incorrectly generated
 * multiple times"). Linear in the number of lines.
 * @param rawHeaders Flat `[name, value, …]` (`IncomingMessage.rawHeaders`).
 * @param lowerName The field name, lower case.
 * @returns The combined value; `undefined` when no line has that name.
 * @throws Nothing.
 * @example
 * combinedFieldValue(['Content-Type', 'application/json', 'content-type', 'text/plain'], 'content-type')
 * // → 'application/json, text/plain'
 * combinedFieldValue(['Content-Type', 'a/b', 'Content-Type', ' a/b'], 'content-type') // → 'a/b'
 */
export function combinedFieldValue(rawHeaders: readonly string[], lowerName: string): string | undefined {
  let combined: string | undefined;
  let seen: Set<string> | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (!isHeaderName(rawHeaders[i] as string, lowerName)) continue;
    const value = trimOws(rawHeaders[i + 1] as string);
    if (combined === undefined) {
      combined = value;
      continue;
    }
    seen ??= new Set([combined]);
    if (seen.has(value)) continue;
    seen.add(value);
    combined = `${combined}, ${value}`;
  }
  return combined;
}

/** Whether a UTF-16 code unit is optional whitespace, SP or HTAB (RFC 9110 §5.6.3). */
function isOws(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

/**
 * A field value or list element without its optional whitespace: SP and HTAB only (RFC 9110 §5.5,
 * §5.6.3). `String#trim` would also strip NBSP, VT, FF and BOM, and accept `chunked\u00a0`.
 * Linear: each end is walked inward once. The regular expression it replaces (`/^[ \t]+|[ \t]+$/g`)
 * tried `[ \t]+$` from every position of an inner run of whitespace, quadratic in the run's length:
 * ~120 ms of the event loop for one 16 KiB `Transfer-Encoding: a<spaces>b, chunked`, before any
 * credential check (docs/reliability.md fix 82).
 * @param value A field value or list element.
 * @returns `value` without leading and trailing SP/HTAB (`value` itself when there are none).
 * @throws Nothing.
 * @example trimOws('\t chunked ') // → 'chunked'
 */
export function trimOws(value: string): string {
  let start = 0;
  let end = value.length;
  while (start < end && isOws(value.charCodeAt(start))) start++;
  while (end > start && isOws(value.charCodeAt(end - 1))) end--;
  return start === 0 && end === value.length ? value : value.slice(start, end);
}

/**
 * Whether a request speaks HTTP/1.0 or older (`0.9`): no `Host` required, no chunked coding, no
 * persistent connection unless asked, no `Expect`, no 1xx responses (RFC 9112 §3.2, §6.1, §9.3;
 * RFC 9110 §10.1.1, §15.2).
 * @param httpVersion The request's version, e.g. `1.1` (Node's `IncomingMessage.httpVersion`).
 * @returns `true` for `1.0` and `0.9`.
 * @throws Nothing.
 * @example isHttp10OrOlder('1.0') // → true
 */
export function isHttp10OrOlder(httpVersion: string): boolean {
  return httpVersion === '1.0' || httpVersion === '0.9';
}
