/**
 * `Expect: 100-continue` (RFC 9110 §10.1.1), as Node's HTTP server recognizes it.
 */
import { isHttp10OrOlder } from './raw-headers.ts';

/** `100-continue` as a member of an `Expect` value (Node's `continueExpression`). */
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

/**
 * Whether `Expect` asks for `100 Continue` before the body. An HTTP/1.0 request's expectation is
 * ignored (RFC 9110 §10.1.1: a server MUST ignore a 100-continue expectation in HTTP/1.0).
 * @param expect The request's `Expect` header, absent for most requests.
 * @param httpVersion The request's version, e.g. `1.1` (Node's `req.httpVersion`).
 * @returns `true` when the client waits for `100 Continue`.
 * @throws Nothing.
 * @example expectsContinue('100-continue', '1.1') // → true
 */
export function expectsContinue(expect: string | undefined, httpVersion: string): boolean {
  return expect !== undefined && !isHttp10OrOlder(httpVersion) && CONTINUE.test(expect);
}
