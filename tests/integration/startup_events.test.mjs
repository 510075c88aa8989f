// --startup-wait's parked calls (issue 14's leftovers): `--startup-wait 0` means no wait;
// parked calls are released by the events they wait for (a server's listing, the end of the
// wait), with no polling timer waking the server while they wait; and a parked tools/list the
// client cancels is never answered.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RawPeer, ptcBin, repoRoot, sleep } from './helpers.mjs';

const fake = path.join(repoRoot, 'tests', 'fixtures', 'fake_downstream.py');

function withConfig(servers) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-startup-'));
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers: servers }));
  return { config, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

// Times the main thread gave up the CPU (blocking in epoll_wait, for one): a timer that fires
// every 25 ms counts 40 a second; a loop with nothing to do counts none.
const wakeups = (pid) => Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8'))[1]);

test('--startup-wait 0 is accepted and nothing waits: tools/list and search_tools answer at once', async () => {
  const s = withConfig({ slow: { command: 'python3', args: [fake, '--mode', 'silent'] } });
  const p = new RawPeer(ptcBin, ['--config', s.config, '--expose-tools', '--startup-wait', '0', '--embedder', 'lexical']);
  try {
    await p.initialize();
    const t0 = Date.now();
    const list = await p.request(1, 'tools/list', {});
    assert.ok(list.result.tools.some((t) => t.name === 'search_tools'), JSON.stringify(list));
    const found = await p.request(2, 'tools/call', { name: 'search_tools', arguments: { query: 'echo' } });
    assert.match(found.result.content[0].text, /Still starting \(--startup-wait 0: no wait\): [^.]*\bslow\./);
    // A parked call would wait for a server that never answers: these came back at once.
    assert.ok(Date.now() - t0 < 4000, `answered after ${Date.now() - t0} ms`);
  } finally {
    await p.close();
    s.cleanup();
  }
});

test('a parked tools/list is released by the listing, with no timer polling while it waits', async () => {
  // The server lists its tools 2.5 s after it is asked; the wait allows a minute.
  const s = withConfig({ fake: { command: 'python3', args: [fake, '--list-delay-ms', '2500'] } });
  const p = new RawPeer(ptcBin, ['--config', s.config, '--expose-tools', '--startup-wait', '60', '--embedder', 'lexical']);
  try {
    await p.initialize();
    const t0 = Date.now();
    p.send({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
    await sleep(300);
    const before = wakeups(p.proc.pid);
    await sleep(1000);
    const woke = wakeups(p.proc.pid) - before;
    const list = await p.response(1, 30000);
    const waited = Date.now() - t0;
    assert.ok(list.result.tools.some((t) => t.name === 'fake__echo'), JSON.stringify(list.result.tools.map((t) => t.name)));
    // Parked (not answered before the listing), then released long before the minute was over.
    assert.ok(waited >= 1300 && waited < 30000, `answered after ${waited} ms`);
    assert.ok(woke < 15, `the server woke ${woke} times in one second while the list was parked`);
  } finally {
    await p.close();
    s.cleanup();
  }
});

test('a parked tools/list the client cancels is never answered; the others are', async () => {
  const s = withConfig({ slow: { command: 'python3', args: [fake, '--mode', 'silent'] } });
  const p = new RawPeer(ptcBin, ['--config', s.config, '--expose-tools', '--startup-wait', '2', '--embedder', 'lexical']);
  try {
    await p.initialize();
    p.send({ jsonrpc: '2.0', id: 'cancelled', method: 'tools/list', params: {} });
    p.send({ jsonrpc: '2.0', id: 'kept', method: 'tools/list', params: {} });
    p.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'cancelled', reason: 'the user gave up' } });
    // Released when the wait is over: the kept one is answered, then a ping after it.
    const kept = await p.response('kept', 20000);
    assert.ok(kept.result.tools.some((t) => t.name === 'execute_code'));
    assert.deepEqual((await p.request('ping', 'ping')).result, {});
    await sleep(300);
    assert.equal(p.messages.find((m) => m.id === 'cancelled'), undefined, JSON.stringify(p.messages));
  } finally {
    await p.close();
    s.cleanup();
  }
});
