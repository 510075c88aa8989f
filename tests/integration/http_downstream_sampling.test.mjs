// Over HTTP many sessions share the downstream servers: a downstream server's sampling request
// must reach the client whose call it serves (on that call's stream), never another session's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHttp, connectHttp, repoRoot, sleep } from './helpers.mjs';

const modules = path.join(repoRoot, 'tests', 'node_modules', '@modelcontextprotocol');

test('a downstream sampling request goes to the session whose call (proxied or from code) caused it', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-ds-sampling-'));
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({
    mcpServers: { everything: { command: process.execPath, args: [path.join(modules, 'server-everything', 'dist', 'index.js'), 'stdio'] } },
  }));
  const srv = await startHttp(undefined, ['--config', config, '--expose-tools', '--embedder', 'lexical'],
    { env: { XDG_CACHE_HOME: path.join(dir, 'cache') } });
  const asked = { A: [], B: [] };
  const client = (who) => connectHttp(srv.url, {
    capabilities: { sampling: {} },
    setup: (c) => c.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      asked[who].push(JSON.stringify(req.params));
      return { model: `model-${who}`, role: 'assistant', content: { type: 'text', text: `answer from ${who}` } };
    }),
  });
  const a = await client('A');
  const b = await client('B'); // the newest session: where a "first session" pick would go
  try {
    let names = [];
    for (let i = 0; i < 300 && !names.includes('everything__trigger-sampling-request'); i++) {
      names = (await a.client.listTools()).tools.map((t) => t.name);
      if (!names.includes('everything__trigger-sampling-request')) await sleep(100);
    }
    assert.ok(names.includes('everything__trigger-sampling-request'), `no sampling tool: ${names}`);

    const proxied = await a.client.callTool({ name: 'everything__trigger-sampling-request', arguments: { prompt: 'from A', maxTokens: 5 } });
    assert.notEqual(proxied.isError, true, JSON.stringify(proxied));
    assert.match(JSON.stringify(proxied.content), /answer from A/);
    assert.equal(asked.A.length, 1);
    assert.match(asked.A[0], /from A/);
    assert.equal(asked.B.length, 0, 'B was never asked');

    // The same from B's sandboxed code through the bridge.
    let ready = false;
    for (let i = 0; i < 300 && !ready; i++) {
      const t = (await b.client.listTools()).tools.find((x) => x.name === 'execute_code');
      ready = /modules: .*everything/.test(t.description);
      if (!ready) await sleep(100);
    }
    const r = await b.client.callTool({ name: 'execute_code', arguments: {
      code: 'from tools.everything import trigger_sampling_request\nprint(trigger_sampling_request(prompt="from B", maxTokens=5))\n',
      max_repairs: 0,
    } });
    assert.equal(r.structuredContent.status, 'ok', r.content[0].text);
    assert.match(r.structuredContent.stdout, /answer from B/);
    assert.equal(asked.B.length, 1);
    assert.match(asked.B[0], /from B/);
    assert.equal(asked.A.length, 1, 'A was not asked again');
  } finally {
    await a.close();
    await b.close();
    await srv.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
