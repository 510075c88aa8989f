#!/usr/bin/env bash
# tests/lint/clang-tidy.sh [BUILD_DIR] - clang-tidy (the checks of .clang-tidy) over every C
# source in git that BUILD_DIR's compile_commands.json compiles (default build/asan; the fuzz
# targets are left out), one file per process, $(nproc) at a time. Each finding is kept as
# "file: message [check]" without its line, so that an edit above a known finding does not make
# it new, and compared as a multiset with tests/lint/clang-tidy-known.txt: fails when a finding
# is not there (or is there more times than listed). The known list holds what is not triaged
# yet; a fixed one is reported so its line can go. Fix a new finding, or, for a false positive,
# a NOLINT(check) comment that says why, or turn the check off in .clang-tidy with the reason.
set -uo pipefail
export LC_ALL=C # one sort order for the lists comm compares
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${1:-build/asan}
known=tests/lint/clang-tidy-known.txt
if ! command -v clang-tidy >/dev/null 2>&1; then
    echo "clang-tidy: not installed (bootstrap.sh test installs it)"
    exit 1
fi
if [ ! -f "$build/compile_commands.json" ]; then
    echo "clang-tidy: no $build/compile_commands.json (configure that build first)"
    exit 1
fi
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The sources the build compiles that git tracks (a build also compiles generated files).
python3 - "$build/compile_commands.json" "$root" >"$tmp/files" <<'PY'
import json, os, subprocess, sys
db, root = sys.argv[1], sys.argv[2]
tracked = set(subprocess.check_output(["git", "ls-files", "*.c"], text=True, cwd=root).split())
seen = set()
for e in json.load(open(db)):
    f = os.path.normpath(os.path.join(e["directory"], e["file"]))
    rel = os.path.relpath(f, root)
    if rel in tracked and not rel.startswith("tests/fuzz/") and rel not in seen:
        seen.add(rel)
        print(rel)
PY
n=$(wc -l <"$tmp/files")
# The build's flags are gcc's: clang does not know some warnings, which is no finding.
xargs -P "$(nproc)" -n 1 clang-tidy -p "$build" --quiet --extra-arg=-Wno-unknown-warning-option \
    <"$tmp/files" >"$tmp/out" 2>"$tmp/err"
if grep -q 'error:' "$tmp/out"; then
    echo "clang-tidy: a source did not compile for clang-tidy:"
    grep 'error:' "$tmp/out" | sed "s|^$root/||" | sort -u
    exit 1
fi
grep -E '^[^ ]+:[0-9]+:[0-9]+: warning: ' "$tmp/out" | sed "s|^$root/||" | sort -u >"$tmp/lines"
sed -E 's/^([^:]+):[0-9]+:[0-9]+: warning: /\1: /' "$tmp/lines" | sort >"$tmp/found"
grep -v -E '^(#|$)' "$known" | sort >"$tmp/known"
new=$(comm -23 "$tmp/found" "$tmp/known")
gone=$(comm -13 "$tmp/found" "$tmp/known")
total=$(wc -l <"$tmp/found")
if [ -n "$gone" ]; then
    printf 'clang-tidy: fixed, remove from %s:\n%s\n' "$known" "$gone"
fi
if [ -n "$new" ]; then
    printf 'clang-tidy: new findings (fix, or NOLINT(check) with the reason):\n'
    while IFS= read -r f; do
        file=${f%%: *}
        rest=${f#*: }
        grep -F -- "$file:" "$tmp/lines" | grep -F -- ": warning: $rest" || printf '%s\n' "$f"
    done <<<"$new" | sort -u
    exit 1
fi
echo "clang-tidy: $n files, no new finding ($total known, listed in $known)"
