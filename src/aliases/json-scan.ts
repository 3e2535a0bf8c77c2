/**
 * A strict, iterative JSON scanner over bytes (RFC 8259), shared by the request-body rewrite and the
 * response patch. It validates the whole text and reports only the object members whose (decoded) key
 * is one of a few names, with byte offsets, so that callers can edit the text by slicing it: values are
 * never parsed, numbers never converted, nothing is re-serialized.
 *
 * - Strict: exactly the grammar of RFC 8259 §2–§7; the text must be UTF-8 (§8.1), checked byte by byte in
 *   strings (overlong forms, surrogates and code points above U+10FFFF are invalid). A byte order mark is
 *   rejected (§8.1: "MUST NOT add"; parsers "MAY" ignore it — this one does not). JSONTestSuite's `y_`
 *   files pass, its `n_` files fail.
 * - No recursion: nesting is an explicit stack of one byte per level, at most {@link MAX_SCAN_NESTING}.
 * - Linear time; no object is ever built from the input, so prototype pollution is impossible.
 *
 * One grammar, {@link JsonStreamScanner}, fed chunk by chunk with its state carried across them (the
 * streaming response patch; SPEC §6), and {@link scanJson}, the same scanner over a whole buffer that also
 * reports key token ranges (the request-body rewrite). Held to JSONTestSuite at every split.
 *
 * The grammar itself is C compiled to WebAssembly (`json-scan.c`, built into `json-scan-wasm.ts` by
 * `json-scan-build.ts`): it skips the plain bytes of strings 16 and 32 at a time with SIMD, about twice
 * the speed of the JavaScript scanner it replaced (issue 9; bench/RESULTS.md). This module feeds it
 * chunks window by window, hands its reported members to the handler and words its errors; for a
 * handler that inserts copies of values (the response patch: {@link LoneInserter}), it has the instance
 * insert the commonest ones itself. One WebAssembly instance serves every scanner of the process: the
 * scanner that last ran keeps its state in the instance's memory, and another one taking its turn
 * first saves it into the scanner's own object (tens of bytes, plus one byte per open nesting level).
 */
import { isUtf8 } from 'node:buffer';
import { JSON_SCAN_WASM } from './json-scan-wasm.ts';

/** Why and where a text is not JSON. */
export interface ScanError {
  /** Byte offset of the first byte that cannot be accepted (the length of the text for a truncated one). */
  readonly offset: number;
  /** What is wrong, e.g. `expected ',' or '}' but found 'x'`. */
  readonly message: string;
  /**
   * Set when the scanner itself failed ({@link SCAN_FAILED}: a WebAssembly trap, a bug or resource
   * failure in the shim), with what was thrown: the text was not judged, it is not known to be invalid.
   */
  readonly failure?: Error;
}

/**
 * The {@link ScanError} of a scanner that failed itself ({@link SCAN_FAILED}: a WebAssembly trap, or
 * memory it could not have), not of the text.
 * @param offset Byte offset of the text where the scan stopped.
 * @param err What was thrown (anything: wrapped in an `Error` when it is none).
 * @returns The error, its message `the JSON scanner failed: <message>`, `failure` the `Error`.
 * @throws Nothing.
 */
function scanFailure(offset: number, err: unknown): ScanError {
  const failure = err instanceof Error ? err : new Error(String(err));
  return { offset, message: `the JSON scanner failed: ${failure.message}`, failure };
}

/**
 * Receives the members whose key is one of the scanned names. Calls nest like the text: `onKey` at depth
 * d, then the members of objects inside the value (deeper), then `onValue` at depth d.
 */
export interface ScanHandler {
  /**
   * A member whose decoded key is `names[name]` starts.
   * @param depth Nesting depth of the object that holds the member (1 = the top-level object).
   * @param keyStart Offset of the key's opening quote; `keyEnd` is the offset after its closing quote.
   */
  onKey(depth: number, name: number, keyStart: number, keyEnd: number): void;
  /** The value of the member last reported at `depth` ends just before offset `valueEnd`. */
  onValue(depth: number, valueEnd: number): void;
  /** An object at `depth` that had at least one reported member closes; `closeOffset` is its `}`. */
  onObjectEnd(depth: number, closeOffset: number): void;
}

/** Most names a {@link KeyNames} holds. */
export const MAX_KEY_NAMES = 256;
/** Longest name a {@link KeyNames} holds, in UTF-8 bytes. */
export const MAX_KEY_NAME_BYTES = 256;
/** Most UTF-8 bytes of all the names of a {@link KeyNames} together. */
const MAX_KEY_NAMES_BYTES = 16384;

/**
 * A small set of member names. Keys written with escapes (`"t\u0061gs"`) are decoded before comparison;
 * keys without escapes are compared as bytes.
 */
export class KeyNames {
  /** The names, in the order given; a reported member carries an index into this array. */
  readonly names: readonly string[];
  /** The names' UTF-8 bytes, one after the other; `offsets[k]`, `lengths[k]` locate name k. */
  readonly bytes: Buffer;
  readonly offsets: readonly number[];
  readonly lengths: readonly number[];

  /**
   * Encodes the names as UTF-8 once, for every scanner that compares keys with them.
   * @param names Distinct member names (decoded form): at most {@link MAX_KEY_NAMES}, each at most
   *   {@link MAX_KEY_NAME_BYTES} UTF-8 bytes long, 16,384 bytes together.
   * @throws {Error} when a name is repeated (the index of a match would be ambiguous) or the names are
   *   too many or too long.
   */
  constructor(names: readonly string[]) {
    if (new Set(names).size !== names.length)
      throw new Error(`key names must be distinct: ${names.join(', ')}`);
    if (names.length > MAX_KEY_NAMES) throw new Error(`at most ${MAX_KEY_NAMES} key names`);
    const encoded = names.map((name) => Buffer.from(name, 'utf8'));
    if (encoded.some((b) => b.length > MAX_KEY_NAME_BYTES))
      throw new Error(`key names are at most ${MAX_KEY_NAME_BYTES} bytes long`);
    this.bytes = Buffer.concat(encoded);
    if (this.bytes.length > MAX_KEY_NAMES_BYTES)
      throw new Error(`key names are at most ${MAX_KEY_NAMES_BYTES} bytes together`);
    this.names = Object.freeze([...names]);
    this.lengths = encoded.map((b) => b.length);
    const offsets: number[] = [];
    let at = 0;
    for (const b of encoded) {
      offsets.push(at);
      at += b.length;
    }
    this.offsets = offsets;
  }
}

/**
 * Validates a whole JSON text and reports the members of objects at depth ≤ `maxDepth` whose key is one
 * of `names` (RFC 8259; see the module comment for the exact strictness): {@link JsonStreamScanner} over
 * the text as one chunk, with each member's key token range found back from its value (the text is at
 * hand and valid up to there).
 *
 * @param text The complete text, as bytes.
 * @param names Member names to report.
 * @param handler Receives the reported members (see {@link ScanHandler}); calls already made stand even
 *   when the text turns out invalid later, so a caller must discard its work on an error.
 * @param maxDepth Deepest object whose members are reported (1 = top-level object only; `Infinity` =
 *   every object). Deeper text is still validated, down to {@link MAX_SCAN_NESTING} levels.
 * @returns `undefined` for a valid text, otherwise the first error with its byte offset (with
 *   `failure` when the scanner itself failed: the text was not judged). Never throws
 *   (unless the handler does).
 * @example
 * scanJson(Buffer.from('{"tags":[1]}'), new KeyNames(['tags']), handler, 1); // onKey(1,0,1,7), onValue(1,11), onObjectEnd(1,11)
 */
export function scanJson(
  text: Buffer,
  names: KeyNames,
  handler: ScanHandler,
  maxDepth: number,
): ScanError | undefined {
  const scanner = new JsonStreamScanner(names, MAX_SCAN_NESTING);
  const members: StreamScanHandler = {
    onMember(depth, name, valueStart) {
      if (depth <= maxDepth) {
        // The whole text is at hand: the key token ends before the ':' that precedes the value.
        const keyEnd = skipWhitespaceBack(text, skipWhitespaceBack(text, valueStart) - 1);
        handler.onKey(depth, name, keyTokenStart(text, keyEnd), keyEnd);
      }
      return true;
    },
    onValue(depth, valueEnd) {
      if (depth <= maxDepth) handler.onValue(depth, valueEnd);
      return true;
    },
    onObjectEnd(depth, closeOffset) {
      if (depth <= maxDepth) handler.onObjectEnd(depth, closeOffset);
      return true;
    },
  };
  if (scanner.write(text, members) === SCAN_OK && scanner.end() === SCAN_OK) return undefined;
  return scanner.error;
}

/**
 * Offset of the opening quote of the (validated) string token that ends just before `tokenEnd`: the
 * nearest quote before its closing one that no backslash escapes (an even run of backslashes before it).
 */
function keyTokenStart(text: Buffer, tokenEnd: number): number {
  for (let q = tokenEnd - 2; q >= 0; q--) {
    if (text[q] !== 0x22) continue;
    let k = q - 1;
    while (text[k] === 0x5c) k--;
    if ((q - 1 - k) % 2 === 0) return q;
  }
  return -1;
}

function isWhitespace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/**
 * Offset of the first byte at or after `i` that is not JSON whitespace (RFC 8259 §2).
 * @param text The JSON text, as bytes.
 * @param i A byte offset into `text`.
 * @returns A byte offset ≥ `i`; `text.length` when only whitespace follows.
 * @throws Nothing.
 */
export function skipWhitespace(text: Buffer, i: number): number {
  while (isWhitespace(text[i])) i++;
  return i;
}

/**
 * Offset just after the last byte before `i` that is not JSON whitespace, scanning backwards.
 * @param text The JSON text, as bytes.
 * @param i A byte offset into `text` (exclusive end).
 * @returns A byte offset ≤ `i`; 0 when only whitespace precedes.
 * @throws Nothing.
 */
export function skipWhitespaceBack(text: Buffer, i: number): number {
  while (i > 0 && isWhitespace(text[i - 1])) i--;
  return i;
}

// ---------------------------------------------------------------------------------------------------
// The incremental scanner.

/**
 * Receives the members of an incrementally scanned text whose key is one of the scanned names. Offsets
 * are absolute (bytes since the first byte of the first chunk). A method returning `false` stops the
 * scan: {@link JsonStreamScanner.write} then returns {@link SCAN_STOPPED} and the scanner is spent.
 * The calls for a chunk come after the scanner has read it up to the end or to its first invalid byte
 * (in windows of 64 KiB), all before `write` returns.
 */
export interface StreamScanHandler {
  /**
   * The value of a member whose decoded key is `names[name]` starts at `valueStart` (its first byte, in
   * the current chunk).
   * @param depth Nesting depth of the object that holds the member (1 = the top-level object).
   */
  onMember(depth: number, name: number, valueStart: number): boolean;
  /** The value of the member last reported at `depth` ends just before `valueEnd` (in the current chunk, or its end). */
  onValue(depth: number, valueEnd: number): boolean;
  /** An object at `depth` that had at least one reported member closes; `closeOffset` is its `}` (in the current chunk). */
  onObjectEnd(depth: number, closeOffset: number): boolean;
  /**
   * Optional: `onMember`, `onValue` and `onObjectEnd` of the same `depth` that came in a row (the member
   * is the last one reported in its object, its value holds none, and the object closes in the same
   * window), in one call; without it, the three calls are made.
   */
  onLoneMember?(
    depth: number,
    name: number,
    valueStart: number,
    valueEnd: number,
    closeOffset: number,
  ): boolean;
  /**
   * Optional: lets the WebAssembly instance insert the lone members (see `onLoneMember`) of a window
   * itself, without a call per member (the response patch's commonest insertion; json-scan.c
   * `insert_lone`). Names must then alternate canonical (even index) and alias (odd).
   */
  readonly lone?: LoneInserter;
}

/**
 * What a handler that inserts `,"alias":<copy of the canonical value>` before the `}` of each object
 * whose one reported member is canonical (src/aliases/patch-json.ts) lets the WebAssembly instance do
 * for it: before a run of lone members, `limits` says whether and within what it may insert; after, the
 * instance's output (the window's bytes from `limits[LONE_COPY_FROM]` to `limits[LONE_COPY_END]` with
 * the insertions) and one record per insertion go to `inserted`. A lone member the limits do not allow
 * goes to `onLoneMember` as before, so the output is the same either way.
 */
export interface LoneInserter {
  /** The pieces' prefixes (`,"alias":` as JSON bytes), by pair; the same object for every call. */
  readonly prefixes: LonePrefixes;
  /**
   * Whether the instance may insert now, from a lone member of an object at `depth` on, and within
   * what: sets `limits[LONE_TOP_DEPTH]` (depth of the innermost object with a reported member, or -1),
   * `LONE_ROOM` (longest value it may copy, bytes), `LONE_COPY_FROM` (window offset of the first byte
   * not output yet, ≥ 0) and `LONE_SLACK` (an insertion before the `}` at window offset c copies at
   * most slack + c bytes).
   * @param windowBase Absolute offset of the window's first byte.
   * @param depth Depth of the first lone member's object.
   */
  limits(windowBase: number, depth: number, limits: Int32Array): boolean;
  /**
   * The instance inserted `limits[LONE_INSERTED]` (≥ 1) members, `limits[LONE_COPIED]` value bytes:
   * `memory[staged, staged + limits[LONE_STAGED])` is the output for the window's bytes from
   * `limits[LONE_COPY_FROM]` to `limits[LONE_COPY_END]`; `records[at + 3k …]` is insertion k's pair,
   * window offset of its `}` and piece length. Valid only during the call.
   */
  inserted(
    windowBase: number,
    limits: Int32Array,
    memory: Buffer,
    staged: number,
    records: Int32Array,
    at: number,
  ): void;
}

/** The prefixes of a {@link LoneInserter}: pair k's are `bytes[offsets[k], offsets[k] + lengths[k])`. */
export interface LonePrefixes {
  readonly bytes: Buffer;
  readonly offsets: readonly number[];
  readonly lengths: readonly number[];
}

/** Indexes of a {@link LoneInserter}'s `limits` (the C `Lone`'s first fields, in order). */
export const LONE_TOP_DEPTH = 0;
export const LONE_ROOM = 1;
export const LONE_COPY_FROM = 2;
export const LONE_SLACK = 3;
export const LONE_STAGED = 4;
export const LONE_INSERTED = 5;
export const LONE_COPIED = 6;
export const LONE_COPY_END = 7;

/** {@link JsonStreamScanner.write}/`end` result: the text so far is valid (or a valid prefix). */
export const SCAN_OK = 0;
/** The text is not JSON; {@link JsonStreamScanner.error} says why and where. */
export const SCAN_INVALID = 1;
/** Nesting exceeded the scanner's `maxNesting`; {@link JsonStreamScanner.error} says where. */
export const SCAN_TOO_DEEP = 2;
/** A handler method returned `false`. */
export const SCAN_STOPPED = 3;
/**
 * The scanner failed (a WebAssembly trap: a bug in json-scan.c or a resource failure), not the text;
 * {@link JsonStreamScanner.error} has the `failure`. A shim error, never to be reported as invalid JSON.
 */
export const SCAN_FAILED = 4;
/** One of {@link SCAN_OK}, {@link SCAN_INVALID}, {@link SCAN_TOO_DEEP}, {@link SCAN_STOPPED}, {@link SCAN_FAILED}. */
export type ScanStatus = 0 | 1 | 2 | 3 | 4;

/**
 * Deepest nesting any scanner accepts (arrays and objects; 1 MiB levels): the nesting stack, one byte per
 * level, lives in the WebAssembly instance's memory, which never shrinks.
 */
export const MAX_SCAN_NESTING = 1024 * 1024;

// The C side's constants (json-scan.c).
const WINDOW = 65536;
const MAX_EVENTS = 4096;
const LONE_FIELDS = 8;
/** Most pairs and prefix bytes the instance holds (json-scan.c MAX_PAIRS, PREFIX_BYTES). */
const LONE_MAX_PAIRS = 30;
const LONE_MAX_PREFIX_BYTES = 65536;
// The rest of the C `Lone`, in int32 words: pair_count, prefix_offset[30], prefix_length[30],
// records[MAX_EVENTS], then the prefixes' bytes.
const LONE_PAIR_COUNT = LONE_FIELDS;
const LONE_PREFIX_OFFSETS = LONE_PAIR_COUNT + 1;
const LONE_PREFIX_LENGTHS = LONE_PREFIX_OFFSETS + LONE_MAX_PAIRS;
const LONE_RECORDS = LONE_PREFIX_LENGTHS + LONE_MAX_PAIRS;
const LONE_PREFIX_BYTES = (LONE_RECORDS + MAX_EVENTS) * 4;
const STATUS_EVENTS_FULL = 4;
const EV_MEMBER = 0;
const EV_VALUE = 1;
const EV_OBJECT_END = 2;
const KEY_CAP = 1536;

// Scanner states.
const S_VALUE = 0;
const S_AFTER = 1;
const S_KEY = 2;
const S_OPEN_OBJECT = 3;
const S_COLON = 5;
const S_STRING = 7;
const S_KEY_STRING = 8;
const S_NUMBER = 9;
const S_LITERAL = 10;

const IS_OBJECT = 1;

// Fields of the C `State` (int32 each), in order.
const F_STATE = 0;
const F_DEPTH = 1;
const F_MAX_NESTING = 2;
const F_REPORTED_NAME = 3;
const F_NUM_SUB = 9;
const F_LITERAL = 10;
const F_LITERAL_POS = 11;
const F_KEY_LEN = 13;
const STATE_FIELDS = 15;

// Fields of the C `Result` (int32 each).
const R_ERROR_KIND = 0;
const R_ERROR_OFFSET = 1;
const R_EVENT_COUNT = 2;
const R_RESUME = 3;

// Fields of the C `Names`: count, longest, offsets[256], lengths[256] (int32), filter[4096], bytes;
// this module writes count, offsets, lengths and bytes, and names_loaded derives the rest.
const NAMES_OFFSETS = 2;
const NAMES_LENGTHS = NAMES_OFFSETS + MAX_KEY_NAMES;
const NAMES_FILTER_BYTES = 4096;
const NAMES_BYTES = (NAMES_LENGTHS + MAX_KEY_NAMES) * 4 + NAMES_FILTER_BYTES;

/** The error kinds of json-scan.c, worded; `%` is where the byte found goes. */
const ERROR_MESSAGES: readonly string[] = [
  '',
  'unexpected % after the JSON value',
  "expected ',' or '}' but found %",
  "expected ',' or ']' but found %",
  'expected a string key but found %',
  "expected ':' after the key but found %",
  'expected a JSON value but found %',
  'expected a JSON value but found %',
  'unescaped control character % in string',
  'invalid escape sequence in string',
  'invalid UTF-8 in string',
  'expected a digit but found %',
  "expected a digit after '.' but found %",
  'expected a digit in the exponent but found %',
];
const ERR_VALUE = 7;
const ERR_LITERAL = 6;

/** What a number cut in a non-final sub-state still needs (RFC 8259 §6), by sub-state. */
const NUMBER_EXPECTED: readonly string[] = [
  'expected a digit', // N_MINUS
  '',
  "expected a digit after '.'", // N_DOT
  '',
  'expected a digit in the exponent', // N_E
  '',
  'expected a digit in the exponent', // N_ESIGN
];

const LITERAL_INITIALS = 'tfn';

/** Describes a byte for an error message. */
function describe(c: number | undefined): string {
  if (c === undefined) return 'the end of the text';
  if (c >= 0x21 && c <= 0x7e) return `'${String.fromCharCode(c)}'`;
  return `byte 0x${c.toString(16).padStart(2, '0')}`;
}

/** The part of the WebAssembly JavaScript API used here (TypeScript declares it only in its DOM library). */
interface WebAssemblyApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { readonly exports: Record<string, unknown> };
}
const { Module: WasmModule, Instance: WasmInstance } = (
  globalThis as unknown as { WebAssembly: WebAssemblyApi }
).WebAssembly;

/** The WebAssembly instance and views of its memory (renewed when the memory grows). */
interface Engine {
  readonly memory: { readonly buffer: ArrayBuffer; grow(pages: number): number };
  readonly scan: (from: number, n: number, utf8From: number, utf8To: number) => number;
  readonly namesLoaded: () => void;
  readonly insertLone: (first: number, count: number) => number;
  /** Byte addresses of the C regions. */
  readonly input: number;
  readonly events: number;
  readonly state: number;
  readonly result: number;
  readonly names: number;
  readonly key: number;
  readonly stack: number;
  readonly lone: number;
  readonly staged: number;
  buffer: ArrayBuffer;
  bytes: Uint8Array;
  words: Int32Array;
  /** The memory as a Buffer (for `Buffer.copy` out of it). */
  view: Buffer;
  /** The names last written into the instance. */
  loadedNames: KeyNames | undefined;
  /** The prefixes last written into the instance (`insert_lone`). */
  loadedPrefixes: LonePrefixes | undefined;
}

let engine: Engine | undefined;
/** What the next WebAssembly call throws instead of scanning ({@link injectScanFailure}), or `undefined`. */
let injectedFailure: Error | undefined;

/** What the next `insert_lone` call throws instead of inserting, or `undefined`. */
let injectedLoneFailure: Error | undefined;

/**
 * Test seam: the next scan call into the WebAssembly instance (or, with `call` `'insert_lone'`, the next
 * call that inserts lone members for a {@link LoneInserter}) throws `failure` instead of running, as a
 * trap would; later calls run normally. For the tests of how a scanner failure is reported
 * ({@link SCAN_FAILED}); nothing in `src/` calls it.
 * @param failure What the call throws, e.g. `new WebAssembly.RuntimeError('unreachable')`.
 * @param call Which call throws (default `'scan'`).
 * @throws Nothing (the failure is thrown later, inside that call, and reported as {@link SCAN_FAILED}).
 */
export function injectScanFailure(failure: Error, call: 'scan' | 'insert_lone' = 'scan'): void {
  if (call === 'scan') injectedFailure = failure;
  else injectedLoneFailure = failure;
}

/** Runs one scan call, or throws the {@link injectScanFailure injected failure}. */
function scanCall(e: Engine, from: number, n: number, utf8From: number, utf8To: number): number {
  if (injectedFailure !== undefined) {
    const failure = injectedFailure;
    injectedFailure = undefined;
    throw failure;
  }
  return e.scan(from, n, utf8From, utf8To);
}
/** Runs one `insert_lone` call, or throws the failure injected for it ({@link injectScanFailure}). */
function loneCall(e: Engine, first: number, count: number): number {
  if (injectedLoneFailure !== undefined) {
    const failure = injectedLoneFailure;
    injectedLoneFailure = undefined;
    throw failure;
  }
  return e.insertLone(first, count);
}

/** The limits a {@link LoneInserter} fills and reads (one call at a time: read before any handler runs). */
const loneLimits = new Int32Array(LONE_FIELDS);

/**
 * Writes an inserter's prefixes into the instance; false when they do not fit its tables (more than
 * 30 pairs or 64 KiB: the handler's `onLoneMember` then does every insertion).
 */
function loadPrefixes(e: Engine, prefixes: LonePrefixes): boolean {
  const pairs = prefixes.lengths.length;
  if (pairs > LONE_MAX_PAIRS || prefixes.bytes.length > LONE_MAX_PREFIX_BYTES) return false;
  const at = e.lone >> 2;
  e.words[at + LONE_PAIR_COUNT] = pairs;
  e.words.set(prefixes.offsets, at + LONE_PREFIX_OFFSETS);
  e.words.set(prefixes.lengths, at + LONE_PREFIX_LENGTHS);
  e.bytes.set(prefixes.bytes, e.lone + LONE_PREFIX_BYTES);
  e.loadedPrefixes = prefixes;
  return true;
}

/** The scanner whose state is in the instance's memory. */
let owner: JsonStreamScanner | undefined;
/** Dispatches under way (a handler may run another scanner), and a copy buffer for each level. */
let dispatching = 0;
const eventCopies: Int32Array[] = [];

/** The instance, created at the first scanner (synchronously: the module is ~11 KB). */
function getEngine(): Engine {
  if (engine !== undefined) return engine;
  const module = new WasmModule(Buffer.from(JSON_SCAN_WASM, 'base64'));
  const { exports } = new WasmInstance(module, {});
  const address = (name: string) => (exports[name] as () => number)();
  const memory = exports.memory as Engine['memory'];
  engine = {
    memory,
    scan: exports.scan as Engine['scan'],
    namesLoaded: exports.names_loaded as Engine['namesLoaded'],
    input: address('input_address'),
    events: address('events_address'),
    state: address('state_address'),
    result: address('result_address'),
    names: address('names_address'),
    key: address('key_address'),
    stack: address('stack_address'),
    insertLone: exports.insert_lone as Engine['insertLone'],
    lone: address('lone_address'),
    staged: address('staged_address'),
    buffer: memory.buffer,
    bytes: new Uint8Array(memory.buffer),
    words: new Int32Array(memory.buffer),
    view: Buffer.from(memory.buffer),
    loadedNames: undefined,
    loadedPrefixes: undefined,
  };
  return engine;
}

/**
 * The range of a window that is UTF-8 (RFC 3629), checked at once, natively (`buffer.isUtf8`, simdutf),
 * so that the scanner need not check strings' non-ASCII bytes one sequence at a time: the window
 * without its leading continuation bytes (the end of a sequence cut by the previous window, or invalid)
 * and without a trailing sequence cut by its end. `[0, 0]` when that range is not UTF-8: the scanner
 * then checks every sequence and finds the first invalid byte.
 */
function checkedUtf8(bytes: Uint8Array, input: number, n: number): [number, number] {
  let from = 0;
  while (from < 3 && from < n && (bytes[input + from]! & 0xc0) === 0x80) from++;
  let to = n;
  for (let k = n - 1; k >= n - 4 && k >= from; k--) {
    const c = bytes[input + k]!;
    if ((c & 0xc0) === 0x80) continue;
    if (c >= 0xc0 && k + (c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2) > n) to = k;
    break;
  }
  return from < to && isUtf8(bytes.subarray(input + from, input + to)) ? [from, to] : [0, 0];
}

/**
 * Copies `length` elements: element by element when they are a few (the usual state, stack and key of
 * a scanner), which costs less than a view and a native call; else natively.
 */
function copy<T extends Uint8Array | Int32Array>(
  from: T,
  fromAt: number,
  to: T,
  toAt: number,
  length: number,
): void {
  if (length > 64) to.set(from.subarray(fromAt, fromAt + length), toAt);
  else for (let k = 0; k < length; k++) to[toAt + k] = from[fromAt + k]!;
}

/** Renews the views after the instance's memory grew (the nesting stack). */
function refresh(e: Engine): void {
  if (e.memory.buffer === e.buffer) return;
  e.buffer = e.memory.buffer;
  e.bytes = new Uint8Array(e.buffer);
  e.words = new Int32Array(e.buffer);
  e.view = Buffer.from(e.buffer);
}

/**
 * The strict scanner of {@link scanJson}, fed chunk by chunk: the same grammar and verdicts (RFC 8259,
 * UTF-8 checked byte by byte, no byte order mark, one top-level value with surrounding whitespace),
 * with its whole state carried between chunks — the nesting as an explicit stack of one byte per level
 * (never recursion), and a token cut by a chunk boundary as a small sub-state (a key as at most 1,536
 * bytes, only to compare it with the names). Members of objects at every depth are compared with the
 * names. Error offsets do not depend on where the chunks were cut.
 *
 * Memory: its state while another scanner runs (15 numbers, the nesting stack of 1 byte per level, the
 * bytes of a key cut by a chunk's end).
 */
export class JsonStreamScanner {
  /** The first error, once {@link write} or {@link end} returned {@link SCAN_INVALID}, {@link SCAN_TOO_DEEP} or {@link SCAN_FAILED}. */
  error: ScanError | undefined;
  readonly #names: KeyNames;
  /** The C state while another scanner owns the instance. */
  readonly #saved = new Int32Array(STATE_FIELDS);
  #stack = new Uint8Array(16);
  #key: Uint8Array | undefined;
  /** Absolute offset of the next chunk's first byte. */
  #base = 0;
  #spent = false;
  /** The text's first bytes, for the byte order mark and UTF-16 hints. */
  #head = '';

  /**
   * A scanner at the start of a text; the WebAssembly instance is created at its first chunk.
   * @param names Member names to report, at any depth.
   * @param maxNesting Deepest nesting accepted (arrays and objects), at most {@link MAX_SCAN_NESTING};
   *   deeper text gives {@link SCAN_TOO_DEEP}.
   * @throws Nothing.
   */
  constructor(names: KeyNames, maxNesting: number) {
    this.#names = names;
    this.#saved[F_STATE] = S_VALUE;
    this.#saved[F_MAX_NESTING] = Math.max(0, Math.min(maxNesting, MAX_SCAN_NESTING));
    this.#saved[F_REPORTED_NAME] = -1;
  }

  /** Bytes scanned so far (the absolute offset of the next chunk's first byte). */
  get position(): number {
    return this.#base;
  }

  /**
   * Scans the next chunk, calling `handler` for reported members (offsets absolute).
   * @param text The next chunk, as bytes (any length; scanned in windows of 64 KiB).
   * @param handler Receives the reported members; returning `false` stops the scan.
   * @returns {@link SCAN_OK} when the text so far can still be (or is) JSON; otherwise why it stopped
   *   (the scanner is then spent and ignores further chunks).
   * @throws Whatever `handler` throws. A trap inside the scan is reported as {@link SCAN_FAILED}, not
   *   thrown, and so is a resource failure before it (a `RangeError` or `WebAssembly` error when the
   *   instance cannot be created, or its memory cannot grow to hold a deep scanner's saved nesting
   *   stack: `memory.grow`): the response patch's `write` must not throw (core/types.ts).
   */
  write(text: Buffer, handler: StreamScanHandler): ScanStatus {
    if (this.#spent) return SCAN_OK;
    const length = text.length;
    if (this.#head.length < 3) this.#head += text.toString('latin1', 0, 3 - this.#head.length);
    for (let start = 0; start < length; start += WINDOW) {
      const n = Math.min(WINDOW, length - start);
      const windowBase = this.#base + start;
      let e = this.#load(text, start, n);
      if (e === undefined) return this.#finish(SCAN_FAILED);
      const [utf8From, utf8To] = checkedUtf8(e.bytes, e.input, n);
      let from = 0;
      for (;;) {
        let status: number;
        try {
          status = scanCall(e, from, n, utf8From, utf8To);
        } catch (err) {
          // A trap (a bug in json-scan.c, or a resource failure; WebAssembly cannot corrupt memory
          // outside its instance): this text is given up as not scanned — a failure of the shim, not
          // invalid JSON — and a fresh instance serves the next scanner. The others keep their state:
          // theirs was saved when this one took its turn.
          engine = undefined;
          owner = undefined;
          this.error = scanFailure(windowBase + from, err);
          return this.#finish(SCAN_FAILED);
        }
        refresh(e);
        const result = e.result >> 2;
        const count = e.words[result + R_EVENT_COUNT]!;
        if (count > 0) {
          const dispatched = this.#dispatch(e, count, windowBase, handler);
          if (dispatched !== SCAN_OK) return this.#finish(dispatched);
          if (owner !== this) {
            // A handler ran another scanner.
            e = this.#load(text, start, n);
            if (e === undefined) return this.#finish(SCAN_FAILED);
          }
        }
        if (status === SCAN_OK) break;
        if (status === STATUS_EVENTS_FULL) {
          from = e.words[result + R_RESUME]!;
          continue;
        }
        const at = e.words[result + R_ERROR_OFFSET]!;
        if (status === SCAN_TOO_DEEP) {
          this.error = {
            offset: windowBase + at,
            message: `nesting deeper than ${e.words[(e.state >> 2) + F_MAX_NESTING]} levels`,
          };
          return this.#finish(SCAN_TOO_DEEP);
        }
        const kind = e.words[result + R_ERROR_KIND]!;
        // A literal's error is at its first byte, which may lie in an earlier chunk.
        const c =
          kind === ERR_LITERAL
            ? LITERAL_INITIALS.charCodeAt(e.words[(e.state >> 2) + F_LITERAL]!)
            : text[start + at];
        let message = ERROR_MESSAGES[kind]!.replace('%', describe(c));
        if (kind === ERR_VALUE && windowBase + at <= 1) message += this.#hint(windowBase + at);
        this.error = { offset: windowBase + at, message };
        return this.#finish(SCAN_INVALID);
      }
    }
    this.#base += length;
    return SCAN_OK;
  }

  /**
   * The text ended.
   * @returns {@link SCAN_OK} when the whole text was one JSON value (with whitespace around it),
   *   {@link SCAN_INVALID} when it was truncated (or empty); a spent scanner returns {@link SCAN_OK}.
   *   A resource failure is {@link SCAN_FAILED}, as in {@link write}.
   * @throws Nothing.
   */
  end(): ScanStatus {
    if (this.#spent) return SCAN_OK;
    const e = this.#turn();
    if (e === undefined) return this.#finish(SCAN_FAILED);
    const state = e.state >> 2;
    const words = e.words;
    const current = words[state + F_STATE]!;
    const depth = words[state + F_DEPTH]!;
    const numSub = words[state + F_NUM_SUB]!;
    const complete = depth === 0 && (current === S_AFTER || (current === S_NUMBER && (numSub & 1) === 1));
    if (complete) return this.#finish(SCAN_OK);
    // What was expected where the text ended, as a byte there would have been told.
    let offset = this.#base;
    let message: string;
    const closer = (e.bytes[e.stack + depth]! & IS_OBJECT) !== 0 ? '}' : ']';
    const afterValue = `expected ',' or '${closer}' but found the end of the text`;
    switch (current) {
      case S_STRING:
      case S_KEY_STRING:
        message = 'unterminated string';
        break;
      case S_NUMBER:
        // A number that may end here ended the value: what follows a value was expected.
        message =
          (numSub & 1) === 1 ? afterValue : `${NUMBER_EXPECTED[numSub]} but found the end of the text`;
        break;
      case S_LITERAL: {
        // A cut literal is no value: the error is at its first byte, as for one that goes wrong.
        offset -= words[state + F_LITERAL_POS]!;
        message = `expected a JSON value but found '${LITERAL_INITIALS[words[state + F_LITERAL]!]}'`;
        break;
      }
      case S_AFTER:
        message = afterValue;
        break;
      case S_KEY:
      case S_OPEN_OBJECT:
        message = 'expected a string key but found the end of the text';
        break;
      case S_COLON:
        message = "expected ':' after the key but found the end of the text";
        break;
      default:
        // S_VALUE, S_OPEN_ARRAY, S_MEMBER_VALUE
        message = 'expected a JSON value but found the end of the text';
    }
    this.error = { offset, message };
    return this.#finish(SCAN_INVALID);
  }

  /**
   * Makes this scanner the instance's owner and copies the window into its input; `undefined`, with
   * `error` set, when it could not have the instance ({@link #turn}).
   */
  #load(text: Buffer, start: number, n: number): Engine | undefined {
    const e = this.#turn(this.#base + start);
    e?.bytes.set(n === text.length ? text : text.subarray(start, start + n), e.input);
    return e;
  }

  /**
   * {@link #acquire}, or `undefined` with `error` set when the memory it needs is not there: the
   * instance cannot be created, the previous owner's state cannot be saved, or the memory cannot grow to
   * hold this scanner's nesting stack. Each fails before the instance's state changes hands, or once the
   * previous owner's state is saved (the instance is then nobody's, and the next scanner restores its
   * own whole), so nothing is given up but this scanner.
   */
  #turn(offset = this.#base): Engine | undefined {
    try {
      return this.#acquire();
    } catch (err) {
      this.error = scanFailure(offset, err);
      return undefined;
    }
  }

  /** Makes this scanner the instance's owner, saving the state of the one before. */
  #acquire(): Engine {
    const e = getEngine();
    if (owner !== this) {
      if (owner !== undefined) owner.#save(e);
      // Saved: the instance is nobody's until this scanner's state is all in it (a restore that throws
      // half-way must not leave the previous owner reading a mix).
      owner = undefined;
      this.#restore(e);
      owner = this;
    }
    return e;
  }

  /** Copies the instance's state into this scanner (another scanner takes its turn). */
  #save(e: Engine): void {
    const saved = this.#saved;
    copy(e.words, e.state >> 2, saved, 0, STATE_FIELDS);
    const levels = saved[F_DEPTH]! + 1;
    if (levels > this.#stack.length) this.#stack = new Uint8Array(Math.max(levels, this.#stack.length * 2));
    copy(e.bytes, e.stack, this.#stack, 0, levels);
    if (saved[F_STATE] === S_KEY_STRING) {
      this.#key ??= new Uint8Array(KEY_CAP);
      copy(e.bytes, e.key, this.#key, 0, Math.min(saved[F_KEY_LEN]!, KEY_CAP));
    }
  }

  /**
   * Copies this scanner's state into the instance. Its nesting stack may be deeper than the instance's
   * memory holds: after a trap a fresh instance serves the scanners that were waiting, with the memory it
   * starts with (~35,000 levels); the memory grows first (WebAssembly `memory.grow`, as the C side's
   * grow_stack does), else the copy threw a RangeError out of {@link write}.
   */
  #restore(e: Engine): void {
    const saved = this.#saved;
    const levels = saved[F_DEPTH]! + 1;
    const missing = e.stack + levels - e.bytes.length;
    if (missing > 0) {
      e.memory.grow(Math.ceil(missing / 65536));
      refresh(e);
    }
    copy(saved, 0, e.words, e.state >> 2, STATE_FIELDS);
    copy(this.#stack, 0, e.bytes, e.stack, levels);
    if (saved[F_STATE] === S_KEY_STRING && this.#key !== undefined)
      copy(this.#key, 0, e.bytes, e.key, Math.min(saved[F_KEY_LEN]!, KEY_CAP));
    if (e.loadedNames !== this.#names) {
      const names = this.#names;
      const at = e.names >> 2;
      e.words[at] = names.names.length;
      e.words.set(names.offsets, at + NAMES_OFFSETS);
      e.words.set(names.lengths, at + NAMES_LENGTHS);
      e.bytes.set(names.bytes, e.names + NAMES_BYTES);
      e.namesLoaded();
      e.loadedNames = names;
    }
  }

  /**
   * Hands `count` events of the instance to the handler: {@link SCAN_OK}, or {@link SCAN_STOPPED} when it
   * stopped the scan, {@link SCAN_FAILED} when `insert_lone` trapped (`error` set). A member, its value's
   * end and its object's end in a row go to `onLoneMember` when the handler has it; runs of them to the
   * instance's `insert_lone` first when the handler has a {@link LoneInserter}.
   */
  #dispatch(e: Engine, count: number, windowBase: number, handler: StreamScanHandler): ScanStatus {
    // Copied first: a handler that runs another scanner overwrites the instance's events. One copy
    // buffer per level of such nesting, reused (a fresh array per window costs collections).
    const level = dispatching++;
    if (eventCopies.length === level) eventCopies.push(new Int32Array(MAX_EVENTS * 3));
    const events = eventCopies[level]!;
    const at = e.events >> 2;
    events.set(e.words.subarray(at, at + count * 3));
    try {
      const lone = handler.onLoneMember !== undefined;
      const inserter = handler.lone;
      const length = count * 3;
      for (let k = 0; k < length; k += 3) {
        const head = events[k]!;
        const kind = head & 3;
        const depth = events[k + 1]!;
        const offset = windowBase + events[k + 2]!;
        let go: boolean;
        if (kind !== EV_MEMBER) {
          go = kind === EV_VALUE ? handler.onValue(depth, offset) : handler.onObjectEnd(depth, offset);
        } else if (
          k + 6 < length &&
          (events[k + 3]! & 3) === EV_VALUE &&
          (events[k + 6]! & 3) === EV_OBJECT_END &&
          events[k + 4] === depth &&
          events[k + 7] === depth
        ) {
          // A member, its value's end and its object's end in a row (a mission's `metadata`): a run of
          // them (canonical names: even) to the instance when the handler lets it — its events and
          // window are this scanner's unless a handler ran another scanner — else one call.
          if (inserter !== undefined && ((head >> 2) & 1) === 0 && owner === this && engine === e) {
            const next = this.#insertLone(e, inserter, k / 3, count, windowBase, depth);
            if (next < 0) return SCAN_FAILED;
            if (next * 3 !== k) {
              k = next * 3 - 3;
              continue;
            }
          }
          if (lone) {
            go = handler.onLoneMember!(
              depth,
              head >> 2,
              offset,
              windowBase + events[k + 5]!,
              windowBase + events[k + 8]!,
            );
            k += 6;
          } else {
            go = handler.onMember(depth, head >> 2, offset);
          }
        } else {
          go = handler.onMember(depth, head >> 2, offset);
        }
        if (!go) return SCAN_STOPPED;
      }
      return SCAN_OK;
    } finally {
      dispatching--;
    }
  }

  /**
   * Lets the instance insert the run of lone members that starts at event `first` (json-scan.c
   * `insert_lone`) within the inserter's limits, and hands it the output. Returns the index of the first
   * event left to the handler (`first` when none was inserted), or -1 when the instance trapped (the
   * scanner failed: `error` is set, a fresh instance serves the next scanner, as for `scan`).
   */
  #insertLone(
    e: Engine,
    inserter: LoneInserter,
    first: number,
    count: number,
    windowBase: number,
    depth: number,
  ): number {
    const limits = loneLimits;
    if (!inserter.limits(windowBase, depth, limits)) return first;
    if (e.loadedPrefixes !== inserter.prefixes && !loadPrefixes(e, inserter.prefixes)) return first;
    const words = e.words;
    const at = e.lone >> 2;
    words[at + LONE_TOP_DEPTH] = limits[LONE_TOP_DEPTH]!;
    words[at + LONE_ROOM] = limits[LONE_ROOM]!;
    words[at + LONE_COPY_FROM] = limits[LONE_COPY_FROM]!;
    words[at + LONE_SLACK] = limits[LONE_SLACK]!;
    let next: number;
    try {
      next = loneCall(e, first, count);
    } catch (err) {
      engine = undefined;
      owner = undefined;
      this.error = scanFailure(windowBase + words[(e.events >> 2) + first * 3 + 2]!, err);
      return -1;
    }
    if (next === first) return first;
    limits[LONE_STAGED] = words[at + LONE_STAGED]!;
    limits[LONE_INSERTED] = words[at + LONE_INSERTED]!;
    limits[LONE_COPIED] = words[at + LONE_COPIED]!;
    limits[LONE_COPY_END] = words[at + LONE_COPY_END]!;
    inserter.inserted(windowBase, limits, e.view, e.staged, words, at + LONE_RECORDS);
    return next;
  }

  /** Names the likely cause when a text starts with a byte order mark or looks like UTF-16. */
  #hint(offset: number): string {
    const head = this.#head;
    if (head === '\u00ef\u00bb\u00bf') {
      return ' (a byte order mark; JSON texts must not start with one, RFC 8259 §8.1)';
    }
    const first = head.charCodeAt(0);
    if (head.charCodeAt(offset) === 0x00 || first === 0xfe || first === 0xff)
      return ' (the text looks like UTF-16; JSON must be UTF-8)';
    return '';
  }

  /** The scanner is done: it gives up the instance (nothing of it needs saving any more). */
  #finish(status: ScanStatus): ScanStatus {
    this.#spent = true;
    if (owner === this) owner = undefined;
    return status;
  }
}
