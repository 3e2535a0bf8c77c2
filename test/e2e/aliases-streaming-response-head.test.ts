/**
 * A legacy client's patched response whose body comes later than its head (a long poll on a patched
 * route, a coded body): the patched head (no length, the validator weakened) reaches the client at once
 * (src/proxy/head-hold.ts, docs/reliability.md fix 138), then the body patched. The upstream sends its
 * body only once the client has the head: a head that waited for the body never arrives. The alias
 * layer's half of streaming-response-head.test.ts.
 */
import zlib from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { headFirstPeers } from '../helpers/head-first.ts';
import { waitFor } from '../helpers/poll.ts';
import { LEGACY } from '../helpers/stack.ts';

const { headFirstUpstream, get, stackFor, closeAll } = headFirstPeers();
afterEach(closeAll);

describe("a legacy client's patched head goes before a late body", () => {
  it('a long poll on a patched route: the patched head first, then the patched body', async () => {
    const up = await headFirstUpstream({ 'content-type': 'application/json', etag: '"v1"' }, (res) =>
      res.end('{"id":"m1","metadata":{"a":1}}'),
    );
    const stack = await stackFor(up.url);
    const seen = get(`${stack.url}/missions/m1`, LEGACY);
    await waitFor(() => seen.status, { what: 'the patched head before the body' });
    // The patched response's head: no length, the validator weakened (the body will be patched).
    expect(seen.headers?.['content-length']).toBeUndefined();
    expect(seen.headers?.etag).toMatch(/^W\//);
    up.release();
    await waitFor(() => seen.ended, { what: 'the patched body' });
    expect(Buffer.concat(seen.body).toString()).toBe('{"id":"m1","metadata":{"a":1},"tags":{"a":1}}');
  });

  it('a gzip body on a patched route: the head first, then the body patched and encoded again', async () => {
    const up = await headFirstUpstream(
      { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      (res) => res.end(zlib.gzipSync('{"id":"m1","requiredMetadataTypes":["x"]}')),
    );
    const stack = await stackFor(up.url);
    const seen = get(`${stack.url}/missions/m1`, { ...LEGACY, 'accept-encoding': 'gzip' });
    await waitFor(() => seen.status, { what: 'the head before the coded body' });
    expect(seen.headers?.['content-encoding']).toBe('gzip');
    up.release();
    await waitFor(() => seen.ended, { what: 'the coded body' });
    expect(zlib.gunzipSync(Buffer.concat(seen.body)).toString()).toBe(
      '{"id":"m1","requiredMetadataTypes":["x"],"requiredTags":["x"]}',
    );
  });
});
