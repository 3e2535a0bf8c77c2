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
 * Build: `node src/aliases/json-scan-build.ts` (clang ≥ 16 with wasm-ld; no libc, no allocator) writes
 * src/aliases/json-scan-wasm.ts, the module as base64 with the SHA-256 of this file, which
 * test/unit/aliases/json-scan-wasm.test.ts compares: change this file, rebuild, commit both.
 *
 * Memory: static regions below `__heap_base` (input window, events, key and names buffers, state); the
 * nesting stack from `__heap_base` on, one byte per level, grown with `memory.grow` as deep as the
 * scanner's `max_nesting` allows. Nothing else is allocated. No recursion.
 */
#include <stdint.h>
#include <wasm_simd128.h>

/* Must match json-scan.ts. */
#define WINDOW 65536       /* most bytes scanned per call */
#define PAD 64             /* zero bytes after the window: skip_plain's 48-byte loads stay inside */
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

/* A hash of a key's length, first and last byte (the empty key: 0). */
static inline uint32_t key_hash(uint32_t length, uint32_t first, uint32_t last) {
  return (length * 67 + first * 13 + last) & (FILTER_SIZE - 1);
}

static State st;
static Result result;
static Names names;
static uint8_t input[WINDOW + PAD] __attribute__((aligned(16)));
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
    names.filter[length == 0 ? 0 : key_hash((uint32_t)length, name[0], name[length - 1])] = 1;
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
    if (c == '\\') {
      escaped = 1;
      if (i + 6 > n) break;
      uint32_t e = p[i + 1];
      if (is_simple_escape(e)) {
        i += 2;
      } else if (e == 'u' && is_hex(p[i + 2]) && is_hex(p[i + 3]) && is_hex(p[i + 4]) && is_hex(p[i + 5])) {
        i += 6;
      } else {
        return fail(ERR_ESCAPE, i);
      }
    } else if (c < 0x20) {
      return fail(ERR_CONTROL, i);
    } else {
      if (i + 4 > n) break;
      int32_t length = utf8_length(p, i);
      if (length == 0) return fail(ERR_UTF8, i);
      i += length;
    }
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

/* Keeps a cut key's bytes for the comparison (only its length beyond KEY_CAP: it cannot match). */
static void keep_key_bytes(const uint8_t *p, int32_t from, int32_t to) {
  for (int32_t k = from; k < to && st.key_len + (k - from) < KEY_CAP; k++) key_bytes[st.key_len + (k - from)] = p[k];
  st.key_len += to - from;
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
    uint32_t hash = length == 0 ? 0 : key_hash((uint32_t)length, p[start], p[r - 2]);
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
