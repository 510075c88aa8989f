// Ctrl-C in a terminal signals the whole foreground process group: ptc-mcp and, unless they
// are in a group of their own, its sandboxes. Only ptc-mcp may get it: a run in flight keeps
// the shutdown's grace period (3 s) and is then answered as cancelled by the shutdown.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RawPeer, ptcBin, sleep } from './helpers.mjs';

// ptc-mcp as a shell starts a job: the leader of its own process group.
async function job() {
  const p = new RawPeer(ptcBin, [], { detached: true });
  await p.initialize();
  return p;
}

const ctrlC = (p) => process.kill(-p.proc.pid, 'SIGINT');

test('Ctrl-C lets a run in flight finish within the grace period', async () => {
  const p = await job();
  try {
    p.send({ jsonrpc: '2.0', id: 1, method: 'tools/call',
      params: { name: 'execute_code', arguments: { code: 'import time\ntime.sleep(1.5)\nprint("done")' } } });
    await sleep(700); // the run is going (a warm sandbox starts in milliseconds)
    ctrlC(p);
    const r = await p.response(1, 10000);
    assert.equal(r.result.structuredContent.status, 'ok', JSON.stringify(r) + p.stderr);
    assert.equal(r.result.structuredContent.stdout, 'done\n');
    assert.deepEqual(await p.exit, { code: 0, signal: null }, p.stderr);
  } finally {
    p.proc.kill('SIGKILL');
  }
});

test('Ctrl-C cancels a run still going after the grace period, and says so', async () => {
  const p = await job();
  try {
    p.send({ jsonrpc: '2.0', id: 1, method: 'tools/call',
      params: { name: 'execute_code', arguments: { code: 'import time\ntime.sleep(30)' } } });
    await sleep(700);
    const t0 = Date.now();
    ctrlC(p);
    const r = await p.response(1, 15000);
    const waited = Date.now() - t0;
    assert.ok(waited >= 2500, `answered after ${waited} ms, before the 3 s grace period: ${JSON.stringify(r)}`);
    assert.equal(r.result.isError, true);
    assert.match(r.result.content[0].text, /cancelled: the server shut down/, JSON.stringify(r));
    assert.deepEqual(await p.exit, { code: 0, signal: null }, p.stderr);
  } finally {
    p.proc.kill('SIGKILL');
  }
});
