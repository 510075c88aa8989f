// ptc-mcp with real downstream servers from npm (server-everything, server-memory) in its
// --config: their tools are searchable by meaning, --expose-tools proxies calls and pages
// tools/list, a killed server comes back, and a broken entry blocks nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CreateMessageRequestSchema, ElicitRequestSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { connect, ptcBin, repoRoot, until } from './helpers.mjs';

const modules = path.join(repoRoot, 'tests', 'node_modules', '@modelcontextprotocol');

// Each test gets its own folder: config, memory file, and a uniquely named link to
// server-memory so that this test can kill exactly its own server process.
function setup() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-ds-'));
  const memoryLink = path.join(dir, 'memory-server.js');
  symlinkSync(path.join(modules, 'server-memory', 'dist', 'index.js'), memoryLink);
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({
    mcpServers: {
      everything: { command: process.execPath, args: [path.join(modules, 'server-everything', 'dist', 'index.js'), 'stdio'] },
      memory: { command: process.execPath, args: [memoryLink], env: { MEMORY_FILE_PATH: path.join(dir, 'memory.jsonl') } },
      broken: { command: path.join(dir, 'no-such-server') },
    },
  }));
  return { dir, config, memoryLink, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

test('tools of real downstream servers are searchable by meaning; a broken one shows as failed', async () => {
  const s = setup();
  const c = await connect(ptcBin, ['--config', s.config]);
  try {
    const search = (query, extra = {}) => c.client.callTool({ name: 'search_tools', arguments: { query, ...extra } });
    await until('both servers ready and indexed', async () => {
      const r = await search('anything');
      return /everything: ready/.test(r.content[0].text) && /memory: ready/.test(r.content[0].text) &&
        r.structuredContent.index.pending === 0 && !/indexed so far/.test(r.content[0].text);
    });
    const echo = await search('repeat back the text I send', { top_k: 3 });
    assert.equal(echo.structuredContent.tools[0].id, 'everything__echo');
    assert.equal(echo.structuredContent.tools[0].server, 'everything');
    const graph = await search('remember facts about people and how they are related', { top_k: 3 });
    assert.equal(graph.structuredContent.tools[0].server, 'memory', JSON.stringify(graph.structuredContent.tools.map((t) => t.id)));
    const only = await search('add numbers', { server: 'memory', top_k: 50 });
    assert.ok(only.structuredContent.tools.every((t) => t.server === 'memory'));
    assert.match(echo.content[0].text, /broken: failed, 0 tools; cannot run .*no-such-server/);
    const states = Object.fromEntries(echo.structuredContent.servers.map((x) => [x.name, x]));
    assert.equal(states.everything.state, 'ready');
    assert.ok(states.everything.tools > 5);
    assert.equal(states.broken.state, 'failed');
    assert.match(states.broken.reason, /no-such-server/);
  } finally {
    await c.close();
    s.cleanup();
  }
});

test('--expose-tools lists downstream tools in pages, proxies calls, and a killed server comes back', async () => {
  const s = setup();
  let changed = 0;
  const c = await connect(ptcBin, ['--config', s.config, '--expose-tools', '--list-page-size', '5'], {
    setup: (client) => client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; }),
  });
  try {
    const listAll = async () => {
      const names = [];
      let cursor;
      do {
        const page = await c.client.listTools(cursor ? { cursor } : {});
        assert.ok(page.tools.length <= 5);
        names.push(...page.tools.map((t) => t.name));
        cursor = page.nextCursor;
      } while (cursor);
      return names;
    };
    const first = await listAll();
    const names = await until('downstream tools listed', async () => {
      const n = await listAll();
      return n.includes('everything__echo') && n.includes('memory__create_entities') ? n : null;
    });
    if (!first.includes('everything__echo')) assert.ok(changed >= 1, 'notifications/tools/list_changed was sent');
    assert.ok(names.includes('execute_code') && names.includes('search_tools'));
    assert.equal(new Set(names).size, names.length);

    const echo = await c.client.callTool({ name: 'everything__echo', arguments: { message: 'through the proxy' } });
    assert.match(echo.content[0].text, /through the proxy/);
    const bad = await c.client.callTool({ name: 'everything__echo', arguments: {} });
    assert.equal(bad.isError, true);
    assert.match(bad.content[0].text, /message: is required/);

    const made = await c.client.callTool({ name: 'memory__create_entities', arguments: { entities: [{ name: 'Ada', entityType: 'person', observations: ['wrote the first program'] }] } });
    assert.ok(!made.isError, JSON.stringify(made));
    const graph = await c.client.callTool({ name: 'memory__read_graph', arguments: {} });
    assert.match(JSON.stringify(graph), /wrote the first program/);

    // Kill this test's memory server; the client restarts it and calls work again.
    execFileSync('pkill', ['-KILL', '-f', s.memoryLink]);
    const again = await until('memory server back', async () => {
      const r = await c.client.callTool({ name: 'memory__read_graph', arguments: {} });
      return r.isError ? null : r;
    });
    assert.match(JSON.stringify(again), /wrote the first program/, 'the graph survives in its file');
  } finally {
    await c.close();
    s.cleanup();
  }
});

test('--check starts every configured server and reports each one', () => {
  const s = setup();
  try {
    const r = spawnSync(ptcBin, ['--check', '--config', s.config], { encoding: 'utf8', timeout: 90000 });
    assert.equal(r.status, 1, 'a failed server makes --check exit 1');
    assert.match(r.stdout, /everything: ready, \d+ tools/);
    assert.match(r.stdout, /memory: ready, \d+ tools/);
    assert.match(r.stdout, /broken: failed/);
  } finally {
    s.cleanup();
  }
});

test('sampling and elicitation requests of a downstream server reach our client and come back', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-ds-'));
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers: { fake: { command: 'python3', args: [path.join(repoRoot, 'tests', 'fixtures', 'fake_downstream.py')] } } }));
  const c = await connect(ptcBin, ['--config', config, '--expose-tools'], {
    capabilities: { sampling: {}, elicitation: {} },
    setup: (client) => {
      client.setRequestHandler(CreateMessageRequestSchema, async () => ({ model: 'm', role: 'assistant', content: { type: 'text', text: 'sampled by the test client' } }));
      client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { ok: true } }));
    },
  });
  try {
    await until('fake server tools', async () => (await c.client.listTools()).tools.some((t) => t.name === 'fake__ask'));
    const r = await c.client.callTool({ name: 'fake__ask', arguments: {} });
    const answers = JSON.parse(r.content[0].text);
    assert.equal(answers['sampling/createMessage'].content.text, 'sampled by the test client');
    // The fake server's elicitation lacks requestedSchema.properties: the SDK client refuses
    // it, and that refusal travels back to the server as a JSON-RPC error.
    assert.match(answers['elicitation/create'].error.message, /Invalid input/);
    assert.deepEqual(answers['roots/list'], { roots: [] });
    assert.deepEqual(answers.ping, {});
  } finally {
    await c.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
