// bench/http: requests per second over Streamable HTTP for `ping` and `tools/list` with N
// keep-alive clients, against ptc-mcp and the reference TypeScript server (server-everything in
// streamableHttp mode) side by side in the same run, with the same load generator and request
// mix. Prints both rates and their ratio, and both servers' peak and idle RSS and the memory
// ratio. The load generator is http_load (bench/http/http_load.c): each client initializes its
// own session (Mcp-Session-Id), then keeps one request in flight on its keep-alive connection.
//
// usage: node bench/http/bench_http.mjs [--clients 1,16,64] [--seconds 5] [--bin PATH]
//        [--load PATH] [--ptc-arg ARG]... [--json]
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import net from 'node:net';
import { cliArgs, referenceServer, releasePath, requireBuilt, sleep, statFields, statusKiB as kib } from '../common.mjs';

const { opt, all, has } = cliArgs();
const clientCounts = opt('--clients', '1,16,64').split(',').map(Number);
const seconds = Number(opt('--seconds', '5'));
const bin = opt('--bin', releasePath('ptc-mcp'));
const load = opt('--load', releasePath('bench', 'http', 'http_load'));
const ptcExtra = all('--ptc-arg');
const asJson = has('--json');
requireBuilt([bin, load], 'build the release tree first (or pass --bin/--load)');
const everything = referenceServer('server-everything');

// The pid and every descendant (ptc-mcp keeps sandbox processes; they count as its memory).
function tree(pid) {
  const kids = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const ppid = Number(statFields(d)[1]);
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(d));
    } catch { /* gone */ }
  }
  const out = [];
  const walk = (p) => { out.push(p); for (const k of kids.get(p) ?? []) walk(k); };
  walk(pid);
  return out;
}
const treeRss = (pid) => tree(pid).reduce((s, p) => { try { return s + kib(p, 'VmRSS'); } catch { return s; } }, 0);

// A port free on the wildcard address, which is what server-everything binds.
async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

// Starts a server and resolves { name, proc, port, sample(), stop() } once it is listening.
async function start(name, cmd, argv, env, ready) {
  const proc = spawn(cmd, argv, { stdio: ['pipe', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d.toString(); });
  let exited = null;
  proc.once('close', (code, signal) => { exited = { code, signal }; });
  let port = null;
  for (let i = 0; i < 600 && port === null; i++) {
    if (exited) throw new Error(`${name} exited ${JSON.stringify(exited)}: ${stderr}`);
    port = ready(stderr);
    if (port === null) await sleep(50);
  }
  if (port === null) throw new Error(`${name} did not start: ${stderr}`);
  await sleep(500); // let start-up work (warm sandbox, indexing) finish before the idle sample
  if (exited) throw new Error(`${name} exited ${JSON.stringify(exited)} after starting: ${stderr}`);
  const s = { name, proc, port, idleRss: kib(proc.pid, 'VmRSS'), idleTree: treeRss(proc.pid), peakTree: 0 };
  s.sample = () => { if (!exited) s.peakTree = Math.max(s.peakTree, treeRss(proc.pid)); };
  s.peakRss = () => kib(proc.pid, 'VmHWM');
  s.stop = async () => {
    proc.kill('SIGTERM');
    for (let i = 0; i < 100 && !exited; i++) await sleep(50);
    if (!exited) proc.kill('SIGKILL');
  };
  return s;
}

function runLoad(server, method, clients, secs) {
  return new Promise((resolve, reject) => {
    const p = spawn(load, ['--port', String(server.port), '--clients', String(clients), '--seconds', String(secs), '--method', method], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    const sampler = setInterval(() => server.sample(), 100);
    p.on('close', (code) => {
      clearInterval(sampler);
      server.sample();
      try {
        const r = JSON.parse(out.trim().split('\n').pop());
        server.served = (server.served ?? 0) + r.requests;
        if (code !== 0 || r.errors) err && process.stderr.write(`${server.name} ${method}: ${err}`);
        resolve({ ...r, exit: code });
      } catch {
        reject(new Error(`http_load against ${server.name} failed (exit ${code}): ${err}`));
      }
    });
  });
}

const ptc = await start('ptc-mcp', bin, ['--transport', 'http', '--listen', '127.0.0.1:0', ...ptcExtra], {},
  (e) => { const m = /listening on https?:\/\/127\.0\.0\.1:(\d+)/.exec(e); return m ? Number(m[1]) : null; });
// Express 5 prints server-everything's "listening" line even when listen fails (the port was
// taken between freePort and its bind; the exit may swallow the reason), so a start that exits
// is retried on another port.
let se = null;
for (let attempt = 1; !se; attempt++) {
  const sePort = await freePort();
  try {
    se = await start('server-everything', process.execPath, [everything, 'streamableHttp'], { PORT: String(sePort) },
      (e) => (/listening on port/.test(e) ? sePort : null));
  } catch (e) {
    if (attempt >= 5 || !/exited/.test(e.message)) {
      await ptc.stop();
      throw e;
    }
  }
}

const rows = [];
try {
  for (const clients of clientCounts) {
    for (const method of ['ping', 'tools/list']) {
      const row = { method, clients };
      // Interleaved, so both servers see the same machine state; one untimed second first.
      for (const s of [ptc, se]) {
        await runLoad(s, method, clients, 1);
        row[s.name] = await runLoad(s, method, clients, seconds);
      }
      rows.push(row);
    }
  }
} finally {
  ptc.peak = ptc.peakRss();
  se.peak = se.peakRss();
  await ptc.stop();
  await se.stop();
}

const fmt = (x) => Math.round(x).toLocaleString('en-US');
const mib = (k) => (k / 1024).toFixed(1);
const result = {
  node: process.version,
  seconds,
  rows: rows.map((r) => ({
    method: r.method, clients: r.clients,
    ptc_rps: r['ptc-mcp'].rps, everything_rps: r['server-everything'].rps,
    ratio: r['ptc-mcp'].rps / r['server-everything'].rps,
    ptc_errors: r['ptc-mcp'].errors, everything_errors: r['server-everything'].errors,
    ptc_bytes: r['ptc-mcp'].response_bytes, everything_bytes: r['server-everything'].response_bytes,
  })),
  memory: {
    ptc_peak_kib: ptc.peak, ptc_idle_kib: ptc.idleRss, ptc_tree_peak_kib: ptc.peakTree, ptc_tree_idle_kib: ptc.idleTree,
    everything_peak_kib: se.peak, everything_idle_kib: se.idleRss,
    ptc_requests: ptc.served, everything_requests: se.served,
  },
};
result.memory.peak_ratio = se.peak / ptc.peak;
result.memory.tree_peak_ratio = se.peak / ptc.peakTree;
result.min_rps_ratio = Math.min(...result.rows.map((r) => r.ratio));

if (asJson) {
  console.log(JSON.stringify(result, null, 2));
} else {
  console.log(`bench/http: ${seconds} s per measurement, keep-alive clients, one request in flight each (${process.version})`);
  console.log('| method | clients | ptc-mcp req/s | server-everything req/s | ratio | response bytes (ptc / everything) | errors |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of result.rows) {
    console.log(`| ${r.method} | ${r.clients} | ${fmt(r.ptc_rps)} | ${fmt(r.everything_rps)} | ${r.ratio.toFixed(1)}x | ${fmt(r.ptc_bytes)} / ${fmt(r.everything_bytes)} | ${r.ptc_errors} / ${r.everything_errors} |`);
  }
  const m = result.memory;
  console.log(`peak RSS: ptc-mcp ${mib(m.ptc_peak_kib)} MiB (with its child processes ${mib(m.ptc_tree_peak_kib)} MiB), server-everything ${mib(m.everything_peak_kib)} MiB`);
  console.log(`idle RSS after start: ptc-mcp ${mib(m.ptc_idle_kib)} MiB (with children ${mib(m.ptc_tree_idle_kib)} MiB), server-everything ${mib(m.everything_idle_kib)} MiB`);
  console.log(`requests served in the run (warm-ups included): ptc-mcp ${fmt(m.ptc_requests)}, server-everything ${fmt(m.everything_requests)}; RSS growth per request: ptc-mcp ${((m.ptc_peak_kib - m.ptc_idle_kib) * 1024 / m.ptc_requests).toFixed(2)} B, server-everything ${((m.everything_peak_kib - m.everything_idle_kib) * 1024 / m.everything_requests).toFixed(0)} B`);
  console.log(`memory ratio (server-everything / ptc-mcp, peak): ${m.peak_ratio.toFixed(1)}x (${m.tree_peak_ratio.toFixed(1)}x counting ptc-mcp's children)`);
  const met = result.min_rps_ratio >= 5 && m.tree_peak_ratio >= 10;
  console.log(`target (>= 5x requests/s, < 1/10 memory): ${met ? 'met' : 'NOT met'} (lowest rate ratio ${result.min_rps_ratio.toFixed(1)}x)`);
}
