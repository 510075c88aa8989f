// Self-healing over Streamable HTTP: the SDK client's sampling handler repairs a failed run, and
// the sampling request rides the call's own POST stream.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectHttp, startHttp } from './helpers.mjs';

test('Streamable HTTP: the SDK client repairs a failed run through sampling', async () => {
  const srv = await startHttp();
  const asked = [];
  const c = await connectHttp(srv.url, {
    capabilities: { sampling: {} },
    setup: (client) => client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      asked.push(req.params);
      return { model: 'm', role: 'assistant', content: { type: 'text', text: '```python\nprint(sum([1, 2, 3]))\n```' } };
    }),
  });
  try {
    await c.client.listTools();
    const r = await c.client.callTool({ name: 'execute_code', arguments: { code: 'print(sum([1, 2, "3"]))' } });
    assert.equal(r.isError, undefined, r.content[0].text);
    assert.equal(r.structuredContent.stdout, '6\n');
    assert.deepEqual(r.structuredContent.attempts.map((a) => a.status), ['error', 'ok']);
    assert.match(r.structuredContent.attempts[0].error, /^TypeError: unsupported operand/);
    assert.equal(r.structuredContent.final_code, 'print(sum([1, 2, 3]))\n');
    assert.equal(asked.length, 1);
  } finally {
    await c.close();
    await srv.stop();
  }
});

// The events of an SSE response body, one JSON-RPC message each, until the stream ends.
async function* messages(res) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const data = buf.slice(0, i).split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
      buf = buf.slice(i + 2);
      if (data) yield JSON.parse(data);
    }
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
  }
}

test('Streamable HTTP: the sampling request of a repair goes out on the call\'s own stream', async () => {
  const srv = await startHttp();
  const post = (sid, body) => fetch(srv.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(sid ? { 'mcp-session-id': sid } : {}) },
    body: JSON.stringify(body),
  });
  try {
    const init = await post(null, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { sampling: {} }, clientInfo: { name: 'raw', version: '1' } } });
    const sid = init.headers.get('mcp-session-id');
    await init.json();
    assert.equal((await post(sid, { jsonrpc: '2.0', method: 'notifications/initialized' })).status, 202);
    const res = await post(sid, { jsonrpc: '2.0', id: 'run', method: 'tools/call', params: { name: 'execute_code', arguments: { code: 'raise SystemExit("no")' } } });
    assert.match(res.headers.get('content-type'), /text\/event-stream/);
    let answer;
    const methods = [];
    for await (const m of messages(res)) {
      if (m.method) methods.push(m.method);
      if (m.method === 'sampling/createMessage') {
        const ok = await post(sid, { jsonrpc: '2.0', id: m.id, result: { model: 'm', role: 'assistant', content: { type: 'text', text: 'print("repaired")' } } });
        assert.equal(ok.status, 202);
      }
      if (m.id === 'run') answer = m;
    }
    assert.ok(methods.includes('sampling/createMessage'), JSON.stringify(methods));
    assert.equal(answer.result.structuredContent.stdout, 'repaired\n');
    assert.deepEqual(answer.result.structuredContent.attempts.map((a) => a.status), ['error', 'ok']);
  } finally {
    await srv.stop();
  }
});
