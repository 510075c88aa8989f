#!/usr/bin/env bash
# tests/run.sh - builds and runs the whole test suite; called by `./bootstrap.sh test` after it
# installed the dependencies. Prints one summary line per stage with its time, then
# "tests: N passed, N failed" counting every unit, integration and conformance test, and
# "stages: N passed, N failed, N skipped" counting the stages (a stage can fail without a test
# failing: a build, the retrieval gate, the format check). Exits non-zero when any stage failed.
#
# Environment: PTC_FUZZ_SECONDS (default 15, per fuzz target) bounds the fuzzing stage.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
logs=build/test-logs
mkdir -p "$logs"
jobs=$(nproc)
gen=$(command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")

summary=()
passed_stages=0
failed_stages=0
skipped_stages=0
tests_passed=0
tests_failed=0

stage() { # stage NAME COMMAND... : runs one stage, its output to the terminal and a log
    local name=$1
    shift
    local t0 t1 rc
    t0=$(date +%s.%N)
    printf '\n===== stage %s =====\n' "$name"
    "$@" 2>&1 | tee "$logs/$name.log"
    rc=${PIPESTATUS[0]}
    t1=$(date +%s.%N)
    local secs
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    if [ "$rc" -eq 0 ]; then
        summary+=("stage $name: ok (${secs} s)")
        passed_stages=$((passed_stages + 1))
    else
        summary+=("stage $name: FAILED, exit $rc (${secs} s, log $logs/$name.log)")
        failed_stages=$((failed_stages + 1))
    fi
    return 0
}

configure_build() { # DIR ARGS...
    local dir=$1
    shift
    cmake -S . -B "$dir" -G "$gen" "$@" && cmake --build "$dir" -j "$jobs"
}

configure_fuzz() {
    CC=clang cmake -S . -B build/fuzz -G "$gen" -DCMAKE_BUILD_TYPE=Debug -DPTC_FUZZ=ON \
        -DPTC_TESTS=OFF && cmake --build build/fuzz -j "$jobs" --target fuzz_session fuzz_downstream fuzz_bridge fuzz_http
}

count_ctest() { # counts from ctest's "N% tests passed, F tests failed out of T", where every
    # case of a cmocka program is a test of its own (tests/unit/cases.cmake), and adds them to
    # the stage's summary line
    local line
    line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$logs/$1.log" | tail -n1)
    [ -z "$line" ] && return
    local f t
    f=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
    t=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
    tests_passed=$((tests_passed + t - f))
    tests_failed=$((tests_failed + f))
    local last=$((${#summary[@]} - 1))
    summary[last]="${summary[last]}; $t test cases: $((t - f)) passed, $f failed"
}

count_node() { # counts from node --test's "# pass N" / "# fail N"
    local p f
    p=$(grep -E '^# pass [0-9]+' "$logs/$1.log" | tail -n1 | awk '{print $3}')
    f=$(grep -E '^# fail [0-9]+' "$logs/$1.log" | tail -n1 | awk '{print $3}')
    tests_passed=$((tests_passed + ${p:-0}))
    tests_failed=$((tests_failed + ${f:-0}))
}

count_conformance() { # counts scenarios from "conformance LABEL: P/T scenarios passed, E expected"
    local line p t e
    while read -r line; do
        p=$(sed -E 's|.*: ([0-9]+)/([0-9]+) scenarios passed, ([0-9]+) expected.*|\1|' <<<"$line")
        t=$(sed -E 's|.*: ([0-9]+)/([0-9]+) scenarios passed, ([0-9]+) expected.*|\2|' <<<"$line")
        e=$(sed -E 's|.*: ([0-9]+)/([0-9]+) scenarios passed, ([0-9]+) expected.*|\3|' <<<"$line")
        tests_passed=$((tests_passed + p))
        tests_failed=$((tests_failed + t - p - e))
    done < <(grep -E '^conformance [a-z-]+: [0-9]+/[0-9]+ scenarios passed' "$logs/$1.log")
}

format_check() {
    local bad=()
    local f
    while IFS= read -r f; do
        clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
    done < <(git ls-files '*.c' '*.h')
    if [ ${#bad[@]} -gt 0 ]; then
        printf 'not formatted per .clang-format (run clang-format -i): %s\n' "${bad[*]}"
        return 1
    fi
    echo "all C sources formatted"
}

# 1. Release build: warnings are errors in every configuration.
stage build-release configure_build build/release -DCMAKE_BUILD_TYPE=Release
# 2. ASan + UBSan build of everything, and its unit tests.
stage build-asan configure_build build/asan -DCMAKE_BUILD_TYPE=Debug -DPTC_SANITIZE=ON
stage unit-asan ctest --test-dir build/asan --output-on-failure -j "$jobs"
count_ctest unit-asan
# 3. Integration tests through real MCP clients, against the sanitizer build.
export PTC_BUILD_DIR="$root/build/asan"
stage integration-asan node --test --test-concurrency=2 tests/integration/*.test.mjs
count_node integration-asan
# 3b. The official MCP conformance suite over Streamable HTTP: every scenario against the fixture
#     server, the fixture-free ones against ptc-mcp (tests/conformance/run.sh).
stage conformance tests/conformance/run.sh "$root/build/asan"
count_conformance conformance
# 3c. ptc-mcp through the official Python SDK 2.x client, both modes, stdio and HTTP
#     (tests/python/run.sh makes its venv with the pinned versions; no index: the stage fails).
stage python-sdk tests/python/run.sh "$root/build/asan"
count_node python-sdk
# 4. Search quality on the evaluation sets carried in the repo (bench/eval/dev and dev2,
#    bench/eval/README.md), against a BM25 baseline the bench computes itself: fails below the
#    targets (a little under what the sentence model measures: overall, paraphrase, lexical
#    recall@5) or when the model silently fell back to the lexical embedder. A shared dev set
#    beside the checkout (../shared/eval/dev, or PTC_EVAL_DIR) is an extra stage with dev's gates.
retrieval() { # retrieval DIR [MIN_R5 MIN_PARAPHRASE_R5 MIN_LEXICAL_R5]
    build/release/bench/bench_retrieval "$1/catalog.json" "$1/queries.jsonl" \
        --min-recall5 "${2:-0.85}" --min-paraphrase-recall5 "${3:-0.76}" \
        --min-lexical-recall5 "${4:-0.97}" --expect-embedder model:
}
stage retrieval retrieval bench/eval/dev
stage retrieval-dev2 retrieval bench/eval/dev2 0.79 0.60 0.95
shared_dev=${PTC_EVAL_DIR:-$root/../shared/eval/dev}
if [ -f "$shared_dev/catalog.json" ]; then
    stage retrieval-shared retrieval "$shared_dev"
elif [ -n "${PTC_EVAL_DIR:-}" ]; then
    summary+=("stage retrieval-shared: FAILED, no catalog.json in PTC_EVAL_DIR=$PTC_EVAL_DIR")
    failed_stages=$((failed_stages + 1))
else
    summary+=("stage retrieval-shared: skipped (no ../shared/eval/dev beside the checkout)")
    skipped_stages=$((skipped_stages + 1))
fi
# 5. A short fuzzing run of the framing + JSON-RPC dispatch (longer: tests/fuzz/run.sh).
if command -v clang >/dev/null 2>&1; then
    stage build-fuzz configure_fuzz
    stage fuzz tests/fuzz/run.sh "${PTC_FUZZ_SECONDS:-15}"
else
    summary+=("stage build-fuzz, fuzz: skipped (needs clang)")
    skipped_stages=$((skipped_stages + 2))
fi
# 6. Formatting, with the clang-format the sources were formatted with (others differ).
if clang-format --version 2>/dev/null | grep -q 'version 14\.'; then
    stage format format_check
else
    summary+=("stage format: skipped (needs clang-format 14)")
    skipped_stages=$((skipped_stages + 1))
fi

# 7. Static checks: no banned function, cppcheck clean (tests/lint/run.sh), and no clang-tidy
#    finding (.clang-tidy's checks) beyond the known ones (tests/lint/clang-tidy.sh), over the
#    sanitizer build's compile_commands.json.
stage lint tests/lint/run.sh
stage clang-tidy tests/lint/clang-tidy.sh build/asan

failures() { # names the failed tests of each log, so the summary's tail says what to look at
    local log=$logs/$1.log
    [ -f "$log" ] || return 0
    case $1 in
    unit-asan) sed -n '/The following tests FAILED:/,/^Errors while running/p' "$log" |
        grep -E '^[[:space:]]+[0-9]+ - ' | sed "s/^[[:space:]]*/  $1: /" ;;
    integration-asan) grep -E '^[[:space:]]*not ok [0-9]+ - ' "$log" |
        sed -E "s/^([[:space:]]*)not ok [0-9]+ - /  $1: \1/" ;;
    *) ;;
    esac
}

printf '\n===== summary =====\n'
printf '%s\n' "${summary[@]}"
if [ "$failed_stages" -ne 0 ] || [ "$tests_failed" -ne 0 ]; then
    printf 'failed tests:\n'
    failures unit-asan
    failures integration-asan
fi
printf 'tests: %d passed, %d failed\n' "$tests_passed" "$tests_failed"
printf 'stages: %d passed, %d failed, %d skipped\n' "$passed_stages" "$failed_stages" "$skipped_stages"
# A test counted as failed always fails its stage too; the second check guards a count parsed
# from a log whose stage still exited 0.
if [ "$failed_stages" -ne 0 ] || [ "$tests_failed" -ne 0 ]; then
    printf 'FAILED: %d stage(s), %d test(s)\n' "$failed_stages" "$tests_failed"
    exit 1
fi
exit 0
