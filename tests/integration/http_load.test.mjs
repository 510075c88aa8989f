// Load over Streamable HTTP: 100 concurrent SDK sessions against one ptc-mcp, each running
// execute_code (a distinct computation, exact answer checked) and search_tools (a known tool
// ranks first). Runs queue behind --max-concurrent (checked from the runs' own clocks: never more
// than that many overlap). Memory: the server's RSS after a measured round is within a small
// tolerance of its RSS after a warm-up round of the same load; at the end SIGTERM must give exit
// 0 with no LeakSanitizer (or other sanitizer) report in the ASan build.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { buildDir, repoRoot, sleep } from './helpers.mjs';
import net from 'node:net';
import { assertServes, connectHttp, isSanitizerBuild, parseResponse, rawExchange, rawPost, rssKiB, startHttp, statusOf } from './http_helpers.mjs';

const catalog = path.join(repoRoot, 'tests', 'fixtures', 'catalog_small.json');
const SESSIONS = 100;
const MAX_CONCURRENT = 2;
const SETTLE_MS = 2000;
// RSS may move by allocator noise and by buffers sized to the peak; a leak or a per-session
// retention of 100 sessions' worth of state (each several KiB and more) shows above this.
const RSS_TOLERANCE_KIB = 4096;
const RSS_TOLERANCE_FRACTION = 0.05;

// The lexical embedder ranks these first on catalog_small.json (checked by hand, margins >= 0.7).
const QUERIES = [
  ['close issue number 12', 'tracker__close_issue'],
  ['weather forecast for a city', 'weather__get_forecast'],
  ['send an email message to recipients', 'mail__send_email'],
  ['air quality index pollutant', 'weather__get_air_quality'],
  ['create a new issue in the bug tracker', 'tracker__create_issue'],
  ['search received email inbox', 'mail__search_inbox'],
  ['read a file', 'files__read_file'],
  ['list files directory', 'files__list_directory'],
];

// Session i's computation: (i + 1) * sum of k^2 for k < n, with n = 1000 + 37 i; exact in BigInt.
function job(i) {
  const n = 1000 + 37 * i;
  const want = BigInt(i + 1) * (BigInt(n - 1) * BigInt(n) * BigInt(2 * n - 1)) / 6n;
  const code = [
    'import sys, time',
    't0 = time.time()',
    `r = sum(k * k * ${i + 1} for k in range(${n}))`,
    `print(f"session ${i}: {r}")`,
    // The run's own start and end on the shared wall clock, to count overlapping runs.
    'print(f"interval {t0!r} {time.time()!r}", file=sys.stderr)',
  ].join('\n');
  return { code, stdout: `session ${i}: ${want}\n` };
}

const CALL_OPTS = { timeout: 600000 }; // generous: 100 runs queue behind 2 slots in an ASan build

async function oneSession(url, i) {
  const c = await connectHttp(url, { name: `load-${i}` });
  try {
    const { code, stdout } = job(i);
    const [query, want] = QUERIES[i % QUERIES.length];
    const [run, found] = await Promise.all([
      c.client.callTool({ name: 'execute_code', arguments: { code, timeout_seconds: 60 } }, undefined, CALL_OPTS),
      c.client.callTool({ name: 'search_tools', arguments: { query, top_k: 3 } }, undefined, CALL_OPTS),
    ]);
    assert.equal(run.isError, undefined, `session ${i}: ${JSON.stringify(run)}`);
    assert.equal(run.structuredContent.status, 'ok');
    assert.equal(run.structuredContent.stdout, stdout, `session ${i}`);
    const m = /interval (\S+) (\S+)/.exec(run.structuredContent.stderr);
    assert.ok(m, `session ${i}: no interval in stderr ${JSON.stringify(run.structuredContent.stderr)}`);
    assert.equal(found.isError, undefined, `session ${i}: ${JSON.stringify(found)}`);
    assert.equal(found.structuredContent.embedder, 'lexical');
    assert.equal(found.structuredContent.tools[0].id, want, `session ${i}: ${query}`);
    return { sessionId: c.sessionId, start: Number(m[1]), end: Number(m[2]) };
  } finally {
    await c.close();
  }
}

// Most runs whose [start, end] intervals overlap at one instant.
function maxOverlap(intervals) {
  const ev = [];
  for (const { start, end } of intervals) ev.push([start, 1], [end, -1]);
  ev.sort((a, b) => a[0] - b[0] || a[1] - b[1]); // an end before a start at the same instant
  let cur = 0;
  let max = 0;
  for (const [, d] of ev) max = Math.max(max, (cur += d));
  return max;
}

async function round(server) {
  const results = await Promise.all(Array.from({ length: SESSIONS }, (_, i) => oneSession(server.url, i)));
  const ids = new Set(results.map((r) => r.sessionId));
  assert.equal(ids.size, SESSIONS, 'every session got its own Mcp-Session-Id');
  for (const id of ids) assert.match(id, /^[\x21-\x7e]{16,}$/, 'session ids are long visible-ASCII tokens');
  const overlap = maxOverlap(results);
  assert.ok(overlap >= 1 && overlap <= MAX_CONCURRENT, `runs overlapped ${overlap} at once with --max-concurrent ${MAX_CONCURRENT}`);
  return results;
}

test('100 concurrent HTTP sessions: correct answers, runs queue, RSS settles, no leak at exit', { timeout: 1200000 }, async () => {
  // ASan keeps freed memory in a quarantine (256 MiB by default) and never gives free pages back
  // to the kernel, so its RSS swings by ~15 MiB between identical rounds (measured); a small
  // quarantine and a release every 100 ms make RSS follow live memory as glibc's malloc does.
  const env = isSanitizerBuild()
    ? { ASAN_OPTIONS: [process.env.ASAN_OPTIONS, 'quarantine_size_mb=1', 'allocator_release_to_os_interval_ms=100', 'detect_leaks=1'].filter(Boolean).join(':') }
    : {};
  const server = await startHttp(['--tools-file', catalog, '--embedder', 'lexical',
    '--max-concurrent', String(MAX_CONCURRENT), '--max-queue', String(SESSIONS * 2)],
  { env, waitFor: /search index: 8 tools indexed/ });
  let stopped = false;
  try {
    const warm = await round(server);
    await sleep(SETTLE_MS);
    const rssWarm = rssKiB(server.pid);

    const measured = await round(server);
    await sleep(SETTLE_MS);
    const rssAfter = rssKiB(server.pid);

    // Ended sessions stay ended: their ids are not reused and a request on one is refused.
    const reused = measured.filter((r) => warm.some((w) => w.sessionId === r.sessionId));
    assert.equal(reused.length, 0, 'no session id is issued twice');
    const gone = await fetch(server.url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
        'Mcp-Session-Id': warm[0].sessionId, 'MCP-Protocol-Version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    await gone.arrayBuffer();
    assert.equal(gone.status, 404, 'a request on a deleted session gets 404');

    const limit = rssWarm * (1 + RSS_TOLERANCE_FRACTION) + RSS_TOLERANCE_KIB;
    console.log(`server RSS: ${rssWarm} KiB after the warm-up round, ${rssAfter} KiB after the measured round (limit ${Math.round(limit)} KiB)`);
    assert.ok(rssAfter <= limit, `RSS grew from ${rssWarm} KiB to ${rssAfter} KiB over a round of ${SESSIONS} sessions`);
    stopped = true;
    await server.stop();
  } finally {
    if (!stopped) await server.stop().catch(() => {});
  }
});

// The bench's load generator (bench/http/http_load.c), a client that is not Node: 50 keep-alive
// connections, each with its own session, then ping and tools/list back to back. Every answer
// must be a 200 with a JSON-RPC result and no connection may be dropped.
test('50 keep-alive clients sending back to back get only correct answers (http_load)', async (t) => {
  const load = path.join(buildDir, 'bench', 'http', 'http_load');
  if (!existsSync(load)) {
    t.skip(`${load} is not built`);
    return;
  }
  const server = await startHttp([]);
  let stopped = false;
  try {
    for (const method of ['ping', 'tools/list']) {
      const r = spawnSync(load, ['--port', String(server.port), '--clients', '50', '--seconds', '2', '--method', method],
        { encoding: 'utf8', timeout: 120000 });
      assert.equal(r.status, 0, `http_load ${method}: ${r.stdout} ${r.stderr}`);
      const out = JSON.parse(r.stdout);
      assert.equal(out.ready, 50, r.stdout);
      assert.equal(out.errors, 0, r.stdout);
      assert.ok(out.requests > 0, r.stdout);
      t.diagnostic(`${method}: ${out.requests} answers in ${out.seconds} s`);
    }
    stopped = true;
    await server.stop();
  } finally {
    if (!stopped) await server.stop().catch(() => {});
  }
});

// Clients that vanish: sockets destroyed mid-request (part of the body sent), or right after
// a tools/call went out (its run still going), sessions never deleted; SDK clients closed with
// calls in flight. The server keeps serving, and SIGTERM with all of that still live must end
// cleanly: exit 0 and no LeakSanitizer report (every session, stream and run freed).
test('clients that vanish mid-request or mid-run leave the server serving and leak-free', { timeout: 600000 }, async () => {
  const server = await startHttp(['--max-concurrent', '2', '--max-queue', '200']);
  let stopped = false;
  try {
    const post = (msg, sid, version) => rawPost(server.port, msg, sid ? { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': version } : {});
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'vanish', version: '1' } } };
    const sessions = await Promise.all(Array.from({ length: 30 }, async () => {
      const r = await rawExchange(server.port, post(init), { until: (t) => parseResponse(t) !== null });
      const p = parseResponse(r.text);
      assert.equal(p.status, 200, r.text);
      const sid = p.headers['mcp-session-id'];
      const version = p.json.result.protocolVersion;
      const note = await rawExchange(server.port, post({ jsonrpc: '2.0', method: 'notifications/initialized' }, sid, version), { until: (t) => parseResponse(t) !== null });
      assert.equal(statusOf(note.text), 202, note.text);
      return { sid, version };
    }));
    const call = (i) => ({ jsonrpc: '2.0', id: 100 + i, method: 'tools/call', params: { name: 'execute_code', arguments: { code: `import time\ntime.sleep(1)\nprint(${i})`, timeout_seconds: 60 } } });
    await Promise.all(sessions.map(({ sid, version }, i) => new Promise((resolve) => {
      const bytes = post(call(i), sid, version);
      const sock = net.connect({ host: '127.0.0.1', port: server.port });
      sock.on('error', () => {});
      sock.on('close', resolve);
      sock.on('connect', () => {
        if (i % 2 === 0) {
          sock.write(bytes.subarray(0, bytes.length - 10)); // the body's last bytes never come
          setTimeout(() => sock.destroy(), 100);
        } else {
          sock.write(bytes); // the whole call: its run starts or queues, then the client is gone
          sock.once('data', () => sock.destroy());
          setTimeout(() => sock.destroy(), 2000);
        }
      });
    })));
    // SDK clients closed with calls in flight (no DELETE). Per the transport spec a dropped
    // connection is not a cancellation: these runs may finish; they only must not leak.
    const sdk = await Promise.all(Array.from({ length: 10 }, () => connectHttp(server.url)));
    const inflight = sdk.map((c, i) => c.client.callTool({ name: 'execute_code', arguments: { code: `import time\ntime.sleep(1)\nprint(${i})` } }, undefined, { timeout: 600000 }).catch((e) => e));
    await sleep(200);
    await Promise.all(sdk.map((c) => c.client.close()));
    await Promise.all(inflight);
    await assertServes(server.url);
    stopped = true;
    await server.stop(); // with the vanished sessions (and maybe their runs) still live
  } finally {
    if (!stopped) await server.stop().catch(() => {});
  }
});
