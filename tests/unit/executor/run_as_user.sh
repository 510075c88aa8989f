#!/bin/sh
# Runs a test program as an unprivileged user, as Claude Desktop would start ptc-mcp.
# Creates the user when missing (needs root); exits 77 (ctest: skipped) when not root.
set -eu
user=ptc-sbx-test
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: creating the unprivileged test user needs root" >&2
    exit 77
fi
if ! command -v setpriv >/dev/null 2>&1; then
    echo "SKIP: setpriv (util-linux) is missing" >&2
    exit 77
fi
if ! id "$user" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
fi
uid=$(id -u "$user")
gid=$(id -g "$user")
# The build tree must be reachable by that user; say so instead of failing obscurely.
if ! setpriv --reuid="$uid" --regid="$gid" --clear-groups test -x "$1"; then
    echo "SKIP: $user cannot reach $1 (a parent directory is not world-searchable)" >&2
    exit 77
fi
# The one case ctest asked for (tests/unit/cases.c) is passed on; nothing else of our environment.
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups env -i PATH=/usr/bin:/bin HOME=/tmp \
    PTC_TEST_AS_USER=1 ${PTC_ZYGOTE:+PTC_ZYGOTE=$PTC_ZYGOTE} \
    ${PTC_TEST_GROUP+"PTC_TEST_GROUP=$PTC_TEST_GROUP"} \
    ${PTC_TEST_CASE+"PTC_TEST_CASE=$PTC_TEST_CASE"} "$@"
