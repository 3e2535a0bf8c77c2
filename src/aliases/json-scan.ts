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
 */

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

const EXPECT_VALUE = 0;
const AFTER_VALUE = 1;
const EXPECT_KEY = 2;

function isWhitespace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** Set by {@link scanString}: whether the string it last scanned contained an escape. */
let stringHadEscape = false;
/** Set by {@link scanString} when it returns -1: what is wrong and where. */
let stringFault: ScanError = { offset: 0, message: '' };

/**
 * Scans the rest of a JSON string (RFC 8259 §7) whose opening quote is just before `i`: escapes,
 * unescaped control characters and UTF-8 (RFC 3629) are checked inline.
 * @returns The offset just after the closing quote, or -1 with {@link stringFault} set.
 */
function scanString(text: Buffer, i: number): number {
  stringHadEscape = false;
  for (;;) {
    const c = text[i];
    if (c === undefined) return fail(text.length, 'unterminated string');
    const cls = STRING_CLASS[c]!;
    if (cls === 0) {
      i++;
    } else if (cls === 1) {
      return i + 1;
    } else if (cls === 2) {
      stringHadEscape = true;
      const e = text[i + 1];
      if (e !== undefined && SIMPLE_ESCAPE[e] === 1) i += 2;
      else if (
        e === 0x75 &&
        HEX[text[i + 2]!] &&
        HEX[text[i + 3]!] &&
        HEX[text[i + 4]!] &&
        HEX[text[i + 5]!]
      ) {
        i += 6;
      } else return fail(i, 'invalid escape sequence in string');
    } else if (cls === 3) {
      return fail(i, `unescaped control character ${found(text, i)} in string`);
    } else {
      const length = utf8SequenceLength(text, i);
      if (length === 0) return fail(i, 'invalid UTF-8 in string');
      i += length;
    }
  }
}

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
 * of `names` (RFC 8259; see the module comment for the exact strictness).
 *
 * @param text The complete text, as bytes.
 * @param names Member names to report.
 * @param handler Receives the reported members (see {@link ScanHandler}); calls already made stand even
 *   when the text turns out invalid later, so a caller must discard its work on an error.
 * @param maxDepth Deepest object whose members are compared with `names` (1 = top-level object only;
 *   `Infinity` = every object). Deeper text is still validated.
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
  const n = text.length;
  let stack = new Uint8Array(64);
  let depth = 0;
  let i = 0;
  let state = EXPECT_VALUE;
  let c: number | undefined;

  for (;;) {
    if (state === AFTER_VALUE) {
      if (depth === 0) {
        while (isWhitespace(text[i])) i++;
        if (i !== n) return { offset: i, message: `unexpected ${found(text, i)} after the JSON value` };
        return undefined;
      }
      const flags = stack[depth]!;
      if ((flags & CURRENT_REPORTED) !== 0) {
        stack[depth] = flags & ~CURRENT_REPORTED;
        handler.onValue(depth, i);
      }
      c = text[i];
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = text[++i];
      if (c === 0x2c) {
        i++;
        state = (flags & IS_OBJECT) !== 0 ? EXPECT_KEY : EXPECT_VALUE;
        continue;
      }
      if ((flags & IS_OBJECT) !== 0) {
        if (c !== 0x7d) return { offset: i, message: `expected ',' or '}' but found ${found(text, i)}` };
        if ((flags & HAS_REPORTED) !== 0) handler.onObjectEnd(depth, i);
      } else if (c !== 0x5d) {
        return { offset: i, message: `expected ',' or ']' but found ${found(text, i)}` };
      }
      depth--;
      i++;
      continue;
    }

    if (state === EXPECT_KEY) {
      c = text[i];
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = text[++i];
      if (c !== 0x22) return { offset: i, message: `expected a string key but found ${found(text, i)}` };
      const keyStart = i;
      i = scanString(text, i + 1);
      if (i < 0) return stringFault;
      const escaped = stringHadEscape;
      if (depth <= maxDepth) {
        const name = names.match(text, keyStart, i, escaped);
        if (name >= 0) {
          stack[depth] = stack[depth]! | HAS_REPORTED | CURRENT_REPORTED;
          handler.onKey(depth, name, keyStart, i);
        }
      }
      c = text[i];
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = text[++i];
      if (c !== 0x3a) return { offset: i, message: `expected ':' after the key but found ${found(text, i)}` };
      i++;
      state = EXPECT_VALUE;
      continue;
    }

    // EXPECT_VALUE
    c = text[i];
    while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = text[++i];
    if (c === 0x22) {
      i = scanString(text, i + 1);
      if (i < 0) return stringFault;
      state = AFTER_VALUE;
      continue;
    }
    if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth === stack.length) {
        const grown = new Uint8Array(stack.length * 2);
        grown.set(stack);
        stack = grown;
      }
      i++;
      const isObject = c === 0x7b;
      stack[depth] = isObject ? IS_OBJECT : 0;
      c = text[i];
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = text[++i];
      if (c === (isObject ? 0x7d : 0x5d)) {
        depth--;
        i++;
        state = AFTER_VALUE;
      } else {
        state = isObject ? EXPECT_KEY : EXPECT_VALUE;
      }
      continue;
    }
    if (c === 0x2d || (c !== undefined && c >= 0x30 && c <= 0x39)) {
      // number = [ minus ] int [ frac ] [ exp ] (RFC 8259 §6)
      if (c === 0x2d) c = text[++i];
      if (c === 0x30) {
        c = text[++i];
      } else if (c !== undefined && c >= 0x31 && c <= 0x39) {
        do c = text[++i];
        while (c !== undefined && c >= 0x30 && c <= 0x39);
      } else {
        return { offset: i, message: `expected a digit but found ${found(text, i)}` };
      }
      if (c === 0x2e) {
        c = text[++i];
        if (c === undefined || c < 0x30 || c > 0x39) {
          return { offset: i, message: `expected a digit after '.' but found ${found(text, i)}` };
        }
        do c = text[++i];
        while (c !== undefined && c >= 0x30 && c <= 0x39);
      }
      if (c === 0x65 || c === 0x45) {
        c = text[++i];
        if (c === 0x2b || c === 0x2d) c = text[++i];
        if (c === undefined || c < 0x30 || c > 0x39) {
          return { offset: i, message: `expected a digit in the exponent but found ${found(text, i)}` };
        }
        do c = text[++i];
        while (c !== undefined && c >= 0x30 && c <= 0x39);
      }
      state = AFTER_VALUE;
      continue;
    }
    if (c === 0x74 && text[i + 1] === 0x72 && text[i + 2] === 0x75 && text[i + 3] === 0x65) {
      i += 4; // true
    } else if (
      c === 0x66 &&
      text[i + 1] === 0x61 &&
      text[i + 2] === 0x6c &&
      text[i + 3] === 0x73 &&
      text[i + 4] === 0x65
    ) {
      i += 5; // false
    } else if (c === 0x6e && text[i + 1] === 0x75 && text[i + 2] === 0x6c && text[i + 3] === 0x6c) {
      i += 4; // null
    } else {
      return { offset: i, message: `expected a JSON value but found ${found(text, i)}${hint(text, i)}` };
    }
    state = AFTER_VALUE;
  }
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
