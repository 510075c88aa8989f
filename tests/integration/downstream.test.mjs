// mcp/'s downstream client against real MCP servers from npm (server-everything and
// server-memory, pinned in package.json), through the small C driver in tests/fixtures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { node22 } from './helpers.mjs';
import { Driver, driverBin } from './downstream_driver.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.resolve(here, '..', 'node_modules', '@modelcontextprotocol');
const everything = path.join(modules, 'server-everything', 'dist', 'index.js');
const memory = path.join(modules, 'server-memory', 'dist', 'index.js');

const bothServers = (dir) => ({
  mcpServers: {
    everything: { command: node22, args: [everything, 'stdio'] },
    memory: { command: node22, args: [memory], env: { MEMORY_FILE_PATH: path.join(dir, 'memory.jsonl') } },
  },
});

const text = (answer) => answer.result.content.map((c) => c.text ?? '').join('');

test('the driver and both servers are installed', () => {
  for (const f of [driverBin, everything, memory, node22]) assert.ok(existsSync(f), `missing ${f}`);
});

test('lists and calls the tools of server-everything and server-memory', async () => {
  const d = new Driver(bothServers);
  try {
    await Promise.all([d.ready('everything'), d.ready('memory')]);

    const ev = (await d.cmd({ cmd: 'tools', server: 'everything' })).tools.map((t) => t.name);
    for (const name of ['echo', 'get-sum', 'get-env', 'trigger-long-running-operation']) assert.ok(ev.includes(name), `everything lacks ${name}: ${ev}`);
    assert.ok(!ev.includes('trigger-sampling-request'), 'sampling tools only appear when we declare sampling');
    const mem = (await d.cmd({ cmd: 'tools', server: 'memory' })).tools.map((t) => t.name);
    for (const name of ['create_entities', 'create_relations', 'read_graph', 'search_nodes', 'open_nodes']) assert.ok(mem.includes(name), `memory lacks ${name}: ${mem}`);

    const echo = await d.cmd({ cmd: 'call', server: 'everything', tool: 'echo', args: { message: 'hello downstream' } });
    assert.equal(echo.err, 0, JSON.stringify(echo));
    assert.equal(text(echo), 'Echo: hello downstream');
    const sum = await d.cmd({ cmd: 'call', server: 'everything', tool: 'get-sum', args: { a: 2, b: 40 } });
    assert.equal(sum.err, 0, JSON.stringify(sum));
    assert.match(text(sum), /\b42\b/);

    const created = await d.cmd({
      cmd: 'call', server: 'memory', tool: 'create_entities',
      args: { entities: [{ name: 'ptc-mcp', entityType: 'project', observations: ['written in C11'] }] },
    });
    assert.equal(created.err, 0, JSON.stringify(created));
    assert.ok(!created.result.isError, JSON.stringify(created.result));
    const graph = await d.cmd({ cmd: 'call', server: 'memory', tool: 'read_graph', args: {} });
    assert.equal(graph.err, 0, JSON.stringify(graph));
    assert.match(text(graph), /ptc-mcp/);
    assert.match(text(graph), /written in C11/);

    // A bad argument is the server's business: it answers, and the client hands it back.
    const bad = await d.cmd({ cmd: 'call', server: 'everything', tool: 'get-sum', args: { a: 'x' } });
    assert.ok(bad.err === 0 ? bad.result.isError === true : bad.err === -5000 /* MCP_EREMOTE */, JSON.stringify(bad));
  } finally {
    await d.close();
  }
});

test('a killed server comes back and answers again', async () => {
  const d = new Driver(bothServers, ['--restart-base-ms', '100']);
  try {
    await Promise.all([d.ready('everything'), d.ready('memory')]);
    const before = await d.cmd({ cmd: 'info', server: 'everything' });
    assert.equal(before.state, 'ready');
    assert.equal(before.spawns, 1);
    const restarting = d.nextEvent((m) => m.event === 'state' && m.server === 'everything' && m.state === 'starting');
    const readyAgain = d.nextEvent((m) => m.event === 'state' && m.server === 'everything' && m.state === 'ready');
    process.kill(before.pid, 'SIGKILL');
    const st = await restarting;
    assert.match(st.reason, /killed by signal 9/);
    assert.match(st.reason, /restarting in 100 ms \(attempt 1 of 5\)/);
    await readyAgain;
    const after = await d.cmd({ cmd: 'info', server: 'everything' });
    assert.equal(after.spawns, 2);
    assert.notEqual(after.pid, before.pid);
    const echo = await d.cmd({ cmd: 'call', server: 'everything', tool: 'echo', args: { message: 'back' } });
    assert.equal(text(echo), 'Echo: back');
    // The other server never noticed.
    const mem = await d.cmd({ cmd: 'info', server: 'memory' });
    assert.equal(mem.spawns, 1);
    assert.equal(mem.state, 'ready');
  } finally {
    await d.close();
  }
});

test('sampling and roots are forwarded to the owner when declared', async () => {
  const d = new Driver((dir) => ({ mcpServers: { everything: { command: node22, args: [everything, 'stdio'] } } }),
    ['--can-sample', '--root', 'file:///srv/ptc-root']);
  try {
    await d.ready('everything');
    // server-everything registers its sampling and roots tools after initialization and says so
    // with list_changed: wait until the client's tool list holds them.
    let names = [];
    for (let i = 0; i < 100; i++) {
      names = (await d.cmd({ cmd: 'tools', server: 'everything' })).tools.map((t) => t.name);
      if (names.includes('trigger-sampling-request') && names.includes('get-roots-list')) break;
      await d.nextEvent((m) => m.event === 'tools' && m.server === 'everything');
    }
    assert.ok(names.includes('trigger-sampling-request'), `no sampling tool: ${names}`);
    assert.ok(names.includes('get-roots-list'), `no roots tool: ${names}`);
    const sampled = await d.cmd({ cmd: 'call', server: 'everything', tool: 'trigger-sampling-request', args: { prompt: 'say hi', maxTokens: 5 } });
    assert.equal(sampled.err, 0, JSON.stringify(sampled));
    assert.match(text(sampled), /sampled: .*say hi/);
    const roots = await d.cmd({ cmd: 'call', server: 'everything', tool: 'get-roots-list', args: {} });
    assert.equal(roots.err, 0, JSON.stringify(roots));
    assert.match(text(roots), /file:\/\/\/srv\/ptc-root/);
  } finally {
    await d.close();
  }
});

test('a server that never answers initialize fails alone, without holding up the others', async () => {
  const d = new Driver((dir) => ({
    mcpServers: {
      mute: { command: node22, args: ['-e', 'setInterval(() => {}, 1000)'] },
      everything: { command: node22, args: [everything, 'stdio'] },
    },
  }), ['--start-timeout-ms', '3000', '--start-timeout-for', 'mute']);
  // The 3 s apply to mute alone: server-everything keeps the default minute, as a Node server can
  // take more than 3 s to start on a loaded machine, and the two events may come in either order.
  try {
    await d.ready('everything');
    const failed = await d.next((m) => m.event === 'state' && m.server === 'mute' && m.state === 'failed');
    assert.match(failed.reason, /did not finish the handshake .* within 3000 ms/);
    const call = await d.cmd({ cmd: 'call', server: 'mute', tool: 'x', args: {} });
    assert.equal(call.err, -5001); // MCP_ESTATE (mcp/mcp.h): fails at once
    const echo = await d.cmd({ cmd: 'call', server: 'everything', tool: 'echo', args: { message: 'fine' } });
    assert.equal(text(echo), 'Echo: fine');
  } finally {
    await d.close();
  }
});

// server-everything's Streamable HTTP transport on a free loopback port.
async function startHttpEverything(port) {
  const proc = spawn(node22, [everything, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`server-everything (http) did not start: ${err}`)), 20000);
    proc.stderr.on('data', (d) => {
      err += d.toString();
      if (/listening on port/.test(err)) { clearTimeout(t); resolve(); }
    });
    proc.on('exit', () => { clearTimeout(t); reject(new Error(`server-everything (http) exited: ${err}`)); });
  });
  proc.stdout.resume();
  return proc;
}

// A port free on the wildcard address, which is what server-everything binds: a port free on
// 127.0.0.1 alone can still be held on another loopback address (e.g. by TIME_WAIT sockets of a
// load test running beside this one), and then the wildcard bind fails.
async function freePort() {
  const net = await import('node:net');
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

test('Streamable HTTP: lists and calls server-everything, and reconnects after it restarts', async () => {
  const port = await freePort();
  let server = await startHttpEverything(port);
  const d = new Driver(() => ({ mcpServers: { web: { type: 'http', url: `http://127.0.0.1:${port}/mcp`, headers: { 'X-Test': 'ptc' } } } }),
    // Retries every second at most, for a minute: a Node server takes over 6 s to start again on
    // a loaded machine, which the default 5 doubling attempts from 200 ms did not wait for.
    ['--restart-base-ms', '200', '--restart-cap-ms', '1000', '--restart-max', '60']);
  try {
    await d.ready('web');
    const names = (await d.cmd({ cmd: 'tools', server: 'web' })).tools.map((t) => t.name);
    for (const name of ['echo', 'get-sum']) assert.ok(names.includes(name), `web lacks ${name}: ${names}`);
    const echo = await d.cmd({ cmd: 'call', server: 'web', tool: 'echo', args: { message: 'over http' } });
    assert.equal(echo.err, 0, JSON.stringify(echo));
    assert.equal(text(echo), 'Echo: over http');
    const sum = await d.cmd({ cmd: 'call', server: 'web', tool: 'get-sum', args: { a: 20, b: 22 } });
    assert.match(text(sum), /\b42\b/);

    // The server goes away: the next call fails with the reason and the client keeps trying.
    server.kill('SIGKILL');
    await new Promise((r) => server.once('close', r));
    const restarting = d.nextEvent((m) => m.event === 'state' && m.server === 'web' && m.state === 'starting');
    const lost = await d.cmd({ cmd: 'call', server: 'web', tool: 'echo', args: { message: 'lost' } });
    assert.notEqual(lost.err, 0);
    assert.match(lost.message, /HTTP request to .* failed/);
    await restarting;
    const readyAgain = d.nextEvent((m) => m.event === 'state' && m.server === 'web' && m.state === 'ready');
    server = await startHttpEverything(port);
    await readyAgain;
    const back = await d.cmd({ cmd: 'call', server: 'web', tool: 'echo', args: { message: 'back over http' } });
    assert.equal(text(back), 'Echo: back over http');
  } finally {
    await d.close();
    server.kill('SIGKILL');
  }
});
