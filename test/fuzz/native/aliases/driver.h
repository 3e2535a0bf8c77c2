/*
 * The harnesses' side of src/aliases/json-scan.c: a C port of what src/aliases/json-scan.ts does with
 * the WebAssembly instance (windows of 64 KiB, the UTF-8 pre-check, EVENTS_FULL, the state saved and
 * restored when scanners take turns, the end of the text), and an independent strict reference
 * (reference.c). See README.md.
 */
#ifndef FUZZ_DRIVER_H
#define FUZZ_DRIVER_H
#include <stddef.h>
#include <stdint.h>

/* One reported event, as json-scan.ts hands it to a StreamScanHandler (offsets absolute). */
typedef struct {
  int32_t kind; /* 0 member (offset: the value's first byte), 1 value end, 2 object end ('}') */
  int32_t name; /* member: index into NAMES */
  int32_t depth;
  int64_t offset;
} Event;

/* The outcome of a whole text. */
typedef struct {
  int32_t status;       /* 0 valid, 1 invalid, 2 too deep */
  int32_t error_kind;   /* json-scan.c's ERR_* for an error found in a window; 100 + state at end() */
  int64_t error_offset; /* as JsonStreamScanner.error.offset */
  Event *events;
  size_t count, capacity;
} Outcome;

/* The names every harness reports (decoded form, UTF-8). */
#define NAME_COUNT 8
extern const char *const NAMES[NAME_COUNT];

void driver_init(void);
void outcome_reset(Outcome *o);
void outcome_free(Outcome *o);
void outcome_push(Outcome *o, int32_t kind, int32_t name, int32_t depth, int64_t offset);

/*
 * Scans `text` as JsonStreamScanner.write chunk by chunk (cut before each offset of `cuts`, ascending,
 * in 1 .. len - 1), then end(). With `interleave`, another scanner takes a turn after each chunk and
 * after each batch of events (as a handler that runs another scanner would), so that the state must
 * survive json-scan.ts's save and restore.
 */
void scan_text(const uint8_t *text, size_t len, const size_t *cuts, size_t ncuts, int32_t max_nesting,
               int interleave, Outcome *out);

/* The strict reference (reference.c): RFC 8259 + RFC 3629, the same error conventions and events. */
void reference_scan(const uint8_t *text, size_t len, int32_t max_nesting, Outcome *out);

/* Strict UTF-8 (RFC 3629). */
int is_utf8(const uint8_t *p, size_t n);

/* The fuzz input's layout: 4 control bytes, then the text. */
typedef struct {
  int32_t max_nesting;
  int interleave;
  size_t *cuts;
  size_t ncuts;
} Plan;
void plan_from(const uint8_t *control, size_t len, Plan *plan);
void plan_free(Plan *plan);

/* Prints an outcome (for a failure report) and aborts. */
void mismatch(const char *what, const uint8_t *text, size_t len, const Plan *plan, const Outcome *a,
              const Outcome *b);
#endif
