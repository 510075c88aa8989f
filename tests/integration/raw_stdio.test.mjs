// Raw JSON lines for what an SDK never sends: broken input, limits, framing, batches, shutdown.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { openSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RawPeer, ptcBin, fixtureBin, sleep } from './helpers.mjs';

test('a malformed line gets -32700 with id null and the server keeps serving', async () => {
  const p = new RawPeer(ptcBin);
  await p.initialize();
  p.write('{"jsonrpc":"2.0","id":1,"method":"ping"\n');
  const err = await p.next((m) => m.error);
  assert.equal(err.id, null);
  assert.equal(err.error.code, -32700);
  p.write('not json at all\n');
  assert.equal((await p.next((m) => m.error)).error.code, -32700);
  p.write('{"a":1} trailing\n');
  assert.equal((await p.next((m) => m.error)).error.code, -32700);
  assert.deepEqual((await p.request(2, 'ping')).result, {});
  assert.deepEqual(await p.close(), { code: 0, signal: null });
});

test('invalid requests, unknown methods and pre-initialize requests get the right errors', async () => {
  const p = new RawPeer(ptcBin);
  const early = await p.request(1, 'tools/list');
  assert.equal(early.error.code, -32600);
  assert.match(early.error.message, /not initialized/);
  assert.deepEqual((await p.request(2, 'ping')).result, {}, 'ping works before initialize');
  await p.initialize();
  const again = await p.request(3, 'initialize', { protocolVersion: '2025-11-25', capabilities: {} });
  assert.equal(again.error.code, -32600);
  const unknown = await p.request(4, 'no/such/method');
  assert.equal(unknown.error.code, -32601);
  assert.match(unknown.error.message, /no\/such\/method/);
  p.send({ jsonrpc: '1.0', id: 5, method: 'ping' });
  const v = await p.response(5);
  assert.equal(v.error.code, -32600);
  p.send({ jsonrpc: '2.0', id: { x: 1 }, method: 'ping' });
  assert.equal((await p.next((m) => m.error)).error.code, -32600);
  const badParams = await p.request(6, 'tools/call', { arguments: {} });
  assert.equal(badParams.error.code, -32602);
  const badCursor = await p.request(7, 'tools/list', { cursor: 'bogus' });
  assert.equal(badCursor.error.code, -32602);
  assert.match(badCursor.error.message, /invalid cursor/);
  const badLevel = await p.request(8, 'logging/setLevel', { level: 'loud' });
  assert.equal(badLevel.error.code, -32602);
  const strId = await p.request('abc', 'ping');
  assert.equal(strId.id, 'abc');
  await p.close();
});

test('protocol negotiation answers the newest version to an unknown one', async () => {
  const p = new RawPeer(ptcBin);
  const r = await p.request(1, 'initialize', { protocolVersion: '2099-01-01', capabilities: {}, clientInfo: { name: 'x', version: '1' } });
  assert.equal(r.result.protocolVersion, '2025-11-25');
  await p.close();
  const q = new RawPeer(ptcBin);
  const bad = await q.request(1, 'initialize', { capabilities: {} });
  assert.equal(bad.error.code, -32602);
  await q.close();
});

test('an oversized line is discarded with an error and the next message is served', async () => {
  const p = new RawPeer(ptcBin, ['--max-message-bytes', '4096']);
  await p.initialize();
  // Sent in pieces, so the cap is enforced across reads without buffering the whole line.
  p.write('{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"');
  for (let i = 0; i < 20; i++) p.write('x'.repeat(1000));
  p.write('"}}\n');
  const err = await p.next((m) => m.error);
  assert.equal(err.error.code, -32600);
  assert.match(err.error.message, /exceeds the limit of 4096 bytes/);
  assert.deepEqual((await p.request(10, 'ping')).result, {});
  assert.equal(p.messages.filter((m) => m.id === 9).length, 0);
  await p.close();
});

test('a 20 MB line over the default 16 MiB cap does not stop the server', async () => {
  const p = new RawPeer(ptcBin);
  await p.initialize();
  p.write('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + 'y'.repeat(20 << 20) + '"}}\n');
  const err = await p.next((m) => m.error, 20000);
  assert.match(err.error.message, /16777216 bytes/);
  assert.deepEqual((await p.request(2, 'ping')).result, {});
  await p.close();
});

test('a message split across writes and two messages in one write are both framed', async () => {
  const p = new RawPeer(ptcBin);
  await p.initialize();
  const line = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) + '\n';
  for (const ch of line) { p.write(ch); }
  await sleep(20);
  assert.deepEqual((await p.response(1)).result, {});
  p.write(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }) + '\r\n' + JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' }) + '\n\n');
  assert.deepEqual((await p.response(2)).result, {});
  assert.deepEqual((await p.response(3)).result, {});
  await p.close();
});

test('batches are answered for 2025-03-26 only', async () => {
  const p = new RawPeer(fixtureBin);
  await p.initialize('2025-03-26');
  p.write(JSON.stringify([
    { jsonrpc: '2.0', id: 1, method: 'ping' },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'slow', arguments: { steps: 2, interval_ms: 10 } } },
    { jsonrpc: '2.0', id: 3, method: 'nope' },
    { jsonrpc: '2.0', id: 4, method: 'initialize', params: {} },
  ]) + '\n');
  const batch = await p.next((m) => Array.isArray(m));
  const byId = Object.fromEntries(batch.map((m) => [m.id, m]));
  assert.equal(batch.length, 4);
  assert.deepEqual(byId[1].result, {});
  assert.match(byId[2].result.content[0].text, /done after 2 steps/);
  assert.equal(byId[3].error.code, -32601);
  assert.equal(byId[4].error.code, -32600);
  p.write('[]\n');
  assert.equal((await p.next((m) => m.error)).error.code, -32600);
  p.write(JSON.stringify([{ jsonrpc: '2.0', method: 'notifications/initialized' }]) + '\n');
  assert.deepEqual((await p.request(5, 'ping')).result, {});
  assert.equal(p.messages.length, 0, 'a batch of notifications gets no answer');
  await p.close();

  const q = new RawPeer(fixtureBin);
  await q.initialize('2025-06-18');
  q.write(JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'ping' }]) + '\n');
  const e = await q.next((m) => m.error);
  assert.equal(e.error.code, -32600);
  assert.match(e.error.message, /only accepted in protocol version 2025-03-26/);
  await q.close();
});

test('notifications/cancelled silences the response; the last progress precedes the result', async () => {
  const p = new RawPeer(fixtureBin);
  await p.initialize();
  p.send({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'slow', arguments: { steps: 1000, interval_ms: 10 }, _meta: { progressToken: 'tok' } } });
  await p.next((m) => m.method === 'notifications/progress' && m.params.progressToken === 'tok');
  p.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7, reason: 'test' } });
  assert.deepEqual((await p.request(8, 'ping')).result, {});
  await sleep(200);
  assert.equal(p.messages.filter((m) => m.id === 7).length, 0, 'no response to a cancelled request');

  p.send({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'slow', arguments: { steps: 30, interval_ms: 2 }, _meta: { progressToken: 9 } } });
  await p.response(9);
  const progress = p.messages.filter((m) => m.method === 'notifications/progress' && m.params.progressToken === 9);
  assert.equal(progress.at(-1).params.progress, 30);
  await p.close();
});

test('stdin EOF lets in-flight calls finish, then the server exits 0', async () => {
  const p = new RawPeer(fixtureBin);
  await p.initialize();
  p.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'slow', arguments: { steps: 3, interval_ms: 50 } } });
  p.proc.stdin.end();
  const r = await p.response(1);
  assert.match(r.result.content[0].text, /done after 3 steps/);
  assert.deepEqual(await p.exit, { code: 0, signal: null });
});

test('SIGTERM cancels calls that outlive the grace period and exits 0', async () => {
  const p = new RawPeer(fixtureBin);
  await p.initialize();
  p.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'slow', arguments: { steps: 100000, interval_ms: 10 } } });
  await sleep(100);
  const t0 = Date.now();
  p.proc.kill('SIGTERM');
  assert.deepEqual(await p.exit, { code: 0, signal: null });
  assert.ok(Date.now() - t0 < 5000);
  const r = p.messages.find((m) => m.id === 1);
  assert.ok(r && r.result.isError && /cancelled/.test(r.result.content[0].text));
});

test('ptc-mcp exits 0 on SIGINT and on EOF', async () => {
  const p = new RawPeer(ptcBin);
  await p.initialize();
  p.proc.kill('SIGINT');
  assert.deepEqual(await p.exit, { code: 0, signal: null });
});

test('stdin may be a regular file and stdout a regular file', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-stdio-'));
  try {
    const input = path.join(dir, 'in.jsonl');
    const output = path.join(dir, 'out.jsonl');
    writeFileSync(input, [
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {} } },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'ping' },
    ].map((m) => JSON.stringify(m)).join('\n')); // no newline after the last line
    const r = spawnSync(ptcBin, [], { stdio: [openSync(input, 'r'), openSync(output, 'w'), 'pipe'], timeout: 10000 });
    assert.equal(r.status, 0, r.stderr?.toString());
    const lines = spawnSync('cat', [output]).stdout.toString().trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(lines.length, 2);
    assert.equal(lines[0].result.protocolVersion, '2025-06-18');
    assert.deepEqual(lines[1], { jsonrpc: '2.0', id: 2, result: {} });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the binary documents every flag and refuses unknown ones', () => {
  const help = spawnSync(ptcBin, ['--help']);
  assert.equal(help.status, 0);
  const text = help.stdout.toString();
  for (const flag of ['--transport', '--listen', '--config', '--tools-file', '--check', '--log-level',
    '--max-message-bytes', '--list-page-size', '--output-page-chars', '--python', '--max-concurrent',
    '--max-queue', '--max-timeout', '--mount', '--pass-env', '--unsafe-no-sandbox', '--embedder',
    '--embed-model-dir', '--embed-url', '--embed-remote-model', '--embed-key-env', '--expose-tools',
    '--allow-tools', '--deny-tools', '--tool-timeout', '--audit-log', '--confirm-writes', '--max-repairs',
    '--request-deadline', '--repair-url', '--repair-model', '--repair-key-env', '--auth-token-env', '--tls-cert', '--tls-key',
    '--ca-file']) {
    assert.ok(text.includes(flag), `--help documents ${flag}`);
  }
  assert.match(spawnSync(ptcBin, ['--version']).stdout.toString(), /^ptc-mcp \d+\.\d+\.\d+/);
  const bad = spawnSync(ptcBin, ['--frobnicate']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr.toString(), /unknown flag/);
  const pigeon = spawnSync(ptcBin, ['--transport', 'pigeon']);
  assert.equal(pigeon.status, 2);
  assert.match(pigeon.stderr.toString(), /--transport must be stdio or http/);
  const size = spawnSync(ptcBin, ['--max-message-bytes', 'lots']);
  assert.equal(size.status, 2);
});

test('--config reads flags from its "ptc" object; the command line wins', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-config-'));
  try {
    const cfg = path.join(dir, 'config.json');
    writeFileSync(cfg, JSON.stringify({ mcpServers: {}, ptc: { 'max-message-bytes': 2048, 'log-level': 'debug' } }));
    const p = new RawPeer(ptcBin, ['--config', cfg]);
    await p.initialize();
    p.write('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + 'z'.repeat(3000) + '"}}\n');
    assert.match((await p.next((m) => m.error)).error.message, /limit of 2048 bytes/);
    await p.close();
    assert.match(p.stderr, / debug: /);
    const q = new RawPeer(ptcBin, ['--config', cfg, '--max-message-bytes', '8192']);
    await q.initialize();
    q.write('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + 'z'.repeat(3000) + '"}}\n');
    assert.deepEqual((await q.response(1)).result, {});
    await q.close();
    writeFileSync(cfg, JSON.stringify({ ptc: { 'no-such-flag': 1 } }));
    const bad = spawnSync(ptcBin, ['--config', cfg]);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr.toString(), /no-such-flag is not a flag/);
    writeFileSync(cfg, '{ not json');
    assert.equal(spawnSync(ptcBin, ['--config', cfg]).status, 2);
    // A number where a flag takes a string is the wrong type, not a string made of it.
    writeFileSync(cfg, JSON.stringify({ ptc: { 'log-level': 7 } }));
    const num = spawnSync(ptcBin, ['--config', cfg]);
    assert.equal(num.status, 2);
    assert.match(num.stderr.toString(), /"ptc"\.log-level has the wrong type/);
    const absent = spawnSync(ptcBin, ['--config', path.join(dir, 'absent.json')]);
    assert.equal(absent.status, 2);
    assert.match(absent.stderr.toString(), /absent\.json: no such file or directory/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('stdin may be a terminal: lines typed on a TTY are served and Ctrl-D stops the server', () => {
  // Python's pty module gives the server a real terminal as stdin; stdout stays a pipe.
  const script = `
import json, os, pty, subprocess, sys
m, s = pty.openpty()
p = subprocess.Popen([sys.argv[1]], stdin=s, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
os.close(s)
os.write(m, b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}\\n')
os.write(m, b'{"jsonrpc":"2.0","id":2,"method":"ping"}\\n')
out = [json.loads(p.stdout.readline()), json.loads(p.stdout.readline())]
os.write(m, b'\\x04')
code = p.wait(timeout=10)
print(json.dumps({"out": out, "code": code}))
`;
  const r = spawnSync('python3', ['-c', script, ptcBin], { encoding: 'utf8', timeout: 20000 });
  assert.equal(r.status, 0, r.stderr);
  const { out, code } = JSON.parse(r.stdout);
  assert.equal(out[0].result.protocolVersion, '2025-06-18');
  assert.deepEqual(out[1], { jsonrpc: '2.0', id: 2, result: {} });
  assert.equal(code, 0);
});

test('a signal after stdin EOF cuts the grace period short and still exits 0', async () => {
  const p = new RawPeer(ptcBin);
  await p.initialize();
  p.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_code', arguments: { code: 'import time\nprint("started", flush=True)\ntime.sleep(60)', timeout_seconds: 60 } } });
  await sleep(1500); // the run is going
  p.proc.stdin.end();
  await sleep(200);
  const t0 = Date.now();
  p.proc.kill('SIGTERM');
  assert.deepEqual(await p.exit, { code: 0, signal: null });
  assert.ok(Date.now() - t0 < 2500, `exit took ${Date.now() - t0} ms`);
  const r = p.messages.find((m) => m.id === 1);
  assert.ok(r && r.result && r.result.isError, JSON.stringify(p.messages));
});
