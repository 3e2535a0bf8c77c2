/**
 * Attack: a request target the web framework reads no path from (framework fingerprinting and gate
 * bypass by parser differential; found by mutation fuzzing of raw HTTP/1.1 traffic, which cut
 * `GET http://shim.test/user/me?… HTTP/1.1` down to `GET http://`).
 *
 * Node's parser accepts `GET http://` (HTTP/0.9-style, and `http://`, `https://`, `http:` as targets in
 * HTTP/1.x too); Express's router reads their path with `parseurl`, gets none, and then runs none of
 * the shim's layers: the request went to Express's final handler, whose HTML 404 "Cannot GET null" (with
 * its own `Content-Security-Policy`) went out without the hygiene gate, the shim's JSON error shape,
 * its `Service-Version` header, log line or metrics. Nothing reached the upstream, but the shim's
 * contract is that every request goes through the gates in order. Now the shim's layers run for it
 * and the hygiene gate answers 400 (origin-form only), in the shim's JSON, counted and logged.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendRawUntilClose, statusesIn } from '../helpers/http.ts';
import { answerEachRequest, markRequests } from '../helpers/http1-frames.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

let upstream: RawUpstream;
let stack: Stack;
beforeAll(async () => {
  upstream = await startRawUpstream(answerEachRequest());
  stack = await startStack({ UPSTREAM_URL: upstream.url, SERVICE_VERSION: '1.4.0' });
});
afterAll(async () => {
  await stack.close();
  await upstream.close();
});

describe('a target Express reads no path from', () => {
  const admitted = 'Service-Client-Version: 0.59.0\r\nx-api-key: test-key\r\n';
  it.each([
    ['HTTP/0.9-style `GET http://`', 'GET http://\r\n\r\n'],
    [
      '`GET http:// HTTP/1.1`',
      `GET http:// HTTP/1.1\r\nHost: shim.test\r\n${admitted}Connection: close\r\n\r\n`,
    ],
    [
      '`GET https://?x HTTP/1.1`',
      `GET https://?x HTTP/1.1\r\nHost: shim.test\r\n${admitted}Connection: close\r\n\r\n`,
    ],
    [
      '`POST http: HTTP/1.1` with a body',
      `POST http: HTTP/1.1\r\nHost: shim.test\r\n${admitted}Content-Length: 2\r\nConnection: close\r\n\r\n{}`,
    ],
  ])('%s gets the hygiene gate’s 400 in the shim’s JSON, and nothing goes upstream', async (_name, bytes) => {
    const since = markRequests(upstream.received);
    const raw = await sendRawUntilClose(stack.url, bytes);
    const statuses = statusesIn(raw);
    // Node's parser may refuse some spellings itself (its own 400, also the shim's JSON): either way one 400.
    expect(statuses).toEqual([400]);
    expect(raw).toMatch(/\r\ncontent-type: application\/json/i);
    expect(raw).toMatch(/\r\nservice-version: 1\.4\.0\r\n/i);
    expect(raw).not.toMatch(/Cannot GET|<html/i);
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toMatchObject({ statusCode: 400 });
    expect(since()).toEqual([]);
  });
});
