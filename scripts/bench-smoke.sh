#!/usr/bin/env bash
# CI smoke run of the benchmark (issue 5): installs wrk when it is missing (Debian package), runs
# `node bench/run.ts --smoke` (1 s per load, one round, 16 MiB transfers: about 20 s) and checks only
# that it ran and printed its tables. No figure is asserted: CI machines are shared and noisy.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

if ! command -v wrk >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "bench-smoke: wrk is missing and there is no apt-get to install it" >&2
    exit 1
  fi
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "bench-smoke: installing wrk (apt-get)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq wrk >/dev/null
fi

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
timeout 300 node bench/run.ts --smoke | tee "$out"

for table in '| load | body KiB | req/s | ratio to direct |' '| transfer | direct MiB/s |' '| target | measured |'; do
  if ! grep -qF "$table" "$out"; then
    echo "bench-smoke: the report has no table starting with: $table" >&2
    exit 1
  fi
done
echo "bench-smoke: the benchmark ran and printed its tables"
