// MCP 2026-07-28 beside the legacy protocol, through the official TypeScript SDK 2.x client
// (@modelcontextprotocol/client, pinned): the same server binary is listed and called by a
// client pinned to 2026-07-28 (stateless: server/discover, per-request _meta, no session) and by
// one in the legacy mode (initialize), over stdio and Streamable HTTP; and a tool that asks the
// client through an InputRequiredResult (MRTR), whose requestState is refused when changed.
// The servers: the conformance fixture (mcp/ library alone) and ptc-mcp itself.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { buildDir, ptcBin } from './helpers.mjs';
import { startHttp } from './http_helpers.mjs';

const fixtureBin = path.join(buildDir, 'mcp_conformance_server');
const MODERN = '2026-07-28';

function newClient(era, capabilities = {}) {
  const versionNegotiation = era === 'modern' ? { mode: { pin: MODERN } } : { mode: 'legacy' };
  return new Client({ name: 'ptc-2026-test', version: '1.0.0' }, { capabilities, versionNegotiation });
}

async function connectStdio(bin, era, capabilities) {
  const client = newClient(era, capabilities);
  const transport = new StdioClientTransport({ command: bin, args: [], stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d.toString(); });
  await client.connect(transport);
  return { client, close: () => client.close(), stderr: () => stderr };
}

// The fixture over HTTP: it prints "url: http://..." on stdout once listening.
async function startFixtureHttp() {
  const { spawn } = await import('node:child_process');
  const proc = spawn(fixtureBin, ['--listen', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout.on('data', (d) => { out += d.toString(); });
  proc.stderr.on('data', (d) => { err += d.toString(); });
  const exited = new Promise((r) => proc.once('close', (code, signal) => r({ code, signal })));
  const deadline = Date.now() + 30000;
  let m;
  while (!(m = /url: (http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(out))) {
    if (Date.now() > deadline) throw new Error(`fixture did not start: ${err}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    url: m[1],
    async stop() {
      proc.kill('SIGTERM');
      const how = await exited;
      assert.equal(how.code, 0, `fixture exit ${JSON.stringify(how)}; stderr:\n${err}`);
      assert.doesNotMatch(err, /Sanitizer|runtime error:/);
    },
  };
}

async function connectHttp(url, era, capabilities) {
  const client = newClient(era, capabilities);
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport, close: () => client.close() };
}

// tools/list and one call, and that the era is the one asked for.
async function listAndCall(client, era, tool, args, expectText) {
  assert.equal(client.getProtocolEra(), era);
  if (era === 'modern') {
    assert.equal(client.getNegotiatedProtocolVersion?.() ?? MODERN, MODERN);
    const d = client.getDiscoverResult();
    assert.deepEqual(d.supportedVersions, [MODERN]);
    assert.ok(d.capabilities.tools, 'discover advertises tools');
  }
  const { tools } = await client.listTools();
  assert.ok(tools.some((t) => t.name === tool), `${tool} is listed (${tools.map((t) => t.name).join(', ')})`);
  const res = await client.callTool({ name: tool, arguments: args });
  assert.equal(res.isError ?? false, false, JSON.stringify(res));
  assert.match(res.content.map((c) => c.text ?? '').join('\n'), expectText);
}

for (const era of ['modern', 'legacy']) {
  test(`fixture over stdio, ${era}: tools/list and a call`, async () => {
    const { client, close } = await connectStdio(fixtureBin, era);
    try {
      await listAndCall(client, era, 'test_simple_text', {}, /simple text response/);
    } finally {
      await close();
    }
  });

  test(`fixture over Streamable HTTP, ${era}: tools/list and a call`, async () => {
    const srv = await startFixtureHttp();
    try {
      const { client, transport, close } = await connectHttp(srv.url, era);
      try {
        await listAndCall(client, era, 'test_simple_text', {}, /simple text response/);
        // Only the legacy era has a session.
        if (era === 'modern') assert.equal(transport.sessionId, undefined);
        else assert.ok(transport.sessionId);
      } finally {
        await close();
      }
    } finally {
      await srv.stop();
    }
  });

  test(`ptc-mcp over stdio, ${era}: tools/list and execute_code`, async () => {
    const { client, close, stderr } = await connectStdio(ptcBin, era);
    try {
      await listAndCall(client, era, 'execute_code', { code: 'print(6 * 7)' }, /42/);
    } catch (e) {
      throw new Error(`${e.message}\nstderr:\n${stderr()}`);
    } finally {
      await close();
    }
  });

  test(`ptc-mcp over Streamable HTTP, ${era}: tools/list and execute_code`, async () => {
    const srv = await startHttp();
    try {
      const { client, close } = await connectHttp(srv.url, era);
      try {
        await listAndCall(client, era, 'execute_code', { code: 'print(6 * 7)' }, /42/);
      } finally {
        await close();
      }
    } finally {
      await srv.stop();
    }
  });
}

// The raw 2026 wire, for what the SDK hides: an InputRequiredResult round trip and a requestState
// that was changed on the way.
async function post(url, method, params, { headers = {} } = {}) {
  const body = {
    jsonrpc: '2.0',
    id: Math.floor(Math.random() * 1e9),
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': MODERN,
        'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
        ...params?._meta,
      },
    },
  };
  const h = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': MODERN,
    'Mcp-Method': method,
    ...(params?.name ? { 'Mcp-Name': params.name } : {}),
    ...headers,
  };
  const res = await fetch(url, { method: 'POST', headers: h, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, msg: JSON.parse(text) };
}

test('MRTR over HTTP: InputRequiredResult, the answers and the state come back, tampering is refused', async () => {
  const srv = await startFixtureHttp();
  try {
    const tool = 'test_input_required_result_multi_round';
    const r1 = await post(srv.url, 'tools/call', { name: tool, arguments: {} });
    assert.equal(r1.status, 200);
    assert.equal(r1.headers.get('mcp-session-id'), null);
    const ir1 = r1.msg.result;
    assert.equal(ir1.resultType, 'input_required');
    assert.equal(ir1.inputRequests.step1.method, 'elicitation/create');
    assert.equal(typeof ir1.requestState, 'string');

    const answer = (content) => ({ action: 'accept', content });
    const r2 = await post(srv.url, 'tools/call', {
      name: tool, arguments: {}, inputResponses: { step1: answer({ name: 'Ada' }) }, requestState: ir1.requestState,
    });
    const ir2 = r2.msg.result;
    assert.equal(ir2.resultType, 'input_required');
    assert.ok(ir2.inputRequests.step2, JSON.stringify(ir2));
    assert.notEqual(ir2.requestState, ir1.requestState);

    // Every kind of change is refused before the tool runs.
    const flip = (s, i) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
    const forged = [ir2.requestState + 'x', flip(ir2.requestState, 3), flip(ir2.requestState, ir2.requestState.length - 5),
      'v1.1.cm91bmQgMQ==.AAAA'];
    for (const bad of forged) {
      const r = await post(srv.url, 'tools/call', {
        name: tool, arguments: {}, inputResponses: { step2: answer({ color: 'red' }) }, requestState: bad,
      });
      assert.equal(r.status, 400, `status for ${bad}`);
      assert.equal(r.msg.error.code, -32602, JSON.stringify(r.msg));
    }
    // The state of one tool is no good for another.
    const other = await post(srv.url, 'tools/call', {
      name: 'test_input_required_result_request_state', arguments: {}, inputResponses: { confirm: answer({ ok: true }) },
      requestState: ir2.requestState,
    });
    assert.equal(other.msg.error.code, -32602);

    const r3 = await post(srv.url, 'tools/call', {
      name: tool, arguments: {}, inputResponses: { step2: answer({ color: 'red' }) }, requestState: ir2.requestState,
    });
    assert.equal(r3.msg.result.resultType, 'complete');
    assert.match(r3.msg.result.content[0].text, /state-ok/);

    // A prompt asks the same way; a tool's state is no good for it.
    const p1 = await post(srv.url, 'prompts/get', { name: 'test_input_required_result_prompt' });
    assert.equal(p1.msg.result.resultType, 'input_required');
    assert.equal(p1.msg.result.inputRequests.user_context.method, 'elicitation/create');
    const p2 = await post(srv.url, 'prompts/get', {
      name: 'test_input_required_result_prompt', inputResponses: { user_context: answer({ context: 'tests' }) },
    });
    assert.equal(p2.msg.result.resultType, 'complete');
    assert.match(p2.msg.result.messages[0].content.text, /context: tests/);
    const p3 = await post(srv.url, 'prompts/get', {
      name: 'test_input_required_result_prompt', inputResponses: {}, requestState: ir2.requestState,
    });
    assert.equal(p3.msg.error.code, -32602);

    // Without the capability the request needs, the tool is refused with -32021.
    const noCap = await post(srv.url, 'tools/call', {
      name: 'test_missing_capability', arguments: {}, _meta: { 'io.modelcontextprotocol/clientCapabilities': {} },
    });
    assert.equal(noCap.status, 400);
    assert.equal(noCap.msg.error.code, -32021);
    assert.deepEqual(noCap.msg.error.data.requiredCapabilities, { sampling: {} });
  } finally {
    await srv.stop();
  }
});

test('2026 errors over HTTP: unsupported version, missing _meta, header mismatch, removed methods', async () => {
  const srv = await startFixtureHttp();
  try {
    const v = await post(srv.url, 'server/discover', { _meta: { 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } },
      { headers: { 'MCP-Protocol-Version': '2099-01-01' } });
    assert.equal(v.status, 400);
    assert.equal(v.msg.error.code, -32022);
    assert.deepEqual(v.msg.error.data, { supported: [MODERN], requested: '2099-01-01' });

    const res = await fetch(srv.url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
        'MCP-Protocol-Version': MODERN, 'Mcp-Method': 'tools/list' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} }),
    });
    assert.equal(res.status, 400);
    const m = await res.json();
    assert.equal(m.id, 7);
    assert.equal(m.error.code, -32602);

    const mismatch = await post(srv.url, 'tools/list', {}, { headers: { 'Mcp-Method': 'prompts/list' } });
    assert.equal(mismatch.status, 400);
    assert.equal(mismatch.msg.error.code, -32020);
    const spaced = await post(srv.url, 'tools/call', { name: 'test_simple_text', arguments: {} },
      { headers: { 'Mcp-Name': '  test_simple_text \t' } });
    assert.equal(spaced.status, 200, JSON.stringify(spaced.msg));

    // SEP-2243: an argument whose schema names x-mcp-header comes in its Mcp-Param header too.
    const region = (h) => post(srv.url, 'tools/call', { name: 'test_custom_header', arguments: { region: 'eu-west' } },
      { headers: h });
    assert.equal((await region({ 'Mcp-Param-Region': 'eu-west' })).status, 200);
    const b64 = Buffer.from('eu-west').toString('base64');
    assert.equal((await region({ 'Mcp-Param-Region': `=?base64?${b64}?=` })).status, 200);
    for (const bad of [{}, { 'Mcp-Param-Region': 'us-east' }, { 'Mcp-Param-Region': '=?base64?ZXUtd2VzdA?=' }]) {
      const r = await region(bad);
      assert.equal(r.status, 400, JSON.stringify(bad));
      assert.equal(r.msg.error.code, -32020);
    }

    // A notification gets 202 and no body.
    const note = await fetch(srv.url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
        'MCP-Protocol-Version': MODERN, 'Mcp-Method': 'notifications/cancelled' },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1,
        _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} } } }),
    });
    assert.equal(note.status, 202);
    assert.equal(await note.text(), '');

    for (const removed of ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe']) {
      const r = await post(srv.url, removed, {});
      assert.equal(r.status, 404, removed);
      assert.equal(r.msg.error.code, -32601, removed);
    }
    const list = await post(srv.url, 'resources/list', {});
    assert.equal(list.msg.result.resultType, 'complete');
    assert.equal(list.msg.result.ttlMs, 0);
    assert.equal(list.msg.result.cacheScope, 'private');
    const missing = await post(srv.url, 'resources/read', { uri: 'test://no-such-thing' },
      { headers: { 'Mcp-Name': 'test://no-such-thing' } });
    assert.equal(missing.msg.error.code, -32602);
    assert.equal(missing.msg.error.data.uri, 'test://no-such-thing');
    // A name that is not printable ASCII comes base64-encoded in Mcp-Name (as ptc-mcp's own
    // downstream client sends it): decoded before it is compared.
    const wide = 'test://gr\u00f6\u00dfe';
    const enc = (v) => `=?base64?${Buffer.from(v).toString('base64')}?=`;
    const wideRead = await post(srv.url, 'resources/read', { uri: wide }, { headers: { 'Mcp-Name': enc(wide) } });
    assert.equal(wideRead.msg.error.code, -32602, JSON.stringify(wideRead.msg));
    assert.equal(wideRead.msg.error.data.uri, wide);
    const wrongWide = await post(srv.url, 'resources/read', { uri: wide }, { headers: { 'Mcp-Name': enc('test://other') } });
    assert.equal(wrongWide.status, 400);
    assert.equal(wrongWide.msg.error.code, -32020);
  } finally {
    await srv.stop();
  }
});
