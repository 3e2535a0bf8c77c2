/**
 * Released chunks of patched responses on real sockets (src/proxy/response-patch.ts `pumpPatch` and,
 * for a gzipped response, `pumpCodedPatch`; src/proxy/body-pump.ts): an upstream (or decoded) chunk
 * is released once the patch has copied what it needs (it returned other bytes), never when the patch
 * passed it on as it came and the socket (or the encoder) may still be reading it. Distinct lists at once, slow readers, every byte compared with the whole-body patch.
 * The pass-through side: released-chunks.test.ts.
 *
 * Goes with the alias layer (`src/aliases/`): deleted with it (docs/removing-the-alias-layer.md).
 */
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { patchJson } from '../../src/aliases/patch-json.ts';
import { responsePairs } from '../../src/aliases/table.ts';
import { bodyOf, type SlowUpstream, sha256, slowGet, startSlowUpstream } from '../helpers/slow-peers.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

/**
 * A mission list whose every value depends on `seed` (~300 bytes per item), after a ~200 KB `note`
 * without canonical members: its chunks pass through the patch as they came (not copied).
 */
function listOf(seed: number, items: number): Buffer {
  const note = bodyOf(seed, 200_000 + seed * 1000).toString('base64');
  const data = Array.from({ length: items }, (_, i) => ({
    uuid: `${seed}-${i}`,
    name: `mission ${seed}/${i} ${'x'.repeat((seed * 7 + i) % 50)}`,
    metadata: [
      { uuid: `m-${seed}-${i}`, value: (seed * 1000 + i) / 7, metadataType: { name: `type-${i % 13}` } },
    ],
    createdAt: '2025-01-01T00:00:00.000Z',
  }));
  return Buffer.from(JSON.stringify({ note, data, count: items }));
}

let upstream: SlowUpstream;
let stack: Stack;
beforeAll(async () => {
  upstream = await startSlowUpstream(listOf);
  stack = await startStack({ UPSTREAM_URL: upstream.url });
});
afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

describe('released chunks of patched responses, several at once under backpressure', () => {
  it('patches 8 distinct ~1 MB lists for legacy clients exactly as the whole-body patch does', async () => {
    const seeds = [11, 12, 13, 14, 15, 16, 17, 18];
    const results = await Promise.all(seeds.map((s) => slowGet(`${stack.url}/json/${s}/4000`, LEGACY)));
    for (const [i, r] of results.entries()) {
      const expected = patchJson(responsePairs(), listOf(seeds[i] as number, 4000));
      expect(expected.outcome.kind).toBe('patched');
      expect(r.status).toBe(200);
      expect(sha256(r.body)).toBe(sha256(expected.body));
    }
  });

  it('patches 8 distinct gzipped lists exactly as the whole-body patch does (decoder → patch → encoder)', async () => {
    // The decoder's 64 KiB chunks: released once the patch copied them, or (the note, passed on as it
    // came) once the encoder consumed them; the patch's output buffers go back to it from the encoder.
    const seeds = [21, 22, 23, 24, 25, 26, 27, 28];
    const results = await Promise.all(
      seeds.map((s) => slowGet(`${stack.url}/gzip-json/${s}/4000`, { ...LEGACY, 'accept-encoding': 'gzip' })),
    );
    for (const [i, r] of results.entries()) {
      const expected = patchJson(responsePairs(), listOf(seeds[i] as number, 4000));
      expect(expected.outcome.kind).toBe('patched');
      expect(r.status).toBe(200);
      expect(sha256(gunzipSync(r.body))).toBe(sha256(expected.body));
    }
  });
});
