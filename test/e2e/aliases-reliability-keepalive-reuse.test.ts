/**
 * Reliability: an upstream keep-alive connection closed by the upstream just as the shim reuses it,
 * for a request whose body the alias layer rewrote (SPEC §4, §5). The shim holds the rewritten body, so
 * an idempotent request (`PUT`) is retried once on a fresh connection with exactly the rewritten bytes
 * (RFC 9110 §9.2.2). The race itself and the other cases: `reliability-keepalive-reuse.test.ts`.
 *
 * Goes with the alias layer (`src/aliases/`): deleted with it (docs/removing-the-alias-layer.md).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, oneShotUpstream, sendOnPooledConnection, stackOn } from '../helpers/one-shot-upstream.ts';
import { LEGACY } from '../helpers/stack.ts';

afterEach(closeAll);

describe('a pooled connection that the upstream closed as it was reused', () => {
  it('a rewritten (buffered) PUT body is replayed byte for byte', async () => {
    const upstream = await oneShotUpstream();
    const stack = await stackOn(upstream);
    const reply = await sendOnPooledConnection(
      stack,
      'PUT',
      '/projects/p1/metadata-types',
      { ...LEGACY, 'content-type': 'application/json' },
      '{"tagTypeUUIDs":["a","b"]}',
    );
    expect(reply.status).toBe(200);
    expect(reply.json()).toMatchObject({ method: 'PUT', body: '{"metadataTypeUUIDs":["a","b"]}' });
  });
});
