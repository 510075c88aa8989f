// A downstream server's own sampling or elicitation, asked while a 2026-07-28 (stateless) client's
// call waits on it (issue 17, docs/mcp-2026.md, the product wiring's item 4): a legacy
// server's server-to-client request, or a modern server's InputRequiredResult, becomes an input
// request of the owner call (execute_code's, or the --expose-tools proxied tool's). The server's
// request stays pending and the run alive until the client's next round brings the answer, which
// goes downstream as the response. Through the official TypeScript SDK 2.x client (pinned
// @modelcontextprotocol/client, modern mode: it answers input_required results with its
// handlers) over stdio and Streamable HTTP, and the raw wire for what the SDK hides: the input
// request itself, a client without the capability, a second request while one waits, a round
// that never comes, a changed requestState, the same inside a task.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { RawPeer, node22, ptcBin, repoRoot, sleep, until } from './helpers.mjs';
import { startHttp } from './http_helpers.mjs';
import { connectSdk2 } from './sdk2.mjs';

const MODERN = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
const modules = path.join(repoRoot, 'tests', 'node_modules', '@modelcontextprotocol');
const modernFixture = path.join(repoRoot, 'tests', 'fixtures', 'modern_only_server.mjs');

// server-everything (a legacy server: it asks through server-to-client requests) and the
// modern-only fixture (it asks through InputRequiredResult), in a config of their own.
function servers() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-mrtr-ds-'));
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({
    mcpServers: {
      everything: { command: process.execPath, args: [path.join(modules, 'server-everything', 'dist', 'index.js'), 'stdio'] },
      modern: { command: node22, args: [modernFixture, 'stdio'] },
    },
  }));
  return { config, env: { XDG_CACHE_HOME: path.join(dir, 'cache') }, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

const said = (params) => params.messages.map((m) => m.content.text).join(' ');
const reply = (text) => ({ model: 'test-model', role: 'assistant', content: { type: 'text', text } });

// An SDK 2.x client pinned to 2026-07-28 that samples ("answer to: PROMPT") and fills forms.
async function sdkClient(transport, { args, env, url }) {
  const client = new Client({ name: 'ptc-mrtr-ds-test', version: '1.0.0' },
    { capabilities: { sampling: {}, elicitation: {} }, versionNegotiation: { mode: { pin: MODERN } } });
  const asked = [];
  client.setRequestHandler('sampling/createMessage', async (req) => {
    asked.push({ method: 'sampling', text: said(req.params) });
    return reply(`answer to: ${said(req.params)}`);
  });
  client.setRequestHandler('elicitation/create', async (req) => {
    asked.push({ method: 'elicitation', text: req.params.message });
    return { action: 'accept', content: { name: 'Ada Lovelace', check: true } };
  });
  const stderr = await connectSdk2(client, transport, { args, env, url });
  assert.equal(client.getProtocolEra(), 'modern');
  return { client, asked, stderr };
}

// Until both servers are in the tools package (and, with --expose-tools, listed).
async function serversReady(client) {
  await until('both servers in the tools package', async () => {
    const tools = (await client.listTools()).tools;
    const ex = tools.find((t) => t.name === 'execute_code');
    return /modules: .*everything/.test(ex.description) && /modules: .*modern/.test(ex.description) &&
      tools.some((t) => t.name === 'everything__trigger-sampling-request');
  }, 60000);
}

const runCode = async (client, code) => {
  const r = await client.callTool({ name: 'execute_code', arguments: { code, max_repairs: 0 } });
  assert.equal(r.structuredContent.status, 'ok', r.content[0].text);
  return r.structuredContent.stdout;
};

for (const transport of ['stdio', 'http']) {
  test(`${transport}, 2026: downstream servers' sampling and elicitation reach the calling client as input requests, from code and proxied`, async () => {
    const s = servers();
    const args = ['--config', s.config, '--expose-tools', '--embedder', 'lexical'];
    const srv = transport === 'http' ? await startHttp(args, { env: s.env }) : null;
    const c = await sdkClient(transport, { args, env: s.env, url: srv?.url });
    try {
      await serversReady(c.client);
      // A legacy server's sampling request from code: the answer reaches the server, whose
      // tool result the code sees.
      let out = await runCode(c.client, 'from tools.everything import trigger_sampling_request\n' +
        'print(trigger_sampling_request(prompt="sampled from code", maxTokens=5))\n');
      assert.match(out, /answer to: [^\n"]*sampled from code/);
      assert.deepEqual(c.asked.map((a) => a.method), ['sampling']);
      assert.match(c.asked[0].text, /sampled from code/);
      // Its elicitation: the form the user filled goes back to the server.
      out = await runCode(c.client, 'from tools.everything import trigger_elicitation_request\n' +
        'print(trigger_elicitation_request())\n');
      assert.match(out, /Name: Ada Lovelace/);
      assert.match(out, /Agreed to terms: true/);
      assert.equal(c.asked[1].method, 'elicitation');
      // A modern-only server's InputRequiredResult, asked by a call from code.
      out = await runCode(c.client, 'from tools.modern import ask_model\nprint(ask_model(question="modern from code"))\n');
      assert.match(out, /model said: answer to: modern from code/);
      // Several downstream requests in one run, one after another: each is a round of its own.
      out = await runCode(c.client, 'from tools.everything import trigger_sampling_request\n' +
        'for n in range(2):\n    print(trigger_sampling_request(prompt="turn %d" % n, maxTokens=5))\n');
      assert.match(out, /answer to: [^\n"]*turn 0[\s\S]*answer to: [^\n"]*turn 1/);
      // A proxied call (--expose-tools) to the legacy server.
      const proxied = await c.client.callTool({ name: 'everything__trigger-sampling-request', arguments: { prompt: 'proxied sampling', maxTokens: 5 } });
      assert.notEqual(proxied.isError, true, JSON.stringify(proxied));
      assert.match(JSON.stringify(proxied.content), /answer to: [^"]*proxied sampling/);
      const form = await c.client.callTool({ name: 'everything__trigger-elicitation-request', arguments: {} });
      assert.match(JSON.stringify(form.content), /Name: Ada Lovelace/);
      assert.equal(c.asked.length, 7);
    } catch (e) {
      throw new Error(`${e.message}\nstderr:\n${srv ? srv.stderr() : c.stderr()}`);
    } finally {
      await c.client.close();
      await srv?.stop();
      s.cleanup();
    }
  });
}

// --- the raw wire over stdio -------------------------------------------------------------------

let nextId = 1;
function meta(caps) {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': caps,
    'io.modelcontextprotocol/clientInfo': { name: 'ptc-mrtr-ds-raw', version: '1' },
  };
}
const rpc = (peer, method, params, caps = { sampling: {}, elicitation: {} }, timeoutMs = 60000) => {
  const id = nextId++;
  peer.send({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta(caps) } });
  return peer.response(id, timeoutMs);
};
const result = (msg) => {
  assert.ok(msg.result, `expected a result, got ${JSON.stringify(msg)}`);
  return msg.result;
};

async function rawReady(peer) {
  await until('both servers in the tools package', async () => {
    const l = result(await rpc(peer, 'tools/list', {}));
    const ex = l.tools.find((t) => t.name === 'execute_code');
    return /modules: .*everything/.test(ex.description) && /modules: .*modern/.test(ex.description);
  }, 60000);
}

const SAMPLE = 'from tools.everything import trigger_sampling_request\n' +
  'print(trigger_sampling_request(prompt="raw", maxTokens=5))\nprint("went on")\n';

test('raw stdio, 2026: the input request, a client without the capability, one request at a time, two callers at once, a round that never comes, a changed state', async () => {
  const s = servers();
  const peer = new RawPeer(ptcBin, ['--config', s.config, '--expose-tools', '--embedder', 'lexical', '--tool-timeout', '4'],
    { env: { ...process.env, ...s.env } });
  try {
    await rawReady(peer);
    const call = (args, extra = {}, caps) => rpc(peer, 'tools/call', { name: 'execute_code', arguments: args, ...extra }, caps);
    // The first round: the server's request is the call's input request, as the server sent it.
    const args = { code: SAMPLE, max_repairs: 0 };
    const ir = result(await call(args));
    assert.equal(ir.resultType, 'input_required', JSON.stringify(ir));
    assert.deepEqual(Object.keys(ir.inputRequests), ['downstream']);
    assert.equal(ir.inputRequests.downstream.method, 'sampling/createMessage');
    assert.match(said(ir.inputRequests.downstream.params), /raw/);
    assert.equal(ir.inputRequests.downstream.params.systemPrompt, 'You are a helpful test server.');
    assert.ok(ir.requestState.length < 400, 'the state names the parked run; it does not carry it');
    const answer = { downstream: reply('raw answer') };
    // A changed requestState is refused before the tool runs; the genuine one still works.
    const flip = (st, i) => st.slice(0, i) + (st[i] === 'A' ? 'B' : 'A') + st.slice(i + 1);
    for (const bad of [ir.requestState + 'x', flip(ir.requestState, 30), flip(ir.requestState, ir.requestState.length - 5)]) {
      const r = await call(args, { inputResponses: answer, requestState: bad });
      assert.equal(r.error?.code, -32602, JSON.stringify(r));
    }
    const done = result(await call(args, { inputResponses: answer, requestState: ir.requestState }));
    assert.equal(done.resultType, 'complete', JSON.stringify(done));
    assert.equal(done.structuredContent.status, 'ok', JSON.stringify(done));
    assert.match(done.structuredContent.stdout, /raw answer[\s\S]*went on\n$/);
    // Used once.
    const again = result(await call(args, { inputResponses: answer, requestState: ir.requestState }));
    assert.equal(again.isError, true);
    assert.match(again.content[0].text, /no longer waiting/);

    // Without sampling declared: today's refusal, saying why (the code sees it as an error).
    const nocap = result(await call({ code: 'import tools\nfrom tools.everything import trigger_sampling_request\ntry:\n' +
      '    trigger_sampling_request(prompt="x", maxTokens=5)\nexcept tools.ToolError as e:\n    print("refused:", e)\n', max_repairs: 0 }, {}, {}));
    assert.equal(nocap.resultType, 'complete', JSON.stringify(nocap));
    assert.match(nocap.structuredContent.stdout, /refused: .*does not support sampling/);

    // Two calls of one run ask at once: the second is answered downstream with an error while
    // the first waits; the first's answer then comes with the round.
    const both = {
      code: [
        'import threading',
        'from tools.everything import trigger_sampling_request',
        'out = {}',
        'def ask(n):',
        '    try:',
        '        out[n] = str(trigger_sampling_request(prompt="thread %d" % n, maxTokens=5))',
        '    except Exception as e:',
        '        out[n] = "error: %s" % e',
        'ts = [threading.Thread(target=ask, args=(n,)) for n in (1, 2)]',
        'for t in ts: t.start()',
        'for t in ts: t.join()',
        'for n in (1, 2): print(n, out[n].replace("\\n", " "))',
      ].join('\n'),
      max_repairs: 0,
    };
    const b1 = result(await call(both));
    assert.equal(b1.resultType, 'input_required', JSON.stringify(b1));
    const first = /thread (\d)/.exec(said(b1.inputRequests.downstream.params))[1];
    await sleep(1500); // the other thread's request comes meanwhile, and is refused
    const b2 = result(await call(both, { inputResponses: { downstream: reply('one answer') }, requestState: b1.requestState }));
    assert.equal(b2.resultType, 'complete', JSON.stringify(b2));
    const lines = b2.structuredContent.stdout.trim().split('\n');
    const other = first === '1' ? '2' : '1';
    assert.match(lines.find((l) => l.startsWith(`${first} `)), /one answer/);
    assert.match(lines.find((l) => l.startsWith(`${other} `)), /error: .*waiting for the client's answer \(one at a time\)/);

    // Two stateless calls wait on the modern server at once: each of its input requests names
    // the downstream call that asked, so each goes to its own caller (none is ambiguous).
    const askModern = (q) => ({ code: `from tools.modern import ask_model\nprint(ask_model(question="${q}"))\n`, max_repairs: 0 });
    const [m1, m2] = (await Promise.all([call(askModern('first')), call(askModern('second'))])).map(result);
    assert.equal(m1.resultType, 'input_required', JSON.stringify(m1));
    assert.equal(m2.resultType, 'input_required', JSON.stringify(m2));
    assert.match(said(m1.inputRequests.downstream.params), /^first$/);
    assert.match(said(m2.inputRequests.downstream.params), /^second$/);
    const [n1, n2] = (await Promise.all([
      call(askModern('first'), { inputResponses: { downstream: reply('for first') }, requestState: m1.requestState }),
      call(askModern('second'), { inputResponses: { downstream: reply('for second') }, requestState: m2.requestState }),
    ])).map(result);
    assert.equal(n1.structuredContent.stdout, 'model said: for first\n', JSON.stringify(n1));
    assert.equal(n2.structuredContent.stdout, 'model said: for second\n', JSON.stringify(n2));

    // No round comes: the run is stopped at the bound (--tool-timeout), its state finds nothing.
    const w1 = result(await call(args));
    assert.equal(w1.resultType, 'input_required');
    await until('the parked run to be stopped', () => /no next round came for mrtr-/.test(peer.stderr), 20000);
    const late = result(await call(args, { inputResponses: answer, requestState: w1.requestState }));
    assert.equal(late.isError, true);
    assert.match(late.content[0].text, /no longer waiting/);

    // The same for a proxied call: its input request, a changed state, a round that never comes.
    const pcall = (extra = {}, caps) => rpc(peer, 'tools/call',
      { name: 'everything__trigger-sampling-request', arguments: { prompt: 'proxied raw', maxTokens: 5 }, ...extra }, caps);
    const p1 = result(await pcall());
    assert.equal(p1.resultType, 'input_required', JSON.stringify(p1));
    assert.equal(p1.inputRequests.downstream.method, 'sampling/createMessage');
    assert.equal((await pcall({ inputResponses: answer, requestState: flip(p1.requestState, 30) })).error?.code, -32602);
    const p2 = result(await pcall({ inputResponses: answer, requestState: p1.requestState }));
    assert.notEqual(p2.isError, true, JSON.stringify(p2));
    assert.match(JSON.stringify(p2.content), /raw answer/);
    const p3 = result(await pcall({}, {}));
    assert.equal(p3.isError, true, JSON.stringify(p3));
    assert.match(JSON.stringify(p3.content), /does not support sampling/);
    const p4 = result(await pcall());
    assert.equal(p4.resultType, 'input_required');
    await until('the parked proxied call to be dropped', () => /proxied call: no next round came for proxy-/.test(peer.stderr), 20000);
    const p5 = result(await pcall({ inputResponses: answer, requestState: p4.requestState }));
    assert.equal(p5.isError, true);
    assert.match(p5.content[0].text, /no longer waiting/);
  } catch (e) {
    throw new Error(`${e.message}\nstderr:\n${peer.stderr}`);
  } finally {
    await peer.close();
    s.cleanup();
  }
});

// Inside a task (the tasks extension): a run that became a task asks through the task
// (input_required, inputRequests.downstream) and tasks/update brings the answer downstream.
test('raw stdio, 2026: a task whose code calls a sampling tool asks through the task; tasks/update answers the server', async () => {
  const s = servers();
  const peer = new RawPeer(ptcBin, ['--config', s.config, '--embedder', 'lexical', '--wait-seconds', '1'],
    { env: { ...process.env, ...s.env } });
  const caps = { sampling: {}, extensions: { [TASKS]: {} } };
  try {
    await rawReady(peer);
    const code = 'import time\ntime.sleep(2)\n' + SAMPLE;
    const created = result(await rpc(peer, 'tools/call', { name: 'execute_code', arguments: { code, max_repairs: 0, timeout_seconds: 60 } }, caps));
    assert.equal(created.resultType, 'task', JSON.stringify(created));
    let t;
    for (let i = 0; (t = result(await rpc(peer, 'tasks/get', { taskId: created.taskId }, caps))).status === 'working'; i++) {
      assert.ok(i < 300, 'the task never asked');
      await sleep(200);
    }
    assert.equal(t.status, 'input_required', JSON.stringify(t));
    assert.equal(t.inputRequests.downstream.method, 'sampling/createMessage');
    const ack = result(await rpc(peer, 'tasks/update', { taskId: created.taskId, inputResponses: { downstream: reply('task answer') } }, caps));
    assert.equal(ack.resultType, 'complete');
    for (let i = 0; ['working', 'input_required'].includes((t = result(await rpc(peer, 'tasks/get', { taskId: created.taskId }, caps))).status); i++) {
      assert.ok(i < 300, `the task stayed ${t.status}`);
      await sleep(200);
    }
    assert.equal(t.status, 'completed', JSON.stringify(t));
    assert.match(t.result.structuredContent.stdout, /task answer[\s\S]*went on\n$/);
  } catch (e) {
    throw new Error(`${e.message}\nstderr:\n${peer.stderr}`);
  } finally {
    await peer.close();
    s.cleanup();
  }
});
