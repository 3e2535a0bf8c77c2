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
 * - No recursion: nesting is an explicit stack of one byte per level, so depth is bounded by memory only.
 * - Linear time; no object is ever built from the input, so prototype pollution is impossible.
 *
 * One grammar, {@link JsonStreamScanner}, fed chunk by chunk with its state carried across them (the
 * streaming response patch; SPEC §6), and {@link scanJson}, the same scanner over a whole buffer that also
 * reports key token ranges (the request-body rewrite). Held to JSONTestSuite at every split.
 */
import { isUtf8 } from 'node:buffer';

/** Why and where a text is not JSON. */
export interface ScanError {
  /** Byte offset of the first byte that cannot be accepted (the length of the text for a truncated one). */
  readonly offset: number;
  /** What is wrong, e.g. `expected ',' or '}' but found 'x'`. */
  readonly message: string;
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

/**
 * A small set of member names, compiled for fast comparison with raw key tokens. Keys written with
 * escapes (`"t\u0061gs"`) are decoded before comparison; keys without escapes are compared as bytes.
 */
export class KeyNames {
  /** The names, in the order given; a reported member carries an index into this array. */
  readonly names: readonly string[];
  readonly #bytes: readonly Buffer[];
  readonly #byLength: Uint8Array;
  readonly #maxRawLength: number;

  /**
   * @param names Distinct member names (decoded form).
   * @throws {Error} when a name is repeated (the index of a match would be ambiguous).
   */
  constructor(names: readonly string[]) {
    if (new Set(names).size !== names.length)
      throw new Error(`key names must be distinct: ${names.join(', ')}`);
    this.names = Object.freeze([...names]);
    this.#bytes = names.map((name) => Buffer.from(name, 'utf8'));
    const maxLength = Math.max(0, ...this.#bytes.map((b) => b.length));
    this.#byLength = new Uint8Array(maxLength + 1);
    for (const b of this.#bytes) this.#byLength[b.length] = 1;
    // Every byte of a name can be written as `\uXXXX` (6 bytes); a longer escaped key cannot match.
    this.#maxRawLength = maxLength * 6 + 2;
  }

  /** Longest key token (with quotes, in bytes) that can spell one of the names: longer keys never match. */
  get maxRawLength(): number {
    return this.#maxRawLength;
  }

  /**
   * Index of the name a key token spells, or -1.
   * @param text The whole (already validated) text.
   * @param keyStart Offset of the opening quote; `keyEnd`: offset after the closing quote.
   * @param escaped Whether the token contains a backslash.
   */
  match(text: Buffer, keyStart: number, keyEnd: number, escaped: boolean): number {
    if (escaped) {
      if (keyEnd - keyStart > this.#maxRawLength) return -1;
      // The token is a validated JSON string: JSON.parse yields a primitive string, never an object.
      const key: string = JSON.parse(text.toString('utf8', keyStart, keyEnd));
      return this.names.indexOf(key);
    }
    const length = keyEnd - keyStart - 2;
    if (length >= this.#byLength.length || this.#byLength[length] === 0) return -1;
    const bytes = this.#bytes;
    outer: for (let k = 0; k < bytes.length; k++) {
      const name = bytes[k]!;
      if (name.length !== length) continue;
      for (let j = 0; j < length; j++) {
        if (text[keyStart + 1 + j] !== name[j]) continue outer;
      }
      return k;
    }
    return -1;
  }
}

// Byte classes inside a string: 0 = plain, 1 = quote, 2 = backslash, 3 = control (invalid), 4 = non-ASCII.
const STRING_CLASS = new Uint8Array(256);
for (let b = 0; b < 0x20; b++) STRING_CLASS[b] = 3;
STRING_CLASS[0x22] = 1;
STRING_CLASS[0x5c] = 2;
for (let b = 0x80; b < 0x100; b++) STRING_CLASS[b] = 4;

// Escapes allowed after a backslash (RFC 8259 §7): " \ / b f n r t, and u with four hex digits.
const SIMPLE_ESCAPE = new Uint8Array(256);
for (const c of '"\\/bfnrt') SIMPLE_ESCAPE[c.charCodeAt(0)] = 1;
const HEX = new Uint8Array(256);
for (const c of '0123456789abcdefABCDEF') HEX[c.charCodeAt(0)] = 1;

const IS_OBJECT = 1;
const HAS_REPORTED = 2;
const CURRENT_REPORTED = 4;

function isWhitespace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** Set by the string scan: whether the string it last scanned contained an escape. */
let stringHadEscape = false;
/** Set by the string scan when it returns -1: what is wrong and where. */
let stringFault: ScanError = { offset: 0, message: '' };

function fail(offset: number, message: string): -1 {
  stringFault = { offset, message };
  return -1;
}

/** Describes the byte at `offset` for an error message. */
function found(text: Buffer, offset: number): string {
  const c = text[offset];
  if (c === undefined) return 'the end of the text';
  if (c >= 0x21 && c <= 0x7e) return `'${String.fromCharCode(c)}'`;
  return `byte 0x${c.toString(16).padStart(2, '0')}`;
}

/** Names the likely cause when a text starts with a byte order mark or looks like UTF-16. */
function hint(text: Buffer, offset: number): string {
  if (offset > 1) return '';
  if (text[0] === 0xef && text[1] === 0xbb && text[2] === 0xbf) {
    return ' (a byte order mark; JSON texts must not start with one, RFC 8259 §8.1)';
  }
  if (text[offset] === 0x00 || text[0] === 0xfe || text[0] === 0xff)
    return ' (the text looks like UTF-16; JSON must be UTF-8)';
  return '';
}

/**
 * Length of the UTF-8 sequence starting at `i` (RFC 3629 §4: no overlong forms, no surrogates, nothing
 * above U+10FFFF), or 0 when it is invalid or truncated.
 */
function utf8SequenceLength(text: Buffer, i: number): number {
  const b0 = text[i]!;
  const b1 = text[i + 1];
  if (b1 === undefined) return 0;
  if (b0 >= 0xc2 && b0 <= 0xdf) return b1 >= 0x80 && b1 <= 0xbf ? 2 : 0;
  const b2 = text[i + 2];
  if (b2 === undefined || b2 < 0x80 || b2 > 0xbf) return 0;
  if (b0 >= 0xe0 && b0 <= 0xef) {
    const lo = b0 === 0xe0 ? 0xa0 : 0x80;
    const hi = b0 === 0xed ? 0x9f : 0xbf;
    return b1 >= lo && b1 <= hi ? 3 : 0;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    const b3 = text[i + 3];
    if (b3 === undefined || b3 < 0x80 || b3 > 0xbf) return 0;
    const lo = b0 === 0xf0 ? 0x90 : 0x80;
    const hi = b0 === 0xf4 ? 0x8f : 0xbf;
    return b1 >= lo && b1 <= hi ? 4 : 0;
  }
  return 0;
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
 *   every object). Deeper text is still validated; nesting is not limited.
 * @returns `undefined` for a valid text, otherwise the first error with its byte offset. Never throws
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
  const scanner = new JsonStreamScanner(names, Number.POSITIVE_INFINITY);
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

/** Offset of the first byte at or after `i` that is not JSON whitespace (RFC 8259 §2). */
export function skipWhitespace(text: Buffer, i: number): number {
  while (isWhitespace(text[i])) i++;
  return i;
}

/** Offset just after the last byte before `i` that is not JSON whitespace, scanning backwards. */
export function skipWhitespaceBack(text: Buffer, i: number): number {
  while (i > 0 && isWhitespace(text[i - 1])) i--;
  return i;
}

// ---------------------------------------------------------------------------------------------------
// The incremental scanner: the same grammar, fed chunk by chunk.

/**
 * Receives the members of an incrementally scanned text whose key is one of the scanned names. Offsets
 * are absolute (bytes since the first byte of the first chunk). A method returning `false` stops the
 * scan: {@link JsonStreamScanner.write} then returns {@link SCAN_STOPPED} and the scanner is spent.
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
}

/** {@link JsonStreamScanner.write}/`end` result: the text so far is valid (or a valid prefix). */
export const SCAN_OK = 0;
/** The text is not JSON; {@link JsonStreamScanner.error} says why and where. */
export const SCAN_INVALID = 1;
/** Nesting exceeded the scanner's `maxNesting`. */
export const SCAN_TOO_DEEP = 2;
/** A handler method returned `false`. */
export const SCAN_STOPPED = 3;
/** One of {@link SCAN_OK}, {@link SCAN_INVALID}, {@link SCAN_TOO_DEEP}, {@link SCAN_STOPPED}. */
export type ScanStatus = 0 | 1 | 2 | 3;

// Scanner states (what the next byte may be).
const S_VALUE = 0; // a value
const S_AFTER = 1; // after a value: whitespace, then ',' or the closer (only whitespace at depth 0)
const S_KEY = 2; // a key (after ',' in an object)
const S_OPEN_OBJECT = 3; // after '{': a key or '}'
const S_OPEN_ARRAY = 4; // after '[': a value or ']'
const S_COLON = 5; // after a key: ':'
const S_MEMBER_VALUE = 6; // after the ':' of a reported key: the value's first byte
const S_STRING = 7; // inside a string value
const S_KEY_STRING = 8; // inside a key
const S_NUMBER = 9; // inside a number
const S_LITERAL = 10; // inside true, false or null
const S_SPENT = 11; // after an error, a stop or the end

// String sub-states (only needed when a chunk ends inside an escape or a UTF-8 sequence).
const STR_PLAIN = 0;
const STR_BACKSLASH = 1;
const STR_HEX = 2; // `strNeed` hex digits to go
const STR_UTF8 = 3; // `strNeed` continuation bytes to go, the next in [strLo, strHi]

// Number sub-states (RFC 8259 §6); the odd names are terminal (the number may end there).
const N_MINUS = 0;
const N_ZERO = 1;
const N_INT = 3;
const N_DOT = 2;
const N_FRAC = 5;
const N_E = 4;
const N_ESIGN = 6;
const N_EXP = 7;

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

// What an error message says was expected.
const E_AFTER_TEXT = 0;
const E_OBJECT_NEXT = 1;
const E_ARRAY_NEXT = 2;
const E_KEY = 3;
const E_COLON = 4;
const E_VALUE = 5;
const E_VALUE_HINT = 6;

/** `c` at the end of a chunk (never a byte). */
const END = -1;

const LITERALS = [Buffer.from('true'), Buffer.from('false'), Buffer.from('null')];

/** Set by {@link scanStringChunk} when it returns -2: the offset of the sequence it could not finish. */
let stringStop = 0;

/** The high bit of each byte of a 32-bit word. */
const HIGH_BITS = 0x80808080 | 0;

/**
 * What {@link prepareWords} found out about a chunk, for the word-at-a-time string scan: a view of the
 * chunk's bytes and the range in which the scan may read whole words, with `high` = {@link HIGH_BITS}
 * when non-ASCII bytes must stop it (they are checked one sequence at a time) or 0 when the range is
 * known to be valid UTF-8 (non-ASCII bytes are then plain string bytes).
 */
let chunkView = new DataView(new ArrayBuffer(0)) as DataView<ArrayBufferLike>;
let chunkWordStart = 0;
let chunkWordEnd = 0;
let chunkHigh = 0;

/**
 * Prepares the word-at-a-time string scan of a chunk ({@link chunkView} and its range). The bytes
 * between the chunk's leading continuation bytes (the end of a sequence cut by the previous chunk, or
 * invalid) and a trailing sequence cut by its end are checked for UTF-8 (RFC 3629) at once, natively
 * (`buffer.isUtf8`, simdutf); when they are not UTF-8, strings are checked sequence by sequence as
 * before, so that the error and its offset are those of the first invalid byte.
 */
function prepareWords(text: Buffer, n: number): void {
  if (n < 8) {
    chunkWordStart = 0x7fffffff;
    chunkWordEnd = 0;
    return;
  }
  chunkView = new DataView(text.buffer, text.byteOffset, n);
  let start = 0;
  while (start < 3 && (text[start]! & 0xc0) === 0x80) start++;
  let end = n;
  for (let k = n - 1; k >= n - 4; k--) {
    const c = text[k]!;
    if ((c & 0xc0) === 0x80) continue;
    if (c >= 0xc0 && k + (c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2) > n) end = k;
    break;
  }
  // The whole chunk in the common case: no slice to allocate.
  if (isUtf8(start === 0 && end === n ? text : text.subarray(start, end))) {
    chunkWordStart = start;
    chunkWordEnd = end;
    chunkHigh = 0;
  } else {
    chunkWordStart = 0;
    chunkWordEnd = n;
    chunkHigh = HIGH_BITS;
  }
}

/**
 * The common case of {@link scanStringChunk}, small enough for V8 to inline into the scanner's main
 * loop (a call per string was ~a third of the scan of a mission list): plain bytes four at a time up to
 * the first byte that is not, which is usually the closing quote. Anything else (an escape, a control
 * byte, non-ASCII bytes to check, the end of the word range) goes to {@link scanStringChunk}, from that
 * byte, or from the start when no word stopped (skipped non-ASCII bytes may end inside a sequence).
 * Same arguments and results as {@link scanStringChunk}.
 */
function scanString(
  text: Buffer,
  i: number,
  n: number,
  view: DataView<ArrayBufferLike>,
  wordStart: number,
  wordEnd: number,
  high: number,
): number {
  const start = i;
  if (i >= wordStart) {
    const last = wordEnd - 4;
    // The word test of scanStringChunk (explained there), written out again: with it in a shared
    // helper the scanner measured 0.94–0.99× (bench/aliases-json-scan-throughput.ts; V8's inlining
    // budget of the main loop).
    while (i <= last) {
      const w = view.getInt32(i, true);
      const q = w ^ 0x22222222;
      const b = w ^ 0x5c5c5c5c;
      const hit =
        ((((q - 0x01010101) | 0) & ~q) |
          (((b - 0x01010101) | 0) & ~b) |
          (((w - 0x20202020) | 0) & ~w) |
          (w & high)) &
        HIGH_BITS;
      if (hit !== 0) {
        i += (31 - Math.clz32(hit ^ ((hit - 1) | 0))) >> 3;
        return text[i] === 0x22 ? i + 1 : scanStringChunk(text, i, n, view, wordStart, wordEnd, high);
      }
      i += 4;
    }
  }
  return scanStringChunk(text, start, n, view, wordStart, wordEnd, high);
}

/**
 * Scans string bytes from `i` in a chunk that may end inside the string (fast path of the incremental
 * scanner, in the plain string sub-state). Plain bytes are skipped four at a time where
 * {@link prepareWords} allows it (`view`, `wordStart`, `wordEnd`, `high`: passed, not read from the
 * module, so that a handler scanning another chunk in between cannot change them).
 * @returns The offset after the closing quote; -1 with {@link stringFault} set; -2 when the chunk ends
 *   (or an escape or UTF-8 sequence may cross its end) at {@link stringStop}.
 */
function scanStringChunk(
  text: Buffer,
  i: number,
  n: number,
  view: DataView<ArrayBufferLike>,
  wordStart: number,
  wordEnd: number,
  high: number,
): number {
  for (;;) {
    if (i >= wordStart) {
      // A word (little-endian: byte k in bits 8k…8k+7) is plain unless a byte is '"', '\' or below
      // 0x20 (or, with `high`, 0x80 or above). Each test sets the high bit of the first such byte
      // exactly; bytes above it may be flagged wrongly (borrows), which does not matter.
      const last = wordEnd - 4;
      const from = i;
      let hit = 0;
      while (i <= last) {
        const w = view.getInt32(i, true);
        const q = w ^ 0x22222222;
        const b = w ^ 0x5c5c5c5c;
        hit =
          ((((q - 0x01010101) | 0) & ~q) |
            (((b - 0x01010101) | 0) & ~b) |
            (((w - 0x20202020) | 0) & ~w) |
            (w & high)) &
          HIGH_BITS;
        if (hit !== 0) break;
        i += 4;
      }
      if (hit !== 0) {
        // The lowest flagged byte: 31 - clz32 of the mask up to the lowest set bit is its bit index.
        i += (31 - Math.clz32(hit ^ ((hit - 1) | 0))) >> 3;
      } else if (i !== from) {
        // Skipped non-ASCII bytes (valid UTF-8) may stop inside a sequence: back to its lead byte.
        while (i < n && (text[i]! & 0xc0) === 0x80) i--;
      }
    }
    // In-bounds loads only: a load that has seen the end of a typed array makes V8 slower on every byte.
    if (i >= n) {
      stringStop = i;
      return -2;
    }
    const c = text[i]!;
    const cls = STRING_CLASS[c]!;
    if (cls === 0) {
      i++;
    } else if (cls === 1) {
      return i + 1;
    } else if (cls === 2) {
      stringHadEscape = true;
      if (i + 6 > n) {
        stringStop = i;
        return -2;
      }
      const e = text[i + 1]!;
      if (SIMPLE_ESCAPE[e] === 1) i += 2;
      else if (e === 0x75 && HEX[text[i + 2]!] && HEX[text[i + 3]!] && HEX[text[i + 4]!] && HEX[text[i + 5]!])
        i += 6;
      else return fail(i, 'invalid escape sequence in string');
    } else if (cls === 3) {
      return fail(i, `unescaped control character ${found(text, i)} in string`);
    } else {
      if (i + 4 > n) {
        stringStop = i;
        return -2;
      }
      const length = utf8SequenceLength(text, i);
      if (length === 0) return fail(i, 'invalid UTF-8 in string');
      i += length;
    }
  }
}

/**
 * Scans a number (RFC 8259 §6) starting at `i` that lies wholly in the chunk (fast path).
 * @returns The offset after it; -1 with {@link stringFault} set; -2 when it reaches the chunk's end
 *   (the caller then scans it again with the sub-state machine).
 */
function scanNumberChunk(text: Buffer, i: number, n: number): number {
  let c = text[i]!;
  if (c === 0x2d) {
    if (++i >= n) return -2;
    c = text[i]!;
  }
  if (c === 0x30) {
    if (++i >= n) return -2;
    c = text[i]!;
  } else if (c >= 0x31 && c <= 0x39) {
    do {
      if (++i >= n) return -2;
      c = text[i]!;
    } while (c >= 0x30 && c <= 0x39);
  } else {
    return fail(i, `expected a digit but found ${found(text, i)}`);
  }
  if (c === 0x2e) {
    if (++i >= n) return -2;
    c = text[i]!;
    if (c < 0x30 || c > 0x39) return fail(i, `expected a digit after '.' but found ${found(text, i)}`);
    do {
      if (++i >= n) return -2;
      c = text[i]!;
    } while (c >= 0x30 && c <= 0x39);
  }
  if (c === 0x65 || c === 0x45) {
    if (++i >= n) return -2;
    c = text[i]!;
    if (c === 0x2b || c === 0x2d) {
      if (++i >= n) return -2;
      c = text[i]!;
    }
    if (c < 0x30 || c > 0x39) return fail(i, `expected a digit in the exponent but found ${found(text, i)}`);
    do {
      if (++i >= n) return -2;
      c = text[i]!;
    } while (c >= 0x30 && c <= 0x39);
  }
  return i;
}

/**
 * The strict scanner of {@link scanJson}, fed chunk by chunk: the same grammar and verdicts (RFC 8259,
 * UTF-8 checked byte by byte, no byte order mark, one top-level value with surrounding whitespace),
 * with its whole state carried between chunks — the nesting as an explicit stack of one byte per level
 * (never recursion), and a token cut by a chunk boundary as a small sub-state (a key as at most a few
 * hundred bytes, only to compare it with the names). Members of objects at every depth are compared
 * with the names.
 *
 * Memory: the nesting stack (1 byte per level, at most `maxNesting`) and one key buffer.
 */
export class JsonStreamScanner {
  /** The first error, once {@link write} or {@link end} returned {@link SCAN_INVALID}. */
  error: ScanError | undefined;
  readonly #names: KeyNames;
  readonly #maxNesting: number;
  #stack = new Uint8Array(64);
  #depth = 0;
  #state = S_VALUE;
  /** Absolute offset of the current chunk's first byte. */
  #base = 0;
  #reportedName = -1;
  #strSub = STR_PLAIN;
  #strNeed = 0;
  #strLo = 0;
  #strHi = 0;
  #strSeqStart = 0;
  #numSub = N_MINUS;
  #literal = 0;
  #literalPos = 0;
  #keyBuf: Buffer;
  #keyLength = 0;
  #keyEscaped = false;

  /**
   * @param names Member names to report, at any depth.
   * @param maxNesting Deepest nesting accepted (arrays and objects); deeper text gives {@link SCAN_TOO_DEEP}.
   */
  constructor(names: KeyNames, maxNesting: number) {
    this.#names = names;
    this.#maxNesting = maxNesting;
    this.#keyBuf = Buffer.allocUnsafe(names.maxRawLength);
  }

  /** Bytes scanned so far (the absolute offset of the next chunk's first byte). */
  get position(): number {
    return this.#base;
  }

  /**
   * Scans the next chunk, calling `handler` for reported members (offsets absolute).
   * @returns {@link SCAN_OK} when the text so far can still be (or is) JSON; otherwise why it stopped
   *   (the scanner is then spent and ignores further chunks). Never throws unless the handler does.
   */
  write(text: Buffer, handler: StreamScanHandler): ScanStatus {
    if (this.#state === S_SPENT) return SCAN_OK;
    // An int32 (typed array lengths may be float64 in V8), so that the bound checks stay integer compares.
    const n = text.length | 0;
    const base = this.#base;
    let i = 0;
    prepareWords(text, n);
    const view = chunkView;
    const wordStart = chunkWordStart;
    const wordEnd = chunkWordEnd;
    const high = chunkHigh;
    if (this.#state >= S_OPEN_ARRAY && this.#state !== S_MEMBER_VALUE) {
      // A token cut by the end of the previous chunk: finish it apart, keeping this loop small.
      i = this.#resume(text, n);
      if (i === -1) return this.#state === S_SPENT ? SCAN_INVALID : SCAN_OK;
    }
    let state = this.#state;
    let stack = this.#stack;
    let depth = this.#depth;
    let c: number;
    let isKey = false;

    main: for (;;) {
      if (state === S_AFTER) {
        if (depth === 0) {
          while (i < n && isWhitespace(text[i]!)) i++;
          if (i < n) return this.#unexpected(text, i, E_AFTER_TEXT);
          break;
        }
        const flags = stack[depth]!;
        if ((flags & CURRENT_REPORTED) !== 0) {
          stack[depth] = flags & ~CURRENT_REPORTED;
          if (!handler.onValue(depth, base + i)) return this.#stop();
        }
        c = i < n ? text[i]! : END;
        while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++i < n ? text[i]! : END;
        if (c === END) break;
        if (c === 0x2c) {
          i++;
          state = (flags & IS_OBJECT) !== 0 ? S_KEY : S_VALUE;
          continue;
        }
        if ((flags & IS_OBJECT) !== 0) {
          if (c !== 0x7d) return this.#unexpected(text, i, E_OBJECT_NEXT);
          if ((flags & HAS_REPORTED) !== 0 && !handler.onObjectEnd(depth, base + i)) return this.#stop();
        } else if (c !== 0x5d) {
          return this.#unexpected(text, i, E_ARRAY_NEXT);
        }
        depth--;
        i++;
        continue;
      }

      if (state === S_VALUE) {
        c = i < n ? text[i]! : END;
        while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++i < n ? text[i]! : END;
        if (c === END) break;
        if (c === 0x7b || c === 0x5b) {
          if (depth >= this.#maxNesting) return this.#tooDeep();
          depth++;
          if (depth === stack.length) stack = this.#grow();
          const isObject = c === 0x7b;
          stack[depth] = isObject ? IS_OBJECT : 0;
          c = ++i < n ? text[i]! : END;
          while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++i < n ? text[i]! : END;
          if (c === END) {
            state = isObject ? S_OPEN_OBJECT : S_OPEN_ARRAY;
            break;
          }
          if (c === (isObject ? 0x7d : 0x5d)) {
            depth--;
            i++;
            state = S_AFTER;
          } else {
            state = isObject ? S_KEY : S_VALUE;
          }
          continue;
        }
        if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
          const end = scanNumberChunk(text, i, n);
          if (end >= 0) {
            i = end;
            state = S_AFTER;
            continue;
          }
          if (end === -1) return this.#fault();
          // The chunk ends inside the number: again, byte by byte, carrying the sub-state.
          this.#numSub = c === 0x2d ? N_MINUS : c === 0x30 ? N_ZERO : N_INT;
          i = this.#number(text, i + 1, n);
          if (i === -1) return this.#fault();
          if (i === -2) {
            state = S_NUMBER;
            break;
          }
          state = S_AFTER;
          continue;
        }
        if (c !== 0x22) {
          i = this.#literalStart(text, i, n, c);
          if (i === -1) return SCAN_INVALID;
          if (i === -2) {
            state = S_LITERAL;
            break;
          }
          state = S_AFTER;
          continue;
        }
        // A string value: scanned below, with the keys (one call site, so that V8 inlines it).
      } else if (state === S_MEMBER_VALUE) {
        c = i < n ? text[i]! : END;
        while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++i < n ? text[i]! : END;
        if (c === END) break;
        if (!handler.onMember(depth, this.#reportedName, base + i)) return this.#stop();
        state = S_VALUE;
        continue;
      } else {
        // S_KEY, S_OPEN_OBJECT
        c = i < n ? text[i]! : END;
        while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++i < n ? text[i]! : END;
        if (c === END) break;
        if (c === 0x7d && state === S_OPEN_OBJECT) {
          depth--;
          i++;
          state = S_AFTER;
          continue;
        }
        if (c !== 0x22) return this.#unexpected(text, i, E_KEY);
        isKey = true;
      }

      // A string (a key when `isKey`) starts at i. The common member sequences (`"key":"value","key"…`
      // with an unreported key) stay in this inner loop instead of a state step per token.
      for (;;) {
        const stringStart = i;
        stringHadEscape = false;
        i = scanString(text, i + 1, n, view, wordStart, wordEnd, high);
        if (!isKey) {
          if (i < 0) {
            if (i === -1) return this.#fault();
            i = this.#stringTail(text, stringStop, n);
            if (i === -1) return this.#fault();
            if (i === -2) {
              state = S_STRING;
              break main;
            }
          }
          state = S_AFTER;
          // `,"` in an object whose current member is not reported: the next key, as S_AFTER then S_KEY would.
          if (
            i + 1 < n &&
            text[i] === 0x2c &&
            text[i + 1] === 0x22 &&
            (stack[depth]! & (IS_OBJECT | CURRENT_REPORTED)) === IS_OBJECT
          ) {
            i++;
            isKey = true;
            continue;
          }
          continue main;
        }
        isKey = false;
        const keyStart = stringStart;
        let name: number;
        if (i >= 0) {
          name = this.#names.match(text, keyStart, i, stringHadEscape);
        } else {
          if (i === -1) return this.#fault();
          i = this.#keyTail(text, keyStart, n);
          if (i === -1) return this.#fault();
          if (i === -2) {
            state = S_KEY_STRING;
            break main;
          }
          name = this.#names.match(text, keyStart, i, this.#keyEscaped);
        }
        // The ':' after the key, inline (the common case: in the same chunk).
        c = i < n ? text[i]! : END;
        while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++i < n ? text[i]! : END;
        if (c === 0x3a) {
          i++;
          if (name >= 0) {
            this.#reportedName = name;
            stack[depth] = stack[depth]! | HAS_REPORTED | CURRENT_REPORTED;
            state = S_MEMBER_VALUE;
            continue main;
          }
          state = S_VALUE;
          // A string value right after the ':', as S_VALUE would scan it.
          if (i < n && text[i] === 0x22) continue;
          continue main;
        }
        if (c !== END) return this.#unexpected(text, i, E_COLON);
        this.#reportedName = name;
        state = S_COLON;
        break main;
      }
    }
    // The chunk is used up in `state`.
    this.#state = state;
    this.#depth = depth;
    this.#base = base + n;
    return SCAN_OK;
  }

  /**
   * Finishes, at the start of a chunk, the token or step cut by the end of the previous one.
   * @returns The offset where the main loop goes on (state and depth updated), or -1 when the chunk is
   *   used up (still in the token) or the text is invalid (then the scanner is spent).
   */
  #resume(text: Buffer, n: number, from = 0): number {
    let i = from;
    let c: number;
    switch (this.#state) {
      case S_OPEN_ARRAY: {
        c = i < n ? text[i]! : END;
        while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++i < n ? text[i]! : END;
        if (c === END) break;
        if (c === 0x5d) {
          this.#depth--;
          this.#state = S_AFTER;
          return i + 1;
        }
        this.#state = S_VALUE;
        return i;
      }

      case S_COLON: {
        c = i < n ? text[i]! : END;
        while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++i < n ? text[i]! : END;
        if (c === END) break;
        if (c !== 0x3a) {
          this.#unexpected(text, i, E_COLON);
          return -1;
        }
        if (this.#reportedName >= 0) {
          this.#stack[this.#depth] = this.#stack[this.#depth]! | HAS_REPORTED | CURRENT_REPORTED;
          this.#state = S_MEMBER_VALUE;
        } else {
          this.#state = S_VALUE;
        }
        return i + 1;
      }

      case S_KEY_STRING: {
        i = this.#resumeString(text, n);
        if (i === -1) {
          this.#fault();
          return -1;
        }
        if (i === -2) {
          this.#keyAppend(text, 0, n);
          break;
        }
        this.#keyAppend(text, 0, i);
        this.#reportedName =
          this.#keyLength <= this.#keyBuf.length
            ? this.#names.match(this.#keyBuf, 0, this.#keyLength, this.#keyEscaped)
            : -1;
        this.#state = S_COLON;
        return this.#resume(text, n, i);
      }

      case S_STRING: {
        i = this.#resumeString(text, n);
        if (i === -1) {
          this.#fault();
          return -1;
        }
        if (i === -2) break;
        this.#state = S_AFTER;
        return i;
      }

      case S_NUMBER: {
        i = this.#number(text, 0, n);
        if (i === -1) {
          this.#fault();
          return -1;
        }
        if (i === -2) break;
        this.#state = S_AFTER;
        return i;
      }

      default: {
        // S_LITERAL
        const literal = LITERALS[this.#literal]!;
        let pos = this.#literalPos;
        while (pos < literal.length && i < n) {
          if (text[i] !== literal[pos]) {
            this.#unexpected(text, i, E_VALUE);
            return -1;
          }
          pos++;
          i++;
        }
        this.#literalPos = pos;
        if (pos < literal.length) break;
        this.#state = S_AFTER;
        return i;
      }
    }
    this.#base += n;
    return -1;
  }

  /** A key cut in this chunk: finish it byte by byte, or keep its bytes for the next chunk. */
  #keyTail(text: Buffer, keyStart: number, n: number): number {
    this.#keyEscaped = stringHadEscape;
    this.#keyLength = 0;
    const i = this.#stringTail(text, stringStop, n);
    if (i === -2) this.#keyAppend(text, keyStart, n);
    return i;
  }

  /** A literal starting at `i`: its end, -2 when the chunk ends inside it, -1 (spent) when it is none. */
  #literalStart(text: Buffer, i: number, n: number, c: number): number {
    const literal = c === 0x74 ? 0 : c === 0x66 ? 1 : c === 0x6e ? 2 : -1;
    if (literal < 0) {
      this.#unexpected(text, i, E_VALUE_HINT);
      return -1;
    }
    const bytes = LITERALS[literal]!;
    if (i + bytes.length <= n) {
      for (let k = 1; k < bytes.length; k++) {
        if (text[i + k] !== bytes[k]) {
          this.#unexpected(text, i, E_VALUE);
          return -1;
        }
      }
      return i + bytes.length;
    }
    for (let k = 1; i + k < n; k++) {
      if (text[i + k] !== bytes[k]) {
        this.#unexpected(text, i, E_VALUE);
        return -1;
      }
    }
    this.#literal = literal;
    this.#literalPos = n - i;
    return -2;
  }

  #grow(): Uint8Array<ArrayBuffer> {
    const grown = new Uint8Array(this.#stack.length * 2);
    grown.set(this.#stack);
    this.#stack = grown;
    return grown;
  }

  #tooDeep(): ScanStatus {
    this.#state = S_SPENT;
    return SCAN_TOO_DEEP;
  }

  /** Fails at byte `i` of this chunk with the message of `kind`. */
  #unexpected(text: Buffer, i: number, kind: number): ScanStatus {
    const what = found(text, i);
    const message =
      kind === E_AFTER_TEXT
        ? `unexpected ${what} after the JSON value`
        : kind === E_OBJECT_NEXT
          ? `expected ',' or '}' but found ${what}`
          : kind === E_ARRAY_NEXT
            ? `expected ',' or ']' but found ${what}`
            : kind === E_KEY
              ? `expected a string key but found ${what}`
              : kind === E_COLON
                ? `expected ':' after the key but found ${what}`
                : kind === E_VALUE_HINT
                  ? `expected a JSON value but found ${what}${hint(text, i)}`
                  : `expected a JSON value but found ${what}`;
    this.error = { offset: this.#base + i, message };
    this.#state = S_SPENT;
    return SCAN_INVALID;
  }

  #stop(): ScanStatus {
    this.#state = S_SPENT;
    return SCAN_STOPPED;
  }

  /**
   * The text ended.
   * @returns {@link SCAN_OK} when the whole text was one JSON value (with whitespace around it),
   *   {@link SCAN_INVALID} when it was truncated (or empty); a spent scanner returns {@link SCAN_OK}.
   */
  end(): ScanStatus {
    const state = this.#state;
    if (state === S_SPENT) return SCAN_OK;
    this.#state = S_SPENT;
    const complete =
      this.#depth === 0 && (state === S_AFTER || (state === S_NUMBER && (this.#numSub & 1) === 1));
    if (complete) return SCAN_OK;
    // What was expected where the text ended, as a byte there would have been told.
    const end = this.#base;
    let offset = end;
    let message: string;
    switch (state) {
      case S_STRING:
      case S_KEY_STRING:
        message = 'unterminated string';
        break;
      case S_NUMBER:
        // A number that may end here ended the value: what follows a value was expected.
        message =
          (this.#numSub & 1) === 1
            ? this.#expectedAfterValue()
            : `${NUMBER_EXPECTED[this.#numSub]} but found the end of the text`;
        break;
      case S_LITERAL:
        // A cut literal is no value: the error is at its first byte, as for one that goes wrong.
        offset = end - this.#literalPos;
        message = `expected a JSON value but found '${String.fromCharCode(LITERALS[this.#literal]![0]!)}'`;
        break;
      case S_AFTER:
        message = this.#expectedAfterValue();
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
    return SCAN_INVALID;
  }

  /** The message for a text that ends after a value inside an array or object. */
  #expectedAfterValue(): string {
    const closer = (this.#stack[this.#depth]! & IS_OBJECT) !== 0 ? '}' : ']';
    return `expected ',' or '${closer}' but found the end of the text`;
  }

  #fault(): ScanStatus {
    this.error = { offset: this.#base + stringFault.offset, message: stringFault.message };
    this.#state = S_SPENT;
    return SCAN_INVALID;
  }

  #keyAppend(text: Buffer, from: number, to: number): void {
    const length = this.#keyLength;
    const room = this.#keyBuf.length - length;
    if (room >= to - from) text.copy(this.#keyBuf, length, from, to);
    // A key longer than the buffer cannot match; only its length is kept.
    this.#keyLength = length + (to - from);
  }

  /**
   * Scans the string bytes of `text` from `i` to the chunk's end byte by byte, carrying the sub-state.
   * @returns -2 (the chunk ended inside the string), the offset after the closing quote, or -1.
   */
  #stringTail(text: Buffer, i: number, n: number): number {
    this.#strSub = STR_PLAIN;
    while (i < n) {
      const r = this.#stringByte(text, i);
      if (r === -1) return -1;
      i++;
      if (r === 1) return i;
    }
    return -2;
  }

  /** Continues a string at the start of a chunk: slow path until the sub-state is plain, then the fast one. */
  #resumeString(text: Buffer, n: number): number {
    let i = 0;
    while (this.#strSub !== STR_PLAIN) {
      if (i >= n) return -2;
      const r = this.#stringByte(text, i);
      if (r === -1) return -1;
      i++;
    }
    stringHadEscape = false;
    // Called before any handler call of this write: the module's chunk state is this chunk's.
    const end = scanStringChunk(text, i, n, chunkView, chunkWordStart, chunkWordEnd, chunkHigh);
    if (stringHadEscape) this.#keyEscaped = true;
    if (end === -2) return this.#stringTail(text, stringStop, n);
    return end;
  }

  /** One string byte in the carried sub-state: 0 = go on, 1 = the closing quote, -1 = invalid. */
  #stringByte(text: Buffer, i: number): number {
    const c = text[i]!;
    switch (this.#strSub) {
      case STR_PLAIN: {
        const cls = STRING_CLASS[c]!;
        if (cls === 0) return 0;
        if (cls === 1) return 1;
        this.#strSeqStart = this.#base + i;
        if (cls === 2) {
          this.#keyEscaped = true;
          this.#strSub = STR_BACKSLASH;
          return 0;
        }
        if (cls === 3) return fail(i, `unescaped control character ${found(text, i)} in string`);
        if (c >= 0xc2 && c <= 0xdf) {
          this.#strNeed = 1;
          this.#strLo = 0x80;
          this.#strHi = 0xbf;
        } else if (c >= 0xe0 && c <= 0xef) {
          this.#strNeed = 2;
          this.#strLo = c === 0xe0 ? 0xa0 : 0x80;
          this.#strHi = c === 0xed ? 0x9f : 0xbf;
        } else if (c >= 0xf0 && c <= 0xf4) {
          this.#strNeed = 3;
          this.#strLo = c === 0xf0 ? 0x90 : 0x80;
          this.#strHi = c === 0xf4 ? 0x8f : 0xbf;
        } else return fail(i, 'invalid UTF-8 in string');
        this.#strSub = STR_UTF8;
        return 0;
      }
      case STR_BACKSLASH:
        if (SIMPLE_ESCAPE[c] === 1) this.#strSub = STR_PLAIN;
        else if (c === 0x75) {
          this.#strSub = STR_HEX;
          this.#strNeed = 4;
        } else return this.#seqFail('invalid escape sequence in string');
        return 0;
      case STR_HEX:
        if (HEX[c] !== 1) return this.#seqFail('invalid escape sequence in string');
        if (--this.#strNeed === 0) this.#strSub = STR_PLAIN;
        return 0;
      default:
        if (c < this.#strLo || c > this.#strHi) return this.#seqFail('invalid UTF-8 in string');
        this.#strLo = 0x80;
        this.#strHi = 0xbf;
        if (--this.#strNeed === 0) this.#strSub = STR_PLAIN;
        return 0;
    }
  }

  /** Fails at the start of the escape or UTF-8 sequence being completed (which may be in an earlier chunk). */
  #seqFail(message: string): -1 {
    return fail(this.#strSeqStart - this.#base, message);
  }

  /**
   * Scans number bytes from `i` in the carried sub-state (RFC 8259 §6).
   * @returns The offset of the first byte after the number; -2 when the chunk ends inside it; -1.
   */
  #number(text: Buffer, i: number, n: number): number {
    let sub = this.#numSub;
    for (;;) {
      if (i >= n) {
        this.#numSub = sub;
        return -2;
      }
      const c = text[i]!;
      const digit = c >= 0x30 && c <= 0x39;
      switch (sub) {
        case N_MINUS:
          if (!digit) return fail(i, `expected a digit but found ${found(text, i)}`);
          sub = c === 0x30 ? N_ZERO : N_INT;
          break;
        case N_INT:
        case N_ZERO:
          if (digit && sub === N_INT) {
            // The common case: a run of digits.
            do i++;
            while (i < n && text[i]! >= 0x30 && text[i]! <= 0x39);
            continue;
          }
          if (c === 0x2e) sub = N_DOT;
          else if (c === 0x65 || c === 0x45) sub = N_E;
          else return this.#numberEnd(sub, i);
          break;
        case N_DOT:
          if (!digit) return fail(i, `expected a digit after '.' but found ${found(text, i)}`);
          sub = N_FRAC;
          break;
        case N_FRAC:
          if (digit) break;
          if (c === 0x65 || c === 0x45) sub = N_E;
          else return this.#numberEnd(sub, i);
          break;
        case N_E:
          if (c === 0x2b || c === 0x2d) sub = N_ESIGN;
          else if (digit) sub = N_EXP;
          else return fail(i, `expected a digit in the exponent but found ${found(text, i)}`);
          break;
        case N_ESIGN:
          if (!digit) return fail(i, `expected a digit in the exponent but found ${found(text, i)}`);
          sub = N_EXP;
          break;
        default:
          // N_EXP
          if (!digit) return this.#numberEnd(sub, i);
      }
      i++;
    }
  }

  #numberEnd(sub: number, i: number): number {
    this.#numSub = sub;
    return i;
  }
}
