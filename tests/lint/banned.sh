#!/usr/bin/env bash
# tests/lint/banned.sh - fails when a C source calls a function this project does not use: the
# ones with no bound (strcpy, strcat, sprintf, gets), the ones that keep hidden state between
# calls (strtok), the number parsers that cannot report an error or take signs and blanks
# where a protocol line must not have them (atoi, atol, atof, sscanf; base/'s ptc_parse_* and
# strtol with an end pointer instead), and those replaced by safer ones (strncpy, strncat:
# snprintf; tmpnam, mktemp: mkstemp). A call inside a comment or a string is matched too: name
# the function otherwise there.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
banned='strcpy|strcat|strncpy|strncat|sprintf|vsprintf|gets|strtok|atoi|atol|atoll|atof|sscanf|tmpnam|mktemp'
# \b keeps snprintf, fgets, strtok_r and a local helper like get_str out of the match
hits=$(git ls-files '*.c' '*.h' | xargs grep -n -E "(^|[^A-Za-z0-9_])($banned)[[:space:]]*\(" || true)
if [ -n "$hits" ]; then
    printf 'banned functions called (see tests/lint/banned.sh for the replacements):\n%s\n' "$hits"
    exit 1
fi
echo "no banned function called"
