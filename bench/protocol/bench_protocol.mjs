// bench/protocol: raw pipelined `ping` over stdio, ptc-mcp against the reference TypeScript
// server (server-everything in stdio mode) in the same run, with the same load generator
// (stdio_load, bench/protocol/stdio_load.c: initialize, then N pings written without waiting).
// Two shapes: pipelined (answers read while pings are written) and burst (every ping written
// before any answer is read). Rounds are interleaved so both servers see the same machine
// state; prints the median msgs/s of each, their ratio, and each server's peak RSS (VmHWM)
// through an N-message burst.
//
// usage: node bench/protocol/bench_protocol.mjs [--n 100000] [--rounds 5] [--bin PATH]
//        [--load PATH] [--ptc-arg ARG]... [--json]
// ptc-mcp runs with `--embedder lexical` unless a --ptc-arg names an embedder: the model
// embedder's weights alone are about 55 MiB of RSS, which is not the protocol's.
import { execFileSync } from 'node:child_process';
import { cliArgs, median, referenceServer, releasePath, requireBuilt } from '../common.mjs';

const { opt, all, has } = cliArgs();
const n = Number(opt('--n', '100000'));
const rounds = Number(opt('--rounds', '5'));
const bin = opt('--bin', releasePath('ptc-mcp'));
const load = opt('--load', releasePath('bench', 'protocol', 'stdio_load'));
let ptcArgs = all('--ptc-arg');
if (!ptcArgs.some((a) => a.startsWith('--embedder'))) ptcArgs = ['--embedder', 'lexical', ...ptcArgs];
const asJson = has('--json');
requireBuilt([bin, load], 'build the release tree first (or pass --bin/--load)');
const everything = referenceServer('server-everything');

const servers = [
  { name: 'ptc-mcp', cmd: [bin, ...ptcArgs] },
  { name: 'server-everything', cmd: [process.execPath, everything, 'stdio'] },
];

function run(server, mode) {
  const out = execFileSync(load, ['--n', String(n), '--mode', mode, '--', ...server.cmd], { encoding: 'utf8', timeout: 600000 });
  return JSON.parse(out.trim().split('\n').pop());
}

const results = {};
for (const s of servers) results[s.name] = { pipelined: [], burst: [], burst_rss_kib: [] };
for (let r = 0; r < rounds; r++) {
  for (const s of servers) {
    results[s.name].pipelined.push(run(s, 'pipelined').msgs_per_s);
    const b = run(s, 'burst');
    results[s.name].burst.push(b.msgs_per_s);
    results[s.name].burst_rss_kib.push(b.peak_rss_kib);
  }
}

const summary = { n, rounds, ptc_args: ptcArgs };
for (const s of servers) {
  const x = results[s.name];
  summary[s.name] = {
    pipelined_msgs_per_s: median(x.pipelined),
    burst_msgs_per_s: median(x.burst),
    burst_peak_rss_mib: Math.max(...x.burst_rss_kib) / 1024,
  };
}
summary.ratio_pipelined = summary['ptc-mcp'].pipelined_msgs_per_s / summary['server-everything'].pipelined_msgs_per_s;
summary.ratio_burst = summary['ptc-mcp'].burst_msgs_per_s / summary['server-everything'].burst_msgs_per_s;

if (asJson) {
  console.log(JSON.stringify(summary));
} else {
  const fmt = (x) => Math.round(x).toLocaleString('en-US');
  console.log(`pipelined ping over stdio, ${fmt(n)} messages, median of ${rounds} interleaved rounds (ptc-mcp ${ptcArgs.join(' ')})`);
  console.log('| server | pipelined msgs/s | burst msgs/s | peak RSS through the burst |');
  console.log('|---|---|---|---|');
  for (const s of servers) {
    const x = summary[s.name];
    console.log(`| ${s.name} | ${fmt(x.pipelined_msgs_per_s)} | ${fmt(x.burst_msgs_per_s)} | ${x.burst_peak_rss_mib.toFixed(1)} MiB |`);
  }
  console.log(`| ratio | ${summary.ratio_pipelined.toFixed(1)}x | ${summary.ratio_burst.toFixed(1)}x | |`);
}
