/**
 * Adds deprecated alias members next to their canonical members in a JSON response, at any depth,
 * without re-serializing anything (SPEC §6; service document part 9, rule 2).
 */
import type { PatchOutcome } from '../proxy/types.ts';
import { KeyNames, type ScanHandler, scanJson, skipWhitespace } from './json-scan.ts';
import type { AliasRename } from './table.ts';

/** One inserted `,"alias":value` piece. */
export interface PatchInsertion {
  /** Index into the `pairs` given to {@link patchJson}. */
  readonly pair: number;
  /** Offset in the upstream body where the piece was inserted (just after the canonical member's value). */
  readonly offset: number;
  /** Length of the inserted piece in bytes. */
  readonly length: number;
}

/** {@link PatchOutcome}, with the insertions listed when the body was patched. */
export type PatchResult =
  | { readonly kind: 'patched'; readonly body: Buffer; readonly insertions: readonly PatchInsertion[] }
  | Exclude<PatchOutcome, { kind: 'patched' }>;

/** Options of {@link patchJson}. */
export interface PatchOptions {
  /**
   * Skip the full scan when no canonical key can be in the body (default `true`). With the precheck an
   * invalid body that cannot hold a canonical key is `unchanged` rather than `skipped`; `false` always
   * validates (used by the conformance tests).
   */
  readonly precheck?: boolean;
}

/**
 * How much larger than the upstream body the inserted pieces may grow, beyond the body's own length, in
 * bytes. Without nesting, the copies of canonical values are disjoint slices of the body and cannot
 * exceed it; only canonical values nested in canonical values (each copy holding copies) go further.
 */
export const GROWTH_SLACK = 64 * 1024;

interface Compiled {
  readonly names: KeyNames;
  /** `"canonical"` as JSON bytes, for the precheck. */
  readonly canonicalTokens: readonly Buffer[];
  /** `,"alias":` as JSON bytes, per pair. */
  readonly prefixes: readonly Buffer[];
}

const compiledCache = new WeakMap<readonly AliasRename[], Compiled>();

function compile(pairs: readonly AliasRename[]): Compiled {
  let compiled = compiledCache.get(pairs);
  if (compiled === undefined) {
    if (pairs.length > 30) throw new Error('patchJson supports at most 30 alias pairs');
    compiled = {
      names: new KeyNames(pairs.flatMap((p) => [p.canonical, p.alias])),
      canonicalTokens: pairs.map((p) => Buffer.from(JSON.stringify(p.canonical), 'utf8')),
      prefixes: pairs.map((p) => Buffer.from(`,${JSON.stringify(p.alias)}:`, 'utf8')),
    };
    compiledCache.set(pairs, compiled);
  }
  return compiled;
}

interface Insertion {
  readonly pair: number;
  readonly offset: number;
  readonly valueStart: number;
  readonly length: number;
}

/**
 * Patches a JSON response for a legacy client: every object, at any depth, that has a canonical member
 * (`metadata`) and no alias member (`tags`) gets `,"tags":<the same value>` inserted directly after the
 * canonical member. The copied value is the canonical value as the client receives it (with its own
 * nested patches), so patching is idempotent. Everything else keeps the upstream's bytes: removing the
 * inserted pieces gives the upstream body back exactly (numbers such as `1.50` or
 * `12345678901234567890`, whitespace, escapes and key order untouched).
 *
 * Keys are compared decoded (`"m\u0065tadata"` counts). An object with the canonical key twice gets the
 * last value (`JSON.parse` semantics), inserted after that last member.
 *
 * Fast path: when neither a literal `"canonical"` token nor any backslash occurs in the body (two or three
 * `Buffer.indexOf` calls), no canonical key can exist and the body is `unchanged` without a scan.
 * Otherwise one strict, iterative, linear scan ({@link scanJson}) finds the members, and the output is
 * copied slice by slice into one buffer of the final length.
 *
 * @param pairs Canonical/alias pairs (alias table, `response` rows), at most 30. Cached by identity.
 * @param body The complete, decoded response body (bytes).
 * @param options See {@link PatchOptions}.
 * @returns `patched` with the new body and the insertions; `unchanged`; `skipped`/`invalid_json` when the
 *   body is not UTF-8 JSON (RFC 8259 incl. §8.1); `skipped`/`too_deep` when canonical values nested in
 *   canonical values would grow the body by more than its length + {@link GROWTH_SLACK}. Never throws.
 * @example
 * patchJson([{ canonical: 'metadata', alias: 'tags' }], Buffer.from('[{"metadata":{"a":1.50}}]'));
 * // → { kind: 'patched', body: <'[{"metadata":{"a":1.50},"tags":{"a":1.50}}]'>, insertions: [...] }
 */
export function patchJson(pairs: readonly AliasRename[], body: Buffer, options?: PatchOptions): PatchResult {
  const { names, canonicalTokens, prefixes } = compile(pairs);
  if (options?.precheck !== false && !mayHoldCanonicalKey(body, canonicalTokens))
    return { kind: 'unchanged' };

  const pairCount = pairs.length;
  // Objects that hold a canonical or alias member, while they are scanned (a stack; flat arrays with
  // `pairCount` slots per object, to keep the per-object cost to a few number pushes).
  const frameDepth: number[] = [];
  const frameAliasMask: number[] = [];
  const slotValueStart: number[] = []; // of the last canonical member, or -1
  const slotValueEnd: number[] = [];
  const slotInner: number[] = []; // bytes inserted inside the canonical value (nested copies)
  // Members whose value is being scanned: name index, key end, bytes inserted so far when it started.
  const pendingName: number[] = [];
  const pendingKeyEnd: number[] = [];
  const pendingInserted: number[] = [];
  const insertions: Insertion[] = [];
  let inserted = 0;

  const handler: ScanHandler = {
    onKey(depth, name, _keyStart, keyEnd) {
      if (frameDepth.length === 0 || frameDepth[frameDepth.length - 1] !== depth) {
        frameDepth.push(depth);
        frameAliasMask.push(0);
        for (let pair = 0; pair < pairCount; pair++) {
          slotValueStart.push(-1);
          slotValueEnd.push(-1);
          slotInner.push(0);
        }
      }
      pendingName.push(name);
      pendingKeyEnd.push(keyEnd);
      pendingInserted.push(inserted);
    },
    onValue(_depth, valueEnd) {
      const name = pendingName.pop()!;
      const keyEnd = pendingKeyEnd.pop()!;
      const insertedBefore = pendingInserted.pop()!;
      const frame = frameDepth.length - 1;
      const pair = name >> 1;
      if ((name & 1) === 1) {
        frameAliasMask[frame] = frameAliasMask[frame]! | (1 << pair);
      } else {
        const slot = frame * pairCount + pair;
        // The text up to here is valid: after the key come whitespace, ':', whitespace, the value.
        slotValueStart[slot] = skipWhitespace(body, skipWhitespace(body, keyEnd) + 1);
        slotValueEnd[slot] = valueEnd;
        slotInner[slot] = inserted - insertedBefore;
      }
    },
    onObjectEnd() {
      const frame = frameDepth.length - 1;
      const aliasMask = frameAliasMask[frame]!;
      const base = frame * pairCount;
      for (let pair = 0; pair < pairCount; pair++) {
        const valueStart = slotValueStart[base + pair]!;
        if (valueStart < 0 || (aliasMask & (1 << pair)) !== 0) continue;
        const offset = slotValueEnd[base + pair]!;
        const length = prefixes[pair]!.length + (offset - valueStart) + slotInner[base + pair]!;
        insertions.push({ pair, offset, valueStart, length });
        inserted += length;
      }
      frameDepth.pop();
      frameAliasMask.pop();
      slotValueStart.length = base;
      slotValueEnd.length = base;
      slotInner.length = base;
    },
  };

  if (scanJson(body, names, handler, Number.POSITIVE_INFINITY) !== undefined) {
    return { kind: 'skipped', reason: 'invalid_json' };
  }
  if (insertions.length === 0) return { kind: 'unchanged' };
  if (inserted > body.length + GROWTH_SLACK) return { kind: 'skipped', reason: 'too_deep' };

  insertions.sort((a, b) => a.offset - b.offset);
  return {
    kind: 'patched',
    body: render(body, insertions, prefixes, body.length + inserted),
    insertions: insertions.map(({ pair, offset, length }) => ({ pair, offset, length })),
  };
}

/**
 * Whether a canonical key can occur: either a literal `"canonical"` token, or a backslash (a key written
 * with escapes, e.g. `"m\u0065tadata"`, always contains one).
 */
function mayHoldCanonicalKey(body: Buffer, canonicalTokens: readonly Buffer[]): boolean {
  for (const token of canonicalTokens) if (body.indexOf(token) !== -1) return true;
  return body.indexOf(0x5c) !== -1;
}

/**
 * Builds the patched body: upstream slices with the insertions (sorted by offset) between them. The value
 * copied into an insertion is itself rendered with the insertions inside its range, iteratively.
 */
function render(
  body: Buffer,
  insertions: readonly Insertion[],
  prefixes: readonly Buffer[],
  totalLength: number,
): Buffer {
  // One allocation, filled with copies of slices: cheaper than thousands of subarray views + concat.
  const out = Buffer.allocUnsafe(totalLength);
  let at = 0;
  // Explicit stack of ranges being rendered: [cursor, end, next insertion index].
  const cursors: number[] = [0];
  const ends: number[] = [body.length];
  const nexts: number[] = [0];
  while (cursors.length > 0) {
    const top = cursors.length - 1;
    const k = nexts[top]!;
    const insertion = insertions[k];
    if (insertion !== undefined && insertion.offset < ends[top]!) {
      at += body.copy(out, at, cursors[top], insertion.offset);
      at += prefixes[insertion.pair]!.copy(out, at);
      cursors[top] = insertion.offset;
      nexts[top] = k + 1;
      cursors.push(insertion.valueStart);
      ends.push(insertion.offset);
      nexts.push(firstAfter(insertions, insertion.valueStart, k));
    } else {
      at += body.copy(out, at, cursors[top], ends[top]);
      cursors.pop();
      ends.pop();
      nexts.pop();
    }
  }
  return out;
}

/** Index of the first insertion in `insertions[0, hi)` with an offset above `offset` (binary search). */
function firstAfter(insertions: readonly Insertion[], offset: number, hi: number): number {
  let lo = 0;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (insertions[mid]!.offset <= offset) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
