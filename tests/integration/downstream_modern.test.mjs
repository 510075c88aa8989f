// mcp/'s downstream client against a modern-only server (2026-07-28 and nothing older, built
// with the official TypeScript SDK 2.x: tests/fixtures/modern_only_server.mjs), over stdio and
// Streamable HTTP: it refuses initialize, so the client must fall back to server/discover and
// stateless requests. Through the C driver (the client alone) and through ptc-mcp (its tools
// proxied, and called from sandboxed code).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { node22, connect, ptcBin, sleep } from './helpers.mjs';
import { Driver } from './downstream_driver.mjs';
import { startModernHttp } from './modern_wire.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixture = path.resolve(here, '..', 'fixtures', 'modern_only_server.mjs');
const text = (answer) => answer.result.content.map((c) => c.text ?? '').join('');

const transports = [
  ['stdio', async () => ({ entry: { command: node22, args: [fixture, 'stdio'] }, stop: () => {} })],
  ['Streamable HTTP', async () => {
    const srv = await startModernHttp();
    return { entry: { type: 'http', url: srv.url }, stop: srv.stop };
  }],
];

for (const [name, start] of transports) {
  test(`a modern-only server over ${name} is listed and called (server/discover after initialize is refused)`, async () => {
    const srv = await start();
    const d = new Driver(() => ({ mcpServers: { modern: srv.entry } }));
    try {
      await d.ready('modern');
      const info = await d.cmd({ cmd: 'info', server: 'modern' });
      assert.equal(info.init.protocolVersion, '2026-07-28');
      assert.equal(info.init.serverInfo.name, 'modern-only-fixture');
      assert.equal(info.init.instructions, 'a modern-only test server');
      const names = (await d.cmd({ cmd: 'tools', server: 'modern' })).tools.map((t) => t.name).sort();
      assert.deepEqual(names, ['add', 'ask_model', 'grow', 'shout', 'which_roots']);
      const shout = await d.cmd({ cmd: 'call', server: 'modern', tool: 'shout', args: { text: 'hello modern' } });
      assert.equal(shout.err, 0, JSON.stringify(shout));
      assert.equal(text(shout), 'HELLO MODERN');
      const add = await d.cmd({ cmd: 'call', server: 'modern', tool: 'add', args: { a: 2, b: 40 } });
      assert.equal(text(add), '42');
      // A tool whose name needs the header's base64 form still reaches the server (an unknown
      // tool: the server's own error comes back, not a header mismatch).
      const odd = await d.cmd({ cmd: 'call', server: 'modern', tool: 'näme with spaces ', args: {} });
      const oddText = odd.err === 0 ? text(odd) : odd.message;
      assert.doesNotMatch(oddText, /header/i, JSON.stringify(odd));
      // Without sampling declared in the request's _meta the server does not even ask: the call
      // fails with its refusal.
      const ask = await d.cmd({ cmd: 'call', server: 'modern', tool: 'ask_model', args: { question: 'q' } });
      assert.notEqual(ask.err, 0, JSON.stringify(ask));
      assert.match(ask.message, /sampling\/createMessage.*capabilit/);
    } finally {
      await d.close();
      srv.stop();
    }
  });

  test(`a modern-only server's input requests over ${name} are answered by the owner (sampling) and the client (roots)`, async () => {
    const srv = await start();
    const d = new Driver(() => ({ mcpServers: { modern: srv.entry } }), ['--can-sample', '--root', 'file:///srv/ptc-root']);
    try {
      await d.ready('modern');
      const ask = await d.cmd({ cmd: 'call', server: 'modern', tool: 'ask_model', args: { question: 'say hi' } });
      assert.equal(ask.err, 0, JSON.stringify(ask));
      assert.equal(text(ask), 'model said: sampled: say hi');
      const roots = await d.cmd({ cmd: 'call', server: 'modern', tool: 'which_roots', args: {} });
      assert.equal(roots.err, 0, JSON.stringify(roots));
      assert.equal(text(roots), 'roots: file:///srv/ptc-root');
    } finally {
      await d.close();
      srv.stop();
    }
  });
}

for (const [name, start] of transports) {
  test(`a modern-only server's tool-list changes over ${name} arrive on subscriptions/listen`, async () => {
    const srv = await start();
    const d = new Driver(() => ({ mcpServers: { modern: srv.entry } }));
    try {
      await d.ready('modern');
      // The subscription opens once the server is ready; grow announces the change at every
      // call, so a call made before the stream was open is followed by one that is heard.
      const grownList = (m) => m.event === 'tools' && m.server === 'modern' && m.count === 6;
      for (let i = 0; i < 20 && !d.lines.some(grownList); i++) {
        const grown = await d.cmd({ cmd: 'call', server: 'modern', tool: 'grow', args: {} });
        assert.equal(text(grown), 'grown');
        await Promise.race([d.next(grownList, 60000), sleep(500)]);
      }
      assert.ok(d.lines.some(grownList), 'the tools listed again after grow');
      const names = (await d.cmd({ cmd: 'tools', server: 'modern' })).tools.map((t) => t.name);
      assert.ok(names.includes('late'), `no late tool: ${names}`);
      const late = await d.cmd({ cmd: 'call', server: 'modern', tool: 'late', args: {} });
      assert.equal(text(late), 'late tool answered');
    } finally {
      await d.close();
      srv.stop();
    }
  });
}

test('ptc-mcp proxies a modern-only server\'s tools, from code too, and forwards its sampling to the calling client', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-ds-modern-'));
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers: { modern: { command: node22, args: [fixture, 'stdio'] } } }));
  const asked = [];
  const c = await connect(ptcBin, ['--config', config, '--expose-tools', '--embedder', 'lexical'], {
    capabilities: { sampling: {} },
    env: { XDG_CACHE_HOME: path.join(dir, 'cache') },
    setup: (client) => client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      asked.push(req.params.messages[0].content.text);
      return { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'hi from the client' } };
    }),
  });
  try {
    let names = [];
    for (let i = 0; i < 300 && !names.includes('modern__shout'); i++) {
      names = (await c.client.listTools()).tools.map((t) => t.name);
      if (!names.includes('modern__shout')) await sleep(100);
    }
    assert.ok(names.includes('modern__shout'), `no proxied tool: ${names}`);
    const shout = await c.client.callTool({ name: 'modern__shout', arguments: { text: 'proxied' } });
    assert.equal(shout.content[0].text, 'PROXIED');
    const ask = await c.client.callTool({ name: 'modern__ask_model', arguments: { question: 'are you there?' } });
    assert.notEqual(ask.isError, true, JSON.stringify(ask));
    assert.equal(ask.content[0].text, 'model said: hi from the client');
    assert.deepEqual(asked, ['are you there?']);
    let ready = false;
    for (let i = 0; i < 300 && !ready; i++) {
      const t = (await c.client.listTools()).tools.find((x) => x.name === 'execute_code');
      ready = /modules: .*modern/.test(t.description);
      if (!ready) await sleep(100);
    }
    const r = await c.client.callTool({ name: 'execute_code', arguments: {
      code: 'from tools.modern import add\nprint(add(a=20, b=22))\n', max_repairs: 0,
    } });
    assert.equal(r.structuredContent.status, 'ok', r.content[0].text);
    assert.match(r.structuredContent.stdout, /\b42\b/);
  } finally {
    await c.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

// The edge cases, against tests/fixtures/fake_modern_downstream.py.
const fake = path.resolve(here, '..', 'fixtures', 'fake_modern_downstream.py');
const fakeEntry = (mode) => ({ command: 'python3', args: [fake, '--mode', mode] });

test('a server that does not know initialize is spoken to statelessly: the envelope on every request and cancel', async () => {
  const d = new Driver(() => ({ mcpServers: { fake: fakeEntry('unknown-init') } }));
  try {
    await d.ready('fake');
    const meta = JSON.parse(text(await d.cmd({ cmd: 'call', server: 'fake', tool: 'meta', args: {} })));
    assert.equal(meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28');
    assert.deepEqual(meta['io.modelcontextprotocol/clientCapabilities'], {});
    assert.equal(meta['io.modelcontextprotocol/clientInfo'].name, 'ptc-mcp');
    // initialize was refused once; nothing of the legacy handshake followed (no initialized).
    const seen = JSON.parse(text(await d.cmd({ cmd: 'call', server: 'fake', tool: 'seen', args: {} })));
    assert.deepEqual(seen, ['initialize', 'server/discover', 'tools/list', 'tools/call', 'tools/call']);
    const hang = await d.cmd({ cmd: 'call', server: 'fake', tool: 'hang', args: {}, timeout_ms: 300 });
    assert.equal(hang.err, -110, JSON.stringify(hang)); // MCP_ETIMEDOUT: -ETIMEDOUT on Linux
    for (let i = 0; i < 100 && !/cancelled \d+ /.test(d.stderr); i++) await sleep(50);
    assert.match(d.stderr, /cancelled \d+ \{[^\n]*"io\.modelcontextprotocol\/protocolVersion": "2026-07-28"/);
    const endless = await d.cmd({ cmd: 'call', server: 'fake', tool: 'endless', args: {} });
    assert.notEqual(endless.err, 0);
    assert.match(endless.message, /still asked for input after 10 rounds/);
    const bad = await d.cmd({ cmd: 'call', server: 'fake', tool: 'bad_input', args: {} });
    assert.notEqual(bad.err, 0);
    assert.match(bad.message, /malformed InputRequiredResult/);
  } finally {
    await d.close();
  }
});

test('without a revision in common, or with a legacy refusal, the start fails saying why', async () => {
  const d = new Driver(() => ({
    mcpServers: { future: fakeEntry('future-only'), wrong: fakeEntry('wrong-era'), legacy: fakeEntry('legacy-error') },
  }));
  try {
    const failed = (server) => d.next((m) => m.event === 'state' && m.server === server && m.state === 'failed');
    assert.match((await failed('future')).reason, /server\/discover offers protocol versions \["2099-01-01"\], none of which ptc-mcp speaks/);
    // -32022 naming no revision we speak, or any other error: the legacy failure, no discover.
    assert.match((await failed('wrong')).reason, /^initialize failed: .*Unsupported protocol version/);
    assert.match((await failed('legacy')).reason, /^initialize failed: .*Invalid params: this server wants something else/);
  } finally {
    await d.close();
  }
});

// Stateless on both sides: a proxied call of an SDK 2.x client pinned to 2026-07-28 hands the
// modern downstream server's input requests to that client in its own InputRequiredResult
// (the SDK answers them through its handlers and calls again), over stdio and HTTP.
for (const over of ['stdio', 'Streamable HTTP']) {
  test(`a stateless client over ${over} answers a stateless downstream server's input requests through ptc-mcp`, async () => {
    const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
    const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
    const { startHttp } = await import('./http_helpers.mjs');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-ds-modern-'));
    const config = path.join(dir, 'config.json');
    writeFileSync(config, JSON.stringify({ mcpServers: { modern: { command: node22, args: [fixture, 'stdio'] } } }));
    const args = ['--config', config, '--expose-tools', '--embedder', 'lexical'];
    const env = { XDG_CACHE_HOME: path.join(dir, 'cache') };
    const srv = over === 'stdio' ? null : await startHttp(args, { env });
    const client = new Client({ name: 'ptc-modern-both', version: '1.0.0' },
      { capabilities: { sampling: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } });
    const asked = [];
    client.setRequestHandler('sampling/createMessage', async (req) => {
      asked.push(req.params.messages[0].content.text);
      return { model: 'm', role: 'assistant', content: { type: 'text', text: 'stateless answer' } };
    });
    const transport = srv ? new StreamableHTTPClientTransport(new URL(srv.url))
      : new StdioClientTransport({ command: ptcBin, args, env: { ...process.env, ...env }, stderr: 'pipe' });
    try {
      await client.connect(transport);
      let names = [];
      for (let i = 0; i < 300 && !names.includes('modern__ask_model'); i++) {
        names = (await client.listTools()).tools.map((t) => t.name);
        if (!names.includes('modern__ask_model')) await sleep(100);
      }
      assert.ok(names.includes('modern__ask_model'), `no proxied tool: ${names}`);
      const ask = await client.callTool({ name: 'modern__ask_model', arguments: { question: 'both stateless?' } });
      assert.notEqual(ask.isError, true, JSON.stringify(ask));
      assert.equal(ask.content[0].text, 'model said: stateless answer');
      assert.deepEqual(asked, ['both stateless?']);
    } finally {
      await client.close();
      if (srv) await srv.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
