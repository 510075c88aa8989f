// Programmatic tool calling: sandboxed Python calls real downstream servers' tools (npm
// server-everything and server-memory, and the fake server for hangs) through the bridge.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ElicitRequestSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { connect, ptcBin, repoRoot, sleep } from './helpers.mjs';

const modules = path.join(repoRoot, 'tests', 'node_modules', '@modelcontextprotocol');

function setup() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-calls-'));
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({
    mcpServers: {
      everything: { command: process.execPath, args: [path.join(modules, 'server-everything', 'dist', 'index.js'), 'stdio'] },
      memory: { command: process.execPath, args: [path.join(modules, 'server-memory', 'dist', 'index.js')], env: { MEMORY_FILE_PATH: path.join(dir, 'memory.jsonl') } },
      fake: { command: 'python3', args: [path.join(repoRoot, 'tests', 'fixtures', 'fake_downstream.py')] },
    },
  }));
  // A cache of our own, so that the package cache is observable and the user's is untouched.
  return { dir, config, env: { XDG_CACHE_HOME: path.join(dir, 'cache') }, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

async function ready(c) {
  // The package is rebuilt as servers come up; execute_code's description names its modules.
  for (let i = 0; i < 300; i++) {
    const t = (await c.client.listTools()).tools.find((x) => x.name === 'execute_code');
    if (/modules: .*everything/.test(t.description) && /memory/.test(t.description) && /fake/.test(t.description)) return t;
    await sleep(100);
  }
  throw new Error(`servers not ready: ${c.stderr.join('')}`);
}

const run = (c, code, extra = {}) => c.client.callTool({ name: 'execute_code', arguments: { code, ...extra } });

test('code calls two servers\' tools as typed functions and prints a combined result', async () => {
  const s = setup();
  const c = await connect(ptcBin, ['--config', s.config, '--tool-timeout', '2'], { env: s.env });
  try {
    const desc = await ready(c);
    assert.match(desc.description, /from tools\.MODULE import FUNCTION/);
    const r = await run(c, [
      'from tools.everything import echo, get_sum',
      'from tools.memory import create_entities, read_graph',
      'import tools, inspect',
      'create_entities(entities=[{"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}])',
      'g = read_graph()',
      'print(echo(message="hi"), "|", get_sum(a=20, b=22), "|", [e["name"] for e in g["entities"]])',
      'print(inspect.signature(get_sum), "|", echo.__doc__.strip()[:30])',
    ].join('\n'));
    assert.equal(r.structuredContent.status, 'ok', r.content[0].text);
    const lines = r.structuredContent.stdout.trim().split('\n');
    assert.equal(lines[0], "Echo: hi | The sum of 20 and 22 is 42. | ['Ada']");
    assert.match(lines[1], /\(a: float, b: float\)/);
    assert.equal(r.structuredContent.tool_calls, 4);
    // `import tools` leaves asyncio (and the bridge's modules) unimported until they are needed;
    // acall still works, importing it then.
    const lazy = await run(c, [
      'import sys',
      'import tools',
      'print(sorted(m for m in ("asyncio", "json", "socket", "threading") if m in sys.modules))',
      'import asyncio',
      'print(asyncio.run(tools.acall("everything", "echo", message="async")))',
    ].join('\n'));
    assert.equal(lazy.structuredContent.status, 'ok', lazy.content[0].text);
    assert.equal(lazy.structuredContent.stdout, "[]\nEcho: async\n");
    // The functions document what they return; one whose tool declares an outputSchema returns
    // that dict (its keys in the docstring), and the call gives exactly it.
    const shape = await run(c, [
      'import inspect',
      'from tools.everything import echo, get_structured_content as g',
      'print(inspect.signature(g).return_annotation is dict, inspect.signature(echo).return_annotation is dict)',
      'print("structuredContent" in echo.__doc__, "temperature (float): Temperature in celsius" in g.__doc__)',
      'r = g(location="Chicago")',
      'print(type(r).__name__, sorted(r))',
    ].join('\n'));
    assert.equal(shape.structuredContent.status, 'ok', shape.content[0].text);
    assert.equal(shape.structuredContent.stdout, "True False\nTrue True\ndict ['conditions', 'humidity', 'temperature']\n");
  } finally {
    await c.close();
    s.cleanup();
  }
});

test('loops, threads, errors, search, emit, budgets and timeouts', async () => {
  const s = setup();
  const logs = [];
  const c = await connect(ptcBin, ['--config', s.config, '--tool-timeout', '1', '--deny-tools', 'memory__delete_*',
    '--audit-log', path.join(s.dir, 'audit.jsonl')], {
    env: s.env,
    setup: (client) => client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params)),
  });
  try {
    await ready(c);
    const loop = await run(c, 'from tools.everything import get_sum\nprint(sum(int(get_sum(a=i, b=0).split()[-1].rstrip(".")) for i in range(100)))');
    assert.equal(loop.structuredContent.stdout.trim(), String(4950), loop.content[0].text);
    assert.equal(loop.structuredContent.tool_calls, 100);

    const threads = await run(c, [
      'from concurrent.futures import ThreadPoolExecutor',
      'from tools.everything import echo',
      'with ThreadPoolExecutor(8) as ex: out = list(ex.map(lambda i: echo(message=str(i)), range(40)))',
      'print(out == [f"Echo: {i}" for i in range(40)])',
    ].join('\n'));
    assert.equal(threads.structuredContent.stdout.trim(), 'True', threads.content[0].text);

    const errors = await run(c, [
      'import tools',
      'from tools.memory import delete_entities',
      'from tools.everything import get_sum',
      'for f, kw in ((get_sum, {"a": "x", "b": 1}), (delete_entities, {"entityNames": ["Ada"]})):',
      '    try:',
      '        f(**kw); print("no error")',
      '    except tools.ToolError as e:',
      '        print("ToolError:", e)',
      'try:',
      '    tools.call("fake", "hang")',
      'except tools.ToolError as e:',
      '    print("ToolError:", e)',
      'print("still running")',
    ].join('\n'), { timeout_seconds: 20 });
    const out = errors.structuredContent.stdout;
    assert.match(out, /ToolError: .*a: expected number, got string/);
    assert.match(out, /ToolError: .*memory__delete_entities.*(denied|not allowed)/i);
    assert.match(out, /ToolError: .*(timed out|timeout)/i);
    assert.match(out, /still running/);

    const found = await run(c, 'import tools\nprint([t["id"] for t in tools.search("repeat back the text I send", top_k=3)][0])');
    assert.equal(found.structuredContent.stdout.trim(), 'everything__echo');

    const emitted = await run(c, 'import tools\ntools.emit({"a": 1})\ntools.emit([1, 2, 3])\ntry:\n    tools.emit("x" * (2 << 20))\nexcept tools.ToolError as e:\n    print("too big:", e)');
    assert.deepEqual(emitted.structuredContent.outputs, [{ a: 1 }, [1, 2, 3]]);
    assert.match(emitted.structuredContent.stdout + emitted.content[0].text, /too big|larger|exceeds/i);

    const budget = await run(c, 'import tools\nfrom tools.everything import echo\nn = 0\ntry:\n    while True:\n        echo(message="x"); n += 1\nexcept tools.ToolError as e:\n    print(n, e)', { timeout_seconds: 60 });
    assert.match(budget.structuredContent.stdout, /^200 .*budget/);
    assert.equal(budget.structuredContent.tool_calls, 200);

    const audit = readFileSync(path.join(s.dir, 'audit.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.ok(audit.length >= 300);
    assert.ok(audit.some((a) => a.tool === 'memory__delete_entities' && a.outcome === 'denied'));
    assert.ok(audit.some((a) => a.tool === 'fake__hang' && a.outcome === 'timeout'));
    assert.ok(audit.every((a) => /^[0-9a-f]{64}$/.test(a.args_sha256)));
    assert.ok(logs.some((l) => l.logger === 'ptc-audit' && l.data.tool === 'everything__echo'), 'audit records reach the client as log messages');
  } finally {
    await c.close();
    s.cleanup();
  }
});

test('the sandbox still cannot open a network socket or see the downstream server\'s environment', async () => {
  const s = setup();
  const c = await connect(ptcBin, ['--config', s.config], { env: { ...s.env, PTC_SECRET_FOR_TEST: 'hunter2' } });
  try {
    await ready(c);
    const r = await run(c, [
      'import os, socket',
      'try:',
      '    socket.socket(socket.AF_INET, socket.SOCK_STREAM); print("socket: opened")',
      'except OSError as e:',
      '    print("socket:", e.errno)',
      'print("secret:", "PTC_SECRET_FOR_TEST" in os.environ, "hunter2" in str(os.environ))',
      'print("fds:", sorted(int(f) for f in os.listdir("/proc/self/fd")))',
    ].join('\n'));
    const out = r.structuredContent.stdout;
    assert.match(out, /socket: 1\b/); // EPERM from the seccomp filter
    assert.match(out, /secret: False False/);
    assert.match(out, /fds: \[0, 1, 2, 3, 4\]/); // 3 is the bridge; 4 is the listing's own
  } finally {
    await c.close();
    s.cleanup();
  }
});

test('the tools package is generated once per registry and reused on a restart', async () => {
  const s = setup();
  try {
    const first = await connect(ptcBin, ['--config', s.config, '--log-level', 'debug'], { env: s.env });
    await ready(first);
    await first.close();
    assert.match(first.stderr.join(''), /tools package generated: 3 modules/);
    const second = await connect(ptcBin, ['--config', s.config, '--log-level', 'debug'], { env: s.env });
    await ready(second);
    const r = await run(second, 'from tools.everything import echo\nprint(echo(message="again"))');
    assert.equal(r.structuredContent.stdout.trim(), 'Echo: again');
    await second.close();
    const log = second.stderr.join('');
    assert.match(log, /tools package unchanged/);
    assert.doesNotMatch(log, /tools package generated: 3 modules/);
  } finally {
    s.cleanup();
  }
});

test('cancelling execute_code cancels its in-flight downstream call', async () => {
  const s = setup();
  const c = await connect(ptcBin, ['--config', s.config, '--tool-timeout', '60'], { env: s.env });
  try {
    await ready(c);
    const ac = new AbortController();
    const pending = c.client.callTool({ name: 'execute_code', arguments: { code: 'import tools\ntools.call("fake", "hang")', timeout_seconds: 60 } }, undefined, { signal: ac.signal });
    // The fake server logs "hanging ID" when the call reaches it, and "cancelled ID" on
    // notifications/cancelled; its stderr is copied into ptc-mcp's log.
    for (let i = 0; i < 200 && !/hanging/.test(c.stderr.join('')); i++) await sleep(50);
    ac.abort('user gave up');
    await assert.rejects(pending);
    for (let i = 0; i < 100 && !/cancelled .*the run ended/.test(c.stderr.join('')); i++) await sleep(50);
    assert.match(c.stderr.join(''), /cancelled .*the run ended/);
  } finally {
    await c.close();
    s.cleanup();
  }
});

test('--confirm-writes asks the user (elicitation) before a call to a tool that is not read-only', async () => {
  const s = setup();
  const asked = [];
  const c = await connect(ptcBin, ['--config', s.config, '--confirm-writes'], {
    env: s.env,
    capabilities: { elicitation: {} },
    setup: (client) => client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params.message);
      const ok = /"Ada"/.test(req.params.message);
      return ok ? { action: 'accept', content: { approve: true } } : { action: 'decline' };
    }),
  });
  try {
    await ready(c);
    const r = await run(c, [
      'import tools',
      'from tools.memory import create_entities, read_graph',
      'create_entities(entities=[{"name": "Ada", "entityType": "person", "observations": []}])',
      'try:',
      '    create_entities(entities=[{"name": "Bob", "entityType": "person", "observations": []}])',
      'except tools.ToolError as e:',
      '    print("ToolError:", e.code, e)',
      'print(sorted(e["name"] for e in read_graph()["entities"]))',
    ].join('\n'));
    // Declined is "denied" (the user said no), not "unavailable" (a server that is down).
    assert.match(r.structuredContent.stdout, /ToolError: denied .*not confirmed by the user/);
    assert.match(r.structuredContent.stdout, /\['Ada'\]/);
    assert.equal(asked.length, 2, 'read_graph (read-only) needs no confirmation');
    assert.match(asked[0], /memory__create_entities/);
  } finally {
    await c.close();
    s.cleanup();
  }
  const t = setup();
  const d = await connect(ptcBin, ['--config', t.config, '--confirm-writes'], { env: t.env });
  try {
    await ready(d);
    const r = await run(d, 'import tools\nfrom tools.memory import create_entities\ntry:\n    create_entities(entities=[])\nexcept tools.ToolError as e:\n    print("ToolError:", e)');
    assert.match(r.structuredContent.stdout, /cannot ask the user \(no elicitation\): refused/);
  } finally {
    await d.close();
    t.cleanup();
  }
});
