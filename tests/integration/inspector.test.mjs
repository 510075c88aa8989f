// The MCP Inspector CLI (run on the Node 22 that tests/package.json pins) against the binaries.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { ptcBin, fixtureBin, node22, repoRoot } from './helpers.mjs';

const cli = path.join(repoRoot, 'tests', 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');

function inspector(args) {
  const r = spawnSync(node22, [cli, '--cli', ...args], { timeout: 60000, encoding: 'utf8' });
  assert.equal(r.status, 0, `inspector failed: ${r.stderr}`);
  assert.doesNotMatch(r.stderr, /Sanitizer|runtime error:/);
  return JSON.parse(r.stdout);
}

test('the Inspector CLI lists the tools of ptc-mcp', () => {
  const out = inspector([ptcBin, '--method', 'tools/list']);
  assert.ok(Array.isArray(out.tools));
});

test('the Inspector CLI pages through every tool of the fixture server and calls one', () => {
  const out = inspector([fixtureBin, '--tools', '30', '--page', '7', '--method', 'tools/list']);
  assert.equal(out.tools.length, 36);
  assert.equal(new Set(out.tools.map((t) => t.name)).size, 36);
  const call = inspector([fixtureBin, '--method', 'tools/call', '--tool-name', 'echo', '--tool-arg', 'message=from inspector']);
  assert.equal(call.content[0].text, 'from inspector');
  assert.deepEqual(call.structuredContent, { echo: 'from inspector' });
});

test('the Inspector CLI reaches ptc-mcp over Streamable HTTP and the legacy SSE transport', async () => {
  const { startHttp } = await import('./helpers.mjs');
  const srv = await startHttp(ptcBin, ['--embedder', 'lexical']);
  try {
    // spawnSync would block the loop the server's output is read on; spawn and wait instead.
    const { spawn } = await import('node:child_process');
    const run = (args) => new Promise((resolve) => {
      const p = spawn(node22, [cli, '--cli', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '', err = '';
      p.stdout.on('data', (d) => { out += d; });
      p.stderr.on('data', (d) => { err += d; });
      p.on('close', (code) => resolve({ code, out, err }));
    });
    const http = await run([srv.url, '--transport', 'http', '--method', 'tools/list']);
    assert.equal(http.code, 0, http.err);
    assert.ok(JSON.parse(http.out).tools.some((t) => t.name === 'execute_code'));
    const call = await run([srv.url, '--transport', 'http', '--method', 'tools/call', '--tool-name', 'execute_code', '--tool-arg', 'code=print(2**10)']);
    assert.equal(call.code, 0, call.err);
    assert.equal(JSON.parse(call.out).structuredContent.stdout, '1024\n');
    const sse = await run([`${srv.base}/sse`, '--transport', 'sse', '--method', 'tools/list']);
    assert.equal(sse.code, 0, sse.err);
    assert.ok(JSON.parse(sse.out).tools.some((t) => t.name === 'search_tools'));
  } finally {
    await srv.stop();
  }
});
