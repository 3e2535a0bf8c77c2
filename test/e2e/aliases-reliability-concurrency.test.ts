/**
 * Reliability under load, on the alias layer's routes: {@link CONNECTIONS} legacy clients at once (1,000 with
 * `npm run test:load`, a tenth in `npm test`: test/helpers/load.ts), each on its own
 * keep-alive connection to a shim process in front of the embedded reference backend, on patched and
 * rewritten routes (GET /missions, GET /files?tags=…), three rounds.
 *
 * No error responses, `tags` equal to `metadata` in every patched item, no client connection beyond
 * the first {@link CONNECTIONS} across the rounds, and the shim's peak RSS recorded. The same load on a plain route:
 * `reliability-concurrency.test.ts`.
 *
 * Goes with the alias layer (`src/aliases/`): deleted with it (docs/removing-the-alias-layer.md).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { CONNECTIONS, keepAliveAgent, ROUNDS, round, runCleanup, startShim } from '../helpers/load.ts';

afterAll(runCleanup);

describe(`${CONNECTIONS} concurrent keep-alive connections`, () => {
  it(`${CONNECTIONS} legacy clients at once on patched and rewritten routes of the reference backend`, async () => {
    const shim = await startShim({}); // UPSTREAM_URL unset: the embedded reference backend
    const { agent, sockets } = keepAliveAgent();
    const headers = { 'service-client-version': '0.59.0', 'x-api-key': 'k' };
    const latencies: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const paths = Array.from({ length: CONNECTIONS }, (_, i) =>
        i % 2 === 0 ? '/missions?take=5' : `/files?tags=e1000000-0000-4000-8000-00000000000${i % 3}&take=2`,
      );
      const t = performance.now();
      const outcomes = await round(agent, shim.url, paths, headers);
      latencies.push(performance.now() - t);
      const failed = outcomes.filter((o) => o.status !== 200);
      expect(failed, JSON.stringify(failed.slice(0, 3))).toEqual([]);
      for (const [i, o] of outcomes.entries()) {
        const body = JSON.parse(o.body) as { data: Array<Record<string, unknown>> };
        expect(body).toHaveProperty('data');
        if (i % 2 === 0) for (const m of body.data) expect(m.tags).toEqual(m.metadata);
      }
    }
    expect(sockets.size).toBe(CONNECTIONS);
    console.info(
      `${CONNECTIONS} legacy clients × ${ROUNDS} rounds on the reference backend: rounds took ` +
        `${latencies.map((l) => `${(l / 1000).toFixed(2)} s`).join(', ')}, shim peak RSS ${(shim.peakRss() / 1e6).toFixed(1)} MB`,
    );
  });
});
