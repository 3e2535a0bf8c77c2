/**
 * Adds deprecated alias members to the objects of a JSON response that have the canonical member, at
 * any depth, as a stream and without re-serializing anything (SPEC §6; service document part 9, rule 2;
 * RFC 8259).
 */

import { ownsMemory, tryReserveReusable } from '../core/buffer-budget.ts';
import type { BufferBudget, PatchOutcome, PatchSkipReason, ResponsePatch } from '../core/types.ts';
import {
  JsonStreamScanner,
  type KeyNames,
  LONE_COPIED,
  LONE_COPY_END,
  LONE_COPY_FROM,
  LONE_INSERTED,
  LONE_ROOM,
  LONE_SLACK,
  LONE_STAGED,
  LONE_TOP_DEPTH,
  type LoneInserter,
  type LonePrefixes,
  MAX_SCAN_NESTING,
  SCAN_FAILED,
  SCAN_INVALID,
  SCAN_OK,
  SCAN_TOO_DEEP,
  type StreamScanHandler,
} from './json-scan.ts';
import { isAlias, pairOf, renameKeyNames } from './rename-names.ts';
import type { AliasRename } from './table.ts';

/** Options of {@link createJsonPatch} and {@link patchJson}. */
export interface JsonPatchOptions {
  /**
   * Most bytes held at once for copies, per response (`MAX_PATCH_VALUE`): the canonical values whose
   * object has not closed yet, as the client receives them. Past it the rest of the body passes
   * unpatched (`skipped`/`value_too_large`).
   */
  maxValueBytes: number;
  /** The process-wide bound the held bytes are reserved from; when it refuses, `skipped`/`budget_exhausted`. */
  budget?: BufferBudget;
  /**
   * Called as inserted members are emitted, with how many of the pair were (≥ 1): once per member, or
   * once for a run of them inserted together.
   */
  onInsert?(canonical: string, alias: string, count: number): void;
  /**
   * Called when the JSON scanner itself failed (a WebAssembly trap: a bug or resource failure in the
   * shim, not in the body), with what it threw; the rest of the body passes unpatched
   * (`skipped`/{@link SCANNER_FAILED}). The alias layer logs it at `error`.
   */
  onScanFailure?(failure: Error): void;
  /** Deepest nesting of arrays and objects patched (default {@link MAX_SCAN_NESTING}, the scanner's own bound); deeper: `skipped`/`too_deep`. */
  maxNesting?: number;
}

/** The skip reason of a scanner failure (a WebAssembly trap), never the body's fault. */
const SCANNER_FAILED: PatchSkipReason = 'scanner_failed';

/**
 * Default of {@link JsonPatchOptions.maxValueBytes} for {@link patchJson}, in bytes (1 MiB); also the
 * default of `MAX_PATCH_VALUE` (aliases/config.ts writes it as `1mb`).
 */
export const DEFAULT_MAX_VALUE_BYTES = 1024 * 1024;

/**
 * How many bytes of copies may exceed the body read so far. Without nesting, copies of canonical values
 * are disjoint slices of the body and cannot exceed it; only canonical values nested in canonical values
 * (each copy holding copies, doubling per level) go further: past the slack, `skipped`/`too_deep`.
 */
export const GROWTH_SLACK = 64 * 1024;

/** One inserted `,"alias":value` piece. */
export interface PatchInsertion {
  /** Index into the `pairs`. */
  readonly pair: number;
  /** Offset in the upstream body where the piece was inserted: that of the object's closing `}`. */
  readonly offset: number;
  /** Length of the inserted piece in bytes. */
  readonly length: number;
}

interface Compiled {
  readonly names: KeyNames;
  readonly pairs: readonly AliasRename[];
  /** `,"alias":` as JSON bytes, per pair. */
  readonly prefixes: readonly Buffer[];
  /** The same prefixes, one after the other, for the WebAssembly instance (json-scan.ts `insert_lone`). */
  readonly lonePrefixes: LonePrefixes;
}

/**
 * Most pairs a patch handles: a frame's alias mask has one bit per pair (`1 << pair`, so 32 at the very
 * most), and 30 bits keep it a small integer on every V8 build (a Smi is 31 bits signed where pointers
 * are compressed: bits 0–29), so that `#frames` stays an array of small integers on the per-member path.
 */
const MAX_PAIRS = 30;

const compiledCache = new WeakMap<readonly AliasRename[], Compiled>();

function compile(pairs: readonly AliasRename[]): Compiled {
  let compiled = compiledCache.get(pairs);
  if (compiled === undefined) {
    if (pairs.length > MAX_PAIRS) throw new Error(`patchJson supports at most ${MAX_PAIRS} alias pairs`);
    const prefixes = pairs.map((p) => Buffer.from(`,${JSON.stringify(p.alias)}:`, 'utf8'));
    const offsets: number[] = [];
    let at = 0;
    for (const prefix of prefixes) {
      offsets.push(at);
      at += prefix.length;
    }
    compiled = {
      names: renameKeyNames(pairs),
      pairs,
      prefixes,
      lonePrefixes: { bytes: Buffer.concat(prefixes), offsets, lengths: prefixes.map((p) => p.length) },
    };
    compiledCache.set(pairs, compiled);
  }
  return compiled;
}

const PATCHING = 0;
const PASSING = 1; // stopped patching (skipped) or destroyed: bytes pass verbatim
const ENDED = 2;

/** First size of the hold buffer (bytes): a slice of Node's pool, cheap per response; doubles as needed. */
const INITIAL_HOLD = 1024;

/**
 * Factor on the insertion rate when an output buffer is sized for the rest of a chunk (1 + 1/16): an
 * estimate a little high costs a few spare bytes, one a little low a regrow (a copy of the output so
 * far), and a chunk's insertions vary a little around the rate of the chunks before it.
 */
const RATE_HEADROOM = 1.0625;

/** Largest room and slack handed to the scanner's instance (int32 there): 2^30 bytes. */
const LONE_BOUND = 2 ** 30;

/** Bytes up to which {@link copyRange} copies in JavaScript rather than with `Buffer.copy`. */
const SMALL_COPY = 32;

/**
 * Copies `source[start, end)` into `target` at `at` and returns the offset after it: byte by byte when
 * it is at most {@link SMALL_COPY} bytes (a `,"alias":` prefix, a short value such as `{}` or `[]`,
 * the bytes between two insertions in small objects), where a call of `Buffer.copy` costs more than
 * its bytes (60–80 ns a call whatever its length, against ~30 ns for a loop of 8 bytes; Node 24), else
 * with `Buffer.copy`. `target` must have room (the caller reserved it); an empty or inverted range
 * copies nothing, as `Buffer.copy` does.
 */
function copyRange(source: Buffer, start: number, end: number, target: Buffer, at: number): number {
  const length = end - start;
  if (length > SMALL_COPY) return at + source.copy(target, at, start, end);
  if (length <= 0) return at;
  for (let k = 0; k < length; k++) target[at + k] = source[start + k]!;
  return at + length;
}

/** What `write` returns for nothing to send (shared: never written to). */
const EMPTY = Buffer.alloc(0);

/**
 * Largest output buffer a response keeps for reuse once the socket has written it (bytes): the output
 * of a 64 KiB socket read with its insertions fits. Kept buffers are reserved from the budget, within
 * its quarter for buffers kept for reuse (`reusableOutputCeiling`).
 */
export const MAX_SPARE_OUTPUT = 256 * 1024;

/**
 * Smallest output given memory of its own (bytes), so that it can be kept for reuse; smaller ones are
 * slices of Node's shared pool (cheap; a response that small is usually one chunk), never kept.
 */
export const MIN_SPARE_OUTPUT = 4096;

/**
 * Most idle output buffers kept for the next responses, per budget (so at most 4 MiB with
 * {@link MAX_SPARE_OUTPUT}): a finished response's output buffer serves the next response's first patched
 * chunk, instead of every patched response allocating one and leaving it to a mark-compact. Idle
 * buffers are reserved from the budget like a response's own spare.
 */
export const OUTPUT_POOL_SIZE = 16;

/** The idle output buffers, by budget (a runtime's own; patches without a budget keep none). */
const outputPools = new WeakMap<BufferBudget, Buffer[]>();

/**
 * Whether an output buffer may be kept for reuse: one with memory of its own (a slice of Node's shared
 * pool, under {@link MIN_SPARE_OUTPUT}, would keep the whole pool alive), at most {@link MAX_SPARE_OUTPUT}.
 */
function keepable(buffer: Buffer): boolean {
  return buffer.length <= MAX_SPARE_OUTPUT && ownsMemory(buffer);
}

/** Gives an output buffer that no response uses any more to its budget's pool; false when not kept. */
function poolOutput(budget: BufferBudget | undefined, buffer: Buffer): boolean {
  if (budget === undefined || !keepable(buffer)) return false;
  let pool = outputPools.get(budget);
  if (pool === undefined) {
    pool = [];
    outputPools.set(budget, pool);
  }
  if (pool.length >= OUTPUT_POOL_SIZE || !tryReserveReusable(budget, buffer.length)) return false;
  pool.push(buffer);
  return true;
}

/** Takes from the budget's pool an idle output buffer of at least `bytes` (its reservation released). */
function pooledOutput(budget: BufferBudget | undefined, bytes: number): Buffer | undefined {
  const pool = budget === undefined ? undefined : outputPools.get(budget);
  if (pool === undefined) return undefined;
  for (let k = pool.length - 1; k >= 0; k--) {
    const buffer = pool[k]!;
    if (buffer.length < bytes) continue;
    pool[k] = pool[pool.length - 1]!;
    pool.pop();
    budget!.release(buffer.length);
    return buffer;
  }
  return undefined;
}

/** Size of a new output buffer of memory of its own: a power of two, so that pooled buffers fit others. */
function outputCapacity(bytes: number): number {
  return bytes < MIN_SPARE_OUTPUT || bytes > MAX_SPARE_OUTPUT ? bytes : 2 ** Math.ceil(Math.log2(bytes));
}

/**
 * What one open object with a canonical or alias member costs the patch (its frame: depth, alias mask,
 * hold base, two slots per pair), in bytes: at most `maxValueBytes / FRAME_BYTES` (or {@link MIN_FRAMES})
 * such objects may nest.
 */
const FRAME_BYTES = 32;

/** Open objects with canonical or alias members always allowed, however small `maxValueBytes` is. */
const MIN_FRAMES = 1024;

// A frame in `#frames`: depth, alias mask, hold base, then (start, end) of the copy per pair: -1 for
// none; a range of `hold`; or, when start ≤ PENDING, a range of the current chunk from PENDING − start.
const PENDING = -2;
const F_DEPTH = 0;
const F_ALIAS_MASK = 1;
const F_HOLD_BASE = 2;
const F_SLOTS = 3;

/**
 * The streaming patch (see {@link createJsonPatch}). A chunk without insertions is returned as it is.
 * At the first insertion in a chunk, one output buffer is allocated for the whole chunk (sized from the
 * growth seen so far); the chunk's ranges and the inserted pieces are copied into it as the scan goes, and
 * `write` returns it: no buffer per piece. Once the socket has written it, the core hands it back
 * (`recycle`) and the next patched chunk writes into it again, so a long response allocates one output
 * buffer rather than one per chunk: measured, fresh ~110 KiB buffers per 64 KiB upstream chunk cost
 * more in mark-compacts (V8 collecting for their external memory) than the copies they replace.
 *
 * It keeps a copy of the canonical values (in one growing buffer, `hold`) until their object closes,
 * and there inserts `,"alias":<copy>` just before the `}`. The hold buffer is a stack: the copies of an
 * object's members lie after those of its ancestors. While a canonical value is open ("recording"),
 * every byte sent is also appended to the buffer, so a copy contains the nested insertions too and
 * copies of nested canonical values are ranges inside it. When an object closes outside any recording,
 * the buffer is cut back to where it was when the object's first reported member appeared.
 * The common case is cheaper: a value that lies whole in the chunk and holds no insertion (a mission's
 * `metadata`) stays "pending", a range of the chunk, and is copied from there when its object closes in
 * the same chunk; it is held only if another reported member or the chunk's end comes first. Room for
 * it is made in `hold` all the same, so that `maxValueBytes` and the budget act as if it were held.
 * Cheaper still, the most common case of all: an object whose only reported member is canonical, with
 * the member's value and the object's `}` in the same window (`onLoneMember`, one call instead of
 * three), opens no frame: the copy goes in at once. And runs of those are inserted by the scanner's
 * WebAssembly instance itself, within the limits this patch sets ({@link limits}): one call and one
 * copy of its output per run instead of a call and three copies per object (a mission list's patch
 * alone in ~0.88× the time; bench/RESULTS.md, twenty-seventh session).
 */
class JsonPatch implements ResponsePatch, StreamScanHandler, LoneInserter {
  readonly #compiled: Compiled;
  readonly #maxValueBytes: number;
  readonly #maxFrames: number;
  readonly #budget: BufferBudget | undefined;
  readonly #onInsert: ((canonical: string, alias: string, count: number) => void) | undefined;
  readonly #onScanFailure: ((failure: Error) => void) | undefined;
  /** For {@link patchJson}: each insertion with its offset in the upstream body. */
  readonly #onInsertion: ((insertion: PatchInsertion) => void) | undefined;
  readonly #scanner: JsonStreamScanner;
  /** Numbers per frame in `#frames`: F_SLOTS + 2 per pair. */
  readonly #stride: number;
  /** This patch lets the scanner's WebAssembly instance insert lone members itself (see {@link limits}). */
  readonly lone: LoneInserter = this;
  readonly prefixes: LonePrefixes;
  /** Insertions per pair of one `inserted` call (reset as they are reported). */
  readonly #pairCounts: Int32Array;
  #mode = PATCHING;
  #skipped: PatchSkipReason | undefined;
  #inserted = 0;
  #copied = 0;
  #received = 0;

  #hold: Buffer | undefined;
  #holdLength = 0;
  #reserved = 0;
  /** Canonical values open (nested in one another). */
  #recording = 0;
  /** The slot (index into `#frames`) that is a range of the current chunk ({@link PENDING}), or -1. */
  #pendingSlot = -1;

  /**
   * Objects with a reported member, innermost last: `#stride` numbers each (see F_DEPTH…), the first
   * `#framesTop` numbers. The array keeps its length when frames close and is written in place when they
   * open, in order, so that a write at its length grows it (pushes and pops of a frame's numbers cost
   * ~3 % of a mission list's patch).
   */
  readonly #frames: number[] = [];
  #framesTop = 0;
  /** Reported members whose value is being scanned, innermost last: name, hold start. */
  readonly #members: number[] = [];
  /** Numbers of `#members` in use (written in place, as `#frames`). */
  #membersTop = 0;

  // The chunk being written.
  #chunk: Buffer = EMPTY;
  #chunkBase = 0;
  /** Offset in the chunk of the first byte not copied to `#out` yet. */
  #copyFrom = 0;
  /** Offset in the chunk of the first byte not appended to `hold` yet (while recording). */
  #recordFrom = 0;
  /** The chunk's output, from its first insertion on; `#outLength` bytes of it are written. */
  #out: Buffer | undefined;
  #outLength = 0;
  /** Input and output bytes of the chunks with insertions so far: how to size the next output. */
  #sizedIn = 0;
  #sizedOut = 0;
  /** The output buffer `write` returned last (whole), until it comes back through `recycle`. */
  #lent: Buffer | undefined;
  /** An output buffer the socket has written (`recycle`), for the next patched chunk. */
  #spare: Buffer | undefined;
  /** Bytes reserved from the budget for `#spare` (its largest size so far). */
  #spareReserved = 0;

  constructor(
    compiled: Compiled,
    options: JsonPatchOptions,
    onInsertion: ((insertion: PatchInsertion) => void) | undefined,
  ) {
    this.#compiled = compiled;
    this.#maxValueBytes = options.maxValueBytes;
    this.#maxFrames = Math.max(MIN_FRAMES, Math.floor(options.maxValueBytes / FRAME_BYTES));
    this.#budget = options.budget;
    this.#onInsert = options.onInsert;
    this.#onScanFailure = options.onScanFailure;
    this.#onInsertion = onInsertion;
    this.#scanner = new JsonStreamScanner(compiled.names, options.maxNesting ?? MAX_SCAN_NESTING);
    this.#stride = F_SLOTS + 2 * compiled.pairs.length;
    this.prefixes = compiled.lonePrefixes;
    this.#pairCounts = new Int32Array(compiled.pairs.length);
  }

  get outcome(): PatchOutcome {
    if (this.#skipped !== undefined) return { kind: 'skipped', reason: this.#skipped };
    return this.#inserted > 0 ? { kind: 'patched' } : { kind: 'unchanged' };
  }

  write(chunk: Buffer): Buffer {
    if (chunk.length === 0) return EMPTY;
    this.#received += chunk.length;
    if (this.#mode !== PATCHING) return this.#mode === PASSING ? chunk : EMPTY;
    this.#chunk = chunk;
    this.#chunkBase = this.#scanner.position;
    this.#copyFrom = 0;
    this.#recordFrom = 0;
    const status = this.#scanner.write(chunk, this);
    if (status === SCAN_INVALID) this.#skip('invalid_json');
    else if (status === SCAN_TOO_DEEP) this.#skip('too_deep');
    else if (status === SCAN_FAILED) {
      this.#skip(SCANNER_FAILED);
      this.#onScanFailure?.(this.#scanner.error!.failure!);
    } else if (status === SCAN_OK) {
      // What of this chunk is still needed is held before the chunk goes (a skip lets the rest pass).
      const held = this.#pendingSlot < 0 || this.#holdPending();
      if (held && this.#recording > 0) this.#record(chunk.length);
    }
    this.#chunk = EMPTY;
    const out = this.#out;
    if (out === undefined) return chunk;
    // The rest of the chunk after the last insertion (all of it verbatim after a skip).
    const length = this.#outLength + chunk.copy(out, this.#outLength, this.#copyFrom);
    this.#out = undefined;
    this.#outLength = 0;
    this.#sizedIn += chunk.length;
    this.#sizedOut += length;
    this.#lent = out;
    return length === out.length ? out : out.subarray(0, length);
  }

  recycle(bytes: Buffer): void {
    const lent = this.#lent;
    // Only the buffer returned last, recognized by its memory (a subarray of it comes back).
    if (lent === undefined || bytes.buffer !== lent.buffer || bytes.byteOffset !== lent.byteOffset) return;
    this.#lent = undefined;
    // Written after the response ended (or stopped patching): for the next response.
    if (this.#mode !== PATCHING) {
      poolOutput(this.#budget, lent);
      return;
    }
    if (!keepable(lent)) return;
    if (this.#spare !== undefined && this.#spare.length >= lent.length) return;
    if (lent.length > this.#spareReserved) {
      if (this.#budget !== undefined && !tryReserveReusable(this.#budget, lent.length - this.#spareReserved))
        return;
      this.#spareReserved = lent.length;
    }
    this.#spare = lent;
  }

  end(): Buffer {
    // Nothing is ever held back from the output: only copies are kept, and they are dropped here.
    if (this.#mode === PATCHING) {
      const status = this.#scanner.end();
      if (status === SCAN_INVALID && this.#received > 0) this.#skipped = 'invalid_json';
      else if (status === SCAN_FAILED) {
        this.#skipped = SCANNER_FAILED;
        this.#onScanFailure?.(this.#scanner.error!.failure!);
      }
    }
    this.#mode = ENDED;
    this.#release();
    return EMPTY;
  }

  destroy(): void {
    if (this.#mode === PATCHING) this.#mode = PASSING;
    this.#release();
  }

  onMember(depth: number, name: number, valueStart: number): boolean {
    // A pending value is held first: whatever follows (a new frame's hold base, a new copy) lies above it.
    if (this.#pendingSlot >= 0 && !this.#holdPending()) return false;
    const frames = this.#frames;
    const stride = this.#stride;
    let frame = this.#framesTop - stride;
    if (frame < 0 || frames[frame + F_DEPTH] !== depth) {
      // The open objects with reported members cost memory too (~32 bytes each): bounded with the copies.
      frame = this.#framesTop;
      if (frame >= this.#maxFrames * stride) return this.#skip('too_deep');
      frames[frame + F_DEPTH] = depth;
      frames[frame + F_ALIAS_MASK] = 0;
      frames[frame + F_HOLD_BASE] = this.#holdLength;
      for (let k = F_SLOTS; k < stride; k++) frames[frame + k] = -1;
      this.#framesTop = frame + stride;
    }
    if (isAlias(name)) {
      frames[frame + F_ALIAS_MASK] = frames[frame + F_ALIAS_MASK]! | (1 << pairOf(name));
      this.#pushMember(name, -1);
      return true;
    }
    if (this.#recording === 0) {
      // A repeated canonical key replaces the copy; drop the old one when it is the last held.
      const slot = frame + F_SLOTS + 2 * pairOf(name);
      if (frames[slot + 1] === this.#holdLength && frames[slot]! >= 0) this.#holdLength = frames[slot]!;
      this.#recordFrom = valueStart - this.#chunkBase;
    } else if (!this.#record(valueStart - this.#chunkBase)) {
      return false;
    }
    this.#pushMember(name, this.#holdLength);
    this.#recording++;
    return true;
  }

  /** Opens a reported member's value: its name and where its copy starts in `hold` (-1 for an alias). */
  #pushMember(name: number, holdStart: number): void {
    const members = this.#members;
    const top = this.#membersTop;
    members[top] = name;
    members[top + 1] = holdStart;
    this.#membersTop = top + 2;
  }

  onValue(_depth: number, valueEnd: number): boolean {
    const members = this.#members;
    const top = this.#membersTop - 2;
    this.#membersTop = top;
    const name = members[top]!;
    const holdStart = members[top + 1]!;
    if (isAlias(name)) return true;
    const slot = this.#framesTop - this.#stride + F_SLOTS + 2 * pairOf(name);
    const end = valueEnd - this.#chunkBase;
    if (this.#recording === 1 && this.#holdLength === holdStart) {
      // The whole value lies in this chunk and holds no insertion: copied from the chunk when its
      // object closes in this chunk, held only if it does not (#holdPending). Room is made for it as if
      // it were held, so that the bounds act as they would.
      if (!this.#holdRoom(holdStart + (end - this.#recordFrom))) return false;
      this.#recording = 0;
      this.#frames[slot] = PENDING - this.#recordFrom;
      this.#frames[slot + 1] = end;
      this.#pendingSlot = slot;
      return true;
    }
    if (!this.#record(end)) return false;
    this.#recording--;
    this.#frames[slot] = holdStart;
    this.#frames[slot + 1] = this.#holdLength;
    return true;
  }

  /**
   * Copies the pending value (a canonical value of this chunk whose object is still open; at most one:
   * the next reported member or the chunk's end holds it) into the held copies; false when it skipped.
   */
  #holdPending(): boolean {
    const frames = this.#frames;
    const slot = this.#pendingSlot;
    this.#pendingSlot = -1;
    const holdStart = this.#holdLength;
    if (!this.#append(this.#chunk, PENDING - frames[slot]!, frames[slot + 1]!)) return false;
    frames[slot] = holdStart;
    frames[slot + 1] = this.#holdLength;
    return true;
  }

  onObjectEnd(_depth: number, closeOffset: number): boolean {
    const pairCount = this.#compiled.pairs.length;
    const frames = this.#frames;
    const frame = this.#framesTop - this.#stride;
    const aliasMask = frames[frame + F_ALIAS_MASK]!;
    for (let pair = 0; pair < pairCount; pair++) {
      let start = frames[frame + F_SLOTS + 2 * pair]!;
      if (start === -1) continue;
      // A pending value is in this chunk (a range of it), any other one in the held copies.
      let source = this.#hold!;
      if (start <= PENDING) {
        this.#pendingSlot = -1;
        source = this.#chunk;
        start = PENDING - start;
      }
      if ((aliasMask & (1 << pair)) !== 0) continue;
      const end = frames[frame + F_SLOTS + 2 * pair + 1]!;
      if (!this.#insert(pair, source, start, end, closeOffset)) return false;
    }
    if (this.#recording === 0) this.#holdLength = frames[frame + F_HOLD_BASE]!;
    this.#framesTop = frame;
    return true;
  }

  onLoneMember(
    depth: number,
    name: number,
    valueStart: number,
    valueEnd: number,
    closeOffset: number,
  ): boolean {
    const frame = this.#framesTop - this.#stride;
    // An alias, a value inside a held copy, or an object with an earlier reported member: the full path.
    if (isAlias(name) || this.#recording > 0 || (frame >= 0 && this.#frames[frame + F_DEPTH] === depth)) {
      return (
        this.onMember(depth, name, valueStart) &&
        this.onValue(depth, valueEnd) &&
        this.onObjectEnd(depth, closeOffset)
      );
    }
    // What the three calls do for an object whose one reported member is canonical and whose value is
    // in this chunk: hold a pending value of an enclosing object, count the frame against the bound,
    // make room for the value as if it were held (the bounds act as they would), insert the copy.
    if (this.#pendingSlot >= 0 && !this.#holdPending()) return false;
    if (this.#framesTop >= this.#maxFrames * this.#stride) return this.#skip('too_deep');
    const start = valueStart - this.#chunkBase;
    const end = valueEnd - this.#chunkBase;
    if (!this.#holdRoom(this.#holdLength + (end - start))) return false;
    return this.#insert(pairOf(name), this.#chunk, start, end, closeOffset);
  }

  /**
   * Inserts `,"alias":` and the copy of `source[start, end)` just before the `}` at `closeOffset`, after
   * the chunk's bytes up to it, into the output; false when it skipped.
   */
  #insert(pair: number, source: Buffer, start: number, end: number, closeOffset: number): boolean {
    const close = closeOffset - this.#chunkBase;
    const prefix = this.#compiled.prefixes[pair]!;
    const valueLength = end - start;
    if (this.#copied + valueLength > closeOffset + GROWTH_SLACK) return this.#skip('too_deep');
    if (this.#recording > 0) {
      if (!this.#record(close)) return false;
      if (this.#holdLength + prefix.length + valueLength > this.#maxValueBytes)
        return this.#skip('value_too_large');
    }
    // The chunk up to the `}`, then `,"alias":` and the copy, straight into the output.
    const pieceLength = prefix.length + valueLength;
    const out = this.#reserveOut(close, pieceLength);
    const copyFrom = this.#copyFrom;
    const copiedAt = this.#outLength;
    let at = copyRange(this.#chunk, copyFrom, close, out, copiedAt);
    this.#copyFrom = close;
    const pieceStart = at;
    at = copyRange(prefix, 0, prefix.length, out, at);
    if (source === this.#chunk && start >= copyFrom && end <= close && valueLength > SMALL_COPY) {
      // The value was just copied with the chunk up to the `}`: copied again from the output
      // (`copyWithin` costs about half a `Buffer.copy` call).
      out.copyWithin(at, copiedAt + (start - copyFrom), copiedAt + (end - copyFrom));
      at += valueLength;
    } else {
      at = copyRange(source, start, end, out, at);
    }
    this.#outLength = at;
    // The piece is in the output from here on: counted even when holding it in an open canonical
    // value is refused next (the budget), which stops the patch after it.
    this.#copied += valueLength;
    this.#inserted++;
    const { canonical, alias } = this.#compiled.pairs[pair]!;
    this.#onInsert?.(canonical, alias, 1);
    this.#onInsertion?.({ pair, offset: closeOffset, length: pieceLength });
    return this.#recording === 0 || this.#append(out, pieceStart, at);
  }

  /**
   * {@link LoneInserter}: the scanner's instance may insert lone members itself exactly when
   * `onLoneMember` would take its short path for them — no canonical value open or pending, no
   * earlier reported member in the object, room for the frame — and only values that fit the room the held copies already have (so that neither bound
   * nor budget is consulted: a value that needs more goes to `onLoneMember`), within the copies' growth
   * slack (GROWTH_SLACK).
   */
  limits(windowBase: number, depth: number, limits: Int32Array): boolean {
    const hold = this.#hold;
    if (hold === undefined || this.#recording > 0 || this.#pendingSlot >= 0 || this.#mode !== PATCHING)
      return false;
    const top = this.#framesTop;
    if (top >= this.#maxFrames * this.#stride) return false;
    const topDepth = top === 0 ? -1 : this.#frames[top - this.#stride + F_DEPTH]!;
    // An object with an earlier reported member (the alias beside it, say) is not lone: no call for it.
    if (topDepth === depth) return false;
    limits[LONE_TOP_DEPTH] = topDepth;
    limits[LONE_ROOM] = Math.min(hold.length - this.#holdLength, LONE_BOUND);
    limits[LONE_COPY_FROM] = Math.max(this.#copyFrom - (windowBase - this.#chunkBase), 0);
    const slack = windowBase + GROWTH_SLACK - this.#copied;
    limits[LONE_SLACK] = Math.max(-LONE_BOUND, Math.min(slack, LONE_BOUND));
    return true;
  }

  /** {@link LoneInserter}: takes the instance's output into this chunk's, and counts the insertions. */
  inserted(
    windowBase: number,
    limits: Int32Array,
    memory: Buffer,
    staged: number,
    records: Int32Array,
    at: number,
  ): void {
    const windowStart = windowBase - this.#chunkBase;
    const from = windowStart + limits[LONE_COPY_FROM]!;
    const end = windowStart + limits[LONE_COPY_END]!;
    const stagedLength = limits[LONE_STAGED]!;
    const count = limits[LONE_INSERTED]!;
    const out = this.#reserveOut(end, stagedLength - (end - from));
    // The chunk's bytes before the window not output yet (a chunk longer than a window), then the staged.
    let length = copyRange(this.#chunk, this.#copyFrom, from, out, this.#outLength);
    length += memory.copy(out, length, staged, staged + stagedLength);
    this.#outLength = length;
    this.#copyFrom = end;
    this.#copied += limits[LONE_COPIED]!;
    this.#inserted += count;
    const pairCounts = this.#pairCounts;
    for (let k = 0; k < count; k++) {
      const pair = records[at + 3 * k]!;
      pairCounts[pair]!++;
      this.#onInsertion?.({
        pair,
        offset: windowBase + records[at + 3 * k + 1]!,
        length: records[at + 3 * k + 2]!,
      });
    }
    for (let pair = 0; pair < pairCounts.length; pair++) {
      const inserted = pairCounts[pair]!;
      if (inserted === 0) continue;
      pairCounts[pair] = 0;
      const { canonical, alias } = this.#compiled.pairs[pair]!;
      this.#onInsert?.(canonical, alias, inserted);
    }
  }

  /**
   * The output buffer of this chunk with room for the chunk's bytes up to `close`, a piece of
   * `pieceLength` bytes and the rest of the chunk: allocated at the chunk's first insertion, sized for
   * the insertions expected in the rest (the rate of earlier chunks, else of this one so far), and
   * regrown (one copy) when they outgrow it.
   */
  #reserveOut(close: number, pieceLength: number): Buffer {
    const out = this.#out;
    const chunkLength = this.#chunk.length;
    const needed = this.#outLength + (chunkLength - this.#copyFrom) + pieceLength;
    if (out !== undefined && needed <= out.length) return out;
    // Inserted bytes per input byte: of the earlier chunks, or of this one up to `close`.
    const insertedHere = this.#outLength - this.#copyFrom + pieceLength;
    const rate =
      this.#sizedIn > 0 && out === undefined
        ? (this.#sizedOut - this.#sizedIn) / this.#sizedIn
        : insertedHere / Math.max(close, 1);
    const capacity = needed + Math.ceil((chunkLength - close) * rate * RATE_HEADROOM);
    const spare = this.#spare;
    // A spare smaller than the estimate still does when it holds what is certain (one regrow at worst).
    if (out === undefined && spare !== undefined && spare.length >= needed) {
      this.#spare = undefined;
      this.#out = spare;
      return spare;
    }
    const pooled = out === undefined ? pooledOutput(this.#budget, needed) : undefined;
    if (pooled !== undefined) {
      this.#out = pooled;
      return pooled;
    }
    const grown =
      capacity < MIN_SPARE_OUTPUT
        ? Buffer.allocUnsafe(capacity)
        : Buffer.allocUnsafeSlow(outputCapacity(capacity));
    if (out !== undefined) out.copy(grown, 0, 0, this.#outLength);
    this.#out = grown;
    return grown;
  }

  /** Appends the chunk's bytes from `recordFrom` to `to` to the hold buffer; false when it skipped. */
  #record(to: number): boolean {
    const from = this.#recordFrom;
    this.#recordFrom = to;
    return to <= from || this.#append(this.#chunk, from, to);
  }

  #append(source: Buffer, from: number, to: number): boolean {
    const length = this.#holdLength;
    const needed = length + (to - from);
    if (!this.#holdRoom(needed)) return false;
    source.copy(this.#hold!, length, from, to);
    this.#holdLength = needed;
    return true;
  }

  /**
   * Makes the hold buffer `needed` bytes long at least (growing it by doubling, reserved from the
   * budget); false when it skipped: `value_too_large` past `maxValueBytes`, `budget_exhausted`.
   */
  #holdRoom(needed: number): boolean {
    if (needed > this.#maxValueBytes) return this.#skip('value_too_large');
    const hold = this.#hold;
    if (hold !== undefined && needed <= hold.length) return true;
    const capacity = Math.min(
      this.#maxValueBytes,
      Math.max(needed, hold === undefined ? INITIAL_HOLD : hold.length * 2),
    );
    const more = capacity - this.#reserved;
    if (this.#budget !== undefined && !this.#budget.tryReserve(more)) return this.#skip('budget_exhausted');
    this.#reserved = capacity;
    const grown = Buffer.allocUnsafe(capacity);
    if (hold !== undefined) hold.copy(grown, 0, 0, this.#holdLength);
    this.#hold = grown;
    return true;
  }

  /** Stops patching: the rest of the body passes verbatim. Returns false (stop the scan). */
  #skip(reason: PatchSkipReason): false {
    this.#skipped = reason;
    this.#mode = PASSING;
    this.#release();
    return false;
  }

  /** Drops the held copies and the spare output and returns their reservations to the budget. */
  #release(): void {
    if (this.#reserved > 0) this.#budget?.release(this.#reserved);
    this.#reserved = 0;
    if (this.#spareReserved > 0) this.#budget?.release(this.#spareReserved);
    this.#spareReserved = 0;
    if (this.#spare !== undefined) poolOutput(this.#budget, this.#spare);
    this.#spare = undefined;
    this.#hold = undefined;
    this.#holdLength = 0;
    this.#recording = 0;
    this.#pendingSlot = -1;
  }
}

/**
 * Creates the streaming patch of one JSON response for a legacy client (SPEC §6): every object, at any
 * depth, that has a canonical member (`metadata`) and no alias member (`tags`) gets `,"tags":<the same
 * value>` inserted just before its closing `}` — after all the upstream's members, whose order is kept.
 * The copied value is the canonical value as the client receives it (with its own nested insertions),
 * so patching is idempotent. Everything else keeps the upstream's bytes: cutting the inserted pieces
 * out gives the upstream body back exactly (numbers such as `1.50`, whitespace, escapes untouched).
 * Keys are compared decoded (`"t\u0061gs"` counts); an object with the canonical key twice gets the last
 * value (`JSON.parse` semantics); with several pairs the pieces follow the order of `pairs`.
 *
 * Streaming: `write` returns the bytes of each chunk at once — the chunk itself when nothing is
 * inserted in it, else one buffer holding the chunk with its pieces (a recycled one when there is
 * one); nothing is held back but copies of canonical values until their object closes — the end of
 * the object is where it becomes known that it has no alias member (`{"metadata":[1],"tags":[2]}`). The
 * output never depends on where the chunks were cut.
 *
 * The body is validated as it goes, strictly ({@link JsonStreamScanner}: RFC 8259, UTF-8, no byte
 * order mark). From the first invalid byte on nothing more is inserted and the rest passes verbatim
 * (`skipped`/`invalid_json`); JSON is never "repaired". A failure of the scanner itself (a WebAssembly
 * trap) stops patching the same way and is handed to `onScanFailure`. Also `skipped`, from the point where it
 * happens: `value_too_large` (held copies over `maxValueBytes`), `budget_exhausted` (the budget refused),
 * `too_deep` (nesting over `maxNesting`; objects with canonical or alias members nested more than
 * `maxValueBytes /` {@link FRAME_BYTES} (at least {@link MIN_FRAMES}) deep; or copies of nested
 * canonical values outgrowing the body by {@link GROWTH_SLACK}). Pieces inserted before that point stay. A top-level scalar, a body without
 * canonical keys, and an empty body pass byte for byte as `unchanged`.
 *
 * @param pairs Canonical/alias pairs (alias table, `response` rows), at most 30 (`MAX_PAIRS`). Compiled once per array.
 * @param options See {@link JsonPatchOptions}.
 * @returns A {@link ResponsePatch}: `write` returns the patched bytes of a chunk (the patch writes
 *   into that memory again only after `recycle` gave it back), `end` an empty buffer (nothing is held
 *   back); neither throws. `destroy` releases the budget. Memory: the held copies (≤ `maxValueBytes`),
 *   one output buffer kept for reuse (≤ {@link MAX_SPARE_OUTPUT}, reserved from the budget's quarter for
 *   reuse; when that is full it is simply not kept), and one byte per nesting level.
 * @throws {Error} when `pairs` has more than 30 pairs (`MAX_PAIRS`: one bit each in a small-integer mask).
 * @example
 * const patch = createJsonPatch(responsePairs(), { maxValueBytes: 1 << 20 });
 * patch.write(Buffer.from('[{"metadata":{"a":1.')); // → the chunk itself
 * patch.write(Buffer.from('50},"x":1}]')); // → '50},"x":1,"tags":{"a":1.50}}]'
 * patch.end(); // → empty; patch.outcome → { kind: 'patched' }
 */
export function createJsonPatch(pairs: readonly AliasRename[], options: JsonPatchOptions): ResponsePatch {
  return new JsonPatch(compile(pairs), options, undefined);
}

/** What {@link patchJson} returns. */
export interface PatchJsonResult {
  /** The patched body: the input Buffer itself when nothing was inserted. */
  readonly body: Buffer;
  readonly outcome: PatchOutcome;
  /** The inserted pieces, in order. */
  readonly insertions: PatchInsertion[];
}

/**
 * Whole-buffer convenience over {@link createJsonPatch} (tests, the docs generator): the body written
 * as one chunk, then ended.
 * @param pairs See {@link createJsonPatch}.
 * @param body The complete, decoded response body (bytes).
 * @param options See {@link JsonPatchOptions}; `maxValueBytes` defaults to {@link DEFAULT_MAX_VALUE_BYTES}.
 * @returns The output, the outcome and the inserted pieces with their offsets in `body`. Never throws
 *   (but for more than 30 pairs).
 * @example
 * patchJson(responsePairs(), Buffer.from('[{"metadata":{"a":1.50}}]')).body.toString();
 * // → '[{"metadata":{"a":1.50},"tags":{"a":1.50}}]'
 */
export function patchJson(
  pairs: readonly AliasRename[],
  body: Buffer,
  options?: Partial<JsonPatchOptions>,
): PatchJsonResult {
  const insertions: PatchInsertion[] = [];
  const patch = new JsonPatch(
    compile(pairs),
    { ...options, maxValueBytes: options?.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES },
    (insertion) => insertions.push(insertion),
  );
  const written = patch.write(body);
  const last = patch.end();
  return {
    body: insertions.length === 0 ? body : last.length === 0 ? written : Buffer.concat([written, last]),
    outcome: patch.outcome,
    insertions,
  };
}
