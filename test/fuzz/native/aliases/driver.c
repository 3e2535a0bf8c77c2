/* The harnesses' port of json-scan.ts's use of the scanner; see driver.h. */
#include "driver.h"

#include <sanitizer/asan_interface.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* json-scan.c's exports and constants (json-scan.ts's copies). */
uint8_t *input_address(void);
int32_t *events_address(void);
int32_t *state_address(void);
int32_t *result_address(void);
int32_t *names_address(void);
uint8_t *key_address(void);
uint8_t *stack_address(void);
void names_loaded(void);
int32_t scan(int32_t from, int32_t n, int32_t checked_from, int32_t checked_to);

#define WINDOW 65536
#define PAD 64
#define KEY_CAP 1536
#define MAX_KEY_NAMES 256
enum { F_STATE, F_DEPTH, F_MAX_NESTING, F_REPORTED_NAME, F_NUM_SUB = 9, F_LITERAL_POS = 11, F_KEY_LEN = 13,
       STATE_FIELDS = 15 };
enum { R_ERROR_KIND, R_ERROR_OFFSET, R_EVENT_COUNT, R_RESUME };
enum { S_VALUE = 0, S_AFTER = 1, S_NUMBER = 9, S_KEY_STRING = 8 };
enum { ST_OK = 0, ST_INVALID = 1, ST_TOO_DEEP = 2, ST_EVENTS_FULL = 4 };

const char *const NAMES[NAME_COUNT] = {
    "metadata", "requiredMetadataTypes", "tags", "requiredTags", "a", "\xc3\xa9", "\xf0\x9f\x98\x80", "",
};

/* ---- the instance's memory: the nesting stack from __heap_base, grown page by page ---- */

#define MAX_PAGES 3
#define HEAP_SLACK 200 /* levels before the first growth */
static uint8_t *region; /* MAX_PAGES pages, 64 KiB-aligned; __heap_base is HEAP_SLACK before page 1 */
static size_t pages = 1;

uint8_t *fuzz_heap_base(void) { return region + 65536 - HEAP_SLACK; }
size_t fuzz_memory_size(void) { return (size_t)((uint32_t)(uintptr_t)region / 65536u) + pages; }
static size_t capacity(void) { return pages * 65536 - 65536 + HEAP_SLACK; }
size_t fuzz_memory_grow(size_t more) {
  if (pages + more > MAX_PAGES) return (size_t)-1;
  size_t before = fuzz_memory_size();
  pages += more;
  ASAN_UNPOISON_MEMORY_REGION(fuzz_heap_base(), capacity());
  return before;
}

void driver_init(void) {
  if (region != NULL) return;
  region = aligned_alloc(65536, MAX_PAGES * 65536);
  ASAN_POISON_MEMORY_REGION(region, MAX_PAGES * 65536);
  ASAN_UNPOISON_MEMORY_REGION(fuzz_heap_base(), capacity());
  /* The names, as KeyNames and JsonStreamScanner.#restore write them. */
  int32_t *names = names_address();
  uint8_t *bytes = (uint8_t *)names + (2 + 2 * MAX_KEY_NAMES) * 4 + 4096;
  int32_t at = 0;
  names[0] = NAME_COUNT;
  for (int k = 0; k < NAME_COUNT; k++) {
    int32_t length = (int32_t)strlen(NAMES[k]);
    names[2 + k] = at;
    names[2 + MAX_KEY_NAMES + k] = length;
    memcpy(bytes + at, NAMES[k], (size_t)length);
    at += length;
  }
  names_loaded();
}

/* ---- outcomes ---- */

void outcome_reset(Outcome *o) {
  o->status = 0;
  o->error_kind = 0;
  o->error_offset = -1;
  o->count = 0;
}

void outcome_free(Outcome *o) {
  free(o->events);
  o->events = NULL;
  o->count = o->capacity = 0;
}

void outcome_push(Outcome *o, int32_t kind, int32_t name, int32_t depth, int64_t offset) {
  if (o->count == o->capacity) {
    o->capacity = o->capacity ? o->capacity * 2 : 64;
    o->events = realloc(o->events, o->capacity * sizeof(Event));
  }
  o->events[o->count++] = (Event){kind, name, depth, offset};
}

/* ---- strict UTF-8 (RFC 3629 §4), written apart from json-scan.c's ---- */

int is_utf8(const uint8_t *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint32_t c = p[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    uint32_t cp, need;
    if ((c & 0xe0) == 0xc0) cp = c & 0x1f, need = 1;
    else if ((c & 0xf0) == 0xe0) cp = c & 0x0f, need = 2;
    else if ((c & 0xf8) == 0xf0) cp = c & 0x07, need = 3;
    else return 0;
    if (i + need >= n) return 0; /* cut by the end */
    for (uint32_t k = 1; k <= need; k++) {
      if ((p[i + k] & 0xc0) != 0x80) return 0;
      cp = cp << 6 | (p[i + k] & 0x3f);
    }
    static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < least[need] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    i += need + 1;
  }
  return 1;
}

/* ---- the scanner objects of json-scan.ts ---- */

typedef struct {
  int32_t saved[STATE_FIELDS];
  uint8_t *stack;
  size_t stack_length;
  uint8_t key[KEY_CAP];
  int64_t base;
  int spent;
} Scanner;

static Scanner *owner;

static void scanner_init(Scanner *s, int32_t max_nesting) {
  memset(s, 0, sizeof *s);
  s->saved[F_STATE] = S_VALUE;
  s->saved[F_MAX_NESTING] = max_nesting;
  s->saved[F_REPORTED_NAME] = -1;
  s->stack_length = 16;
  s->stack = calloc(16, 1);
}

static void scanner_free(Scanner *s) {
  if (owner == s) owner = NULL;
  free(s->stack);
}

static void save(Scanner *s) {
  memcpy(s->saved, state_address(), sizeof s->saved);
  size_t levels = (size_t)s->saved[F_DEPTH] + 1;
  if (levels > s->stack_length) {
    size_t length = levels > s->stack_length * 2 ? levels : s->stack_length * 2;
    s->stack = realloc(s->stack, length);
    s->stack_length = length;
  }
  memcpy(s->stack, stack_address(), levels);
  if (s->saved[F_STATE] == S_KEY_STRING) {
    int32_t length = s->saved[F_KEY_LEN] < KEY_CAP ? s->saved[F_KEY_LEN] : KEY_CAP;
    memcpy(s->key, key_address(), (size_t)length);
  }
}

static void restore(Scanner *s) {
  memcpy(state_address(), s->saved, sizeof s->saved);
  memcpy(stack_address(), s->stack, (size_t)s->saved[F_DEPTH] + 1);
  if (s->saved[F_STATE] == S_KEY_STRING) {
    int32_t length = s->saved[F_KEY_LEN] < KEY_CAP ? s->saved[F_KEY_LEN] : KEY_CAP;
    memcpy(key_address(), s->key, (size_t)length);
  }
}

static void acquire(Scanner *s) {
  if (owner != s) {
    if (owner != NULL) save(owner);
    restore(s);
    owner = s;
  }
}

/* Copies a window into `input`; the stale bytes past its padding are poisoned: reading them is a bug. */
static void load(Scanner *s, const uint8_t *window, int32_t n) {
  acquire(s);
  uint8_t *input = input_address();
  ASAN_UNPOISON_MEMORY_REGION(input, WINDOW + PAD);
  memcpy(input, window, (size_t)n);
  ASAN_POISON_MEMORY_REGION(input + n + PAD, (size_t)(WINDOW - n));
}

/* json-scan.ts's checkedUtf8. */
static void checked_utf8(const uint8_t *w, int32_t n, int32_t *from_out, int32_t *to_out) {
  int32_t from = 0;
  while (from < 3 && from < n && (w[from] & 0xc0) == 0x80) from++;
  int32_t to = n;
  for (int32_t k = n - 1; k >= n - 4 && k >= from; k--) {
    uint8_t c = w[k];
    if ((c & 0xc0) == 0x80) continue;
    if (c >= 0xc0 && k + (c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2) > n) to = k;
    break;
  }
  if (from < to && is_utf8(w + from, (size_t)(to - from))) {
    *from_out = from;
    *to_out = to;
  } else {
    *from_out = *to_out = 0;
  }
}

static void finish(Scanner *s) {
  s->spent = 1;
  if (owner == s) owner = NULL;
}

/* A second scanner that takes turns with the one under test: a text that leaves a deep state behind. */
static Scanner other;
static const char OTHER_TEXT[] = "[[[{\"metadata\":[{\"tags\":\"\\u00e9\xc3\xa9";
static void other_turn(void) {
  static int started;
  if (!started) {
    scanner_init(&other, 1000);
    started = 1;
  }
  if (other.spent) {
    scanner_free(&other);
    scanner_init(&other, 1000);
  }
  int32_t n = (int32_t)sizeof OTHER_TEXT - 1;
  load(&other, (const uint8_t *)OTHER_TEXT, n);
  int32_t from, to;
  checked_utf8((const uint8_t *)OTHER_TEXT, n, &from, &to);
  int32_t status = scan(0, n, from, to);
  if (status != ST_OK) finish(&other);
  other.spent = 1; /* start over next time: its text is one chunk */
  save(&other);
  owner = NULL;
  /* Leave junk where the scanner under test keeps nothing across turns. */
  int32_t *result = result_address();
  result[R_ERROR_KIND] = 77;
  result[R_ERROR_OFFSET] = -77;
  result[R_RESUME] = -1;
}

/* JsonStreamScanner.write. Returns 0 to go on. */
static int write_chunk(Scanner *s, const uint8_t *text, size_t length, int interleave, Outcome *out) {
  if (s->spent) return 1;
  for (size_t start = 0; start < length; start += WINDOW) {
    int32_t n = (int32_t)(length - start < WINDOW ? length - start : WINDOW);
    int64_t window_base = s->base + (int64_t)start;
    load(s, text + start, n);
    int32_t utf8_from, utf8_to;
    checked_utf8(text + start, n, &utf8_from, &utf8_to);
    int32_t from = 0;
    for (;;) {
      int32_t status = scan(from, n, utf8_from, utf8_to);
      int32_t *result = result_address();
      int32_t count = result[R_EVENT_COUNT];
      int32_t resume = result[R_RESUME], error_kind = result[R_ERROR_KIND], error_offset = result[R_ERROR_OFFSET];
      const int32_t *events = events_address();
      for (int32_t k = 0; k < count * 3; k += 3)
        outcome_push(out, events[k] & 3, events[k] >> 2, events[k + 1], window_base + events[k + 2]);
      if (count > 0 && interleave) {
        other_turn();
        load(s, text + start, n);
      }
      if (status == ST_OK) break;
      if (status == ST_EVENTS_FULL) {
        from = resume;
        continue;
      }
      out->status = status == ST_TOO_DEEP ? 2 : 1;
      out->error_kind = status == ST_TOO_DEEP ? 0 : error_kind;
      out->error_offset = window_base + error_offset;
      if (status != ST_TOO_DEEP && status != ST_INVALID) {
        fprintf(stderr, "scan returned %d\n", status);
        abort();
      }
      finish(s);
      return 1;
    }
  }
  s->base += (int64_t)length;
  return 0;
}

/* JsonStreamScanner.end: the state where the text ended stands for its message. */
static void end_text(Scanner *s, Outcome *out) {
  if (s->spent) return;
  acquire(s);
  const int32_t *st = state_address();
  int32_t state = st[F_STATE], depth = st[F_DEPTH], num_sub = st[F_NUM_SUB];
  int complete = depth == 0 && (state == S_AFTER || (state == S_NUMBER && (num_sub & 1) == 1));
  if (!complete) {
    out->status = 1;
    out->error_offset = s->base - (state == 10 ? st[F_LITERAL_POS] : 0);
    /* What the message would name: the state, the closer expected, the number's sub-state. */
    int32_t closer = stack_address()[depth] & 1;
    out->error_kind = 100 + state * 32 + (state == S_NUMBER ? num_sub : 0) * 2 +
                      ((state == S_AFTER || state == S_NUMBER) ? closer : 0);
  }
  finish(s);
}

void scan_text(const uint8_t *text, size_t len, const size_t *cuts, size_t ncuts, int32_t max_nesting,
               int interleave, Outcome *out) {
  driver_init();
  outcome_reset(out);
  Scanner s;
  scanner_init(&s, max_nesting);
  size_t at = 0;
  int stopped = 0;
  for (size_t k = 0; k <= ncuts && !stopped; k++) {
    size_t to = k < ncuts ? cuts[k] : len;
    stopped = write_chunk(&s, text + at, to - at, interleave, out);
    if (!stopped && interleave && k < ncuts) other_turn();
    at = to;
  }
  if (!stopped) end_text(&s, out);
  scanner_free(&s);
}

/* ---- the fuzz input ---- */

void plan_from(const uint8_t *control, size_t len, Plan *plan) {
  /* control[0]: bits 0-1 nesting limit (8, 1 MiB, 3, 300), bit 2 interleave, bits 3-4 cut style,
     bits 5-7 cut count; control[1..3]: the cuts' seed. */
  static const int32_t limits[4] = {8, 1 << 20, 3, 300};
  plan->max_nesting = limits[control[0] & 3];
  plan->interleave = (control[0] >> 2) & 1;
  int style = (control[0] >> 3) & 3;
  size_t want = (size_t)(control[0] >> 5) + 1;
  uint32_t seed = (uint32_t)control[1] | (uint32_t)control[2] << 8 | (uint32_t)control[3] << 16;
  plan->cuts = malloc((len + 1) * sizeof(size_t));
  plan->ncuts = 0;
  if (len < 2) return;
  if (style == 3) {
    for (size_t k = 1; k < len; k++) plan->cuts[plan->ncuts++] = k; /* byte by byte */
    return;
  }
  if (style == 2) {
    size_t step = (size_t)(seed % 7) + 1; /* every step bytes */
    for (size_t k = step; k < len; k += step) plan->cuts[plan->ncuts++] = k;
    return;
  }
  /* `want` cuts at seeded positions (style 0) or near the 64-byte blocks' edges (style 1). */
  uint32_t x = seed * 2654435761u + 1;
  size_t last = 0;
  for (size_t k = 0; k < want; k++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    size_t cut = style == 0 ? 1 + x % (len - 1) : ((x % (len / 64 + 1)) * 64 + (x >> 8) % 5 + 62) % len;
    if (cut == 0) cut = 1;
    if (cut <= last) continue;
    plan->cuts[plan->ncuts++] = cut;
    last = cut;
  }
}

void plan_free(Plan *plan) { free(plan->cuts); }

static void print_outcome(const char *label, const Outcome *o) {
  fprintf(stderr, "%s: status %d kind %d offset %lld, %zu events\n", label, o->status, o->error_kind,
          (long long)o->error_offset, o->count);
  for (size_t k = 0; k < o->count && k < 40; k++)
    fprintf(stderr, "  %s name %d depth %d at %lld\n",
            o->events[k].kind == 0 ? "member" : o->events[k].kind == 1 ? "value " : "end   ", o->events[k].name,
            o->events[k].depth, (long long)o->events[k].offset);
}

void mismatch(const char *what, const uint8_t *text, size_t len, const Plan *plan, const Outcome *a,
              const Outcome *b) {
  fprintf(stderr, "MISMATCH: %s\ntext (%zu bytes): ", what, len);
  for (size_t k = 0; k < len && k < 400; k++) {
    uint8_t c = text[k];
    if (c >= 0x20 && c < 0x7f && c != '\\') fputc(c, stderr);
    else fprintf(stderr, "\\x%02x", c);
  }
  fprintf(stderr, "\nmax_nesting %d, interleave %d, cuts:", plan->max_nesting, plan->interleave);
  for (size_t k = 0; k < plan->ncuts && k < 60; k++) fprintf(stderr, " %zu", plan->cuts[k]);
  fputc('\n', stderr);
  if (a) print_outcome("first ", a);
  if (b) print_outcome("second", b);
  abort();
}
