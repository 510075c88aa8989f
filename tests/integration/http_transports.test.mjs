// ptc-mcp over HTTP: the SDK's StreamableHTTPClientTransport and SSEClientTransport run the
// stdio scenarios (handshake, tools, execute_code, search_tools, progress, cancellation), and raw
// requests check the routing of a call's messages to its own POST stream and resumption.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startHttp, connectHttp, repoRoot, sleep } from './helpers.mjs';

const JSON_SSE = 'application/json, text/event-stream';

// Reads SSE events from a fetch Response body; next() resolves with {id, event, data} or null
// at the end of the stream.
function sseReader(res) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  return {
    async next() {
      for (;;) {
        const i = buf.indexOf('\n\n');
        if (i >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const ev = { data: '' };
          const data = [];
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue;
            const c = line.indexOf(':');
            const k = c < 0 ? line : line.slice(0, c);
            const v = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
            if (k === 'data') data.push(v); else ev[k] = v;
          }
          if (data.length === 0 && ev.id === undefined && ev.event === undefined) continue; // a comment
          ev.data = data.join('\n');
          return ev;
        }
        const { value, done } = await reader.read();
        if (done) return null;
        buf += dec.decode(value, { stream: true });
      }
    },
    cancel: () => reader.cancel(),
  };
}

async function initRaw(url, version = '2025-11-25', capabilities = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: JSON_SSE },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: version, capabilities, clientInfo: { name: 'raw', version: '1' } } }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /application\/json/);
  const sid = res.headers.get('mcp-session-id');
  assert.match(sid, /^[0-9a-f]{32}$/);
  await res.json();
  const note = await post(url, sid, { jsonrpc: '2.0', method: 'notifications/initialized' });
  assert.equal(note.status, 202);
  return sid;
}

function post(url, sid, body, extra = {}) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: JSON_SSE, ...(sid ? { 'mcp-session-id': sid } : {}), ...extra },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

test('legacy HTTP+SSE: the SDK SSE client runs code and searches; closing the stream ends the session', async () => {
  const srv = await startHttp(undefined, ['--embedder', 'lexical']);
  try {
    const c = await connectHttp(srv.url, { legacy: true });
    assert.equal(c.client.getServerVersion().name, 'ptc-mcp');
    const tools = await c.client.listTools();
    assert.ok(tools.tools.some((t) => t.name === 'execute_code'));
    const r = await c.client.callTool({ name: 'execute_code', arguments: { code: 'print(sum(range(10)))' } });
    assert.equal(r.structuredContent.stdout, '45\n');
    const s = await c.client.callTool({ name: 'search_tools', arguments: { query: 'search' } });
    assert.equal(s.structuredContent.embedder, 'lexical');
    const endpoint = c.transport._endpoint.toString();
    assert.match(endpoint, /\/messages\?sessionId=[0-9a-f]{32}$/);
    await c.close();
    // The session is gone once the server has seen the stream close.
    let status = 0;
    for (let i = 0; i < 50 && status !== 404; i++) {
      await sleep(50);
      status = (await fetch(endpoint, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' })).status;
    }
    assert.equal(status, 404);
  } finally {
    await srv.stop();
  }
});

for (const legacy of [false, true]) test(`${legacy ? 'legacy SSE' : 'Streamable HTTP'}: progress arrives during the call and cancellation stops the run`, async () => {
  const srv = await startHttp();
  try {
    const c = await connectHttp(srv.url, { legacy });
    const seen = [];
    const r = await c.client.callTool({ name: 'execute_code', arguments: { code: 'import time\nprint("x", flush=True)\ntime.sleep(1.6)\nprint("done")' } },
      undefined, { onprogress: (p) => seen.push(p) });
    assert.equal(r.structuredContent.status, 'ok');
    assert.ok(seen.length >= 1, `got ${seen.length} progress notifications`);
    assert.match(seen.at(-1).message, /running/);

    const ac = new AbortController();
    const t0 = Date.now();
    const p = c.client.callTool({ name: 'execute_code', arguments: { code: 'import time\nwhile True:\n    time.sleep(0.05)', timeout_seconds: 60 } },
      undefined, { signal: ac.signal });
    await sleep(500);
    ac.abort('changed my mind');
    await assert.rejects(p);
    const after = await c.client.callTool({ name: 'execute_code', arguments: { code: 'print("after")' } });
    assert.equal(after.content[0].text, 'after');
    assert.ok(Date.now() - t0 < 10000);
    for (let i = 0; i < 50 && !/cancelled by the client/.test(srv.stderr); i++) await sleep(50);
    assert.match(srv.stderr, /call execute_code cancelled by the client/);
    await c.close();
  } finally {
    await srv.stop();
  }
});

test('a tools/call answers on its own SSE stream; a dropped stream resumes with Last-Event-ID', async () => {
  const srv = await startHttp();
  try {
    const sid = await initRaw(srv.url);
    // Plain requests are answered as JSON.
    const ping = await post(srv.url, sid, { jsonrpc: '2.0', id: 1, method: 'ping' });
    assert.match(ping.headers.get('content-type'), /application\/json/);
    assert.deepEqual(await ping.json(), { jsonrpc: '2.0', id: 1, result: {} });

    const ac = new AbortController();
    const res = await fetch(srv.url, {
      method: 'POST', signal: ac.signal,
      headers: { 'content-type': 'application/json', accept: JSON_SSE, 'mcp-session-id': sid },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'execute_code', arguments: { code: 'import time\ntime.sleep(1.2)\nprint("resumed")' }, _meta: { progressToken: 'p' } } }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /text\/event-stream/);
    const rd = sseReader(res);
    const prime = await rd.next();
    assert.match(prime.id, /^\d+_0$/, 'the priming event comes first');
    assert.equal(prime.data, '');
    assert.equal(prime.retry, '1000');
    // The client goes away mid-call: that is not a cancellation.
    ac.abort();
    await sleep(100);
    const again = await fetch(srv.url, { headers: { accept: 'text/event-stream', 'mcp-session-id': sid, 'last-event-id': prime.id } });
    assert.equal(again.status, 200);
    const rd2 = sseReader(again);
    let answer;
    for (let ev = await rd2.next(); ev; ev = await rd2.next()) {
      if (!ev.data) continue;
      const m = JSON.parse(ev.data);
      assert.match(ev.id, new RegExp(`^${prime.id.split('_')[0]}_\\d+$`));
      if (m.id === 2) answer = m;
    }
    assert.ok(answer, 'the answer was replayed on the resumed stream');
    assert.equal(answer.result.structuredContent.stdout, 'resumed\n');
  } finally {
    await srv.stop();
  }
});

test('the GET stream: one per session (409 for a second), 405 never; DELETE then 404', async () => {
  const srv = await startHttp();
  try {
    const sid = await initRaw(srv.url);
    const ac = new AbortController();
    const g = await fetch(srv.url, { signal: ac.signal, headers: { accept: 'text/event-stream', 'mcp-session-id': sid } });
    assert.equal(g.status, 200);
    assert.match(g.headers.get('content-type'), /text\/event-stream/);
    const g2 = await fetch(srv.url, { headers: { accept: 'text/event-stream', 'mcp-session-id': sid } });
    assert.equal(g2.status, 409);
    await g2.text();
    const d = await fetch(srv.url, { method: 'DELETE', headers: { 'mcp-session-id': sid } });
    assert.equal(d.status, 200);
    // The deleted session's GET stream ends.
    const rd = sseReader(g);
    for (let ev = await rd.next(); ev; ev = await rd.next()) { /* drain */ }
    const p = await post(srv.url, sid, { jsonrpc: '2.0', id: 5, method: 'ping' });
    assert.equal(p.status, 404);
    const d2 = await fetch(srv.url, { method: 'DELETE', headers: { 'mcp-session-id': sid } });
    assert.equal(d2.status, 404);
  } finally {
    await srv.stop();
  }
});

test('--confirm-writes: the elicitation a call makes rides that call\'s POST stream', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-http-'));
  const modules = path.join(repoRoot, 'tests', 'node_modules', '@modelcontextprotocol');
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers: { memory: { command: process.execPath, args: [path.join(modules, 'server-memory', 'dist', 'index.js')], env: { MEMORY_FILE_PATH: path.join(dir, 'm.jsonl') } } } }));
  const srv = await startHttp(undefined, ['--config', config, '--confirm-writes'], { env: { XDG_CACHE_HOME: path.join(dir, 'cache') } });
  try {
    const sid = await initRaw(srv.url, '2025-11-25', { elicitation: {} });
    // Wait for the memory server's tools to reach the generated package.
    for (let i = 0; i < 300; i++) {
      const l = await (await post(srv.url, sid, { jsonrpc: '2.0', id: 100 + i, method: 'tools/list' })).json();
      if (/memory/.test(l.result.tools.find((t) => t.name === 'execute_code').description)) break;
      await sleep(100);
    }
    const res = await post(srv.url, sid, { jsonrpc: '2.0', id: 'run', method: 'tools/call', params: { name: 'execute_code', arguments: { code: 'from tools.memory import create_entities\ncreate_entities(entities=[{"name": "Ada", "entityType": "person", "observations": []}])\nprint("created")' } } });
    const rd = sseReader(res);
    let ev;
    do { ev = await rd.next(); } while (ev && !ev.data);
    const ask = JSON.parse(ev.data);
    assert.equal(ask.method, 'elicitation/create');
    assert.match(ask.params.message, /memory__create_entities/);
    const yes = await post(srv.url, sid, { jsonrpc: '2.0', id: ask.id, result: { action: 'accept', content: { approve: true } } });
    assert.equal(yes.status, 202);
    let answer;
    for (ev = await rd.next(); ev; ev = await rd.next()) {
      if (!ev.data) continue;
      const m = JSON.parse(ev.data);
      if (m.id === 'run') answer = m;
    }
    assert.equal(answer.result.structuredContent.stdout, 'created\n', JSON.stringify(answer));
  } finally {
    await srv.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('unrelated notifications wait for the GET stream: list_changed sent before it opened arrives on it', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-http-'));
  const modules = path.join(repoRoot, 'tests', 'node_modules', '@modelcontextprotocol');
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers: { memory: { command: process.execPath, args: [path.join(modules, 'server-memory', 'dist', 'index.js')], env: { MEMORY_FILE_PATH: path.join(dir, 'm.jsonl') } } } }));
  const srv = await startHttp(undefined, ['--config', config], { env: { XDG_CACHE_HOME: path.join(dir, 'cache') } });
  try {
    // The session exists before the downstream server is listed; listing it changes
    // execute_code's description, which is announced with tools/list_changed.
    const sid = await initRaw(srv.url);
    for (let i = 0; i < 300; i++) {
      const l = await (await post(srv.url, sid, { jsonrpc: '2.0', id: 100 + i, method: 'tools/list' })).json();
      if (/memory/.test(l.result.tools.find((t) => t.name === 'execute_code').description)) break;
      await sleep(100);
    }
    const ac = new AbortController();
    const g = await fetch(srv.url, { signal: ac.signal, headers: { accept: 'text/event-stream', 'mcp-session-id': sid } });
    assert.equal(g.status, 200);
    const rd = sseReader(g);
    let ev;
    do { ev = await rd.next(); } while (ev && !ev.data);
    const m = JSON.parse(ev.data);
    assert.equal(m.method, 'notifications/tools/list_changed');
    assert.match(ev.id, /^0_\d+$/, 'events of the GET stream are numbered for resumption');
    ac.abort();
  } finally {
    await srv.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const legacy of [false, true]) test(`SIGTERM with a call in flight (${legacy ? 'legacy SSE' : 'Streamable HTTP'}): its answer still arrives, then exit 0`, async () => {
  const srv = await startHttp();
  const c = await connectHttp(srv.url, { legacy });
  const p = c.client.callTool({ name: 'execute_code', arguments: { code: 'import time\ntime.sleep(1)\nprint("finished")' } });
  await sleep(400);
  srv.proc.kill('SIGTERM');
  const r = await p;
  assert.equal(r.structuredContent.stdout, 'finished\n');
  const how = await srv.exit;
  assert.equal(how.code, 0, srv.stderr);
  assert.doesNotMatch(srv.stderr, /Sanitizer|runtime error:/);
  await c.close().catch(() => {});
});

test('fairness: one session cannot take every executor slot; another session still runs', async () => {
  // 1 running + 4 queued runs: one session may hold at most 4 requests in flight.
  const srv = await startHttp(undefined, ['--max-concurrent', '1', '--max-queue', '4']);
  try {
    const a = await initRaw(srv.url);
    const b = await initRaw(srv.url);
    const slow = (id) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_code', arguments: { code: 'import time\ntime.sleep(0.3)\nprint("slow")', timeout_seconds: 60 } } });
    const held = [];
    for (let i = 0; i < 4; i++) {
      const res = await post(srv.url, a, slow(i));
      assert.equal(res.status, 200);
      held.push(res);
    }
    const over = await post(srv.url, a, slow(9));
    assert.equal(over.status, 503);
    assert.ok(over.headers.get('retry-after'));
    await over.text();
    const other = await post(srv.url, b, slow(1));
    assert.equal(other.status, 200);
    const answers = [other, ...held].map(async (res) => {
      const rd = sseReader(res);
      let m;
      for (let ev = await rd.next(); ev; ev = await rd.next()) if (ev.data) m = JSON.parse(ev.data);
      return m.result.structuredContent;
    });
    for (const sc of await Promise.all(answers)) assert.equal(sc.stdout, 'slow\n', JSON.stringify(sc));
  } finally {
    await srv.stop();
  }
});
