// --state-key-file (issue 17): instances that share the requestState key honour each other's
// MRTR states, so a client's next round may land on any instance behind a load balancer. What
// the state names decides the rest: execute_code's parked repair lives in the process that
// asked, so another instance with the key verifies the state and then says where the job is,
// while an instance with another key refuses the state itself (-32602). Three ptc-mcp processes
// over Streamable HTTP and the raw 2026 wire; the binary refuses a short or readable key file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ptcBin } from './helpers.mjs';
import { startHttp } from './http_helpers.mjs';
import { post26 } from './modern_wire.mjs';

function keyFile(dir, name, bytes, mode = 0o600) {
  const p = path.join(dir, name);
  writeFileSync(p, bytes);
  chmodSync(p, mode);
  return p;
}

const broken = 'total = 41\nprint(totl + 1)\n';
const fix = (params) => {
  const program = /```python\n([\s\S]*?)```/.exec(params.messages[0].content.text)[1];
  return { model: 'test-model', role: 'assistant', content: { type: 'text', text: '```python\n' + program.replace('totl', 'total') + '```\n' } };
};

test('a requestState written by one instance verifies on another with the same key, not on one with another key', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-state-key-'));
  const shared = keyFile(dir, 'shared.key', randomBytes(32));
  const other = keyFile(dir, 'other.key', randomBytes(48));
  // The second instance reads the key from the config file's "ptc" object.
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers: {}, ptc: { 'state-key-file': shared } }));
  const servers = await Promise.all([
    startHttp(['--state-key-file', shared]),
    startHttp(['--config', config]),
    startHttp(['--state-key-file', other]),
  ]);
  const [a, b, c] = servers;
  try {
    const args = { code: broken };
    const call = (srv, extra = {}) => post26(srv.url, 'tools/call', { name: 'execute_code', arguments: args, ...extra }, { sampling: {} });
    const r1 = await call(a);
    const ir = r1.msg.result;
    assert.equal(ir?.resultType, 'input_required', JSON.stringify(r1.msg));
    const next = { inputResponses: { repair: fix(ir.inputRequests.repair.params) }, requestState: ir.requestState };

    // Same key: the state passes the integrity check, and the tool says the job is elsewhere.
    const onB = await call(b, next);
    assert.equal(onB.status, 200, JSON.stringify(onB.msg));
    assert.equal(onB.msg.result.isError, true, JSON.stringify(onB.msg));
    assert.match(onB.msg.result.content[0].text, /no longer waiting here.*lives on another ptc-mcp instance/s);
    // Another key: refused before the tool runs.
    const onC = await call(c, next);
    assert.equal(onC.status, 400);
    assert.equal(onC.msg.error.code, -32602, JSON.stringify(onC.msg));
    assert.match(onC.msg.error.message, /integrity check/);
    // The instance that holds the job completes the round (B's look did not consume it).
    const onA = await call(a, next);
    assert.equal(onA.msg.result.resultType, 'complete', JSON.stringify(onA.msg));
    assert.equal(onA.msg.result.structuredContent.status, 'ok', JSON.stringify(onA.msg.result));
    assert.equal(onA.msg.result.structuredContent.stdout, '42\n');
    assert.equal(onA.msg.result.structuredContent.attempts.length, 2);
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the binary refuses a key file that is short, readable by others, or missing', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-state-key-'));
  try {
    const run = (args) => spawnSync(ptcBin, args, { input: '', encoding: 'utf8', timeout: 60000 });
    const short = keyFile(dir, 'short.key', randomBytes(31));
    let r = run(['--state-key-file', short]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--state-key-file .*: 31 bytes; it needs at least 32/);
    for (const mode of [0o640, 0o604, 0o620]) {
      const open = keyFile(dir, `open-${mode.toString(8)}.key`, randomBytes(32), mode);
      r = run(['--state-key-file', open]);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, /readable or writable by group or others .*chmod 600/);
    }
    r = run(['--state-key-file', keyFile(dir, 'big.key', randomBytes(4097))]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /big\.key: larger than 4096 bytes/);
    r = run(['--state-key-file', path.join(dir, 'absent.key')]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /absent\.key: No such file/);
    // Through the config file's "ptc" object the same checks hold.
    const config = path.join(dir, 'config.json');
    writeFileSync(config, JSON.stringify({ mcpServers: {}, ptc: { 'state-key-file': short } }));
    r = run(['--config', config]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /needs at least 32/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
