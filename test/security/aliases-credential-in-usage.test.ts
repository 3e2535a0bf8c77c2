import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { leakedSecrets, SECRETS } from '../helpers/secrets.ts';
import { type Stack, startStack } from '../helpers/stack.ts';

const LEGACY = { 'service-client-version': '0.59.0', 'user-agent': 'legacy-cli/0.59.0' };
const FINGERPRINT_KEY = 'fingerprint-key-never-logged-7c1d';
const FILES = '/files?tags=a0000000-0000-4000-8000-000000000003';
const COOKIE = `authtoken=${SECRETS.authtoken}; refreshtoken=${SECRETS.refreshtoken}`;

interface Running {
  stack: Stack;
  adminUrl: string;
}

/** A shim with its own admin listener (the runtime's, where the usage report is served). */
async function start(env: Record<string, string>): Promise<Running> {
  const stack = await startStack({ LOG_LEVEL: 'trace', ...env });
  return { stack, adminUrl: stack.adminUrl };
}

const runs: Running[] = [];

beforeAll(async () => {
  runs.push(await start({ CONSUMER_FINGERPRINT_KEY: FINGERPRINT_KEY }));
  runs.push(await start({}));
  runs.push(await start({ CONSUMER_HEADER: 'x-consumer-id' }));
  for (const { stack } of runs) {
    for (let i = 0; i < 3; i++) {
      expect((await send(stack.url, 'GET', FILES, { ...LEGACY, 'x-api-key': SECRETS.apiKey })).status).toBe(
        200,
      );
      expect((await send(stack.url, 'GET', FILES, { ...LEGACY, cookie: COOKIE })).status).toBe(200);
    }
    // A gateway header that is absent or empty falls back to the key's fingerprint, never the key.
    await send(stack.url, 'GET', FILES, {
      ...LEGACY,
      'x-consumer-id': '',
      'x-api-key': SECRETS.apiKey,
    });
  }
});

afterAll(async () => {
  for (const { stack } of runs) await stack.close();
});

describe('no credential byte in the usage report, the log or the metrics', () => {
  it('attributes the requests (the test would see a leak)', async () => {
    for (const { adminUrl } of runs) {
      const report = (await send(adminUrl, 'GET', '/aliases/usage')).json<{
        consumers: Array<{ consumer: string }>;
      }>();
      expect(report.consumers.map((c) => c.consumer)).toContain('session');
      expect(report.consumers.reduce((n, c) => n + (c as unknown as { count: number }).count, 0)).toBe(7);
    }
  });

  it.each([0, 1, 2])('stack %i: the report, the log lines and /metrics hold no marker', async (i) => {
    const { stack, adminUrl } = runs[i]!;
    const report = (await send(adminUrl, 'GET', '/aliases/usage')).text;
    const metrics = (await send(adminUrl, 'GET', '/metrics')).text;
    expect(metrics).toContain('shim_alias_consumers{consumer=');
    expect(stack.logs().filter((l) => l.consumer !== undefined).length).toBeGreaterThan(0);
    expect(leakedSecrets(report)).toEqual([]);
    expect(leakedSecrets(stack.rawLogs())).toEqual([]);
    expect(leakedSecrets(metrics)).toEqual([]);
    // Nor the HMAC key that would let a reader test guessed API keys against the fingerprints.
    expect(report + metrics + stack.rawLogs()).not.toContain(FINGERPRINT_KEY);
    // No 12-character window of the key survives either (a prefix or a truncated copy).
    for (let k = 0; k + 12 <= SECRETS.apiKey.length; k++) {
      const piece = SECRETS.apiKey.slice(k, k + 12);
      expect(report + metrics + stack.rawLogs()).not.toContain(piece);
    }
  });
});
