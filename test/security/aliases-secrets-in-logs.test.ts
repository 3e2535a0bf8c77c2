/**
 * Attack: credential harvesting from logs (CWE-532, OWASP Logging Cheat Sheet), on the alias layer's
 * paths.
 *
 * The shim must never write a cookie, an API key (the configured header), an `Authorization` or
 * `Proxy-Authorization` value, or an upstream `Set-Cookie` value — at any log level (here `trace`) —
 * also where the alias layer holds the body: a rewritten body and query, a body over `MAX_REWRITE_BODY`
 * (413), a malformed body to rewrite (400), a patched route's response that is not JSON, an upload to a
 * rewritten route cut off by the client. Every other path: `secrets-in-logs.test.ts`.
 *
 * Every request below carries unique marker secrets (`test/helpers/secrets.ts`); after all of them, no
 * log line may contain any marker, in plain text, percent-encoded, base64 or hex.
 *
 * Goes with the alias layer (`src/aliases/`): deleted with it (docs/removing-the-alias-layer.md).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import type { RawUpstream } from '../helpers/raw-upstream.ts';
import {
  abortMidUpload,
  faultyUpstream,
  LEAKY_FIELDS,
  LEGACY,
  leakedSecrets,
  loggedStatuses,
  SECRET_HEADERS,
  SECRETS,
  TRACE_ENV,
} from '../helpers/secrets.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

let reference: Stack;
let faulty: Stack;
let upstream: RawUpstream;

beforeAll(async () => {
  reference = await startStack(TRACE_ENV);
  upstream = await faultyUpstream();
  faulty = await startStack({ ...TRACE_ENV, UPSTREAM_URL: upstream.url, UPSTREAM_TIMEOUT_MS: '200' });
});
afterAll(async () => {
  await reference.close();
  await faulty.close();
  await upstream.close();
});

describe('no credential in any log line', () => {
  it('across rewritten, refused, unpatched and aborted requests on rewritten and patched routes at LOG_LEVEL=trace', async () => {
    const q = `?access_token=${SECRETS.query}`;
    // Rewritten (legacy client): body, query.
    await send(
      reference.url,
      'POST',
      '/missions',
      { ...LEGACY, ...SECRET_HEADERS, 'content-type': 'application/json' },
      '{"name":"m","tags":[]}',
    );
    await send(reference.url, 'GET', `/files?tags=${SECRETS.query}`, { ...LEGACY, ...SECRET_HEADERS });
    // Refused by the rewrite.
    await send(
      reference.url,
      'POST',
      '/missions',
      { ...LEGACY, ...SECRET_HEADERS, 'content-type': 'application/json' },
      `{"tags":"${'x'.repeat(2048)}"}`,
    ); // 413
    await send(
      reference.url,
      'POST',
      '/missions',
      { ...LEGACY, ...SECRET_HEADERS, 'content-type': 'application/json' },
      `{"tags":${SECRETS.query}}`,
    ); // 400 malformed
    // Invalid JSON on a patched route: forwarded unpatched.
    await send(faulty.url, 'GET', `/missions${q}`, { ...LEGACY, ...SECRET_HEADERS });
    // Client abort on a rewritten route (buffered): announced below MAX_REWRITE_BODY (1kb), so the
    // body is being read when the client goes.
    await abortMidUpload(reference.url, '/missions', 'application/json', 1_000);
    // The aborted exchanges are logged when the shim notices the client went away.
    await waitFor(() => (reference.rawLogs().match(/"aborted":true/g)?.length ?? 0) >= 1, {
      what: 'the abort to be logged',
    });

    const text = reference.rawLogs() + faulty.rawLogs();
    // The scenarios above did run, and were logged.
    expect(loggedStatuses(reference, faulty), '413').toContain(413);
    expect(text).toMatch(/response forwarded unpatched|patchSkipped/);
    expect(leakedSecrets(text), 'markers in the logs').toEqual([]);
    expect(text).not.toMatch(LEAKY_FIELDS);
  });
});
