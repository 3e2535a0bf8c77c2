/*
 * The strict, streaming JSON scanner of the alias layer (RFC 8259), compiled to WebAssembly with
 * 128-bit SIMD. src/aliases/json-scan.ts is its only user: it copies each chunk into `input`, window by
 * window, calls `scan`, hands the reported members (`events`) to its handler and turns an error code
 * into a message. The grammar, the states and the error offsets are those json-scan.ts documents.
 *
 * Why C and WebAssembly: the scan is the largest cost of a legacy client's patched list (issue 9;
 * bench/RESULTS.md). Strings are most of a JSON response's bytes, and SIMD skips their plain bytes 16
 * and 32 at a time, which JavaScript cannot: measured on the bench's mission list, 0.74 GB/s for the
 * former JavaScript scanner, 1.5–1.8 GB/s for this one with the copy into `input` counted.
 *
 * The compact path (`walk`): in a compact text such as that list (~55 tokens per 675-byte mission, no
 * whitespace) the cost was per token, not per byte (~21 cycles a token): a chain of dependent steps
 * (load 16 bytes at i, mask, count zeros, the next i) and a byte-by-byte state machine around it. `scan`
 * now hands each key to `walk`, which goes on through the common shapes (`"key":"value"`, numbers,
 * literals, `{`, `[`, `,` and closers with no whitespace, names and their events) and hands back to
 * the states above at anything else, the states staying the only authority on errors, whitespace, the
 * window's end and EVENTS_FULL. Its strings come from a cursor over 64-byte blocks of string stops
 * (quotes, backslashes, control bytes, non-ASCII bytes not known to be UTF-8; `take`): in a compact text
 * the next stop is the next quote, one bit operation away, and a block's mask is computed off the
 * dependency chain. Measured (bench/aliases-json-scan-throughput.ts, interleaved against the former
 * version, medians; 2-core VM): `list` 1.55–1.6× (1.6 → 2.5–2.6 GB/s), `text` ~1.15×, `numbers`
 * (pretty-printed) unchanged. `walk` is a function of its own: inside `scan`, V8's register
 * allocation of the whole state machine cost ~5% of `list`. Then, as V8 still spilled walk's registers
 * around its token loop: the block's stops and the event count in memory rather than in locals, the
 * high-bit masks of block_stops only for blocks with a non-ASCII byte, the key's last byte read with the
 * bytes after its closing quote, and no branch for the empty key's hash: `list` a further 1.12–1.16×
 * (2.7 → 3.1 GB/s), `text` 1.03–1.07×, `numbers` 1.01–1.03× (same bench, against the version before).
 *
 * Build: `node src/aliases/json-scan-build.ts` (clang ≥ 16 with wasm-ld, or the npm package
 * `@yowasp/clang`; no libc, no allocator) writes src/aliases/json-scan-wasm.ts, the module as base64 with
 * the SHA-256 of this file, which test/unit/aliases/json-scan-wasm.test.ts compares: change this file,
 * rebuild, commit both.
 *
 * Memory: static regions below `__heap_base` (input window, events, key and names buffers, state, the
 * lone members' prefixes and staged output); the nesting stack from `__heap_base` on, one byte per
 * level, grown with `memory.grow` as deep as the scanner's `max_nesting` allows. Nothing else is
 * allocated. No recursion.
 */
#include <stdint.h>
#include <wasm_simd128.h>

/* Must match json-scan.ts. */
#define WINDOW 65536       /* most bytes scanned per call */
#define PAD 64             /* zero bytes after the window: the 48- and 64-byte loads stay inside */
#define MAX_EVENTS 4096    /* events per call; `scan` returns EVENTS_FULL before it could overflow */
#define MAX_NAMES 256      /* reported member names */
#define NAME_BYTES 16384   /* their UTF-8 bytes, together */
#define KEY_CAP 1536       /* key bytes kept to compare (6 × the longest name: every byte as \uXXXX) */

/* Scanner states: what the next byte may be. */
enum {
  S_VALUE,        /* a value */
  S_AFTER,        /* after a value: ',' or the closer (only whitespace at depth 0) */
  S_KEY,          /* a key, after ',' in an object */
  S_OPEN_OBJECT,  /* after '{': a key or '}' */
  S_OPEN_ARRAY,   /* after '[': a value or ']' */
  S_COLON,        /* after a key: ':' */
  S_MEMBER_VALUE, /* after the ':' of a reported key: the value's first byte */
  S_STRING,       /* inside a string value */
  S_KEY_STRING,   /* inside a key */
  S_NUMBER,       /* inside a number */
  S_LITERAL,      /* inside true, false or null */
  S_SPENT         /* after an error, a stop or the end */
};

/* String sub-states: where a window ended inside an escape or a UTF-8 sequence. */
enum { STR_PLAIN, STR_BACKSLASH, STR_HEX, STR_UTF8 };

/* Number sub-states (RFC 8259 §6); the odd ones may end the number. */
enum { N_MINUS = 0, N_ZERO = 1, N_DOT = 2, N_INT = 3, N_E = 4, N_FRAC = 5, N_ESIGN = 6, N_EXP = 7 };

/* What `scan` returns. */
enum { OK = 0, INVALID = 1, TOO_DEEP = 2, EVENTS_FULL = 4 };

/* Events, as json-scan.ts reads them: (kind | name << 2, depth, window offset). */
enum { EV_MEMBER = 0, EV_VALUE = 1, EV_OBJECT_END = 2 };

/* Error kinds; json-scan.ts words them (ERROR_MESSAGES). */
enum {
  ERR_AFTER_TEXT = 1, /* unexpected X after the JSON value */
  ERR_OBJECT_NEXT,    /* expected ',' or '}' but found X */
  ERR_ARRAY_NEXT,     /* expected ',' or ']' but found X */
  ERR_KEY,            /* expected a string key but found X */
  ERR_COLON,          /* expected ':' after the key but found X */
  ERR_LITERAL,        /* expected a JSON value but found X, at the literal's first byte */
  ERR_VALUE,          /* expected a JSON value but found X (with a BOM or UTF-16 hint at the start) */
  ERR_CONTROL,        /* unescaped control character X in string */
  ERR_ESCAPE,         /* invalid escape sequence in string, at its backslash */
  ERR_UTF8,           /* invalid UTF-8 in string, at the sequence's first byte */
  ERR_DIGIT,          /* expected a digit but found X */
  ERR_DIGIT_DOT,      /* expected a digit after '.' but found X */
  ERR_DIGIT_EXP       /* expected a digit in the exponent but found X */
};

/* Flags of a nesting level. */
#define IS_OBJECT 1
#define HAS_REPORTED 2
#define CURRENT_REPORTED 4

/*
 * Everything a scanner carries from one window to the next. json-scan.ts saves and restores it (with the
 * stack and the key bytes) when scanners of several responses take turns; field order is its F_*
 * indexes (15 numbers: a typed array that small lives in V8's heap). Offsets are relative to the
 * current window's first byte (negative: in an earlier window) and shifted when a window is done.
 */
typedef struct {
  int32_t state, depth, max_nesting, reported_name;
  int32_t str_sub, str_need, str_lo, str_hi, str_seq_start;
  int32_t num_sub, literal, literal_pos, literal_start;
  int32_t key_len, key_escaped;
} State;

/* What a call of `scan` reports besides its status (json-scan.ts's R_* indexes). */
typedef struct {
  int32_t error_kind, error_offset; /* INVALID, TOO_DEEP */
  int32_t event_count;              /* events in `events` */
  int32_t resume;                   /* EVENTS_FULL: where to call again from */
} Result;

#define FILTER_SIZE 4096   /* entries of Names.filter */

/*
 * The names: json-scan.ts (KeyNames) sets count, offset, length and bytes (name k is bytes[offset[k] ..
 * offset[k] + length[k])) and calls names_loaded, which derives the rest: the longest length, and
 * filter[key_hash(name)] = 1 for each name, so that nearly every other unescaped key is told apart
 * without comparing it.
 */
typedef struct {
  int32_t count, longest;
  int32_t offset[MAX_NAMES], length[MAX_NAMES];
  uint8_t filter[FILTER_SIZE];
  uint8_t bytes[NAME_BYTES];
} Names;

/*
 * A hash of a key's length, first and last byte. For the empty key, both are its quotes: the bytes
 * around its (empty) inside, as for any other key, with no branch.
 */
static inline uint32_t key_hash(uint32_t length, uint32_t first, uint32_t last) {
  return (length * 67 + first * 13 + last) & (FILTER_SIZE - 1);
}

static State st;
static Result result;
static Names names;
static uint8_t input[WINDOW + PAD] __attribute__((aligned(64)));
static int32_t events[MAX_EVENTS * 3];
static uint8_t key_bytes[KEY_CAP];
static uint8_t decoded[KEY_CAP];
/* Set by the string scans when they meet a backslash (a key with one is decoded before comparison). */
static int32_t escaped;
/* Nesting levels the memory holds from __heap_base (grow_stack). */
static uint32_t stack_capacity;
/* The window's bytes known to be UTF-8 (scan's arguments): in strings there, non-ASCII bytes are plain. */
static int32_t utf8_from, utf8_to;
extern uint8_t __heap_base;

uint8_t *input_address(void) { return input; }
int32_t *events_address(void) { return events; }
State *state_address(void) { return &st; }
Result *result_address(void) { return &result; }
Names *names_address(void) { return &names; }
uint8_t *key_address(void) { return key_bytes; }
uint8_t *stack_address(void) { return &__heap_base; }

/* Derives `longest` and `filter` from the names json-scan.ts has written. */
void names_loaded(void) {
  names.longest = 0;
  for (int32_t k = 0; k < FILTER_SIZE; k++) names.filter[k] = 0;
  for (int32_t k = 0; k < names.count; k++) {
    int32_t length = names.length[k];
    const uint8_t *name = names.bytes + names.offset[k];
    if (length > names.longest) names.longest = length;
    uint32_t first = length == 0 ? '"' : name[0], last = length == 0 ? '"' : name[length - 1];
    names.filter[key_hash((uint32_t)length, first, last)] = 1;
  }
}

/* ---- byte classes ------------------------------------------------------------------------------- */

static inline int is_whitespace(uint32_t c) { return c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09; }
static inline int is_digit(uint32_t c) { return c - '0' < 10u; }
static inline int is_hex(uint32_t c) { return c - '0' < 10u || (c | 0x20) - 'a' < 6u; }
/* Escapes after a backslash (RFC 8259 §7), but u: " \ / b f n r t. */
static inline int is_simple_escape(uint32_t c) {
  return c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't';
}

/*
 * Length of the UTF-8 sequence at p[i], 0 when invalid (RFC 3629 §4: no overlong forms, no surrogates,
 * nothing above U+10FFFF). Reads up to p[i + 3].
 */
static int32_t utf8_length(const uint8_t *p, int32_t i) {
  uint32_t b0 = p[i], b1 = p[i + 1];
  if (b0 >= 0xc2 && b0 <= 0xdf) return b1 >= 0x80 && b1 <= 0xbf ? 2 : 0;
  uint32_t b2 = p[i + 2];
  if (b2 < 0x80 || b2 > 0xbf) return 0;
  if (b0 >= 0xe0 && b0 <= 0xef) {
    uint32_t lo = b0 == 0xe0 ? 0xa0 : 0x80, hi = b0 == 0xed ? 0x9f : 0xbf;
    return b1 >= lo && b1 <= hi ? 3 : 0;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    uint32_t b3 = p[i + 3];
    if (b3 < 0x80 || b3 > 0xbf) return 0;
    uint32_t lo = b0 == 0xf0 ? 0x90 : 0x80, hi = b0 == 0xf4 ? 0x8f : 0xbf;
    return b1 >= lo && b1 <= hi ? 4 : 0;
  }
  return 0;
}

/* ---- outcomes ----------------------------------------------------------------------------------- */

static int32_t fail(int32_t kind, int32_t at) {
  result.error_kind = kind;
  result.error_offset = at;
  st.state = S_SPENT;
  return -1;
}

static inline void emit(int32_t kind, int32_t name, int32_t depth, int32_t offset) {
  int32_t k = result.event_count++ * 3;
  events[k] = kind | (name << 2);
  events[k + 1] = depth;
  events[k + 2] = offset;
}

/* Makes room for nesting level `depth` (1 byte each); 0 when memory cannot grow. */
static int grow_stack(int32_t depth) {
  uint32_t base = (uint32_t)(uintptr_t)&__heap_base;
  stack_capacity = (uint32_t)__builtin_wasm_memory_size(0) * 65536u - base;
  if ((uint32_t)depth < stack_capacity) return 1;
  uint32_t pages = ((uint32_t)depth - stack_capacity) / 65536u + 1;
  if (__builtin_wasm_memory_grow(0, pages) == (__SIZE_TYPE__)-1) return 0;
  stack_capacity = (uint32_t)__builtin_wasm_memory_size(0) * 65536u - base;
  return 1;
}

/* ---- strings ------------------------------------------------------------------------------------ */

/* The bytes of `v` that end a run of plain string bytes, as a 16-bit mask (see skip_plain). */
static inline __attribute__((always_inline)) uint32_t stop_mask(v128_t v, int utf8) {
  const v128_t quote = wasm_i8x16_splat('"');
  const v128_t backslash = wasm_i8x16_splat('\\');
  const v128_t space = wasm_i8x16_splat(0x20);
  const v128_t printable = wasm_i8x16_splat(0x60); /* 0x20 … 0x7f, shifted down by 0x20 */
  v128_t special = wasm_v128_or(wasm_i8x16_eq(v, quote), wasm_i8x16_eq(v, backslash));
  v128_t other = utf8 ? wasm_u8x16_lt(v, space) : wasm_u8x16_ge(wasm_i8x16_sub(v, space), printable);
  return wasm_i8x16_bitmask(wasm_v128_or(special, other));
}

/*
 * The first offset from i whose byte is '"', '\', a control byte or (unless `utf8`) non-ASCII: 16 bytes,
 * then 32 at a time (most keys end in the first 16, a UUID in the next 32: one branch each). The zero
 * bytes after the window stop it at the window's end.
 */
static inline __attribute__((always_inline)) int32_t skip_plain(const uint8_t *p, int32_t i, int utf8) {
  for (;;) {
    uint32_t bits = stop_mask(wasm_v128_load(p + i), utf8);
    if (bits != 0) return i + __builtin_ctz(bits);
    bits = stop_mask(wasm_v128_load(p + i + 16), utf8) | stop_mask(wasm_v128_load(p + i + 32), utf8) << 16;
    if (bits != 0) return i + 16 + __builtin_ctz(bits);
    i += 48;
  }
}

/* The low `k` bits (0 ≤ k ≤ 64). */
static inline uint64_t low_bits(int32_t k) { return k >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << k) - 1; }

/* Of the 64 bytes from `b`, those in input[utf8_from .. utf8_to), the bytes known to be UTF-8. */
__attribute__((noinline)) static uint64_t checked_bits(int32_t b) {
  int32_t lo = utf8_from - b, hi = utf8_to - b;
  lo = lo < 0 ? 0 : lo > 64 ? 64 : lo;
  hi = hi < 0 ? 0 : hi > 64 ? 64 : hi;
  return hi > lo ? low_bits(hi) & ~low_bits(lo) : 0;
}

/*
 * The string stops of the 64 bytes from `b` (a multiple of 64) as a 64-bit mask: '"', '\\', control
 * bytes and the non-ASCII bytes not known to be UTF-8 (a sequence cut by a block's edge is whole in the
 * known range, plain on both sides). A signed comparison finds control and non-ASCII bytes at once.
 */
static inline __attribute__((always_inline)) uint64_t block_stops(const uint8_t *p, int32_t b) {
  const v128_t quote = wasm_i8x16_splat('"');
  const v128_t backslash = wasm_i8x16_splat('\\');
  const v128_t space = wasm_i8x16_splat(0x20);
  v128_t v[4];
  uint32_t stops[4];
  for (int k = 0; k < 4; k++) {
    v[k] = wasm_v128_load(p + b + 16 * k);
    v128_t special = wasm_v128_or(wasm_i8x16_eq(v[k], quote), wasm_i8x16_eq(v[k], backslash));
    stops[k] = (uint32_t)wasm_i8x16_bitmask(wasm_v128_or(special, wasm_i8x16_lt(v[k], space)));
  }
  uint64_t all = (uint64_t)(stops[0] | stops[1] << 16) | (uint64_t)(stops[2] | stops[3] << 16) << 32;
  /* Most blocks are ASCII: no byte to tell apart by `checked` (four bitmasks and the range test spared). */
  if (wasm_i8x16_bitmask(wasm_v128_or(wasm_v128_or(v[0], v[1]), wasm_v128_or(v[2], v[3]))) == 0) return all;
  uint32_t high[4];
  for (int k = 0; k < 4; k++) high[k] = (uint32_t)wasm_i8x16_bitmask(v[k]);
  uint64_t non_ascii = (uint64_t)(high[0] | high[1] << 16) | (uint64_t)(high[2] | high[3] << 16) << 32;
  uint64_t checked = b >= utf8_from && b + 64 <= utf8_to ? ~(uint64_t)0 : checked_bits(b);
  return all & ~(non_ascii & checked);
}

/*
 * String bytes one at a time in the carried sub-state, from i to the window's end n.
 * Returns the offset after the closing quote, -2 at the window's end (sub-state kept), -1 on an error.
 * Sets `escaped` when it meets a backslash.
 */
static int32_t string_bytes(const uint8_t *p, int32_t i, int32_t n) {
  for (; i < n; i++) {
    uint32_t c = p[i];
    switch (st.str_sub) {
    case STR_PLAIN:
      if (c == '"') return i + 1;
      if (c >= 0x20 && c < 0x80 && c != '\\') break;
      st.str_seq_start = i;
      if (c == '\\') {
        escaped = 1;
        st.str_sub = STR_BACKSLASH;
        break;
      }
      if (c < 0x20) return fail(ERR_CONTROL, i);
      if (c >= 0xc2 && c <= 0xdf) {
        st.str_need = 1;
        st.str_lo = 0x80;
        st.str_hi = 0xbf;
      } else if (c >= 0xe0 && c <= 0xef) {
        st.str_need = 2;
        st.str_lo = c == 0xe0 ? 0xa0 : 0x80;
        st.str_hi = c == 0xed ? 0x9f : 0xbf;
      } else if (c >= 0xf0 && c <= 0xf4) {
        st.str_need = 3;
        st.str_lo = c == 0xf0 ? 0x90 : 0x80;
        st.str_hi = c == 0xf4 ? 0x8f : 0xbf;
      } else {
        return fail(ERR_UTF8, i);
      }
      st.str_sub = STR_UTF8;
      break;
    case STR_BACKSLASH:
      if (is_simple_escape(c)) {
        st.str_sub = STR_PLAIN;
      } else if (c == 'u') {
        st.str_sub = STR_HEX;
        st.str_need = 4;
      } else {
        return fail(ERR_ESCAPE, st.str_seq_start);
      }
      break;
    case STR_HEX:
      if (!is_hex(c)) return fail(ERR_ESCAPE, st.str_seq_start);
      if (--st.str_need == 0) st.str_sub = STR_PLAIN;
      break;
    default: /* STR_UTF8 */
      if (c < (uint32_t)st.str_lo || c > (uint32_t)st.str_hi) return fail(ERR_UTF8, st.str_seq_start);
      st.str_lo = 0x80;
      st.str_hi = 0xbf;
      if (--st.str_need == 0) st.str_sub = STR_PLAIN;
      break;
    }
  }
  return -2;
}

/*
 * A string stop other than the closing quote at p[i], whole in the window: a backslash, a control byte
 * or a non-ASCII byte. Returns the offset after its escape or UTF-8 sequence, -1 on an error, or -3 when
 * the escape or sequence may run past the window's end n (the caller goes on byte by byte,
 * string_bytes). Sets `escaped` at a backslash.
 */
static inline __attribute__((always_inline)) int32_t string_stop(const uint8_t *p, int32_t i, int32_t n) {
  uint32_t c = p[i];
  if (c == '\\') {
    escaped = 1;
    if (i + 6 > n) return -3;
    uint32_t e = p[i + 1];
    if (is_simple_escape(e)) return i + 2;
    if (e == 'u' && is_hex(p[i + 2]) && is_hex(p[i + 3]) && is_hex(p[i + 4]) && is_hex(p[i + 5])) return i + 6;
    return fail(ERR_ESCAPE, i);
  }
  if (c < 0x20) return fail(ERR_CONTROL, i);
  if (i + 4 > n) return -3;
  int32_t length = utf8_length(p, i);
  if (length == 0) return fail(ERR_UTF8, i);
  return i + length;
}

/*
 * String bytes from i (plain sub-state) to the closing quote: plain bytes by skip_plain, escapes and
 * UTF-8 sequences checked whole where the window holds them, else byte by byte (string_bytes).
 * Returns as string_bytes does.
 */
static inline __attribute__((always_inline)) int32_t scan_string(const uint8_t *p, int32_t i, int32_t n) {
  for (;;) {
    if (i >= utf8_from && i < utf8_to) {
      /* Past the checked bytes (a sequence cut by the window's end), bytes are checked one by one. */
      i = skip_plain(p, i, 1);
      if (i > utf8_to) i = utf8_to;
    } else {
      i = skip_plain(p, i, 0);
    }
    if (i >= n) {
      st.str_sub = STR_PLAIN;
      return -2;
    }
    uint32_t c = p[i];
    if (c == '"') return i + 1;
    int32_t r = string_stop(p, i, n);
    if (r == -1) return -1;
    if (r == -3) break;
    i = r;
  }
  st.str_sub = STR_PLAIN;
  return string_bytes(p, i, n);
}

/* Finishes a string cut by the previous window: its escape or sequence byte by byte, then the rest. */
static int32_t resume_string(const uint8_t *p, int32_t n) {
  int32_t i = 0;
  while (st.str_sub != STR_PLAIN) {
    if (i >= n) return -2;
    int32_t r = string_bytes(p, i, i + 1);
    if (r == -1) return -1;
    i++;
  }
  return scan_string(p, i, n);
}

/*
 * A cursor over the string stops (block_stops) of the window, 64 bytes at a time: `block_stop`, those of
 * the block from `base`; `rest`, those not yet passed. seek puts it anywhere; take returns the next stop
 * and passes it, which in a compact text is the next quote: one instruction on the chain from one token
 * to the next, while a block's stops are found ahead of need.
 */
typedef struct {
  int32_t base;
  uint64_t rest;
} Block;
/*
 * The stops of the cursor's block: in memory, not in Block, as seek alone reads them (a 64-bit local
 * fewer in walk, whose registers V8 spilled around the token loop: `list` ~5% faster without it).
 */
static uint64_t block_stop;

/* Puts the cursor at `at`: the stops of its block from `at` on. */
static inline __attribute__((always_inline)) void seek(const uint8_t *p, int32_t at, Block *block) {
  int32_t b = at & ~63;
  if (b != block->base) {
    block->base = b;
    block_stop = block_stops(p, b);
  }
  block->rest = block_stop & (~(uint64_t)0 << (at & 63));
}

/* The offset of the next stop, which the cursor passes. The zero bytes after the window stop it there. */
static inline __attribute__((always_inline)) int32_t take(const uint8_t *p, Block *block) {
  while (block->rest == 0) {
    block->base += 64;
    block->rest = block_stop = block_stops(p, block->base);
  }
  int32_t k = block->base + (int32_t)__builtin_ctzll(block->rest);
  block->rest &= block->rest - 1;
  return k;
}

/* The first string stop at or after `at` (the cursor passes it). */
static inline __attribute__((always_inline)) int32_t next_stop(const uint8_t *p, int32_t at, Block *block) {
  seek(p, at, block);
  return take(p, block);
}

/* scan_string with the stops of `block`. */
static inline __attribute__((always_inline)) int32_t block_string(const uint8_t *p, int32_t i, int32_t n,
                                                                  Block *block) {
  for (;;) {
    i = next_stop(p, i, block);
    uint32_t c = p[i];
    if (c == '"') return i + 1;
    if (i >= n) {
      st.str_sub = STR_PLAIN;
      return -2;
    }
    int32_t r = string_stop(p, i, n);
    if (r == -1) return -1;
    if (r == -3) break;
    i = r;
  }
  st.str_sub = STR_PLAIN;
  return string_bytes(p, i, n);
}

/* ---- keys --------------------------------------------------------------------------------------- */

static int32_t hex_value(const uint8_t *s) {
  int32_t v = 0;
  for (int k = 0; k < 4; k++) {
    uint32_t c = s[k];
    v = v * 16 + (int32_t)(is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return v;
}

/*
 * Decodes the escapes of a validated key's bytes into `decoded` (UTF-8); -1 when the key holds a lone
 * surrogate (no name can be one), else the decoded length.
 */
static int32_t decode_key(const uint8_t *s, int32_t length) {
  int32_t out = 0;
  for (int32_t i = 0; i < length;) {
    uint32_t c = s[i];
    if (c != '\\') {
      decoded[out++] = (uint8_t)c;
      i++;
      continue;
    }
    uint32_t e = s[i + 1];
    if (e != 'u') {
      decoded[out++] = e == 'b' ? 8 : e == 'f' ? 12 : e == 'n' ? 10 : e == 'r' ? 13 : e == 't' ? 9 : (uint8_t)e;
      i += 2;
      continue;
    }
    int32_t cp = hex_value(s + i + 2);
    i += 6;
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (i + 6 > length || s[i] != '\\' || s[i + 1] != 'u') return -1;
      int32_t low = hex_value(s + i + 2);
      if (low < 0xdc00 || low > 0xdfff) return -1;
      cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
      i += 6;
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
      return -1;
    }
    if (cp < 0x80) {
      decoded[out++] = (uint8_t)cp;
    } else if (cp < 0x800) {
      decoded[out++] = (uint8_t)(0xc0 | cp >> 6);
      decoded[out++] = (uint8_t)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      decoded[out++] = (uint8_t)(0xe0 | cp >> 12);
      decoded[out++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
      decoded[out++] = (uint8_t)(0x80 | (cp & 0x3f));
    } else {
      decoded[out++] = (uint8_t)(0xf0 | cp >> 18);
      decoded[out++] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
      decoded[out++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
      decoded[out++] = (uint8_t)(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

/* Index of the name a key's bytes (between its quotes) spell, decoded when `has_escape`; -1 for none. */
static int32_t match_name(const uint8_t *s, int32_t length, int32_t has_escape) {
  if (has_escape) {
    if (length > names.longest * 6) return -1;
    length = decode_key(s, length);
    if (length < 0) return -1;
    s = decoded;
  } else if (length > names.longest) {
    return -1;
  }
  for (int32_t k = 0; k < names.count; k++) {
    if (names.length[k] != length) continue;
    const uint8_t *name = names.bytes + names.offset[k];
    int32_t j = 0;
    while (j < length && s[j] == name[j]) j++;
    if (j == length) return k;
  }
  return -1;
}

/*
 * Keeps a cut key's bytes for the comparison; beyond KEY_CAP bytes only that it is longer (it cannot
 * match): its length stops at KEY_CAP + 1, so that it never overflows (it counted every byte, and a key
 * cut by 2 GiB of windows turned it negative: writes before key_bytes, a trap).
 */
static void keep_key_bytes(const uint8_t *p, int32_t from, int32_t to) {
  for (int32_t k = from; k < to && st.key_len + (k - from) < KEY_CAP; k++) key_bytes[st.key_len + (k - from)] = p[k];
  st.key_len = to - from > KEY_CAP - st.key_len ? KEY_CAP + 1 : st.key_len + (to - from);
}

/* ---- numbers and literals ----------------------------------------------------------------------- */

/*
 * Number bytes from i in sub-state `sub` (RFC 8259 §6). Returns the offset of the first byte after the
 * number, -2 at the window's end (sub-state kept), -1 on an error.
 */
static int32_t number_bytes(const uint8_t *p, int32_t i, int32_t n, int32_t sub) {
  for (;;) {
    if (i >= n) {
      st.num_sub = sub;
      return -2;
    }
    uint32_t c = p[i];
    switch (sub) {
    case N_MINUS:
      if (!is_digit(c)) return fail(ERR_DIGIT, i);
      sub = c == '0' ? N_ZERO : N_INT;
      break;
    case N_INT:
      if (is_digit(c)) {
        do i++;
        while (is_digit(p[i])); /* the zero bytes after the window stop it */
        continue;
      }
      /* fall through */
    case N_ZERO:
      if (c == '.') sub = N_DOT;
      else if ((c | 0x20) == 'e') sub = N_E;
      else return i;
      break;
    case N_DOT:
      if (!is_digit(c)) return fail(ERR_DIGIT_DOT, i);
      sub = N_FRAC;
      break;
    case N_FRAC:
      if (is_digit(c)) break;
      if ((c | 0x20) == 'e') sub = N_E;
      else return i;
      break;
    case N_E:
      if (c == '+' || c == '-') sub = N_ESIGN;
      else if (is_digit(c)) sub = N_EXP;
      else return fail(ERR_DIGIT_EXP, i);
      break;
    case N_ESIGN:
      if (!is_digit(c)) return fail(ERR_DIGIT_EXP, i);
      sub = N_EXP;
      break;
    default: /* N_EXP */
      if (!is_digit(c)) return i;
      break;
    }
    i++;
  }
}

static const char LITERALS[3][6] = {"true", "false", "null"};
static const int32_t LITERAL_LENGTHS[3] = {4, 5, 4};

/* Literal bytes from i, st.literal_pos of literal st.literal done: its end, -2 (window end), -1. */
static int32_t literal_bytes(const uint8_t *p, int32_t i, int32_t n) {
  const char *literal = LITERALS[st.literal];
  int32_t length = LITERAL_LENGTHS[st.literal];
  int32_t pos = st.literal_pos;
  while (pos < length && i < n) {
    if (p[i] != (uint8_t)literal[pos]) return fail(ERR_LITERAL, st.literal_start);
    pos++;
    i++;
  }
  st.literal_pos = pos;
  return pos < length ? -2 : i;
}

/* ---- the compact path -------------------------------------------------------------------------- */

/* Where walk hands a text over to scan's states. */
enum {
  W_KEY_SLOW,     /* key_start, i at the key's opening quote */
  W_COLON,        /* colon, after a key that is no name */
  W_VALUE,        /* value */
  W_MEMBER_VALUE, /* member_value */
  W_OPEN_OBJECT,  /* open_object */
  W_OPEN_ARRAY,   /* open_array */
  W_AFTER,        /* after */
  W_KEY,          /* key */
  W_STRING_CUT,   /* a string value goes on past the window */
  W_NUMBER_CUT,   /* a number goes on past the window */
  W_INVALID       /* an error: result says which */
};

/* walk's cursor, kept from one call to the next in a window (scan resets it), and scan's depth. */
static Block cursor;
static int32_t walk_depth;

/*
 * The compact path: the common shapes of a compact text (no whitespace between tokens, no escape in
 * keys) walked with fewer checks than scan's states, into which it hands over wherever anything else
 * comes. Its events and their EVENTS_FULL points are those of the states: it checks `event_count` where
 * `after` and `member_value` do, and hands over there. A function of its own, with few locals, for
 * V8's register allocation. The zero bytes after the window fail every byte it expects.
 *
 * From p[i], a key's opening quote in the object at walk_depth; returns (where it stopped) × 16 + the
 * state to go on in (W_*), walk_depth and result.event_count updated.
 */
#define EXIT(code)                                                                                      \
  do {                                                                                                  \
    exit = (code);                                                                                      \
    goto done;                                                                                          \
  } while (0)

#define EMIT(kind, name, offset)                                                                        \
  do {                                                                                                  \
    int32_t at_ = result.event_count++ * 3;                                                             \
    events[at_] = (kind) | ((name) << 2);                                                               \
    events[at_ + 1] = depth;                                                                            \
    events[at_ + 2] = (offset);                                                                         \
  } while (0)

__attribute__((noinline)) static int32_t walk(const uint8_t *p, int32_t i, int32_t n) {
  uint8_t *stack = &__heap_base;
  int32_t depth = walk_depth;
  Block block = cursor;
  int32_t exit, r, k, name;
  uint32_t c, word;

  if (((i + 1) & ~63) != block.base) {
    /* A new block: a key mostly ends in the next 16 bytes, found without the block's 64 (which a text
       with whitespace would seldom use further). */
    uint32_t bits = stop_mask(wasm_v128_load(p + i + 1), 0);
    if (bits != 0) {
      k = i + 1 + (int32_t)__builtin_ctz(bits);
      if (p[k] != '"') EXIT(W_KEY_SLOW);
      int32_t length = k - i - 1;
      if (names.filter[key_hash((uint32_t)length, p[i + 1], p[k - 1])]) EXIT(W_KEY_SLOW);
      i = k + 1;
      if (p[i] != ':') EXIT(W_COLON);
      i++;
      if (p[i] != '"') EXIT(W_VALUE);
      seek(p, i, &block);
      goto fast_value;
    }
  }
  seek(p, i + 1, &block);

fast_key: /* p[i] is a key's opening quote, in the object at `depth`; the cursor after it */
  k = take(p, &block);
  __builtin_memcpy(&word, p + k - 1, 4); /* the key's last byte, the stop, and two more */
  if ((uint8_t)(word >> 8) != '"') EXIT(W_KEY_SLOW); /* an escape, a control or an unchecked non-ASCII byte */
  {
    int32_t length = k - i - 1;
    if (names.filter[key_hash((uint32_t)length, p[i + 1], (uint8_t)word)] &&
        (name = match_name(p + i + 1, length, 0)) >= 0) {
      /* A name: as colon and member_value do, when its value follows the ':' */
      if ((uint8_t)(word >> 16) != ':') EXIT(W_KEY_SLOW);
      i = k + 2;
      st.reported_name = name;
      stack[depth] |= HAS_REPORTED | CURRENT_REPORTED;
      c = p[i];
      if (result.event_count > MAX_EVENTS - 2 || is_whitespace(c) || i >= n) EXIT(W_MEMBER_VALUE);
      EMIT(EV_MEMBER, name, i);
      goto fast_value;
    }
  }
  i = k + 2;
  if ((word >> 8) == ('"' | ':' << 8 | '"' << 16)) {
    /* "key":"value", the most common member */
    take(p, &block); /* the value's opening quote */
    k = take(p, &block);
    if (p[k] == '"') {
      i = k + 1;
      goto fast_after;
    }
    goto string_rest;
  }
  if ((uint8_t)(word >> 16) != ':') {
    i = k + 1; /* whitespace or an error after the key */
    EXIT(W_COLON);
  }

fast_value: /* i at a value's first byte; the cursor at i (from here on: no stop passed unseen) */
  c = p[i];
  if (c == '"') {
    take(p, &block); /* its opening quote */
    k = take(p, &block);
    if (p[k] == '"') {
      i = k + 1;
      goto fast_after;
    }
  string_rest: /* k: a stop other than the closing quote */
    r = block_string(p, k, n, &block);
    if (r == -1) EXIT(W_INVALID);
    if (r == -2) EXIT(W_STRING_CUT);
    i = r;
    seek(p, i, &block);
    goto fast_after;
  }
  if (is_digit(c) || c == '-') {
    r = number_bytes(p, i + 1, n, c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT);
    if (r == -1) EXIT(W_INVALID);
    if (r == -2) EXIT(W_NUMBER_CUT);
    i = r;
    goto fast_after;
  }
  if (c == '{' || c == '[') {
    if (depth >= st.max_nesting || (uint32_t)depth + 1 >= stack_capacity) EXIT(W_VALUE); /* value says */
    depth++;
    i++;
    if (c == '{') {
      stack[depth] = IS_OBJECT;
      if (p[i] != '"') EXIT(W_OPEN_OBJECT);
      take(p, &block); /* the key's opening quote */
      goto fast_key;
    }
    stack[depth] = 0;
    c = p[i];
    if (c == '"' || c == '{' || c == '[' || c == '-' || is_digit(c)) goto fast_value;
    EXIT(W_OPEN_ARRAY);
  }
  __builtin_memcpy(&word, p + i, 4);
  if (word == ('t' | 'r' << 8 | 'u' << 16 | (uint32_t)'e' << 24) ||
      word == ('n' | 'u' << 8 | 'l' << 16 | (uint32_t)'l' << 24)) {
    i += 4;
    goto fast_after;
  }
  __builtin_memcpy(&word, p + i + 1, 4);
  if (c == 'f' && word == ('a' | 'l' << 8 | 's' << 16 | (uint32_t)'e' << 24)) {
    i += 5;
    goto fast_after;
  }
  EXIT(W_VALUE);

fast_after: /* i after a value, at `depth` ≥ 1: as `after`, when a ',' or the closer follows */
  if (result.event_count > MAX_EVENTS - 2) EXIT(W_AFTER); /* where `after` returns EVENTS_FULL */
  {
    uint32_t flags = stack[depth];
    c = p[i];
    if (c == ',') {
      if (flags & CURRENT_REPORTED) {
        stack[depth] = (uint8_t)(flags & ~CURRENT_REPORTED);
        EMIT(EV_VALUE, 0, i);
      }
      i++;
      if (!(flags & IS_OBJECT)) goto fast_value;
      if (p[i] != '"') EXIT(W_KEY);
      take(p, &block); /* the key's opening quote */
      goto fast_key;
    }
    if (c != ((flags & IS_OBJECT) ? '}' : ']')) EXIT(W_AFTER);
    if (flags & CURRENT_REPORTED) {
      stack[depth] = (uint8_t)(flags & ~CURRENT_REPORTED);
      EMIT(EV_VALUE, 0, i);
    }
    if (flags & HAS_REPORTED) EMIT(EV_OBJECT_END, 0, i);
    depth--;
    i++;
    if (depth == 0) EXIT(W_AFTER);
    goto fast_after;
  }

done:
  cursor = block;
  walk_depth = depth;
  return i * 16 + exit;
}
#undef EXIT
#undef EMIT

/* ---- the scanner -------------------------------------------------------------------------------- */

/*
 * Scans input[from .. n) in the state of `st`, carrying it on to the window's end; input[checked_from ..
 * checked_to) is known to be UTF-8 (empty when it is not known). Returns:
 * - OK: the window is scanned (offsets in `st` shifted for the next one);
 * - INVALID: result.error_kind and result.error_offset are set;
 * - TOO_DEEP: result.error_offset is the '[' or '{' one level too deep;
 * - EVENTS_FULL: `events` is nearly full; hand the events over and call again from result.resume.
 * result.event_count events are in `events`.
 */
int32_t scan(int32_t from, int32_t n, int32_t checked_from, int32_t checked_to) {
  const uint8_t *p = input;
  utf8_from = checked_from;
  utf8_to = checked_to;
  uint8_t *stack = &__heap_base;
  int32_t i = from;
  int32_t depth = st.depth;
  int32_t name = -1;
  int32_t r;
  uint32_t c;
  result.event_count = 0;
  cursor.base = -64; /* a new window */
  for (int k = 0; k < PAD; k++) input[n + k] = 0;

  switch (st.state) {
  case S_VALUE: goto value;
  case S_AFTER: goto after;
  case S_KEY: goto key;
  case S_OPEN_OBJECT: goto open_object;
  case S_OPEN_ARRAY: goto open_array;
  case S_COLON: name = st.reported_name; goto colon;
  case S_MEMBER_VALUE: goto member_value;
  case S_STRING:
    r = resume_string(p, n);
    if (r == -1) return INVALID;
    if (r == -2) goto window_end;
    i = r;
    goto after;
  case S_KEY_STRING:
    escaped = st.key_escaped;
    r = resume_string(p, n);
    if (r == -1) return INVALID;
    st.key_escaped = escaped;
    if (r == -2) {
      keep_key_bytes(p, 0, n);
      goto window_end;
    }
    keep_key_bytes(p, 0, r - 1);
    name = st.key_len <= KEY_CAP ? match_name(key_bytes, st.key_len, escaped) : -1;
    i = r;
    goto colon;
  case S_NUMBER:
    r = number_bytes(p, 0, n, st.num_sub);
    if (r == -1) return INVALID;
    if (r == -2) goto window_end;
    i = r;
    goto after;
  case S_LITERAL:
    r = literal_bytes(p, 0, n);
    if (r == -1) return INVALID;
    if (r == -2) goto window_end;
    i = r;
    goto after;
  default: return OK; /* S_SPENT */
  }

value:
  while (is_whitespace(c = p[i])) i++;
  if (i >= n) {
    st.state = S_VALUE;
    goto out;
  }
  if (c == '"') {
    r = scan_string(p, i + 1, n);
    if (r == -1) return INVALID;
    if (r == -2) {
      st.state = S_STRING;
      goto out;
    }
    i = r;
    goto after;
  }
  if (c == '{' || c == '[') {
    if (depth >= st.max_nesting || ((uint32_t)depth + 1 >= stack_capacity && !grow_stack(depth + 1))) {
      st.state = S_SPENT;
      result.error_offset = i;
      return TOO_DEEP;
    }
    depth++;
    stack[depth] = c == '{' ? IS_OBJECT : 0;
    i++;
    if (c == '{') goto open_object;
    goto open_array;
  }
  if (c == '-' || is_digit(c)) {
    r = number_bytes(p, i + 1, n, c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT);
    if (r == -1) return INVALID;
    if (r == -2) {
      st.state = S_NUMBER;
      goto out;
    }
    i = r;
    goto after;
  }
  st.literal = c == 't' ? 0 : c == 'f' ? 1 : c == 'n' ? 2 : -1;
  if (st.literal < 0) {
    fail(ERR_VALUE, i);
    return INVALID;
  }
  st.literal_start = i;
  st.literal_pos = 1;
  r = literal_bytes(p, i + 1, n);
  if (r == -1) return INVALID;
  if (r == -2) {
    st.state = S_LITERAL;
    goto out;
  }
  i = r;
  goto after;

open_array:
  while (is_whitespace(c = p[i])) i++;
  if (i >= n) {
    st.state = S_OPEN_ARRAY;
    goto out;
  }
  if (c == ']') {
    depth--;
    i++;
    goto after;
  }
  goto value;

after:
  if (depth == 0) {
    while (i < n && is_whitespace(p[i])) i++;
    if (i < n) {
      fail(ERR_AFTER_TEXT, i);
      return INVALID;
    }
    st.state = S_AFTER;
    goto out;
  }
  if (result.event_count > MAX_EVENTS - 2) {
    st.state = S_AFTER;
    result.resume = i;
    st.depth = depth;
    return EVENTS_FULL;
  }
  {
    uint32_t flags = stack[depth];
    if (flags & CURRENT_REPORTED) {
      stack[depth] = (uint8_t)(flags & ~CURRENT_REPORTED);
      emit(EV_VALUE, 0, depth, i);
    }
    while (is_whitespace(c = p[i])) i++;
    if (i >= n) {
      st.state = S_AFTER;
      goto out;
    }
    if (c == ',') {
      i++;
      if (flags & IS_OBJECT) goto key;
      goto value;
    }
    if (flags & IS_OBJECT) {
      if (c != '}') {
        fail(ERR_OBJECT_NEXT, i);
        return INVALID;
      }
      if (flags & HAS_REPORTED) emit(EV_OBJECT_END, 0, depth, i);
    } else if (c != ']') {
      fail(ERR_ARRAY_NEXT, i);
      return INVALID;
    }
    depth--;
    i++;
    goto after;
  }

open_object:
  while (is_whitespace(c = p[i])) i++;
  if (i >= n) {
    st.state = S_OPEN_OBJECT;
    goto out;
  }
  if (c == '}') {
    depth--;
    i++;
    goto after;
  }
  goto key_start;

key:
  while (is_whitespace(c = p[i])) i++;
  if (i >= n) {
    st.state = S_KEY;
    goto out;
  }
key_start:
  if (c != '"') {
    fail(ERR_KEY, i);
    return INVALID;
  }
  {
    walk_depth = depth;
    int32_t w = walk(p, i, n);
    depth = walk_depth;
    i = w >> 4;
    switch (w & 15) {
    case W_KEY_SLOW: break;
    case W_COLON: name = -1; goto colon;
    case W_VALUE: goto value;
    case W_MEMBER_VALUE: goto member_value;
    case W_OPEN_OBJECT: goto open_object;
    case W_OPEN_ARRAY: goto open_array;
    case W_AFTER: goto after;
    case W_KEY: goto key;
    case W_STRING_CUT: st.state = S_STRING; goto out;
    case W_NUMBER_CUT: st.state = S_NUMBER; goto out;
    default: return INVALID;
    }
  }
  {
    int32_t start = i + 1;
    escaped = 0;
    r = scan_string(p, start, n);
    if (r == -1) return INVALID;
    if (r == -2) {
      st.key_len = 0;
      st.key_escaped = escaped;
      keep_key_bytes(p, start, n);
      st.state = S_KEY_STRING;
      goto out;
    }
    int32_t length = r - 1 - start;
    uint32_t hash = key_hash((uint32_t)length, p[start], p[r - 2]);
    name = escaped || names.filter[hash] ? match_name(p + start, length, escaped) : -1;
    i = r;
  }

colon:
  while (is_whitespace(c = p[i])) i++;
  if (i >= n) {
    st.reported_name = name;
    st.state = S_COLON;
    goto out;
  }
  if (c != ':') {
    fail(ERR_COLON, i);
    return INVALID;
  }
  i++;
  if (name < 0) goto value;
  st.reported_name = name;
  stack[depth] |= HAS_REPORTED | CURRENT_REPORTED;

member_value:
  if (result.event_count > MAX_EVENTS - 2) {
    st.state = S_MEMBER_VALUE;
    result.resume = i;
    st.depth = depth;
    return EVENTS_FULL;
  }
  while (is_whitespace(c = p[i])) i++;
  if (i >= n) {
    st.state = S_MEMBER_VALUE;
    goto out;
  }
  emit(EV_MEMBER, st.reported_name, depth, i);
  goto value;

window_end: /* a token cut by the previous window goes on past this one too: the state stays */
out:
  st.depth = depth;
  /* Offsets into this window become offsets into the next one (only those still needed). */
  if (st.state == S_LITERAL) st.literal_start -= n;
  else if ((st.state == S_STRING || st.state == S_KEY_STRING) && st.str_sub != STR_PLAIN) st.str_seq_start -= n;
  return OK;
}

/* ---- lone members: the response patch's common insertion, done here ------------------------------ */

/*
 * src/aliases/patch-json.ts inserts `,"alias":<copy of the canonical value>` just before the `}` of
 * every object with a canonical member and no alias member. Its commonest case by far (a mission's
 * `metadata`): an object whose one reported member is canonical, with the member, its value's end and
 * the object's end in a row in the same window (three events at one depth). `insert_lone` does those
 * insertions itself, from the events of the last `scan` call, while the handler's state lets them be
 * done without it: it copies the window's bytes up to each `}`, the pair's prefix and the value into
 * `staged`, and json-scan.ts hands the handler the staged bytes with one record per insertion. Measured
 * on the bench's 1,000-item list: the insertions in JavaScript (a `Buffer.copy` or `copyWithin` call
 * per piece, 60–80 ns each whatever its length, and the handler's calls) cost ~300 µs of the ~830 µs
 * its patch took; with the runs inserted here the patch takes ~0.88× the time (bench/RESULTS.md,
 * twenty-seventh session).
 *
 * Names alternate canonical (even index) and alias (odd), pair = index / 2 (src/aliases/rename-names.ts).
 */
#define MAX_PAIRS 30        /* patch-json.ts MAX_PAIRS */
#define PREFIX_BYTES 65536  /* the prefixes' bytes, together */
#define STAGED 262144       /* most output bytes staged per call */

typedef struct {
  /* Set by the handler before each call (json-scan.ts's L_* indexes). */
  int32_t top_frame_depth; /* depth of the handler's innermost object with a reported member, or -1 */
  int32_t room;            /* longest value that may be inserted here (bytes) */
  int32_t copy_from;       /* window offset of the first byte not in the output yet (≥ 0) */
  int32_t slack;           /* an insertion before the `}` at window offset c may copy at most slack + c
                              bytes; decreased by each copy */
  /* Reported. */
  int32_t staged_length;   /* bytes in `staged`: the window from copy_from to copy_end with the insertions */
  int32_t inserted;        /* records */
  int32_t copied;          /* value bytes copied */
  int32_t copy_end;        /* window offset after the last `}` staged (copy_from when none) */
  /* The prefixes (`,"alias":` as JSON), by pair: json-scan.ts writes them. */
  int32_t pair_count;
  int32_t prefix_offset[MAX_PAIRS], prefix_length[MAX_PAIRS];
  int32_t records[MAX_EVENTS]; /* per insertion: pair, window offset of the `}`, piece length */
  uint8_t prefix_bytes[PREFIX_BYTES];
} Lone;

static Lone lone;
static uint8_t staged[STAGED];

Lone *lone_address(void) { return &lone; }
uint8_t *staged_address(void) { return staged; }

/*
 * Inserts the lone members of events [first, count) in a row, from `first` on, and returns the index of
 * the first event it left (`first` when none): it stops at the first event that does not begin a lone
 * member it may insert — an alias, a member whose object had another reported member (or is the
 * handler's innermost one), one whose value is longer than `room` or would outgrow `slack`, or
 * output past `STAGED`.
 */
int32_t insert_lone(int32_t first, int32_t count) {
  int32_t k = first;
  int32_t from = lone.copy_from;
  int32_t at = 0;
  int32_t records = 0;
  int32_t copied = 0;
  int64_t slack = lone.slack;
  while (k + 2 < count) {
    const int32_t *e = events + k * 3;
    int32_t head = e[0], depth = e[1];
    if ((head & 3) != EV_MEMBER || (e[3] & 3) != EV_VALUE || (e[6] & 3) != EV_OBJECT_END) break;
    if (e[4] != depth || e[7] != depth || depth == lone.top_frame_depth) break;
    int32_t name = head >> 2, pair = name >> 1;
    if ((name & 1) != 0 || pair >= lone.pair_count) break;
    int32_t start = e[2], end = e[5], close = e[8];
    int32_t length = end - start;
    if (start < from || length > lone.room || (int64_t)length > slack + close) break;
    int32_t prefix = lone.prefix_length[pair];
    if ((int64_t)at + (close - from) + prefix + length > STAGED) break;
    __builtin_memcpy(staged + at, input + from, (uint32_t)(close - from));
    at += close - from;
    __builtin_memcpy(staged + at, lone.prefix_bytes + lone.prefix_offset[pair], (uint32_t)prefix);
    at += prefix;
    __builtin_memcpy(staged + at, input + start, (uint32_t)length);
    at += length;
    from = close;
    slack -= length;
    copied += length;
    lone.records[records * 3] = pair;
    lone.records[records * 3 + 1] = close;
    lone.records[records * 3 + 2] = prefix + length;
    records++;
    k += 3;
  }
  lone.copy_end = from;
  lone.staged_length = at;
  lone.inserted = records;
  lone.copied = copied;
  return k;
}
