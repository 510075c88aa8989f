#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS] - fuzzes the framing + JSON-RPC dispatch target for SECONDS
# (default 600) from the committed seeds. Needs the clang build: build/fuzz (tests/run.sh makes
# it). Crash inputs are left in build/fuzz/artifacts/. Exits non-zero when a crash was found.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
secs=${1:-600}
bin=$root/build/fuzz/fuzz_session
[ -x "$bin" ] || { echo "build the fuzz target first: CC=clang cmake -S . -B build/fuzz -DPTC_FUZZ=ON -DPTC_TESTS=OFF && cmake --build build/fuzz" >&2; exit 2; }
work=$root/build/fuzz/corpus
mkdir -p "$work" "$root/build/fuzz/artifacts"
# Two workers on two cores; the generated corpus stays in build/ and grows across runs.
"$bin" -max_total_time="$secs" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$root/build/fuzz/artifacts/" -print_final_stats=1 \
    "$work" "$root/tests/fuzz/corpus"
