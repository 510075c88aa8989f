#!/usr/bin/env bash
# tests/lint/run.sh - the static checks of the test suite: no banned function (banned.sh) and
# cppcheck clean (warnings, portability; run without the system headers, as its manual advises,
# so a function it cannot see return or not is named in an inline suppression with the reason).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
rc=0
tests/lint/banned.sh || rc=1
if command -v cppcheck >/dev/null 2>&1; then
    out=$(git ls-files '*.c' | grep -v '^tests/fuzz/' |
        xargs cppcheck --quiet --std=c11 --enable=warning,portability --inline-suppr \
            -j "$(nproc)" --template='{file}:{line}: {severity}: {id}: {message}' \
            -I base -I mcp -I executor -I registry 2>&1 |
        grep -E '^[^ ]+:[0-9]+: (error|warning|portability|style):')
    if [ -n "$out" ]; then
        printf 'cppcheck:\n%s\n' "$out"
        rc=1
    else
        echo "cppcheck: clean"
    fi
else
    echo "cppcheck: not installed (bootstrap.sh test installs it)"
    rc=1
fi
exit $rc
