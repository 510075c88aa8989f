// search_tools through the official SDK client: ranking by meaning with the in-process model,
// filters, bounds, the lexical and remote (OpenAI-compatible, local) embedders.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, ptcBin, repoRoot, sleep } from './helpers.mjs';

const catalog = path.join(repoRoot, 'tests', 'fixtures', 'catalog_small.json');

async function indexed(c, n = 8) {
  // Indexing runs on the thread pool; the log says when it is complete.
  for (let i = 0; i < 600; i++) {
    if (c.stderr.join('').includes(`search index: ${n} tools indexed`)) return;
    await sleep(50);
  }
  throw new Error(`index not complete: ${c.stderr.join('')}`);
}

const search = (c, args) => c.client.callTool({ name: 'search_tools', arguments: args });

test('search_tools ranks tools by meaning with the model, not by shared words', async () => {
  const c = await connect(ptcBin, ['--tools-file', catalog]);
  try {
    const { tools } = await c.client.listTools();
    assert.ok(tools.some((t) => t.name === 'search_tools'));
    await indexed(c);
    const cases = [
      ['will it rain in Paris tomorrow', 'weather__get_forecast'],
      ['report a bug so the team can fix it', 'tracker__create_issue'],
      ['write to my colleague about the meeting', 'mail__send_email'],
      ['what is inside this document on my computer', 'files__read_file'],
      ['is the air safe to breathe outside', 'weather__get_air_quality'],
    ];
    for (const [query, want] of cases) {
      const r = await search(c, { query, top_k: 3 });
      assert.ok(!r.isError, r.content[0].text);
      assert.equal(r.structuredContent.embedder, 'model:all-MiniLM-L6-v2');
      assert.equal(r.structuredContent.tools[0].id, want, `${query}: ${JSON.stringify(r.structuredContent.tools.map((t) => t.id))}`);
      const top = r.structuredContent.tools[0];
      assert.equal(top.server, want.split('__')[0]);
      assert.equal(top.name, want.split('__')[1]);
      assert.equal(top.inputSchema.type, 'object');
      assert.ok(top.score > 0 && top.score <= 1);
      assert.match(r.content[0].text, new RegExp(want));
    }
  } finally {
    await c.close();
  }
});

test('search_tools filters by server and checks its arguments', async () => {
  const c = await connect(ptcBin, ['--tools-file', catalog]);
  try {
    await indexed(c);
    const r = await search(c, { query: 'send a message', server: 'tracker', top_k: 10 });
    assert.ok(r.structuredContent.tools.length > 0);
    assert.ok(r.structuredContent.tools.every((t) => t.server === 'tracker'));
    const all = await search(c, { query: 'anything', top_k: 50 });
    assert.equal(all.structuredContent.tools.length, 8);
    const none = await search(c, { query: 'weather', server: 'no-such-server' });
    assert.equal(none.structuredContent.tools.length, 0);
    assert.match(none.content[0].text, /No tools match/);
    for (const [args, why] of [
      [{ query: '' }, /query: needs at least 1 characters/],
      [{ query: '   ' }, /query is empty/],
      [{ query: 'x', top_k: 0 }, /top_k: must be >= 1/],
      [{ query: 'x', top_k: 51 }, /top_k: must be <= 50/],
      [{ top_k: 3 }, /query: is required/],
    ]) {
      const bad = await search(c, args);
      assert.equal(bad.isError, true, JSON.stringify(args));
      assert.match(bad.content[0].text, why);
    }
  } finally {
    await c.close();
  }
});

test('the lexical embedder works without a model and says so', async () => {
  const c = await connect(ptcBin, ['--tools-file', catalog, '--embedder', 'lexical']);
  try {
    await indexed(c);
    const r = await search(c, { query: 'close issue number 12', top_k: 2 });
    assert.equal(r.structuredContent.embedder, 'lexical');
    assert.equal(r.structuredContent.tools[0].id, 'tracker__close_issue');
  } finally {
    await c.close();
  }
});

test('bad embedder settings and tool files stop the server with a reason', () => {
  const noModel = spawnSync(ptcBin, ['--embedder', 'model', '--embed-model-dir', '/nonexistent-model-dir'], { input: '', encoding: 'utf8' });
  assert.notEqual(noModel.status, 0);
  assert.match(noModel.stderr, /nonexistent-model-dir/);
  const noFile = spawnSync(ptcBin, ['--tools-file', '/nonexistent.json'], { input: '', encoding: 'utf8' });
  assert.notEqual(noFile.status, 0);
  assert.match(noFile.stderr, /--tools-file/);
  const remote = spawnSync(ptcBin, ['--embedder', 'remote'], { input: '', encoding: 'utf8' });
  assert.notEqual(remote.status, 0);
  assert.match(remote.stderr, /--embed-url/);
  const check = spawnSync(ptcBin, ['--check'], { encoding: 'utf8' });
  assert.match(check.stdout, /embedder: model:all-MiniLM-L6-v2 \(dimension 384\)/);
});

test('an unreachable remote embedder falls back to the lexical one with a warning', async () => {
  const closed = http.createServer();
  const port = await new Promise((resolve) => closed.listen(0, '127.0.0.1', () => resolve(closed.address().port)));
  await new Promise((resolve) => closed.close(resolve)); // nothing listens there now
  const c = await connect(ptcBin, ['--tools-file', catalog, '--embedder', 'remote', '--embed-url', `http://127.0.0.1:${port}/v1/embeddings`,
    '--embed-remote-model', 'm']);
  try {
    await indexed(c);
    const r = await search(c, { query: 'close issue number 12', top_k: 1 });
    assert.equal(r.structuredContent.embedder, 'lexical');
    assert.equal(r.structuredContent.tools[0].id, 'tracker__close_issue');
    assert.match(c.stderr.join(''), /falling back to the built-in lexical embedder/);
  } finally {
    await c.close();
  }
});

// A local OpenAI-compatible embeddings endpoint: deterministic bag-of-words vectors, so the
// ranking is checkable, and a record of what the server sent.
function startEmbeddingServer() {
  const seen = [];
  const dim = 64;
  const vec = (text) => {
    const v = new Array(dim).fill(0);
    for (const w of text.toLowerCase().match(/[a-z]+/g) ?? []) {
      let h = 0;
      for (const ch of w) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
      v[h % dim] += 1;
    }
    return v;
  };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      const j = JSON.parse(body);
      seen.push({ url: req.url, auth: req.headers.authorization, model: j.model, n: j.input.length });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ object: 'list', data: j.input.map((t, i) => ({ object: 'embedding', index: i, embedding: vec(t) })), model: j.model }));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, seen, port: server.address().port })));
}

test('the remote embedder calls an OpenAI-compatible endpoint; a restart reuses the embedding cache', async () => {
  const { server, seen, port } = await startEmbeddingServer();
  const cacheHome = mkdtempSync(path.join(os.tmpdir(), 'ptc-cache-'));
  const args = ['--tools-file', catalog, '--embedder', 'remote', '--embed-url', `http://127.0.0.1:${port}/v1/embeddings`,
    '--embed-remote-model', 'test-embed', '--embed-key-env', 'PTC_TEST_EMBED_KEY'];
  const env = { PTC_TEST_EMBED_KEY: 'sk-test-123', XDG_CACHE_HOME: cacheHome };
  try {
    const c = await connect(ptcBin, args, { env });
    try {
      await indexed(c);
      const r = await search(c, { query: 'list directory entries', top_k: 1 });
      assert.equal(r.structuredContent.embedder, 'remote:test-embed');
      assert.equal(r.structuredContent.tools[0].id, 'files__list_directory');
    } finally {
      await c.close();
    }
    assert.ok(seen.every((s) => s.url === '/v1/embeddings' && s.auth === 'Bearer sk-test-123' && s.model === 'test-embed'));
    assert.ok(seen.some((s) => s.n === 8), `the catalog is embedded in one batch: ${JSON.stringify(seen)}`);
    seen.length = 0;
    const again = await connect(ptcBin, args, { env });
    try {
      await indexed(again);
      const r = await search(again, { query: 'list directory entries', top_k: 1 });
      assert.equal(r.structuredContent.tools[0].id, 'files__list_directory');
    } finally {
      await again.close();
    }
    assert.ok(!seen.some((s) => s.n === 8), `a restart re-embedded the catalog: ${JSON.stringify(seen)}`);
  } finally {
    server.close();
    rmSync(cacheHome, { recursive: true, force: true });
  }
});

test('tools.search in execute_code filters by category and server as search_tools does', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-codecat-'));
  const toolsFile = path.join(dir, 'tools.json');
  writeFileSync(toolsFile, JSON.stringify([
    { server: 'disk', name: 'read_file', description: 'Read a file from disk', category: 'storage' },
    { server: 'disk', name: 'delete_file', description: 'Delete a file from disk', category: 'storage' },
    { server: 'cloud', name: 'read_object', description: 'Read a file from a bucket', category: 'storage' },
    { server: 'mail', name: 'read_inbox', description: 'Read the messages of a file folder in the inbox', category: 'messaging' },
    { server: 'mail', name: 'send_mail', description: 'Send a message with a file attached', category: 'messaging' },
  ]));
  const code = [
    'import json, tools',
    'def ids(rs): return sorted((t["id"], t["category"]) for t in rs)',
    'out = {',
    '  "all": ids(tools.search("read a file", top_k=50)),',
    '  "storage": ids(tools.search("read a file", 50, category="storage")),',
    '  "messaging": ids(tools.search("read a file", top_k=50, category="messaging")),',
    '  "both": ids(tools.search("read a file", top_k=50, server="cloud", category="storage")),',
    '  "clash": ids(tools.search("read a file", top_k=50, server="mail", category="storage")),',
    '  "none": ids(tools.search("read a file", top_k=50, category="nope")),',
    '}',
    'import asyncio',
    'out["async"] = ids(asyncio.run(tools.asearch("read a file", 50, category="messaging")))',
    'try:',
    '    tools.search("   ")',
    'except tools.ToolError as e:',
    '    out["blank"] = str(e)',
    'print(json.dumps(out))',
  ].join('\n');
  try {
    const c = await connect(ptcBin, ['--tools-file', toolsFile, '--embedder', 'lexical']);
    try {
      // Called at once: the first run that imports tools waits for the generated package
      // (the start-up gate), with no downstream server as with one.
      const r = await c.client.callTool({ name: 'execute_code', arguments: { code } });
      assert.equal(r.structuredContent.status, 'ok', r.content[0].text);
      const out = JSON.parse(r.structuredContent.stdout);
      const storage = [['cloud__read_object', 'storage'], ['disk__delete_file', 'storage'], ['disk__read_file', 'storage']];
      const messaging = [['mail__read_inbox', 'messaging'], ['mail__send_mail', 'messaging']];
      assert.deepEqual(out.all, [...storage, ...messaging].sort());
      assert.deepEqual(out.storage, storage);
      assert.deepEqual(out.messaging, messaging);
      assert.deepEqual(out.async, messaging);
      assert.deepEqual(out.both, [['cloud__read_object', 'storage']]);
      assert.deepEqual(out.clash, []);
      assert.deepEqual(out.none, []);
      assert.match(out.blank, /query is empty/);
      // The same filter through search_tools gives the same tools in the same order.
      const code2 = 'import tools\nprint([t["id"] for t in tools.search("read a file", top_k=3, category="storage")])';
      const r2 = await c.client.callTool({ name: 'execute_code', arguments: { code: code2 } });
      const st = await search(c, { query: 'read a file', top_k: 3, category: 'storage' });
      assert.equal(r2.structuredContent.stdout.trim(),
        `[${st.structuredContent.tools.map((t) => `'${t.id}'`).join(', ')}]`);
    } finally {
      await c.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('search_tools category: from a --config entry and a --tools-file tool, filtered and shown', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-cat-'));
  const config = path.join(dir, 'config.json');
  const toolsFile = path.join(dir, 'tools.json');
  const fake = path.join(repoRoot, 'tests', 'fixtures', 'fake_downstream.py');
  writeFileSync(config, JSON.stringify({
    mcpServers: {
      lab: { command: 'python3', args: [fake], category: 'testing' },
      plain: { command: 'python3', args: [fake] },
    },
  }));
  writeFileSync(toolsFile, JSON.stringify([
    { server: 'files', name: 'read_file', description: 'Read a file from disk', category: 'storage' },
    { server: 'files', name: 'stat_file', description: 'Show a file\'s size and dates' },
  ]));
  try {
    // "category" is a key of ours now: no warning about it.
    const chk = spawnSync(ptcBin, ['--check', '--config', config], { encoding: 'utf8', timeout: 90000 });
    assert.doesNotMatch(chk.stdout + chk.stderr, /category/, chk.stdout + chk.stderr);

    const c = await connect(ptcBin, ['--config', config, '--tools-file', toolsFile, '--embedder', 'lexical', '--startup-wait', '60']);
    try {
      const { tools } = await c.client.listTools(); // the SDK then checks structuredContent
      const st = tools.find((t) => t.name === 'search_tools');
      assert.equal(st.inputSchema.properties.category.type, 'string');
      assert.ok(st.outputSchema.properties.tools.items.required.includes('category'));

      const lab = await search(c, { query: 'echo fixture tool', top_k: 50, category: 'testing' });
      assert.ok(lab.structuredContent.tools.length > 0, lab.content[0].text);
      for (const t of lab.structuredContent.tools) {
        assert.equal(t.server, 'lab');
        assert.equal(t.category, 'testing');
      }
      assert.match(lab.content[0].text, /^1\. lab__\S+ \(score [0-9.]+; category testing\)/);

      // Without a configured category a server's tools are in its own name's.
      const plain = await search(c, { query: 'echo fixture tool', top_k: 50, category: 'plain' });
      assert.ok(plain.structuredContent.tools.length > 0);
      assert.ok(plain.structuredContent.tools.every((t) => t.server === 'plain' && t.category === 'plain'));

      const stored = await search(c, { query: 'file', top_k: 50, category: 'storage' });
      assert.deepEqual(stored.structuredContent.tools.map((t) => t.id), ['files__read_file']);
      const all = await search(c, { query: 'file', top_k: 50 });
      assert.equal(all.structuredContent.tools.find((t) => t.id === 'files__stat_file').category, 'files');

      const none = await search(c, { query: 'echo', category: 'nope' });
      assert.equal(none.structuredContent.tools.length, 0);
      assert.match(none.content[0].text, /No tools match in category nope/);
    } finally {
      await c.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
