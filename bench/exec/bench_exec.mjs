// bench/exec: execute_code `print(1)` through the official SDK client, side by side in the same
// run with bare `python3 -I -S -c 'print(1)'` (and bubblewrap around the same interpreter when it
// is installed). It prints the three figures of issue 18, each with its ratio to bare python:
//   1. p50 with --gap MS idle between calls (what a model thinking between calls gives; bare
//      python is timed with the same gaps),
//   2. p50 back to back (each call sent as soon as the last answer came),
//   3. sustained runs per second with --clients concurrent callers for --seconds S (one server,
//      that many calls in flight on its connection) against bare spawns with as many in flight,
// plus the CPU per run (the server's and its reaped children's user+system time from
// /proc/PID/stat, over the sustained phase; bare: this process's reaped children), of it the
// server process's own (its utime+stime alone: JSON-RPC, the pool, the bridge host), and the RSS
// of the server alone and with its process tree (the warm sandboxes) once the pool is full.
// --compare PATH (repeatable) measures more ptc-mcp binaries in the same run (after --bin, in
// that order, --rounds times), e.g. the build from before a change. A PATH of the form
// "env:NAME=VALUE:BIN" runs BIN with that variable set (PTC_ZYGOTE=0: the launcher alone, without
// the zygote, which is on by default).
//
// usage: node bench/exec/bench_exec.mjs [--runs N] [--gap MS] [--clients N] [--seconds S]
//        [--rounds N] [--python PATH] [--bin PATH] [--compare PATH] [--json]
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cliArgs, ms, pct, releasePath, requireBuilt, sdkClient, sleep, statFields } from '../common.mjs';

const { Client, StdioClientTransport } = await sdkClient();
const { opt, all, has } = cliArgs();
const runs = Number(opt('--runs', '100'));
const gap = Number(opt('--gap', '100'));
const clients = Number(opt('--clients', '8'));
const seconds = Number(opt('--seconds', '5'));
const rounds = Number(opt('--rounds', '1'));
const python = opt('--python', '/usr/bin/python3');
const bins = [opt('--bin', releasePath('ptc-mcp')), ...all('--compare')];
requireBuilt(bins.map((b) => b.replace(/^env:[^:]*:/, '')), 'build the release tree (or pass --bin)');
const BARE = ['-I', '-S', '-c', 'print(1)'];

const TICK_MS = 1000 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

// user+system of pid itself and of the children it has reaped, in ms
function cpuMs(pid) {
  const f = statFields(pid);
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * TICK_MS;
}
// user+system of pid alone, in ms
function ownCpuMs(pid) {
  const f = statFields(pid);
  return (Number(f[11]) + Number(f[12])) * TICK_MS;
}
// the same for pid and its live descendants: a forked sandbox's launcher is reaped by the zygote
// (the server's child), whose reaped children's time reaches the server only when it is reaped
function treeCpuMs(pid) {
  let sum = 0;
  try { sum = cpuMs(pid); } catch { return 0; }
  let kids = [];
  try {
    kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch { /* gone */ }
  for (const k of kids) sum += treeCpuMs(k);
  return sum;
}
function rssKiB(pid) {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch { return 0; }
}
function treeRssKiB(pid) {
  let sum = rssKiB(pid);
  let kids = [];
  try {
    for (const t of readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean)) kids.push(Number(t));
  } catch { /* gone */ }
  for (const k of kids) sum += treeRssKiB(k);
  return sum;
}

async function timeBare(pause) {
  const out = [];
  for (let i = 0; i < runs + 5; i++) {
    if (pause) await sleep(pause);
    const t0 = process.hrtime.bigint();
    const r = spawnSync(python, BARE, { encoding: 'utf8' });
    const t = ms(t0);
    if (r.status !== 0 || r.stdout !== '1\n') throw new Error(`${python} failed: ${r.stderr}`);
    if (i >= 5) out.push(t); // warm-up runs are not counted
  }
  return out;
}

function spawnBare() {
  return new Promise((resolve, reject) => {
    const p = spawn(python, BARE, { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.on('error', reject);
    p.on('close', (code) => (code === 0 && out === '1\n' ? resolve() : reject(new Error('bare run failed'))));
  });
}

// n callers each doing `one` in a loop for `seconds`: completions per second
async function sustained(one) {
  let done = 0;
  const end = Date.now() + seconds * 1000;
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: clients }, async () => {
    while (Date.now() < end) {
      await one();
      done++;
    }
  }));
  return { rate: done / (ms(t0) / 1000), done };
}

async function bareSustained() {
  const c0 = cpuMs(process.pid);
  const r = await sustained(spawnBare);
  return { ...r, cpu: (cpuMs(process.pid) - c0) / r.done };
}

async function server(spec) {
  // "env:NAME=VALUE:BIN": BIN with one more variable (the SDK passes only a default environment)
  const m = /^env:([A-Za-z_][A-Za-z0-9_]*)=([^:]*):(.*)$/.exec(spec);
  const bin = m ? m[3] : spec;
  const env = m ? { [m[1]]: m[2] } : undefined; // merged into the default one
  const transport = new StdioClientTransport({ command: bin, args: ['--python', python, '--log-level', 'warning'], stderr: 'inherit', env });
  const client = new Client({ name: 'bench-exec', version: '1' });
  await client.connect(transport);
  const pid = transport.pid;
  const call = async () => {
    const r = await client.callTool({ name: 'execute_code', arguments: { code: 'print(1)' } });
    if (r.isError || r.content[0].text !== '1') throw new Error(`execute_code failed: ${JSON.stringify(r)}`);
  };
  const timeCalls = async (pause) => {
    const out = [];
    for (let i = 0; i < runs + 5; i++) {
      if (pause) await sleep(pause);
      const t0 = process.hrtime.bigint();
      await call();
      const t = ms(t0);
      if (i >= 5) out.push(t);
    }
    return out;
  };
  const res = {};
  res.gaps = await timeCalls(gap);
  await sleep(1000); // the pool refills
  res.rss = rssKiB(pid);
  res.treeRss = treeRssKiB(pid);
  res.b2b = await timeCalls(0);
  await sleep(1000);
  const c0 = treeCpuMs(pid), o0 = ownCpuMs(pid);
  const s = await sustained(call);
  await sleep(1000); // tear-downs of the last runs are reaped
  res.sustained = s.rate;
  res.cpu = (treeCpuMs(pid) - c0) / s.done;
  res.ownCpu = (ownCpuMs(pid) - o0) / s.done;
  await client.close();
  return res;
}

const rows = [];
let bwrap = null;
try {
  bwrap = execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim();
} catch { /* not installed */ }
for (let round = 0; round < rounds; round++) {
  const bare = { gaps: await timeBare(gap), b2b: await timeBare(0) };
  Object.assign(bare, await bareSustained());
  rows.push({ round, what: 'bare python3 -I -S -c', ...bare });
  if (bwrap) {
    const out = [];
    for (let i = 0; i < runs + 5; i++) {
      const t0 = process.hrtime.bigint();
      const r = spawnSync(bwrap, ['--unshare-all', '--die-with-parent', '--new-session',
        '--ro-bind', '/usr', '/usr', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64',
        '--symlink', 'usr/bin', '/bin', '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp',
        '--uid', '1000', '--gid', '1000', '--cap-drop', 'ALL', '--chdir', '/tmp', python, ...BARE], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`bwrap failed: ${r.stderr}`);
      if (i >= 5) out.push(ms(t0));
    }
    rows.push({ round, what: 'bubblewrap, back to back', b2b: out });
  }
  for (const bin of bins) rows.push({ round, what: bin, ...(await server(bin)) });
}

if (has('--json')) {
  console.log(JSON.stringify(rows.map((r) => ({ ...r, gaps: r.gaps && pct(r.gaps, 50), b2b: r.b2b && pct(r.b2b, 50) }))));
  process.exit(0);
}
const f = (x, d = 2) => (x === undefined ? '-' : x.toFixed(d));
console.log(`bench/exec: ${runs} calls per timing, ${gap} ms gaps, ${clients} concurrent for ${seconds} s, python ${python}`);
console.log('p50 ms (ratio to bare in the same round); runs/s (ratio); CPU ms per run (of it the server process\'s own); RSS MiB server / with its tree');
for (let round = 0; round < rounds; round++) {
  const b = rows.find((r) => r.round === round && r.what.startsWith('bare'));
  const bg = pct(b.gaps, 50), bb = pct(b.b2b, 50);
  console.log(`round ${round + 1}`);
  console.log('  what                                    with gaps          back to back       sustained          CPU/run (server)  RSS');
  for (const r of rows.filter((x) => x.round === round)) {
    const g = r.gaps && pct(r.gaps, 50), k = r.b2b && pct(r.b2b, 50);
    const cell = (v, ref) => (v === undefined ? '-'.padEnd(18) : `${f(v)} (${f(v / ref)}x)`.padEnd(18));
    const rss = r.rss ? `${f(r.rss / 1024, 1)} / ${f(r.treeRss / 1024, 1)}` : '-';
    const cpu = `${f(r.cpu, 1)}${r.ownCpu === undefined ? '' : ` (${f(r.ownCpu, 2)})`}`;
    console.log(`  ${r.what.slice(-38).padEnd(38)}  ${cell(g, bg)} ${cell(k, bb)} ${cell(r.sustained ?? r.rate, b.rate)} ${cpu.padStart(16)}  ${rss}`);
  }
}
if (!bwrap) console.log('bubblewrap: not installed (apt-get install bubblewrap) - skipped');
