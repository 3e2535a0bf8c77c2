/**
 * Adds deprecated alias members to the objects of a JSON response that have the canonical member, at
 * any depth, as a stream and without re-serializing anything (SPEC §6; service document part 9, rule 2;
 * RFC 8259).
 */
import type { BufferBudget, PatchOutcome, PatchSkipReason, ResponsePatch } from '../proxy/types.ts';
import {
  JsonStreamScanner,
  KeyNames,
  SCAN_INVALID,
  SCAN_OK,
  SCAN_TOO_DEEP,
  type StreamScanHandler,
} from './json-scan.ts';
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
  /** Called once per inserted member, as it is emitted. */
  onInsert?(canonical: string, alias: string): void;
  /** Deepest nesting of arrays and objects patched (default {@link MAX_NESTING}); deeper: `skipped`/`too_deep`. */
  maxNesting?: number;
}

/** Default of {@link JsonPatchOptions.maxValueBytes} for {@link patchJson} (1 MiB, as `MAX_PATCH_VALUE`). */
export const DEFAULT_MAX_VALUE_BYTES = 1024 * 1024;

/** Default nesting bound: the scanner's stack costs one byte per level, so at most 1 MiB. */
export const MAX_NESTING = 1024 * 1024;

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
}

const compiledCache = new WeakMap<readonly AliasRename[], Compiled>();

function compile(pairs: readonly AliasRename[]): Compiled {
  let compiled = compiledCache.get(pairs);
  if (compiled === undefined) {
    if (pairs.length > 30) throw new Error('patchJson supports at most 30 alias pairs');
    compiled = {
      // Name 2k is the canonical of pair k, 2k+1 its alias.
      names: new KeyNames(pairs.flatMap((p) => [p.canonical, p.alias])),
      pairs,
      prefixes: pairs.map((p) => Buffer.from(`,${JSON.stringify(p.alias)}:`, 'utf8')),
    };
    compiledCache.set(pairs, compiled);
  }
  return compiled;
}

const PATCHING = 0;
const PASSING = 1; // stopped patching (skipped) or destroyed: bytes pass verbatim
const ENDED = 2;

const INITIAL_HOLD = 4096;

/**
 * What one open object with a canonical or alias member costs the patch (its frame: depth, alias mask,
 * hold base, two slots per pair), in bytes: at most `maxValueBytes / FRAME_BYTES` (or {@link MIN_FRAMES})
 * such objects may nest.
 */
export const FRAME_BYTES = 32;

/** Open objects with canonical or alias members always allowed, however small `maxValueBytes` is. */
export const MIN_FRAMES = 1024;

/**
 * The streaming patch (see {@link createJsonPatch}). Everything it receives is emitted at once, as
 * slices of the chunk; it keeps a copy of the canonical values (in one growing buffer, `hold`) until
 * their object closes, and there emits `,"alias":<copy>` just before the `}`.
 *
 * The hold buffer is a stack: the copies of an object's members lie after those of its ancestors. While
 * a canonical value is open ("recording"), every byte emitted is also appended to the buffer, so a copy
 * contains the nested insertions too and copies of nested canonical values are ranges inside it. When an
 * object closes outside any recording, the buffer is cut back to where it was when the object's first
 * reported member appeared.
 */
class JsonPatch implements ResponsePatch, StreamScanHandler {
  readonly #compiled: Compiled;
  readonly #maxValueBytes: number;
  readonly #maxFrames: number;
  readonly #budget: BufferBudget | undefined;
  readonly #onInsert: ((canonical: string, alias: string) => void) | undefined;
  /** For {@link patchJson}: each insertion with its offset in the upstream body. */
  readonly #onInsertion: ((insertion: PatchInsertion) => void) | undefined;
  readonly #scanner: JsonStreamScanner;
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

  // Objects with a reported member, innermost last; `pairs.length` slots per object.
  readonly #frameDepth: number[] = [];
  readonly #frameAliasMask: number[] = [];
  readonly #frameHoldBase: number[] = [];
  readonly #slotStart: number[] = [];
  readonly #slotEnd: number[] = [];
  // Reported members whose value is being scanned, innermost last.
  readonly #memberName: number[] = [];
  readonly #memberHoldStart: number[] = [];

  // The chunk being written.
  #chunk: Buffer = Buffer.alloc(0);
  #chunkBase = 0;
  #emit: (bytes: Buffer) => void = () => {};
  /** Offset in the chunk of the first byte not emitted yet. */
  #emitFrom = 0;
  /** Offset in the chunk of the first byte not appended to `hold` yet (while recording). */
  #recordFrom = 0;

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
    this.#onInsertion = onInsertion;
    this.#scanner = new JsonStreamScanner(compiled.names, options.maxNesting ?? MAX_NESTING);
  }

  get outcome(): PatchOutcome {
    if (this.#skipped !== undefined) return { kind: 'skipped', reason: this.#skipped };
    return this.#inserted > 0 ? { kind: 'patched' } : { kind: 'unchanged' };
  }

  write(chunk: Buffer, emit: (bytes: Buffer) => void): void {
    if (chunk.length === 0) return;
    this.#received += chunk.length;
    if (this.#mode !== PATCHING) {
      if (this.#mode === PASSING) emit(chunk);
      return;
    }
    this.#chunk = chunk;
    this.#chunkBase = this.#scanner.position;
    this.#emit = emit;
    this.#emitFrom = 0;
    this.#recordFrom = 0;
    const status = this.#scanner.write(chunk, this);
    if (status === SCAN_INVALID) this.#skip('invalid_json');
    else if (status === SCAN_TOO_DEEP) this.#skip('too_deep');
    else if (status === SCAN_OK && this.#recording > 0 && !this.#record(chunk.length)) {
      // #record skipped: the rest passes verbatim below.
    }
    if (this.#emitFrom < chunk.length) emit(this.#emitFrom === 0 ? chunk : chunk.subarray(this.#emitFrom));
    this.#chunk = Buffer.alloc(0);
    this.#emit = () => {};
  }

  end(_emit: (bytes: Buffer) => void): void {
    // Nothing is ever held back from the output: only copies are kept, and they are dropped here.
    if (this.#mode === PATCHING) {
      if (this.#scanner.end() === SCAN_INVALID && this.#received > 0) this.#skipped = 'invalid_json';
    }
    this.#mode = ENDED;
    this.#releaseHold();
  }

  destroy(): void {
    if (this.#mode === PATCHING) this.#mode = PASSING;
    this.#releaseHold();
  }

  onMember(depth: number, name: number, valueStart: number): boolean {
    const frames = this.#frameDepth;
    const pairCount = this.#compiled.pairs.length;
    let frame = frames.length - 1;
    if (frame < 0 || frames[frame] !== depth) {
      // The open objects with reported members cost memory too (~32 bytes each): bounded with the copies.
      if (frames.length >= this.#maxFrames) return this.#skip('too_deep');
      frames.push(depth);
      this.#frameAliasMask.push(0);
      this.#frameHoldBase.push(this.#holdLength);
      for (let pair = 0; pair < pairCount; pair++) {
        this.#slotStart.push(-1);
        this.#slotEnd.push(-1);
      }
      frame++;
    }
    this.#memberName.push(name);
    if ((name & 1) === 1) {
      this.#frameAliasMask[frame] = this.#frameAliasMask[frame]! | (1 << (name >> 1));
      this.#memberHoldStart.push(-1);
      return true;
    }
    if (this.#recording === 0) {
      // A repeated canonical key replaces the copy; drop the old one when it is the last held.
      const slot = frame * pairCount + (name >> 1);
      if (this.#slotEnd[slot] === this.#holdLength && this.#slotStart[slot]! >= 0)
        this.#holdLength = this.#slotStart[slot]!;
      this.#recordFrom = valueStart - this.#chunkBase;
    } else if (!this.#record(valueStart - this.#chunkBase)) {
      return false;
    }
    this.#memberHoldStart.push(this.#holdLength);
    this.#recording++;
    return true;
  }

  onValue(_depth: number, valueEnd: number): boolean {
    const name = this.#memberName.pop()!;
    const holdStart = this.#memberHoldStart.pop()!;
    if ((name & 1) === 1) return true;
    if (!this.#record(valueEnd - this.#chunkBase)) return false;
    this.#recording--;
    const slot = (this.#frameDepth.length - 1) * this.#compiled.pairs.length + (name >> 1);
    this.#slotStart[slot] = holdStart;
    this.#slotEnd[slot] = this.#holdLength;
    return true;
  }

  onObjectEnd(_depth: number, closeOffset: number): boolean {
    const { pairs, prefixes } = this.#compiled;
    const pairCount = pairs.length;
    const frame = this.#frameDepth.length - 1;
    const aliasMask = this.#frameAliasMask[frame]!;
    const base = frame * pairCount;
    const close = closeOffset - this.#chunkBase;
    for (let pair = 0; pair < pairCount; pair++) {
      const start = this.#slotStart[base + pair]!;
      if (start < 0 || (aliasMask & (1 << pair)) !== 0) continue;
      const end = this.#slotEnd[base + pair]!;
      const prefix = prefixes[pair]!;
      const valueLength = end - start;
      if (this.#copied + valueLength > closeOffset + GROWTH_SLACK) return this.#skip('too_deep');
      if (this.#recording > 0) {
        if (!this.#record(close)) return false;
        if (this.#holdLength + prefix.length + valueLength > this.#maxValueBytes)
          return this.#skip('value_too_large');
      }
      const piece = Buffer.allocUnsafe(prefix.length + valueLength);
      prefix.copy(piece, 0);
      this.#hold!.copy(piece, prefix.length, start, end);
      if (close > this.#emitFrom) this.#emit(this.#chunk.subarray(this.#emitFrom, close));
      this.#emitFrom = close;
      this.#emit(piece);
      if (this.#recording > 0 && !this.#append(piece, 0, piece.length)) return false;
      this.#copied += valueLength;
      this.#inserted++;
      this.#onInsert?.(pairs[pair]!.canonical, pairs[pair]!.alias);
      this.#onInsertion?.({ pair, offset: closeOffset, length: piece.length });
    }
    if (this.#recording === 0) this.#holdLength = this.#frameHoldBase[frame]!;
    this.#frameDepth.pop();
    this.#frameAliasMask.pop();
    this.#frameHoldBase.pop();
    // pop() rather than `length = base`: setting the length goes through the runtime in V8.
    for (let pair = 0; pair < pairCount; pair++) {
      this.#slotStart.pop();
      this.#slotEnd.pop();
    }
    return true;
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
    if (needed > this.#maxValueBytes) return this.#skip('value_too_large');
    let hold = this.#hold;
    if (hold === undefined || needed > hold.length) {
      const capacity = Math.min(
        this.#maxValueBytes,
        Math.max(needed, hold === undefined ? INITIAL_HOLD : hold.length * 2),
      );
      const more = capacity - this.#reserved;
      if (this.#budget !== undefined && !this.#budget.tryReserve(more)) return this.#skip('budget_exhausted');
      this.#reserved = capacity;
      const grown = Buffer.allocUnsafe(capacity);
      if (hold !== undefined) hold.copy(grown, 0, 0, length);
      // `source` may be the old hold buffer (a copy appended while recording): read it before dropping it.
      if (source === hold) source = grown;
      hold = grown;
      this.#hold = hold;
    }
    source.copy(hold, length, from, to);
    this.#holdLength = needed;
    return true;
  }

  /** Stops patching: the rest of the body passes verbatim. Returns false (stop the scan). */
  #skip(reason: PatchSkipReason): false {
    this.#skipped = reason;
    this.#mode = PASSING;
    this.#releaseHold();
    return false;
  }

  #releaseHold(): void {
    if (this.#reserved > 0) this.#budget?.release(this.#reserved);
    this.#reserved = 0;
    this.#hold = undefined;
    this.#holdLength = 0;
    this.#recording = 0;
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
 * Streaming: each written chunk is emitted at once (as slices of it, no copy) with the pieces between;
 * nothing is held back but copies of canonical values until their object closes — the end of the
 * object is where it becomes known that it has no alias member (`{"metadata":[1],"tags":[2]}`). The
 * output never depends on where the chunks were cut.
 *
 * The body is validated as it goes, strictly ({@link JsonStreamScanner}: RFC 8259, UTF-8, no byte
 * order mark). From the first invalid byte on nothing more is inserted and the rest passes verbatim
 * (`skipped`/`invalid_json`); JSON is never "repaired". Also `skipped`, from the point where it
 * happens: `value_too_large` (held copies over `maxValueBytes`), `budget_exhausted` (the budget refused),
 * `too_deep` (nesting over `maxNesting`; objects with canonical or alias members nested more than
 * `maxValueBytes /` {@link FRAME_BYTES} (at least {@link MIN_FRAMES}) deep; or copies of nested
 * canonical values outgrowing the body by {@link GROWTH_SLACK}). Pieces inserted before that point stay. A top-level scalar, a body without
 * canonical keys, and an empty body pass byte for byte as `unchanged`.
 *
 * @param pairs Canonical/alias pairs (alias table, `response` rows), at most 30. Compiled once per array.
 * @param options See {@link JsonPatchOptions}.
 * @returns A {@link ResponsePatch}: `write`/`end` emit the patched bytes, never throw; `destroy`
 *   releases the budget. Memory: the held copies (≤ `maxValueBytes`) and one byte per nesting level.
 * @throws {Error} when `pairs` has more than 30 pairs.
 * @example
 * const patch = createJsonPatch(responsePairs(), { maxValueBytes: 1 << 20 });
 * patch.write(Buffer.from('[{"metadata":{"a":1.'), send);
 * patch.write(Buffer.from('50},"x":1}]'), send); // sends …,"x":1 then ,"tags":{"a":1.50} then }]
 * patch.end(send); // patch.outcome → { kind: 'patched' }
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
  const out: Buffer[] = [];
  const emit = (bytes: Buffer) => out.push(bytes);
  patch.write(body, emit);
  patch.end(emit);
  return {
    body: insertions.length === 0 ? body : Buffer.concat(out),
    outcome: patch.outcome,
    insertions,
  };
}
