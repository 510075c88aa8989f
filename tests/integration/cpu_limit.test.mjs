// --cpu-limit CORES: a run's CPU share (the cgroup's cpu.max), through the official SDK client and
// --check; values out of range are refused at start with what is allowed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, ptcBin } from './helpers.mjs';

const check = (args) => spawnSync(ptcBin, ['--check', ...args], { encoding: 'utf8', timeout: 60000 });
const cpuLayer = (out) => /^\s*cgroup-cpu\s+(\S+)\s+(.*)$/m.exec(out);

test('--cpu-limit out of range is refused at start, naming the range', () => {
  for (const v of ['0', '-1', 'two', '0.001', '300']) {
    const r = spawnSync(ptcBin, ['--cpu-limit', v], { input: '', encoding: 'utf8', timeout: 30000 });
    assert.notEqual(r.status, 0, v);
    assert.match(r.stderr, /--cpu-limit/, v);
  }
  const r = spawnSync(ptcBin, ['--cpu-limit', '300'], { input: '', encoding: 'utf8', timeout: 30000 });
  assert.match(r.stderr, /between 0\.01 and 256 cores, not 300/);
});

test('--cpu-limit sets the sandbox cgroup quota (--check, --config) and a spinning run gets no more', async (t) => {
  const layer = cpuLayer(check(['--cpu-limit', '0.1']).stdout);
  assert.ok(layer, 'the CPU cgroup layer is listed');
  if (layer[1] !== 'active') {
    t.skip(`no CPU cgroup here: ${layer[2]}`);
    return;
  }
  assert.match(layer[2], /0\.100 CPU/);
  assert.match(cpuLayer(check([]).stdout)[2], /1\.000 CPU/, 'the default is one core');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ptc-cpu-limit-'));
  try {
    const cfg = path.join(dir, 'config.json');
    fs.writeFileSync(cfg, JSON.stringify({ mcpServers: {}, ptc: { 'cpu-limit': 2.5 } }));
    assert.match(cpuLayer(check(['--config', cfg]).stdout)[2], /2\.500 CPU/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const c = await connect(ptcBin, ['--cpu-limit', '0.1']);
  try {
    await c.client.listTools();
    const code = 'import time\nt = time.monotonic(); c = time.process_time()\n' +
      'while time.monotonic() - t < 1.5: pass\nprint(int(1000 * (time.process_time() - c) / (time.monotonic() - t)))\n';
    const r = await c.client.callTool({ name: 'execute_code', arguments: { code, max_repairs: 0 } });
    assert.equal(r.structuredContent.status, 'ok', JSON.stringify(r.structuredContent));
    // thousandths of a core; a loaded machine only lowers it
    assert.ok(Number(r.structuredContent.stdout) <= 180, r.structuredContent.stdout);
  } finally {
    await c.close();
  }
});
