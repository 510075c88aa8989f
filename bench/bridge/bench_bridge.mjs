// bench/bridge: latency of ONE downstream tool call (server-everything `echo`) made from
// sandboxed Python through the bridge, side by side in the same run with the same call made
// directly by the official SDK client to a server-everything of its own. The Python side times
// each call with time.perf_counter inside one execute_code run, so the number is the bridge's
// cost per call, not execute_code's start-up. Prints p50/p99, the ratio and the added ms.
//
// usage: node bench/bridge/bench_bridge.mjs [--runs N] [--bin PATH]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cliArgs, ms, pct, referenceServer, releasePath, requireBuilt, sdkClient, sleep } from '../common.mjs';

const { Client, StdioClientTransport, getDefaultEnvironment } = await sdkClient();
const { opt } = cliArgs();
const runs = Number(opt('--runs', '500'));
const warmup = 20;
const bin = opt('--bin', releasePath('ptc-mcp'));
requireBuilt([bin]);
const everything = referenceServer('server-everything');

// Direct: the official SDK client to a server-everything it starts itself.
async function direct() {
  const transport = new StdioClientTransport({ command: process.execPath, args: [everything, 'stdio'], stderr: 'ignore' });
  const client = new Client({ name: 'bench-bridge-direct', version: '1' });
  await client.connect(transport);
  const out = [];
  try {
    for (let i = 0; i < runs + warmup; i++) {
      const t0 = process.hrtime.bigint();
      const r = await client.callTool({ name: 'echo', arguments: { message: 'x' } });
      const t = ms(t0);
      if (r.isError || r.content[0].text !== 'Echo: x') throw new Error(`echo failed: ${JSON.stringify(r)}`);
      if (i >= warmup) out.push(t);
    }
  } finally {
    await client.close();
  }
  return out;
}

// Bridge: ptc-mcp with server-everything as its downstream server; the calls are timed in Python.
async function bridge() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-bridge-'));
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers: { everything: { command: process.execPath, args: [everything, 'stdio'] } } }));
  const transport = new StdioClientTransport({
    command: bin,
    args: ['--config', config, '--log-level', 'warning'],
    stderr: 'inherit',
    env: { ...getDefaultEnvironment(), XDG_CACHE_HOME: path.join(dir, 'cache') },
  });
  const client = new Client({ name: 'bench-bridge', version: '1' });
  await client.connect(transport);
  try {
    // The generated tools package appears once the downstream server is up.
    let ready = false;
    for (let i = 0; i < 300 && !ready; i++) {
      const t = (await client.listTools()).tools.find((x) => x.name === 'execute_code');
      ready = /modules: .*everything/.test(t.description);
      if (!ready) await sleep(100);
    }
    if (!ready) throw new Error('server-everything did not come up behind ptc-mcp');
    // A run may make at most 200 tool calls (the per-run budget), so the calls are spread over
    // runs of CHUNK timed calls, each after a few untimed ones (the first run also warms up).
    const CHUNK = 180;
    const out = [];
    for (let done = 0; done < runs; done += CHUNK) {
      const n = Math.min(CHUNK, runs - done);
      const skip = done === 0 ? warmup : 5;
      const code = [
        'import json, time',
        'from tools.everything import echo',
        'ts = []',
        `for i in range(${n + skip}):`,
        '    t0 = time.perf_counter()',
        '    r = echo(message="x")',
        '    ts.append((time.perf_counter() - t0) * 1000)',
        '    assert r == "Echo: x", r',
        `print(json.dumps(ts[${skip}:]))`,
      ].join('\n');
      const r = await client.callTool({ name: 'execute_code', arguments: { code } }, undefined, { timeout: 120000 });
      if (r.isError || r.structuredContent?.status !== 'ok') throw new Error(`execute_code failed: ${r.content[0].text}`);
      out.push(...JSON.parse(r.structuredContent.stdout));
    }
    return out;
  } finally {
    await client.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const results = { 'direct (SDK client)': await direct(), 'bridge (sandboxed Python)': await bridge() };
const [d, b] = Object.values(results);
console.log(`bench/bridge: ${runs} calls of server-everything echo each (after ${warmup} warm-up calls)`);
console.log('what                          p50 ms   p99 ms');
for (const [k, v] of Object.entries(results)) {
  console.log(`${k.padEnd(28)} ${pct(v, 50).toFixed(3).padStart(7)}  ${pct(v, 99).toFixed(3).padStart(7)}`);
}
const ratio = pct(b, 50) / pct(d, 50);
const added = pct(b, 50) - pct(d, 50);
console.log(`bridge / direct p50: ${ratio.toFixed(2)}x, added ${added.toFixed(3)} ms p50 (target < 1 ms), ` +
  `added ${(pct(b, 99) - pct(d, 99)).toFixed(3)} ms p99`);
