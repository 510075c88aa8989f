// SEP-2243 headers sent downstream (issue 17): when mcp/'s downstream client calls a tool of a
// 2026-07-28 server over Streamable HTTP and the tool's listed inputSchema names
// "x-mcp-header": NAME for an argument, the POST carries Mcp-Param-NAME with the value (literal
// when it is plain visible ASCII, else =?base64?...?=). The server is the modern-only fixture
// built with the TypeScript SDK 2.4.0 (tests/fixtures/modern_only_server.mjs param-headers),
// which refuses a call whose header is missing or differs (-32020) before its handler runs:
// the raw POSTs below show that it does, then the C driver's calls get through.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Driver } from './downstream_driver.mjs';
import { post26, startModernHttp } from './modern_wire.mjs';

const text = (answer) => answer.result.content.map((c) => c.text ?? '').join('');

test('the downstream client sends Mcp-Param-* headers for x-mcp-header arguments, literal or base64', async () => {
  const srv = await startModernHttp(['param-headers']);
  const d = new Driver(() => ({ mcpServers: { modern: { type: 'http', url: srv.url } } }));
  try {
    // The server does refuse a call without its headers, or with a different value.
    const args = { region: 'eu-west', count: 3 };
    const bare = await post26(srv.url, 'tools/call', { name: 'route', arguments: args });
    assert.equal(bare.status, 400, JSON.stringify(bare.msg));
    assert.equal(bare.msg.error.code, -32020);
    const wrong = await post26(srv.url, 'tools/call', { name: 'route', arguments: args },
      {}, { headers: { 'Mcp-Param-Region': 'us-east', 'Mcp-Param-Count': '3' } });
    assert.equal(wrong.msg.error?.code, -32020, JSON.stringify(wrong.msg));
    const right = await post26(srv.url, 'tools/call', { name: 'route', arguments: args },
      {}, { headers: { 'Mcp-Param-Region': 'eu-west', 'Mcp-Param-Count': '3' } });
    assert.equal(right.msg.result?.content?.[0]?.text, 'eu-west x3', JSON.stringify(right.msg));

    await d.ready('modern');
    const info = await d.cmd({ cmd: 'info', server: 'modern' });
    assert.equal(info.init.protocolVersion, '2026-07-28');
    const call = (a) => d.cmd({ cmd: 'call', server: 'modern', tool: 'route', args: a });
    // Plain values go literally; a number as its decimal text.
    let r = await call(args);
    assert.equal(r.err, 0, JSON.stringify(r));
    assert.equal(text(r), 'eu-west x3');
    // Values a header cannot hold literally (non-ASCII, edge blanks, the sentinel itself) go
    // as base64, which the server decodes to the same value.
    for (const note of ['größer', ' padded ', '=?base64?not-really?=', 'line\nbreak', '']) {
      r = await call({ region: 'ap-south', count: 1.5, note });
      assert.equal(r.err, 0, `${JSON.stringify(note)}: ${JSON.stringify(r)}`);
      assert.equal(text(r), `ap-south x1.5: ${note}`);
    }
    // An argument left out sends no header (the server expects none).
    r = await call({ region: 'x', count: 0 });
    assert.equal(text(r), 'x x0');
  } finally {
    await d.close();
    srv.stop();
  }
});
