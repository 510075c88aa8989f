#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS] - runs each libFuzzer target for SECONDS (default 600) from its
# committed seeds: fuzz_session (framing + JSON-RPC dispatch of our server) and fuzz_downstream
# (config parsing and what a downstream server writes to our client), fuzz_bridge (the
# bridge protocol lines sandboxed code sends), fuzz_http (bytes on an HTTP connection). Needs the clang build in
# build/fuzz (tests/run.sh makes it). Crash inputs are left in build/fuzz/artifacts/. Exits
# non-zero when a target found a crash.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
secs=${1:-600}
mkdir -p "$root/build/fuzz/artifacts"
run() { # TARGET SEEDS
    local bin=$root/build/fuzz/$1
    [ -x "$bin" ] || { echo "build the fuzz targets first: CC=clang cmake -S . -B build/fuzz -DPTC_FUZZ=ON -DPTC_TESTS=OFF && cmake --build build/fuzz" >&2; exit 2; }
    local work=$root/build/fuzz/corpus-$1
    mkdir -p "$work"
    # The generated corpus stays in build/ and grows across runs.
    "$bin" -max_total_time="$secs" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$root/build/fuzz/artifacts/$1-" -print_final_stats=1 \
        "$work" "$2"
}
run fuzz_session "$root/tests/fuzz/corpus"
run fuzz_downstream "$root/tests/fuzz/corpus-downstream"
run fuzz_bridge "$root/tests/fuzz/corpus-bridge"
run fuzz_http "$root/tests/fuzz/corpus-http"
