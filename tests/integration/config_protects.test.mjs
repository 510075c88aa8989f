// A --config that protects the user: downstream processes die with ptc-mcp even when it is
// SIGKILLed, an entry that is ptc-mcp itself starts no chain of ptc-mcp processes, and one
// invalid entry leaves the others running.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ptcBin, repoRoot, sleep, until } from './helpers.mjs';

const fake = path.join(repoRoot, 'tests', 'fixtures', 'fake_downstream.py');

function withConfig(mcpServers) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-cfg-'));
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers }));
  return { dir, config, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

// Alive and not a zombie (a dead child stays a zombie until someone reaps it).
function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

// Every process whose parent is pid.
function childrenOf(pid) {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(name));
    } catch { /* gone meanwhile */ }
  }
  return out;
}

// ptc-mcp with one stubborn downstream server (it ignores SIGTERM and stdin EOF), run until
// that server is ready; then how(ptc, stderr) ends ptc-mcp, and the server must end too.
async function stubbornServerEnds(how) {
  const c = withConfig({ fake: { command: 'python3', args: [fake, '--mode', 'stubborn'] } });
  let pid = 0;
  const ptc = spawn(ptcBin, ['--config', c.config, '--log-level', 'info'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  ptc.stderr.on('data', (d) => { err += d.toString(); });
  const exited = new Promise((resolve) => ptc.once('close', (code, signal) => resolve({ code, signal })));
  try {
    pid = Number(await until('the downstream server to start', () => err.match(/started \S+ \(pid (\d+)\)/)?.[1]));
    // Ready: the server runs its main loop (a wrapper such as a pyenv shim has exec'ed it).
    await until('the downstream server to be ready', () => /downstream server fake is ready/.test(err));
    assert.ok(alive(pid));
    await how(ptc, exited, () => err);
    await until(`downstream pid ${pid} to end`, () => !alive(pid), 10000);
  } finally {
    ptc.kill('SIGKILL');
    if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
    c.cleanup();
  }
}

test('a downstream server dies with ptc-mcp even when ptc-mcp is SIGKILLed', async () => {
  // No stop runs: only PR_SET_PDEATHSIG can end it.
  await stubbornServerEnds(async (ptc) => { ptc.kill('SIGKILL'); });
});

test('a normal shutdown ends a downstream server that ignores SIGTERM and stdin EOF', async () => {
  await stubbornServerEnds(async (ptc, exited, err) => {
    ptc.stdin.end(); // the client goes away: ptc-mcp stops its servers and exits
    assert.deepEqual(await exited, { code: 0, signal: null }, err());
  });
});

test('an entry that is ptc-mcp itself starts no ptc-mcp; one invalid entry leaves the others', async () => {
  const c = withConfig({
    self: { command: ptcBin, args: ['--config', 'CONFIG'] },
    broken: { args: ['no command'] },
    fake: { command: 'python3', args: [fake] },
  });
  // The chain a reused Claude Desktop config gives: the entry passes this very config on.
  const cfg = JSON.parse(readFileSync(c.config, 'utf8'));
  cfg.mcpServers.self.args[1] = c.config;
  writeFileSync(c.config, JSON.stringify(cfg));
  try {
    const r = spawnSync(ptcBin, ['--check', '--config', c.config], { encoding: 'utf8', timeout: 90000 });
    assert.match(r.stdout, /fake: ready/, r.stdout + r.stderr);
    assert.doesNotMatch(r.stdout, /self: ready/);
    // Running: its only children are the fake server, never another ptc-mcp.
    const ptc = spawn(ptcBin, ['--config', c.config, '--log-level', 'info'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let err = '';
    ptc.stderr.on('data', (d) => { err += d.toString(); });
    try {
      await until('the fake server to start', () => /started \S+ \(pid \d+\)/.test(err));
      await sleep(1500);
      for (const kid of childrenOf(ptc.pid)) {
        const exe = (() => { try { return readFileSync(`/proc/${kid}/cmdline`, 'utf8'); } catch { return ''; } })();
        assert.ok(!exe.startsWith(ptcBin), `ptc-mcp started itself (pid ${kid}): ${err}`);
      }
    } finally {
      ptc.kill('SIGKILL');
    }
  } finally {
    c.cleanup();
  }
});

test('a ptc-mcp started by a ptc-mcp through a wrapper starts no processes', { skip: !existsSync('/bin/sh') }, async () => {
  const c = withConfig({ fake: { command: 'python3', args: [fake] } });
  try {
    // PTC_MCP_PARENT_PID as every downstream process gets it.
    const r = spawnSync(ptcBin, ['--check', '--config', c.config], {
      encoding: 'utf8', timeout: 90000, env: { ...process.env, PTC_MCP_PARENT_PID: String(process.pid) },
    });
    assert.doesNotMatch(r.stdout, /fake: ready/, r.stdout + r.stderr);
  } finally {
    c.cleanup();
  }
});

test('--check lists every problem of the config and fails when an entry was left out', async () => {
  const c = withConfig({
    broken: { args: ['no command'] },
    fake: { command: 'python3', args: [fake], bogus: 1 },
  });
  try {
    const r = spawnSync(ptcBin, ['--check', '--config', c.config], { encoding: 'utf8', timeout: 90000 });
    assert.match(r.stdout, /^broken: left out: mcpServers\.broken: a stdio server needs "command"/m, r.stdout);
    assert.match(r.stdout, /^fake: warning: mcpServers\.fake\.bogus: unknown key/m, r.stdout);
    assert.match(r.stdout, /fake: ready/, r.stdout + r.stderr);
    assert.doesNotMatch(r.stdout, /see above/);
    assert.equal(r.status, 1, 'an entry left out fails --check');
    // Running: the same problems reach the log, named after the file.
    const ptc = spawn(ptcBin, ['--config', c.config], { stdio: ['pipe', 'pipe', 'pipe'] });
    let err = '';
    ptc.stderr.on('data', (d) => { err += d.toString(); });
    try {
      await until('the problems in the log', () => /--config \S+: mcpServers\.broken: .*left out/.test(err) &&
        /warning: --config \S+: mcpServers\.fake\.bogus: unknown key/.test(err));
    } finally {
      ptc.kill('SIGKILL');
    }
  } finally {
    c.cleanup();
  }
});

test('--check with every entry left out says so, not "none configured"', () => {
  const c = withConfig({ broken: { args: ['no command'] } });
  try {
    const r = spawnSync(ptcBin, ['--check', '--config', c.config], { encoding: 'utf8', timeout: 90000 });
    assert.match(r.stdout, /^broken: left out: /m, r.stdout);
    assert.doesNotMatch(r.stdout, /none configured/);
    assert.equal(r.status, 1);
  } finally {
    c.cleanup();
  }
});

test('a --config with a JSON syntax error names the line and column', () => {
  const c = withConfig({});
  try {
    writeFileSync(c.config, '{"mcpServers": {\n  "a": {"command": "true",}\n}}\n');
    const r = spawnSync(ptcBin, ['--check', '--config', c.config], { encoding: 'utf8', timeout: 90000 });
    assert.match(r.stderr, /--config \S+: not valid JSON: near line 2, column \d+: /, r.stderr);
    assert.notEqual(r.status, 0);
  } finally {
    c.cleanup();
  }
});
