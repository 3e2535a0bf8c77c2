#!/bin/sh
# Builds the libFuzzer targets of src/aliases/json-scan.c into $OUT (default: /tmp/json-scan-fuzz).
# Needs clang with libFuzzer and the sanitizer runtimes, and SIMDe (Debian bookworm:
# apt-get install clang-16 libclang-rt-16-dev libsimde-dev). CLANG=… to choose the compiler.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../../.." && pwd)
OUT=${OUT:-/tmp/json-scan-fuzz}
CLANG=${CLANG:-clang-16}
mkdir -p "$OUT"
# A variant with 4 events per call: every EVENTS_FULL hand-over, in texts of a few bytes, and an
# `events` array that AddressSanitizer bounds tightly.
sed 's/^#define MAX_EVENTS 4096 /#define MAX_EVENTS 4 /' "$ROOT/src/aliases/json-scan.c" > "$OUT/json-scan-events4.c"
grep -q '^#define MAX_EVENTS 4 ' "$OUT/json-scan-events4.c"
FLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
  -I$HERE/include -Wall -Wextra -Wno-unused-function"
for variant in plain events4; do
  if [ $variant = plain ]; then SRC="$ROOT/src/aliases/json-scan.c"; else SRC="$OUT/json-scan-events4.c"; fi
  for target in 1:split 2:reference 3:offsets; do
    $CLANG $FLAGS -DTARGET=${target%%:*} -o "$OUT/${target#*:}-$variant" \
      "$HERE/fuzz.c" "$HERE/driver.c" "$HERE/reference.c" "$SRC"
  done
done
ls "$OUT"
