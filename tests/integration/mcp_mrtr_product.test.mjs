// ptc-mcp's own requests to a 2026-07-28 (stateless) client go as MRTR (issue 17): self-healing's
// sampling and --confirm-writes' elicitation come back as an InputRequiredResult, and the client's
// next round (its answer and the requestState) continues the same request: the repair loop where
// it was, the run whose bridge call waited. Through the official TypeScript SDK 2.x client
// (@modelcontextprotocol/client, pinned; it fulfils input_required results with its registered
// handlers) over stdio and Streamable HTTP, and the raw wire for what the SDK hides: a changed
// requestState, one used twice, a run whose client never comes back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { repoRoot, sleep } from './helpers.mjs';
import { startHttp } from './http_helpers.mjs';
import { connectSdk2 } from './sdk2.mjs';

const MODERN = '2026-07-28';
const modules = path.join(repoRoot, 'tests', 'node_modules', '@modelcontextprotocol');

function newClient(era, capabilities) {
  const versionNegotiation = era === 'modern' ? { mode: { pin: MODERN } } : { mode: 'legacy' };
  return new Client({ name: 'ptc-mrtr-test', version: '1.0.0' }, { capabilities, versionNegotiation });
}

// A client (era 'modern' or 'legacy') with handlers: { sampling(params), elicitation(params) }.
async function connect(transport, { era = 'modern', args = [], env, handlers = {}, url } = {}) {
  const capabilities = {};
  if (handlers.sampling) capabilities.sampling = {};
  if (handlers.elicitation) capabilities.elicitation = {};
  const client = newClient(era, capabilities);
  const asked = [];
  if (handlers.sampling) {
    client.setRequestHandler('sampling/createMessage', async (req) => {
      asked.push(req.params);
      return handlers.sampling(req.params);
    });
  }
  if (handlers.elicitation) {
    client.setRequestHandler('elicitation/create', async (req) => {
      asked.push(req.params);
      return handlers.elicitation(req.params);
    });
  }
  const stderr = await connectSdk2(client, transport, { args, env, url });
  assert.equal(client.getProtocolEra(), era);
  // Every message the server sent, in the order the transport delivered them: the SDK runs a
  // notification's handler in a microtask but an answer's at once, so a progress update read
  // together with its call's answer finds its handler gone and never reaches onprogress.
  const wire = [];
  const deliver = client.transport.onmessage;
  client.transport.onmessage = (message, extra) => {
    wire.push(message);
    deliver(message, extra);
  };
  await client.listTools(); // the SDK validates structuredContent against the outputSchema
  return { client, era, asked, wire, stderr, close: () => client.close() };
}

const reply = (text) => ({ model: 'test-model', role: 'assistant', content: { type: 'text', text } });
const programOf = (params) => /```python\n([\s\S]*?)```/.exec(params.messages[0].content.text)[1];
const fixTotl = (params) => reply('The fix:\n\n```python\n' + programOf(params).replace('totl', 'total') + '```\n');
const broken = 'print("kept in the sandbox")\ntotal = 41\nprint(totl + 1)\n';

async function assertRepaired(c) {
  const progress = [];
  const r = await c.client.callTool({ name: 'execute_code', arguments: { code: broken } },
    { onprogress: (p) => progress.push(p) });
  assert.equal(r.isError ?? false, false, r.content[0].text);
  const sc = r.structuredContent;
  assert.equal(sc.status, 'ok');
  assert.equal(sc.stdout, 'kept in the sandbox\n42\n');
  assert.equal(sc.attempts.length, 2);
  assert.match(sc.attempts[0].error, /^NameError: name 'totl' is not defined/);
  assert.equal(sc.attempts[1].repaired_by, 'sampling');
  assert.equal(sc.final_code, broken.replace('totl', 'total'));
  assert.match(r.content[0].text, /Self-healing: 2 attempts, 1 repair by the client's model \(sampling\)/);
  // One sampling request, as a legacy client gets it (system prompt, the program, the error).
  assert.equal(c.asked.length, 1);
  assert.equal(c.asked[0].includeContext, 'none');
  assert.equal(programOf(c.asked[0]), broken);
  assert.match(c.asked[0].messages[0].content.text, /NameError: name 'totl' is not defined/);
  // Before the model is asked (a 2026 client: the first leg's answer is the input request; a
  // legacy one: a sampling request) the server said that attempt 1 failed. It is read on the
  // wire: the SDK runs a progress handler in a microtask but an answer's at once, so an update
  // read together with the answer it precedes is dropped (and the SDK sends a 2026 call's next
  // round without a progress token). A legacy call's handler lives until its answer, which
  // comes after the sampling: there onprogress must show it too.
  const failed = /^attempt 1 of 3 failed \(NameError.*asking the client's model for a fix/;
  const asking = c.wire.findIndex((m) => m.result?.resultType === 'input_required' || m.method === 'sampling/createMessage');
  assert.ok(asking > 0, JSON.stringify(c.wire));
  const said = c.wire.slice(0, asking).filter((m) => m.method === 'notifications/progress').map((m) => m.params.message);
  assert.ok(said.some((m) => failed.test(m)), JSON.stringify(c.wire.slice(0, asking + 1)));
  const texts = progress.map((p) => p.message ?? '');
  if (c.era === 'legacy') assert.ok(texts.some((m) => failed.test(m)), JSON.stringify(texts));
  else assert.ok(texts.includes("Fulfilling input required by 'tools/call' (round 1)"), JSON.stringify(texts));
}

test('stdio, 2026: a failed run is repaired through MRTR sampling and the result shows both attempts', async () => {
  const c = await connect('stdio', { handlers: { sampling: fixTotl } });
  try {
    await assertRepaired(c);
    // The same error again after the repair: the history (kept between the rounds) stops it.
    c.asked.length = 0;
    let n = 0;
    const moved = (p) => reply('```python\n# try ' + (++n) + '\n' + programOf(p).replace(/^# try \d+\n/, '').replace('1}', '23}') + '```');
    const d = await connect('stdio', { handlers: { sampling: moved } });
    try {
      const r = await d.client.callTool({ name: 'execute_code', arguments: { code: 'import json\njson.loads("{bad json 1}")\n', max_repairs: 5 } });
      assert.equal(r.isError, true);
      assert.equal(d.asked.length, 1, 'a second round would have been asked if the loop went on');
      assert.equal(r.structuredContent.attempts.length, 2);
      assert.match(r.structuredContent.repair.stopped, /the same error came back/);
    } finally {
      await d.close();
    }
    // In a workspace session: the repaired cell runs in the same interpreter, which lives on.
    c.asked.length = 0;
    const r = await c.client.callTool({ name: 'execute_code', arguments: { code: broken, session: 'new' } });
    assert.equal(r.structuredContent.status, 'ok', r.content[0].text);
    assert.equal(r.structuredContent.attempts.length, 2);
    assert.equal(c.asked.length, 1);
    const again = await c.client.callTool({ name: 'execute_code', arguments: { code: 'print(total * 2)', session: r.structuredContent.session } });
    assert.equal(again.structuredContent.stdout, '82\n');
  } catch (e) {
    throw new Error(`${e.message}\nstderr:\n${c.stderr()}`);
  } finally {
    await c.close();
  }
});

test('Streamable HTTP, 2026: a repair through MRTR sampling, no session needed', async () => {
  const srv = await startHttp();
  try {
    const c = await connect('http', { url: srv.url, handlers: { sampling: fixTotl } });
    try {
      await assertRepaired(c);
    } finally {
      await c.close();
    }
    // A 2026 client that cannot sample gets today's answer: no repair, the repair packet.
    const d = await connect('http', { url: srv.url });
    try {
      const r = await d.client.callTool({ name: 'execute_code', arguments: { code: broken } });
      assert.equal(r.isError, true);
      assert.equal(r.structuredContent.attempts.length, 1);
      assert.match(r.structuredContent.repair.fingerprint, /^NameError/);
    } finally {
      await d.close();
    }
  } finally {
    await srv.stop();
  }
});

function memoryConfig() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-mrtr-'));
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({
    mcpServers: {
      memory: { command: process.execPath, args: [path.join(modules, 'server-memory', 'dist', 'index.js')], env: { MEMORY_FILE_PATH: path.join(dir, 'memory.jsonl') } },
    },
  }));
  return { config, env: { XDG_CACHE_HOME: path.join(dir, 'cache') }, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

async function memoryReady(client) {
  for (let i = 0; i < 300; i++) {
    const t = (await client.listTools()).tools.find((x) => x.name === 'execute_code');
    if (/modules: .*memory/.test(t.description)) return;
    await sleep(100);
  }
  throw new Error('the memory server did not come up');
}

const writes = [
  'import tools',
  'from tools.memory import create_entities, read_graph',
  'create_entities(entities=[{"name": "Ada", "entityType": "person", "observations": []}])',
  'try:',
  '    create_entities(entities=[{"name": "Bob", "entityType": "person", "observations": []}])',
  'except tools.ToolError as e:',
  '    print("ToolError:", e.code, e)',
  'print(sorted(e["name"] for e in read_graph()["entities"]))',
].join('\n');

// The user allows the call that names Ada and declines Bob's.
const confirmAda = (params) => (/"Ada"/.test(params.message) ? { action: 'accept', content: { approve: true } } : { action: 'decline' });

for (const transport of ['stdio', 'http']) {
  test(`${transport}, 2026: --confirm-writes asks through MRTR elicitation; the run waits and goes on (accepted, then declined)`, async () => {
    const m = memoryConfig();
    const args = ['--config', m.config, '--confirm-writes'];
    const srv = transport === 'http' ? await startHttp(args, { env: m.env }) : null;
    const c = await connect(transport, { args, env: m.env, url: srv?.url, handlers: { elicitation: confirmAda } });
    try {
      await memoryReady(c.client);
      const r = await c.client.callTool({ name: 'execute_code', arguments: { code: writes } });
      assert.equal(r.structuredContent.status, 'ok', r.content[0].text);
      assert.match(r.structuredContent.stdout, /ToolError: denied .*not confirmed by the user/);
      assert.match(r.structuredContent.stdout, /\['Ada'\]/, 'the accepted write reached the server, the declined one did not');
      assert.equal(c.asked.length, 2, 'read_graph (read-only) needs no confirmation');
      assert.match(c.asked[0].message, /memory__create_entities/);
      assert.equal(r.structuredContent.tool_calls, 3);
    } catch (e) {
      throw new Error(`${e.message}\nstderr:\n${srv ? srv.stderr() : c.stderr()}`);
    } finally {
      await c.close();
      await srv?.stop();
      m.cleanup();
    }
  });
}

test('stdio, 2026: the replay journal is kept between the rounds: a repaired run does not repeat a write', async () => {
  const m = memoryConfig();
  const c = await connect('stdio', { args: ['--config', m.config], env: m.env, handlers: { sampling: fixTotl } });
  try {
    await memoryReady(c.client);
    const code = [
      'from tools.memory import add_observations, create_entities',
      'create_entities(entities=[{"name": "Ada", "entityType": "person", "observations": []}])',
      'add_observations(observations=[{"entityName": "Ada", "contents": ["x"]}])',
      'total = 1',
      'print(totl)',
    ].join('\n');
    const r = await c.client.callTool({ name: 'execute_code', arguments: { code } });
    const sc = r.structuredContent;
    assert.equal(sc.status, 'ok', r.content[0].text);
    assert.equal(sc.attempts.length, 2);
    assert.deepEqual(sc.attempts[1].replayed.map((x) => x.tool), ['memory__create_entities', 'memory__add_observations']);
    // The graph holds what the first attempt wrote, once.
    const g = await c.client.callTool({ name: 'execute_code', arguments: { code: 'from tools.memory import read_graph\nprint(read_graph()["entities"][0]["observations"])' } });
    assert.equal(g.structuredContent.stdout, "['x']\n");
  } catch (e) {
    throw new Error(`${e.message}\nstderr:\n${c.stderr()}`);
  } finally {
    await c.close();
    m.cleanup();
  }
});

// The raw 2026 wire over HTTP.
async function post(url, method, params, caps, meta = {}) {
  const body = {
    jsonrpc: '2.0',
    id: Math.floor(Math.random() * 1e9),
    method,
    params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': caps, ...meta } },
  };
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': MODERN, 'Mcp-Method': method, ...(params.name ? { 'Mcp-Name': params.name } : {}),
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  // A tools/call may answer on an event stream (progress first): the last data line is the answer.
  const events = text.startsWith('{') ? [text] : text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
  const all = events.map((e) => JSON.parse(e));
  return { status: res.status, msg: all.at(-1), before: all.slice(0, -1) };
}

test('raw HTTP, 2026: a changed requestState is refused, a used one finds nothing, a run nobody comes back for is stopped', async () => {
  const m = memoryConfig();
  const srv = await startHttp(['--config', m.config, '--confirm-writes', '--tool-timeout', '3'], { env: m.env });
  try {
    const call = (args, extra = {}, caps = { sampling: {} }, meta) =>
      post(srv.url, 'tools/call', { name: 'execute_code', arguments: args, ...extra }, caps, meta);
    const args = { code: broken };
    const r1 = await call(args, {}, { sampling: {} }, { progressToken: 'p1' });
    assert.equal(r1.status, 200);
    // The progress a legacy client sees while the model is asked comes before the question.
    assert.ok(r1.before.some((n) => n.method === 'notifications/progress' &&
      /^attempt 1 of 3 failed \(NameError.*asking the client's model for a fix/.test(n.params.message)), JSON.stringify(r1.before));
    const ir = r1.msg.result;
    assert.equal(ir.resultType, 'input_required', JSON.stringify(r1.msg));
    assert.equal(ir.inputRequests.repair.method, 'sampling/createMessage');
    assert.match(ir.inputRequests.repair.params.messages[0].content.text, /NameError/);
    assert.ok(ir.requestState.length < 400, 'the state names the parked request; it does not carry it');
    const answer = { repair: fixTotl(ir.inputRequests.repair.params) };

    // The next round repeats the arguments of the call it continues: other code is refused.
    const other = await call({ code: 'print(1)\n' }, { inputResponses: answer, requestState: ir.requestState });
    assert.equal(other.msg.result.isError, true);
    assert.match(other.msg.result.content[0].text, /repeats the arguments/);
    const flip = (s, i) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
    for (const bad of [ir.requestState + 'x', flip(ir.requestState, 3), flip(ir.requestState, ir.requestState.length - 5), flip(ir.requestState, 30)]) {
      const r = await call(args, { inputResponses: answer, requestState: bad });
      assert.equal(r.status, 400, `status for ${bad}`);
      assert.equal(r.msg.error.code, -32602, JSON.stringify(r.msg));
    }
    // The request still waits after the forgeries: the genuine round completes it.
    const r2 = await call(args, { inputResponses: answer, requestState: ir.requestState });
    const done = r2.msg.result;
    assert.equal(done.resultType, 'complete', JSON.stringify(r2.msg));
    assert.equal(done.structuredContent.status, 'ok', JSON.stringify(done));
    assert.equal(done.structuredContent.attempts.length, 2);
    // Used once: the same state again finds nothing.
    const again = await call(args, { inputResponses: answer, requestState: ir.requestState });
    assert.equal(again.msg.result.isError, true);
    assert.match(again.msg.result.content[0].text, /no longer waiting/);

    // A write asked for confirmation, and no round comes: the run is stopped at the call's bound.
    await until(async () => {
      const l = await post(srv.url, 'tools/list', {}, {});
      return /modules: .*memory/.test(l.msg.result.tools.find((t) => t.name === 'execute_code').description);
    });
    const w = { code: 'from tools.memory import create_entities\nimport time\ncreate_entities(entities=[{"name": "Cy", "entityType": "person", "observations": []}])\nprint("went on")\n', timeout_seconds: 60 };
    const ask = { elicitation: {} };
    const c1 = await call(w, {}, ask);
    const cir = c1.msg.result;
    assert.equal(cir.resultType, 'input_required', JSON.stringify(c1.msg));
    assert.equal(cir.inputRequests.confirm.method, 'elicitation/create');
    assert.match(cir.inputRequests.confirm.params.message, /memory__create_entities with .*"Cy"/);
    await until(() => /no next round came for mrtr-/.test(srv.stderr()), 15000);
    const late = await call(w, { inputResponses: { confirm: { action: 'accept', content: { approve: true } } }, requestState: cir.requestState }, ask);
    assert.equal(late.msg.result.isError, true);
    assert.match(late.msg.result.content[0].text, /no longer waiting/);
    // Declined through the raw wire: the run goes on with `denied` (no sampling: no repair).
    const d1 = await call(w, {}, ask);
    const d2 = await call(w, { inputResponses: { confirm: { action: 'decline' } }, requestState: d1.msg.result.requestState }, ask);
    assert.equal(d2.msg.result.structuredContent.status, 'error', JSON.stringify(d2.msg));
    assert.match(d2.msg.result.structuredContent.stderr, /denied|not confirmed by the user/);
    // Without elicitation declared, a write is refused as for a legacy client that cannot ask.
    const n1 = await call({ code: 'import tools\nfrom tools.memory import create_entities\ntry:\n    create_entities(entities=[])\nexcept tools.ToolError as e:\n    print(e)\n' }, {}, {});
    assert.match(n1.msg.result.structuredContent.stdout, /cannot ask the user \(no elicitation\): refused/);
    // Neither the write left waiting nor the declined one reached the memory server.
    const g = await call({ code: 'from tools.memory import read_graph\nprint(sorted(e["name"] for e in read_graph()["entities"]))\n' }, {}, {});
    assert.equal(g.msg.result.structuredContent.stdout, '[]\n');
    // One left waiting when the server stops: it is killed and freed (stop() checks a clean exit).
    const left = await call(w, {}, ask);
    assert.equal(left.msg.result.resultType, 'input_required');
  } catch (e) {
    throw new Error(`${e.message}\nstderr:\n${srv.stderr()}`);
  } finally {
    await srv.stop();
    m.cleanup();
  }
});

async function until(fn, ms = 30000) {
  const end = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await sleep(100);
  }
}

test('legacy era of the same client: sampling and elicitation stay server-to-client requests', async () => {
  const c = await connect('stdio', { era: 'legacy', handlers: { sampling: fixTotl } });
  try {
    await assertRepaired(c);
  } finally {
    await c.close();
  }
});
