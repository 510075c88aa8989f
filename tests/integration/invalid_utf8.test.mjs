// A downstream server that sends ill-formed UTF-8 inside a result (tests/fixtures/fake_downstream.py,
// echo with bad_utf8): the client boundary replaces it with U+FFFD, so that neither our own
// answers (--expose-tools) nor the sandbox's bridge ever carry the bytes on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RawPeer, connect, ptcBin, repoRoot, sleep } from './helpers.mjs';

// a 0xFF b, "caf" and a cut 2-byte sequence, a UTF-16 surrogate (3 ill-formed bytes), z.
const repaired = 'a\uFFFDb caf\uFFFD \uFFFD\uFFFD\uFFFDz';

function setup() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-utf8-'));
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({
    mcpServers: { fake: { command: 'python3', args: [path.join(repoRoot, 'tests', 'fixtures', 'fake_downstream.py')] } },
  }));
  return { config, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

test('--expose-tools: a result with ill-formed UTF-8 reaches the client as valid UTF-8 (U+FFFD)', async () => {
  const s = setup();
  const p = new RawPeer(ptcBin, ['--config', s.config, '--expose-tools']);
  const raw = [];
  p.proc.stdout.on('data', (d) => raw.push(d));
  try {
    await p.initialize();
    let id = 1;
    for (let i = 0; ; i++) {
      const l = await p.request(id++, 'tools/list');
      if (l.result.tools.some((t) => t.name === 'fake__echo')) break;
      assert.ok(i < 200, `fake__echo never listed: ${p.stderr}`);
      await sleep(100);
    }
    const r = await p.request(id++, 'tools/call', { name: 'fake__echo', arguments: { bad_utf8: true } });
    assert.equal(r.result.content[0].text, repaired);
    // What went out on stdout is valid UTF-8 (Node's own decoding above would hide it).
    assert.doesNotThrow(() => new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(raw)));
    // The log line travels on stderr, a pipe of its own: it may come in after the answer.
    const logged = /downstream server fake sent 5 ill-formed UTF-8 sequences/;
    for (let i = 0; i < 200 && !logged.test(p.stderr); i++) await sleep(50);
    assert.match(p.stderr, logged);
    const again = await p.request(id++, 'tools/call', { name: 'fake__echo', arguments: { n: 1 } });
    assert.equal(again.result.content[0].text, '{"n": 1}');
  } finally {
    p.proc.kill('SIGKILL');
    s.cleanup();
  }
});

test('execute_code: a result with ill-formed UTF-8 leaves the bridge usable for the rest of the run', async () => {
  const s = setup();
  const c = await connect(ptcBin, ['--config', s.config]);
  try {
    for (let i = 0; ; i++) {
      const t = (await c.client.listTools()).tools.find((x) => x.name === 'execute_code');
      if (/modules: .*fake/.test(t.description)) break;
      assert.ok(i < 300, `fake never ready: ${c.stderr.join('')}`);
      await sleep(100);
    }
    const r = await c.client.callTool({
      name: 'execute_code',
      arguments: { code: 'import tools\nprint(repr(tools.call("fake", "echo", bad_utf8=True)))\nprint(tools.call("fake", "echo", n=2))\n' },
    });
    assert.equal(r.structuredContent.status, 'ok', r.content[0].text);
    const lines = r.structuredContent.stdout.trim().split('\n');
    assert.match(lines[0], new RegExp(repaired.replace(/\uFFFD/g, '\\ufffd')));
    assert.match(lines[1], /'n': 2|"n": 2/);
    assert.equal(r.structuredContent.tool_calls, 2);
  } finally {
    await c.close();
    s.cleanup();
  }
});
