/**
 * Attack: alias-usage poisoning — keeping the "who still uses the aliases" signals alive with requests
 * nobody would answer.
 *
 * The shim admits any non-empty API key (SPEC §3 step 5: it checks presence, the upstream verifies).
 * When the alias layer counted a request as soon as it rewrote it, anyone could send
 * `GET /files?tags=x` with `x-api-key: junk<i>`: the upstream answered 401, yet the request counted in
 * `shim_alias_uses_total{direction="request"}` — the signal docs/removing-the-alias-layer.md says must
 * stay at 0 for 30 days before the layer goes — and put a junk consumer in the 1,000-entry usage table
 * (`GET /aliases/usage`, `shim_alias_consumers`), pushing out the real stragglers operators must reach.
 * The same held for the brownout counters and the brownout usage attribution.
 *
 * Now a request counts only once the upstream answered it with a status below 500 other than 401 and 403
 * (`countsAsUse`, src/aliases/consumer.ts). The deprecation `Warning` and the log fields still describe
 * every request. The upstream here is a real `node:http` server that verifies keys: 401 for any key
 * but {@link REAL_KEY}, and, like the canonical backend, 400 for a query parameter it does not know.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { keyFingerprint } from '../../src/aliases/consumer.ts';
import { MAX_CLIENT_LABELS } from '../../src/aliases/metrics.ts';
import { send } from '../helpers/http.ts';
import { waitFor } from '../helpers/poll.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const REAL_KEY = 'real-key-issued-by-the-upstream';
const FINGERPRINT_KEY = 'usage-poisoning-fingerprint-key';
const LEGACY = { 'service-client-version': '0.59.0' };
const JUNK_REQUESTS = 30;

interface Usage {
  recorded: number;
  consumers: Array<{ consumer: string; count: number }>;
}

let upstream: Server;
let upstreamUrl: string;
const stacks: Stack[] = [];

beforeAll(async () => {
  upstream = createServer((req, res) => {
    req.resume();
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify(body));
    };
    if (req.headers['x-api-key'] !== REAL_KEY) {
      json(401, { message: 'Unauthorized', statusCode: 401 });
      return;
    }
    const query = new URL(req.url ?? '/', 'http://upstream').searchParams;
    if (query.has('tags')) {
      json(400, { statusCode: 400, message: 'property tags should not exist', error: 'Bad Request' });
      return;
    }
    json(200, { data: [], count: 0, skip: 0, take: 10 });
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
});

afterEach(async () => {
  for (const stack of stacks.splice(0)) await stack.close();
});

afterAll(async () => {
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
});

async function shim(env: Record<string, string> = {}): Promise<Stack> {
  const stack = await startStack({
    UPSTREAM_URL: upstreamUrl,
    CONSUMER_FINGERPRINT_KEY: FINGERPRINT_KEY,
    ...env,
  });
  stacks.push(stack);
  return stack;
}

/** 20 query aliases and 10 body aliases, each with a key of its own that the upstream refuses. */
async function sendJunk(stack: Stack): Promise<void> {
  for (let i = 0; i < JUNK_REQUESTS; i++) {
    const headers = { ...LEGACY, 'x-api-key': `junk${i}` };
    const reply =
      i < 20
        ? await send(stack.url, 'GET', `/files?tags=x${i}`, headers)
        : await send(
            stack.url,
            'POST',
            '/missions',
            { ...headers, 'content-type': 'application/json' },
            '{"name":"m","tags":{"k":1}}',
          );
    expect(reply.status).toBe(401);
    expect(reply.headers.warning, 'the deprecation warning still describes the request').toBeDefined();
  }
}

const usageOf = async (stack: Stack) => (await send(stack.adminUrl, 'GET', '/aliases/usage')).json<Usage>();
const metricsOf = async (stack: Stack) => (await send(stack.adminUrl, 'GET', '/metrics')).text;
/** The value of every sample of `name` whose labels include `labels`, summed (0 when absent). */
function sampleSum(metrics: string, name: string, labels = ''): number {
  return metrics
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) && line.includes(labels))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

describe('junk API keys the upstream refuses (401) count nowhere', () => {
  it('with the layer on: no usage entry, no request-direction use, no consumer gauge; a real answer counts', async () => {
    const stack = await shim();
    await sendJunk(stack);

    const poisoned = await usageOf(stack);
    expect(poisoned).toMatchObject({ recorded: 0, consumers: [] });
    const metrics = await metricsOf(stack);
    expect(sampleSum(metrics, 'shim_alias_uses_total', 'direction="request"')).toBe(0);
    expect(sampleSum(metrics, 'shim_alias_consumers')).toBe(0);
    // The log lines still say what each request did (written when the response finished: polled).
    const refused = () =>
      stack
        .logs()
        .filter((l) => l.msg === 'request completed' && (l.res as { statusCode: number }).statusCode === 401);
    await waitFor(() => refused().length === JUNK_REQUESTS, { what: 'the 30 log lines' });
    for (const line of refused())
      expect(line).toMatchObject({ aliases: ['tags'], consumer: expect.any(String) });

    // One request the upstream answers (its key is real) is counted.
    const real = await send(stack.url, 'GET', '/files?tags=x', { ...LEGACY, 'x-api-key': REAL_KEY });
    expect(real.status).toBe(200);
    expect(await usageOf(stack)).toMatchObject({
      recorded: 1,
      consumers: [{ consumer: keyFingerprint(FINGERPRINT_KEY, REAL_KEY), count: 1 }],
    });
    const after = await metricsOf(stack);
    expect(sampleSum(after, 'shim_alias_uses_total', 'direction="request"')).toBe(1);
    expect(sampleSum(after, 'shim_alias_consumers')).toBe(1);
  });

  it('in a brownout: no brownout request, no refusal, no usage entry; a real refusal counts', async () => {
    const now = Date.now();
    const window = `${new Date(now - 3_600_000).toISOString()}/${new Date(now + 3_600_000).toISOString()}`;
    const stack = await shim({ ALIAS_BROWNOUTS: window });
    await sendJunk(stack);

    expect(await usageOf(stack)).toMatchObject({ recorded: 0, consumers: [] });
    const metrics = await metricsOf(stack);
    expect(sampleSum(metrics, 'shim_alias_brownout_requests_total')).toBe(0);
    expect(sampleSum(metrics, 'shim_alias_brownout_refusals_total')).toBe(0);

    // The alias left untranslated reaches the upstream, which refuses it: the rehearsal's signal.
    const real = await send(stack.url, 'GET', '/files?tags=x', { ...LEGACY, 'x-api-key': REAL_KEY });
    expect(real.status).toBe(400);
    expect(await usageOf(stack)).toMatchObject({
      recorded: 1,
      consumers: [{ consumer: keyFingerprint(FINGERPRINT_KEY, REAL_KEY), count: 1 }],
    });
    const after = await metricsOf(stack);
    expect(sampleSum(after, 'shim_alias_brownout_requests_total', 'route="GET /files"')).toBe(1);
    expect(sampleSum(after, 'shim_alias_brownout_refusals_total', 'route="GET /files"')).toBe(1);
  });
});

describe("made-up client versions cannot use up shim_alias_uses_total's client label (fix 126)", () => {
  it(`${MAX_CLIENT_LABELS} versions refused by the upstream (401) or by the shim (400) leave a real 0.59 client its own label`, async () => {
    const stack = await shim();
    for (let i = 0; i < MAX_CLIENT_LABELS; i++) {
      const version = { 'service-client-version': `0.${1000 + i}.0`, 'x-api-key': `junk${i}` };
      const reply =
        i % 2 === 0
          ? await send(stack.url, 'GET', `/files?tags=x${i}`, version)
          : await send(
              stack.url,
              'POST',
              '/missions',
              { ...version, 'content-type': 'application/json' },
              '{"tags":',
            );
      expect(reply.status).toBe(i % 2 === 0 ? 401 : 400);
    }
    const real = await send(stack.url, 'GET', '/files?tags=x', { ...LEGACY, 'x-api-key': REAL_KEY });
    expect(real.status).toBe(200);
    const metrics = await metricsOf(stack);
    expect(sampleSum(metrics, 'shim_alias_uses_total', 'client="0.59"')).toBe(1);
    expect(sampleSum(metrics, 'shim_alias_uses_total', 'client="other"')).toBe(0);
  });
});
