/**
 * Lone members inserted by the scanner's WebAssembly instance (json-scan.c `insert_lone`; issue 9): an
 * object whose one reported member is canonical gets its piece from the instance, a run of them per
 * call, exactly when the JavaScript path would insert it without holding anything. The bytes, the
 * insertions and the outcome are those of the JavaScript path (one insertion per `onLoneMember`), and
 * the limits hand everything else back to it. Pure: no sockets, no clock.
 */
import { describe, expect, it } from 'vitest';
import { injectScanFailure } from '../../../src/aliases/json-scan.ts';
import { createJsonPatch, type JsonPatchOptions, patchJson } from '../../../src/aliases/patch-json.ts';
import { responsePairs } from '../../../src/aliases/table.ts';
import { addAliases, cutInserted } from './helpers.ts';

const pairs = responsePairs();
const MIB = 1024 * 1024;

/** `[` + the objects + `]` as JSON bytes. */
function list(objects: readonly string[]): Buffer {
  return Buffer.from(`[${objects.join(',')}]`);
}

/** Objects with one canonical member each: `{"id":k,"metadata":[k,"…"]}` (~40 bytes). */
function loneObjects(count: number, from = 0): string[] {
  return Array.from({ length: count }, (_, k) => `{"id":${from + k},"metadata":[${from + k},"m${k}"]}`);
}

/** Feeds `body` in chunks of `chunk` bytes; the output, the outcome and every onInsert call. */
function feed(body: Buffer, chunk: number, options: Partial<JsonPatchOptions> = {}) {
  const calls: Array<[string, number]> = [];
  const failures: Error[] = [];
  const patch = createJsonPatch(pairs, {
    maxValueBytes: MIB,
    onInsert: (_canonical, alias, count) => calls.push([alias, count]),
    onScanFailure: (failure) => failures.push(failure),
    ...options,
  });
  const pieces: Buffer[] = [];
  for (let at = 0; at < body.length; at += chunk)
    pieces.push(Buffer.from(patch.write(body.subarray(at, at + chunk))));
  pieces.push(Buffer.from(patch.end()));
  return { body: Buffer.concat(pieces), outcome: patch.outcome, calls, failures };
}

/** What the reference model says the patched body parses to. */
function modelOf(body: Buffer): unknown {
  return addAliases(JSON.parse(body.toString()), pairs);
}

describe('lone members inserted by the scanner instance', () => {
  it('inserts a run of lone members per call: the bytes of one insertion at a time, counted per run', () => {
    const body = list(loneObjects(300));
    const whole = feed(body, body.length);
    expect(JSON.parse(whole.body.toString())).toEqual(modelOf(body));
    expect(whole.outcome).toEqual({ kind: 'patched' });
    // The first goes through onLoneMember (no held copies yet, so no room), the rest in runs.
    expect(whole.calls[0]).toEqual(['tags', 1]);
    expect(whole.calls.some(([, count]) => count > 1)).toBe(true);
    expect(whole.calls.reduce((sum, [, count]) => sum + count, 0)).toBe(300);
    // Every insertion is recorded where the JavaScript path records it: cut out, the body comes back.
    const { body: patched, insertions } = patchJson(pairs, body);
    expect(patched.equals(whole.body)).toBe(true);
    expect(insertions).toHaveLength(300);
    expect(cutInserted(patched, insertions).equals(body)).toBe(true);
    // Chunks of any size give the same bytes (runs cut where the chunks are).
    for (const chunk of [1, 7, 41, 64, 1000]) expect(feed(body, chunk).body.equals(whole.body)).toBe(true);
  });

  it("outputs the bytes of a long chunk's earlier window that no insertion output yet", () => {
    // A lone member (it makes the held copies' room), 70,000 bytes of a string, then lone members: in
    // one chunk of ~74 KB, the second window's runs start after bytes of the first window that are not
    // output yet.
    const body = list([...loneObjects(1), `{"pad":"${'a'.repeat(70_000)}"}`, ...loneObjects(100, 1)]);
    const whole = feed(body, body.length);
    expect(JSON.parse(whole.body.toString())).toEqual(modelOf(body));
    expect(feed(body, 4096).body.equals(whole.body)).toBe(true);
    expect(patchJson(pairs, body).body.equals(whole.body)).toBe(true);
  });

  it('leaves to the JavaScript path the objects that are not lone, with the same bytes', () => {
    // An alias beside the canonical member, two reported members, a canonical member nested in one.
    const objects = [
      ...loneObjects(20),
      '{"tags":[1],"metadata":[2]}',
      ...loneObjects(20, 100),
      '{"metadata":[3],"requiredMetadataTypes":[4]}',
      ...loneObjects(20, 200),
      '{"metadata":{"x":{"metadata":[5]}}}',
      ...loneObjects(20, 300),
    ];
    const body = list(objects);
    const whole = feed(body, body.length);
    expect(JSON.parse(whole.body.toString())).toEqual(modelOf(body));
    expect(whole.body.toString()).toContain('{"tags":[1],"metadata":[2]}');
    for (const chunk of [3, 50, 333]) expect(feed(body, chunk).body.equals(whole.body)).toBe(true);
  });

  it('leaves a value longer than the held copies have room for to the bounds: value_too_large where it was', () => {
    // 4 KiB for copies: the short values fit the room of the first hold (1 KiB), the 6,000-byte one
    // needs more than MAX_PATCH_VALUE allows: the patch stops there, having inserted the others.
    const long = `{"metadata":"${'v'.repeat(6000)}"}`;
    const body = list([...loneObjects(30), long, ...loneObjects(30, 30)]);
    const result = feed(body, body.length, { maxValueBytes: 4096 });
    expect(result.outcome).toEqual({ kind: 'skipped', reason: 'value_too_large' });
    const { body: patched, insertions } = patchJson(pairs, body, { maxValueBytes: 4096 });
    expect(result.body.equals(patched)).toBe(true);
    expect(insertions).toHaveLength(30);
    expect(cutInserted(patched, insertions).equals(body)).toBe(true);
    expect(result.calls.reduce((sum, [, count]) => sum + count, 0)).toBe(30);
  });

  it('reports a trap of the instance while inserting as a scanner failure: the rest passes verbatim', () => {
    const body = list(loneObjects(50));
    injectScanFailure(new Error('unreachable'), 'insert_lone');
    const result = feed(body, body.length);
    expect(result.outcome).toEqual({ kind: 'skipped', reason: 'scanner_failed' });
    expect(result.failures.map((f) => f.message)).toEqual(['unreachable']);
    // Only the first (through onLoneMember, before the instance was asked) was inserted.
    expect(result.calls).toEqual([['tags', 1]]);
    const first = loneObjects(1)[0]!;
    expect(result.body.toString()).toBe(
      body.toString().replace(first, first.replace(/\]\}$/, '],"tags":[0,"m0"]}')),
    );
    // A fresh instance serves the next response.
    const next = feed(body, body.length);
    expect(next.outcome).toEqual({ kind: 'patched' });
    expect(JSON.parse(next.body.toString())).toEqual(modelOf(body));
  });
});
