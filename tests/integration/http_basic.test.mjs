// ptc-mcp over Streamable HTTP with the official SDK client: handshake, tools, a code run, a
// tool search, session deletion.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startHttp, connectHttp } from './helpers.mjs';

test('Streamable HTTP: the SDK client initializes, lists tools, runs code and searches', async () => {
  const srv = await startHttp(undefined, ['--embedder', 'lexical']);
  try {
    const c = await connectHttp(srv.url);
    assert.match(c.transport.sessionId, /^[0-9a-f]{32}$/);
    assert.equal(c.client.getServerVersion().name, 'ptc-mcp');
    await c.client.ping();
    const tools = await c.client.listTools();
    const names = tools.tools.map((t) => t.name);
    assert.ok(names.includes('execute_code') && names.includes('search_tools'), names.join(','));
    const r = await c.client.callTool({ name: 'execute_code', arguments: { code: 'print(6 * 7)' } });
    assert.equal(r.structuredContent.status, 'ok');
    assert.equal(r.structuredContent.stdout, '42\n');
    const s = await c.client.callTool({ name: 'search_tools', arguments: { query: 'run python code' } });
    assert.equal(s.structuredContent.embedder, 'lexical');
    // DELETE ends the session; the id is then unknown.
    const sid = c.transport.sessionId;
    await c.transport.terminateSession();
    const res = await fetch(srv.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' }),
    });
    assert.equal(res.status, 404);
    await c.close();
  } finally {
    await srv.stop();
  }
});
