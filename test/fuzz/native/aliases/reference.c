/*
 * An independent strict JSON reference for the harnesses: RFC 8259 §2–§7 by recursive descent over the
 * whole text, strings checked as RFC 3629 UTF-8 code point by code point, keys decoded and compared with
 * NAMES. It follows json-scan.ts's documented conventions for where an error is (the first byte that
 * cannot be accepted; an escape's backslash; a UTF-8 sequence's first byte; a literal's first byte; the
 * text's length when it is cut short) and which events it reports, when (a member at its value's first
 * byte once that byte is there; a value's end once a byte after a number, or the last byte of any other
 * value, is there; an object's end at its '}').
 */
#include <stdlib.h>
#include <string.h>

#include "driver.h"

enum { ERR_AFTER_TEXT = 1, ERR_OBJECT_NEXT, ERR_ARRAY_NEXT, ERR_KEY, ERR_COLON, ERR_LITERAL, ERR_VALUE,
       ERR_CONTROL, ERR_ESCAPE, ERR_UTF8, ERR_DIGIT, ERR_DIGIT_DOT, ERR_DIGIT_EXP };

typedef struct {
  const uint8_t *p;
  size_t n, i;
  int32_t max_nesting;
  Outcome *out;
  int failed;
  uint8_t key[4096];
  size_t key_len;
  int key_lone_surrogate;
} Ref;

static int ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static void skip_ws(Ref *r) {
  while (r->i < r->n && ws(r->p[r->i])) r->i++;
}

/* An error at `at`; at the text's end it is the end's (length) offset with the state's code. */
static int fail(Ref *r, int32_t kind, size_t at) {
  if (!r->failed) {
    r->failed = 1;
    r->out->status = 1;
    r->out->error_kind = kind;
    r->out->error_offset = (int64_t)at;
  }
  return 0;
}
/* Truncated: json-scan.ts reports the end of the text (kind 0 here: compared by offset only). */
static int truncated(Ref *r) { return fail(r, -1, r->n); }

static int hexval(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static void key_put(Ref *r, uint32_t cp) {
  uint8_t b[4];
  size_t k = 0;
  if (cp < 0x80) b[k++] = (uint8_t)cp;
  else if (cp < 0x800) b[k++] = (uint8_t)(0xc0 | cp >> 6), b[k++] = (uint8_t)(0x80 | (cp & 0x3f));
  else if (cp < 0x10000)
    b[k++] = (uint8_t)(0xe0 | cp >> 12), b[k++] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)), b[k++] = (uint8_t)(0x80 | (cp & 0x3f));
  else
    b[k++] = (uint8_t)(0xf0 | cp >> 18), b[k++] = (uint8_t)(0x80 | (cp >> 12 & 0x3f)),
    b[k++] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)), b[k++] = (uint8_t)(0x80 | (cp & 0x3f));
  for (size_t j = 0; j < k; j++) {
    if (r->key_len < sizeof r->key) r->key[r->key_len] = b[j];
    r->key_len++;
  }
}

/* A string from its opening quote at r->i; the decoded text into r->key when `is_key`. */
static int string(Ref *r, int is_key) {
  r->i++;
  r->key_len = 0;
  r->key_lone_surrogate = 0;
  int32_t pending_high = -1; /* a high surrogate escape waiting for its low one */
  for (;;) {
    if (r->i >= r->n) return truncated(r);
    uint8_t c = r->p[r->i];
    if (c == '"') {
      if (pending_high >= 0) r->key_lone_surrogate = 1;
      r->i++;
      return 1;
    }
    if (c < 0x20) return fail(r, ERR_CONTROL, r->i);
    if (c == '\\') {
      size_t at = r->i;
      if (at + 1 >= r->n) return truncated(r);
      uint8_t e = r->p[at + 1];
      const char *simple = strchr("\"\\/bfnrt", e);
      if (e != 0 && simple != NULL) {
        static const uint8_t decoded[] = {'"', '\\', '/', 8, 12, 10, 13, 9};
        if (pending_high >= 0) r->key_lone_surrogate = 1, pending_high = -1;
        key_put(r, decoded[simple - "\"\\/bfnrt"]);
        r->i = at + 2;
        continue;
      }
      if (e != 'u') return fail(r, ERR_ESCAPE, at);
      uint32_t cp = 0;
      for (size_t k = 0; k < 4; k++) {
        if (at + 2 + k >= r->n) return truncated(r);
        int h = hexval(r->p[at + 2 + k]);
        if (h < 0) return fail(r, ERR_ESCAPE, at);
        cp = cp * 16 + (uint32_t)h;
      }
      r->i = at + 6;
      if (cp >= 0xdc00 && cp <= 0xdfff && pending_high >= 0) {
        key_put(r, 0x10000 + (((uint32_t)pending_high - 0xd800) << 10) + (cp - 0xdc00));
        pending_high = -1;
      } else {
        if (pending_high >= 0) r->key_lone_surrogate = 1, pending_high = -1;
        if (cp >= 0xd800 && cp <= 0xdbff) pending_high = (int32_t)cp;
        else if (cp >= 0xdc00 && cp <= 0xdfff) r->key_lone_surrogate = 1;
        else key_put(r, cp);
      }
      continue;
    }
    if (pending_high >= 0) r->key_lone_surrogate = 1, pending_high = -1;
    if (c < 0x80) {
      key_put(r, c);
      r->i++;
      continue;
    }
    /* A UTF-8 sequence: its length from the first byte, each continuation byte in its range. */
    size_t at = r->i, need;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) need = 1, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) need = 2, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) need = 3, cp = c & 0x07;
    else return fail(r, ERR_UTF8, at);
    for (size_t k = 1; k <= need; k++) {
      if (at + k >= r->n) return truncated(r);
      uint8_t b = r->p[at + k];
      if ((b & 0xc0) != 0x80) return fail(r, ERR_UTF8, at);
      cp = cp << 6 | (b & 0x3f);
      /* The second byte's range decides overlong forms, surrogates and > U+10FFFF (RFC 3629 §4). */
      if (k == 1) {
        uint32_t lo = 0x80, hi = 0xbf;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
        if (b < lo || b > hi) return fail(r, ERR_UTF8, at);
      }
    }
    key_put(r, cp);
    r->i = at + need + 1;
  }
  (void)is_key;
}

static int number(Ref *r) {
  if (r->p[r->i] == '-') {
    r->i++;
    if (r->i >= r->n) return truncated(r);
  }
  uint8_t c = r->p[r->i];
  if (c == '0') r->i++;
  else if (c >= '1' && c <= '9')
    while (r->i < r->n && r->p[r->i] >= '0' && r->p[r->i] <= '9') r->i++;
  else return fail(r, ERR_DIGIT, r->i);
  if (r->i < r->n && r->p[r->i] == '.') {
    r->i++;
    if (r->i >= r->n) return truncated(r);
    if (!(r->p[r->i] >= '0' && r->p[r->i] <= '9')) return fail(r, ERR_DIGIT_DOT, r->i);
    while (r->i < r->n && r->p[r->i] >= '0' && r->p[r->i] <= '9') r->i++;
  }
  if (r->i < r->n && (r->p[r->i] == 'e' || r->p[r->i] == 'E')) {
    r->i++;
    if (r->i >= r->n) return truncated(r);
    if (r->p[r->i] == '+' || r->p[r->i] == '-') {
      r->i++;
      if (r->i >= r->n) return truncated(r);
    }
    if (!(r->p[r->i] >= '0' && r->p[r->i] <= '9')) return fail(r, ERR_DIGIT_EXP, r->i);
    while (r->i < r->n && r->p[r->i] >= '0' && r->p[r->i] <= '9') r->i++;
  }
  /* A number at the very end: nobody knows yet that it ended. */
  return r->i < r->n ? 1 : 2;
}

static int value(Ref *r, int32_t depth);

/* The member's name index, or -1. */
static int32_t match(Ref *r) {
  if (r->key_lone_surrogate || r->key_len > sizeof r->key) return -1;
  for (int32_t k = 0; k < NAME_COUNT; k++)
    if (strlen(NAMES[k]) == r->key_len && memcmp(NAMES[k], r->key, r->key_len) == 0) return k;
  return -1;
}

static int container(Ref *r, int32_t depth) {
  int is_object = r->p[r->i] == '{';
  if (depth >= r->max_nesting) {
    if (!r->failed) {
      r->failed = 1;
      r->out->status = 2;
      r->out->error_kind = 0;
      r->out->error_offset = (int64_t)r->i;
    }
    return 0;
  }
  depth++;
  r->i++;
  skip_ws(r);
  if (r->i >= r->n) return truncated(r);
  if (r->p[r->i] == (is_object ? '}' : ']')) {
    r->i++;
    return 1;
  }
  int reported = 0;
  for (;;) {
    int32_t name = -1;
    if (is_object) {
      if (r->i >= r->n) return truncated(r);
      if (r->p[r->i] != '"') return fail(r, ERR_KEY, r->i);
      if (!string(r, 1)) return 0;
      name = match(r);
      skip_ws(r);
      if (r->i >= r->n) return truncated(r);
      if (r->p[r->i] != ':') return fail(r, ERR_COLON, r->i);
      r->i++;
      skip_ws(r);
      if (r->i >= r->n) return truncated(r);
      if (name >= 0) {
        outcome_push(r->out, 0, name, depth, (int64_t)r->i);
        reported = 1;
      }
    }
    int v = value(r, depth);
    if (!v) return 0;
    if (v == 2) return truncated(r);
    if (name >= 0) outcome_push(r->out, 1, 0, depth, (int64_t)r->i);
    skip_ws(r);
    if (r->i >= r->n) return truncated(r);
    uint8_t c = r->p[r->i];
    if (c == ',') {
      r->i++;
      skip_ws(r);
      if (r->i >= r->n) return truncated(r);
      continue;
    }
    if (c != (is_object ? '}' : ']')) return fail(r, is_object ? ERR_OBJECT_NEXT : ERR_ARRAY_NEXT, r->i);
    if (reported) outcome_push(r->out, 2, 0, depth, (int64_t)r->i);
    r->i++;
    return 1;
  }
}

/* A value at r->i (whitespace skipped, r->i < n): 1, 2 for a number at the end, 0 on an error. */
static int value(Ref *r, int32_t depth) {
  uint8_t c = r->p[r->i];
  if (c == '"') return string(r, 0);
  if (c == '{' || c == '[') return container(r, depth);
  if (c == '-' || (c >= '0' && c <= '9')) return number(r);
  const char *literal = c == 't' ? "true" : c == 'f' ? "false" : c == 'n' ? "null" : NULL;
  if (literal == NULL) return fail(r, ERR_VALUE, r->i);
  size_t start = r->i, length = strlen(literal);
  for (size_t k = 0; k < length; k++) {
    if (start + k >= r->n) return fail(r, -1, start); /* cut: at its first byte */
    if (r->p[start + k] != (uint8_t)literal[k]) return fail(r, ERR_LITERAL, start);
  }
  r->i = start + length;
  return 1;
}

void reference_scan(const uint8_t *text, size_t len, int32_t max_nesting, Outcome *out) {
  outcome_reset(out);
  Ref *r = calloc(1, sizeof *r);
  r->p = text;
  r->n = len;
  r->max_nesting = max_nesting;
  r->out = out;
  skip_ws(r);
  if (r->i >= r->n) {
    truncated(r);
  } else if (value(r, 0)) {
    skip_ws(r);
    if (r->i < r->n) fail(r, ERR_AFTER_TEXT, r->i);
  }
  free(r);
}
