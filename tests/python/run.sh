#!/usr/bin/env bash
# tests/python/run.sh BUILD_DIR - ptc-mcp through the official Python SDK 2.x client: makes the
# venv build/python-sdk-venv with the pinned requirements (again when requirements.txt changed),
# then runs sdk_client.py against BUILD_DIR's ptc-mcp. An install that fails (no network, no
# index) fails the stage with pip's message: the tests are never skipped silently.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:?usage: tests/python/run.sh BUILD_DIR}
venv=$root/build/python-sdk-venv
req=$here/requirements.txt
stamp=$venv/.requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)

if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    if ! "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"; then
        rm -rf "$venv"
        echo "python-sdk: could not install the pinned Python SDK (tests/python/requirements.txt);" \
            "the stage needs the package index or a pip cache that holds those versions" >&2
        echo "# pass 0"
        echo "# fail 1"
        exit 1
    fi
    echo "$want" >"$stamp"
fi
exec "$venv/bin/python" "$here/sdk_client.py" "$build"
