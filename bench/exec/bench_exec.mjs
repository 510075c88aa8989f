// bench/exec: end-to-end latency of execute_code `print(1)` through the official SDK client,
// side by side in the same run with bare `python3 -I -S -c 'print(1)'` and with bubblewrap
// running the same interpreter with comparable isolation. Prints p50/p99 and the ratios.
// execute_code is timed twice: back to back (each call sent as soon as the last answer came,
// so the warm sandboxes are still being made for the next runs) and with --gap MS idle between
// calls, as a model thinking between calls gives (the warm start); bare python3 is also timed
// with the same gap, so that both sides idle alike.
//
// usage: node bench/exec/bench_exec.mjs [--runs N] [--gap MS] [--python PATH] [--bin PATH]
import { spawnSync, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const require = createRequire(path.join(root, 'tests', 'package.json'));
const { Client } = await import(require.resolve('@modelcontextprotocol/sdk/client/index.js'));
const { StdioClientTransport } = await import(require.resolve('@modelcontextprotocol/sdk/client/stdio.js'));

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const runs = Number(opt('--runs', '100'));
const gap = Number(opt('--gap', '100'));
const sleep = (t) => new Promise((r) => setTimeout(r, t));
const python = opt('--python', '/usr/bin/python3');
const bin = opt('--bin', path.join(root, 'build', 'release', 'ptc-mcp'));
if (!existsSync(bin)) throw new Error(`missing ${bin}: run ./bootstrap.sh run once (or pass --bin)`);

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

async function timeCommand(cmd, argv, pause = 0) {
  const out = [];
  for (let i = 0; i < runs + 5; i++) {
    if (pause) await sleep(pause);
    const t0 = process.hrtime.bigint();
    const r = spawnSync(cmd, argv, { encoding: 'utf8' });
    const t = ms(t0);
    if (r.status !== 0 || r.stdout !== '1\n') throw new Error(`${cmd} failed: ${r.stderr}`);
    if (i >= 5) out.push(t); // warm-up runs are not counted
  }
  return out;
}

const results = {};
results.bare = await timeCommand(python, ['-I', '-S', '-c', 'print(1)']);
results[`bare, ${gap} ms gaps`] = await timeCommand(python, ['-I', '-S', '-c', 'print(1)'], gap);

let bwrap = null;
try {
  bwrap = execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim();
} catch { /* not installed */ }
if (bwrap) {
  results.bubblewrap = await timeCommand(bwrap, ['--unshare-all', '--die-with-parent', '--new-session',
    '--ro-bind', '/usr', '/usr', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64',
    '--symlink', 'usr/bin', '/bin', '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp',
    '--uid', '1000', '--gid', '1000', '--cap-drop', 'ALL', '--chdir', '/tmp',
    python, '-I', '-S', '-c', 'print(1)']);
}

const transport = new StdioClientTransport({ command: bin, args: ['--python', python, '--log-level', 'warning'], stderr: 'inherit' });
const client = new Client({ name: 'bench-exec', version: '1' });
await client.connect(transport);
async function timeCalls(pause) {
  const out = [];
  for (let i = 0; i < runs + 5; i++) {
    if (pause) await sleep(pause);
    const t0 = process.hrtime.bigint();
    const r = await client.callTool({ name: 'execute_code', arguments: { code: 'print(1)' } });
    const t = ms(t0);
    if (r.isError || r.content[0].text !== '1') throw new Error(`execute_code failed: ${JSON.stringify(r)}`);
    if (i >= 5) out.push(t);
  }
  return out;
}
results['execute_code, back to back'] = await timeCalls(0);
results[`execute_code, ${gap} ms gaps`] = await timeCalls(gap);
await client.close();

const base = pct(results.bare, 50);
const baseGap = pct(results[`bare, ${gap} ms gaps`], 50);
console.log(`bench/exec: ${runs} runs each, python ${python}; bare = python3 -I -S -c 'print(1)'`);
console.log('what                              p50 ms   p99 ms   p50 / bare   p50 / bare with gaps');
for (const [k, v] of Object.entries(results)) {
  const p50 = pct(v, 50);
  console.log(`${k.padEnd(32)} ${p50.toFixed(2).padStart(7)}  ${pct(v, 99).toFixed(2).padStart(7)}  ${(p50 / base).toFixed(2).padStart(10)}x  ${(p50 / baseGap).toFixed(2).padStart(20)}x`);
}
if (!bwrap) console.log('bubblewrap: not installed (apt-get install bubblewrap) - skipped');
