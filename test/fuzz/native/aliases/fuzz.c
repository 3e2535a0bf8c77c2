/*
 * libFuzzer targets for src/aliases/json-scan.c (README.md). Built three times, -DTARGET=:
 *   1 split:     the text whole, then cut at the input's chunk offsets with another scanner taking turns:
 *                the same verdict, error kind and offset, and events.
 *   2 reference: the cut scan against reference.c (RFC 8259 + RFC 3629): the same verdict, error offset
 *                (and kind where the reference names one) and events.
 *   3 offsets:   every reported offset lies inside the text and in order, members nest, each member's
 *                value start leads back (as scanJson's keyTokenStart does) to a key that decodes to its
 *                name, each object end is a '}', each value end follows its value.
 * Input: 4 control bytes (driver.c's plan_from), then the text.
 */
#include <stdlib.h>
#include <string.h>

#include "driver.h"

#ifndef TARGET
#error "build with -DTARGET=1, 2 or 3"
#endif

static int same(const Outcome *a, const Outcome *b, int kinds) {
  if (a->status != b->status || a->error_offset != b->error_offset || a->count != b->count) return 0;
  if (kinds && a->error_kind != b->error_kind) return 0;
  for (size_t k = 0; k < a->count; k++) {
    const Event *x = &a->events[k], *y = &b->events[k];
    if (x->kind != y->kind || x->depth != y->depth || x->offset != y->offset) return 0;
    if (x->kind == 0 && x->name != y->name) return 0;
  }
  return 1;
}

#if TARGET == 3
static int ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int hexval(uint8_t c) {
  return c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
}

/* Decodes a (validated) key's inside into out; -1 with a lone surrogate. */
static long decode(const uint8_t *s, size_t n, uint8_t *out) {
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    if (s[i] != '\\') {
      out[o++] = s[i++];
      continue;
    }
    uint8_t e = s[i + 1];
    if (e != 'u') {
      out[o++] = e == 'b' ? 8 : e == 'f' ? 12 : e == 'n' ? 10 : e == 'r' ? 13 : e == 't' ? 9 : e;
      i += 2;
      continue;
    }
    uint32_t cp = 0;
    for (int k = 0; k < 4; k++) cp = cp * 16 + (uint32_t)hexval(s[i + 2 + k]);
    i += 6;
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (i + 6 > n || s[i] != '\\' || s[i + 1] != 'u') return -1;
      uint32_t lo = 0;
      for (int k = 0; k < 4; k++) lo = lo * 16 + (uint32_t)hexval(s[i + 2 + k]);
      if (lo < 0xdc00 || lo > 0xdfff) return -1;
      cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      i += 6;
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
      return -1;
    }
    if (cp < 0x80) out[o++] = (uint8_t)cp;
    else if (cp < 0x800) out[o++] = (uint8_t)(0xc0 | cp >> 6), out[o++] = (uint8_t)(0x80 | (cp & 0x3f));
    else if (cp < 0x10000)
      out[o++] = (uint8_t)(0xe0 | cp >> 12), out[o++] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)),
      out[o++] = (uint8_t)(0x80 | (cp & 0x3f));
    else
      out[o++] = (uint8_t)(0xf0 | cp >> 18), out[o++] = (uint8_t)(0x80 | (cp >> 12 & 0x3f)),
      out[o++] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)), out[o++] = (uint8_t)(0x80 | (cp & 0x3f));
  }
  return (long)o;
}

static void check_offsets(const uint8_t *p, size_t n, const Plan *plan, const Outcome *o) {
  if (o->status != 0 && (o->error_offset < 0 || o->error_offset > (int64_t)n))
    mismatch("error offset outside the text", p, n, plan, o, NULL);
  if (o->status == 0 && o->error_offset != -1) mismatch("valid text with an error offset", p, n, plan, o, NULL);
  int64_t last = 0;
  int32_t open_depth[4096];
  int64_t open_at[4096];
  size_t open = 0;
  int32_t max_depth = plan->max_nesting;
  for (size_t k = 0; k < o->count; k++) {
    const Event *e = &o->events[k];
    if (e->offset < last) mismatch("events out of order", p, n, plan, o, NULL);
    last = e->offset;
    if (e->depth < 1 || e->depth > max_depth) mismatch("event depth out of range", p, n, plan, o, NULL);
    if (o->status != 0 && e->offset > o->error_offset && e->kind != 1)
      mismatch("event after the error", p, n, plan, o, NULL);
    if (e->kind == 0) {
      if (e->offset >= (int64_t)n) mismatch("member outside the text", p, n, plan, o, NULL);
      if (e->name < 0 || e->name >= NAME_COUNT) mismatch("member name out of range", p, n, plan, o, NULL);
      if (open > 0 && open_depth[open - 1] >= e->depth) mismatch("member inside a member of its depth", p, n, plan, o, NULL);
      /* The patcher's way back: whitespace, ':', whitespace, the key's closing quote, its opening one. */
      size_t i = (size_t)e->offset;
      while (i > 0 && ws(p[i - 1])) i--;
      if (i == 0 || p[i - 1] != ':') mismatch("no ':' before a member's value", p, n, plan, o, NULL);
      i--;
      while (i > 0 && ws(p[i - 1])) i--;
      size_t key_end = i;
      if (key_end < 2 || p[key_end - 1] != '"') mismatch("no key before a member's ':'", p, n, plan, o, NULL);
      size_t q = key_end - 2, key_start = (size_t)-1;
      for (;; q--) {
        if (p[q] == '"') {
          size_t b = 0;
          while (b < q && p[q - 1 - b] == '\\') b++;
          if (b % 2 == 0) {
            key_start = q;
            break;
          }
        }
        if (q == 0) break;
      }
      if (key_start == (size_t)-1) mismatch("no opening quote of a member's key", p, n, plan, o, NULL);
      uint8_t *decoded = malloc(key_end - key_start + 16);
      long length = decode(p + key_start + 1, key_end - 1 - key_start - 1, decoded);
      if (length != (long)strlen(NAMES[e->name]) || memcmp(decoded, NAMES[e->name], (size_t)length) != 0) {
        free(decoded);
        mismatch("a member's key is not its name", p, n, plan, o, NULL);
      }
      free(decoded);
      uint8_t c = p[e->offset];
      if (!strchr("\"{[-0123456789tfn", c) || c == 0) {
        /* Reported at the value's first byte even when that byte turns out invalid: then the error is there. */
        if (!(o->status == 1 && o->error_offset == e->offset)) mismatch("member at no value", p, n, plan, o, NULL);
      }
      if (open == 4096) mismatch("too many open members", p, n, plan, o, NULL);
      open_depth[open] = e->depth;
      open_at[open] = e->offset;
      open++;
    } else if (e->kind == 1) {
      if (e->offset > (int64_t)n) mismatch("value end outside the text", p, n, plan, o, NULL);
      if (open == 0 || open_depth[open - 1] != e->depth) mismatch("value end with no member", p, n, plan, o, NULL);
      if (e->offset <= open_at[open - 1]) mismatch("value ends before it starts", p, n, plan, o, NULL);
      uint8_t last_byte = p[e->offset - 1];
      if (ws(last_byte) || last_byte == ',' || last_byte == ':')
        mismatch("value end after whitespace or a separator", p, n, plan, o, NULL);
      open--;
    } else if (e->kind == 2) {
      if (e->offset >= (int64_t)n || p[e->offset] != '}') mismatch("object end at no '}'", p, n, plan, o, NULL);
      if (open > 0 && open_depth[open - 1] >= e->depth) mismatch("object end inside a member", p, n, plan, o, NULL);
    } else {
      mismatch("event of no kind", p, n, plan, o, NULL);
    }
  }
  if (o->status == 0 && open != 0) mismatch("valid text with a member left open", p, n, plan, o, NULL);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  const uint8_t *text = data + 4;
  size_t len = size - 4;
  Plan plan;
  plan_from(data, len, &plan);
  Outcome cut = {0};
  scan_text(text, len, plan.cuts, plan.ncuts, plan.max_nesting, plan.interleave, &cut);
#if TARGET == 1
  Outcome whole = {0};
  scan_text(text, len, NULL, 0, plan.max_nesting, 0, &whole);
  if (!same(&whole, &cut, 1)) mismatch("whole and cut differ", text, len, &plan, &whole, &cut);
  outcome_free(&whole);
#elif TARGET == 2
  Outcome ref = {0};
  reference_scan(text, len, plan.max_nesting, &ref);
  int kinds = ref.status == 1 && ref.error_kind > 0;
  if (!same(&ref, &cut, kinds)) mismatch("reference and scanner differ", text, len, &plan, &ref, &cut);
  if (ref.status == 1 && ref.error_kind < 0 && cut.error_kind < 100)
    mismatch("reference: cut short; scanner: an error in the text", text, len, &plan, &ref, &cut);
  outcome_free(&ref);
#elif TARGET == 3
  check_offsets(text, len, &plan, &cut);
#endif
  outcome_free(&cut);
  plan_free(&plan);
  return 0;
}
