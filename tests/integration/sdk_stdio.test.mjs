// The official TypeScript SDK client against ptc-mcp and the fixture server over stdio.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema,
  LoggingMessageNotificationSchema, McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { connect, ptcBin, fixtureBin, sleep } from './helpers.mjs';

const VERSIONS = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];

for (const version of VERSIONS) {
  test(`ptc-mcp handshake negotiates ${version} with the SDK client`, async () => {
    const c = await connect(ptcBin, [], { version });
    try {
      assert.equal(c.transport.initializeResult.protocolVersion, version);
      const info = c.client.getServerVersion();
      assert.equal(info.name, 'ptc-mcp');
      assert.match(info.version, /^\d+\.\d+\.\d+/);
      assert.ok(c.client.getServerCapabilities().tools, 'tools capability');
      assert.ok(c.client.getServerCapabilities().logging, 'logging capability');
      assert.equal(typeof c.client.getInstructions(), 'string');
      await c.client.ping();
      const tools = await c.client.listTools();
      assert.ok(Array.isArray(tools.tools));
    } finally {
      await c.close();
    }
  });
}

test('fixture server: paging through tools/list yields every tool once, in a stable order', async () => {
  const c = await connect(fixtureBin, ['--tools', '123', '--page', '10']);
  try {
    const names = [];
    let cursor;
    let pages = 0;
    do {
      const page = await c.client.listTools(cursor ? { cursor } : {});
      assert.ok(page.tools.length <= 10);
      names.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    assert.equal(names.length, 129);
    assert.equal(new Set(names).size, 129);
    assert.deepEqual(names, [...names].sort());
    assert.equal(pages, 13);
    await assert.rejects(c.client.listTools({ cursor: 'not-a-cursor!' }), (e) => e instanceof McpError && e.code === -32602);
  } finally {
    await c.close();
  }
});

test('tools/call returns text and structuredContent; validation errors name the field', async () => {
  const c = await connect(fixtureBin);
  try {
    const r = await c.client.callTool({ name: 'echo', arguments: { message: 'héllo ✓' } });
    assert.equal(r.content[0].text, 'héllo ✓');
    assert.deepEqual(r.structuredContent, { echo: 'héllo ✓' });
    assert.ok(!r.isError);

    const bad = await c.client.callTool({ name: 'add', arguments: { a: 'x', b: 1 } });
    assert.equal(bad.isError, true);
    assert.match(bad.content[0].text, /a: expected integer, got string/);
    const missing = await c.client.callTool({ name: 'add', arguments: { a: 1 } });
    assert.match(missing.content[0].text, /b: is required/);
    const neg = await c.client.callTool({ name: 'add', arguments: { a: 1, b: -1 } });
    assert.match(neg.content[0].text, /b: must be >= 0/);
    const extra = await c.client.callTool({ name: 'add', arguments: { a: 1, b: 2, c: 3 } });
    assert.match(extra.content[0].text, /c: is not an allowed property/);
    const ok = await c.client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
    assert.deepEqual(ok.structuredContent, { sum: 5 });

    const failed = await c.client.callTool({ name: 'fail', arguments: {} });
    assert.equal(failed.isError, true);

    await assert.rejects(c.client.callTool({ name: 'no_such_tool', arguments: {} }),
      (e) => e instanceof McpError && e.code === -32602 && /no_such_tool/.test(e.message));
  } finally {
    await c.close();
  }
});

test('structuredContent and listing fields follow the negotiated protocol version', async () => {
  const old = await connect(fixtureBin, [], { version: '2024-11-05' });
  try {
    const r = await old.client.callTool({ name: 'echo', arguments: { message: 'x' } });
    assert.equal(r.structuredContent, undefined);
    const tools = (await old.client.listTools()).tools;
    const echo = tools.find((t) => t.name === 'echo');
    assert.equal(echo.outputSchema, undefined);
    assert.equal(echo.annotations, undefined);
    assert.equal(echo.title, undefined);
  } finally {
    await old.close();
  }
  const cur = await connect(fixtureBin, [], { version: '2025-06-18' });
  try {
    const echo = (await cur.client.listTools()).tools.find((t) => t.name === 'echo');
    assert.equal(echo.title, 'Echo');
    assert.deepEqual(echo.annotations, { readOnlyHint: true });
    assert.ok(echo.outputSchema);
  } finally {
    await cur.close();
  }
});

test('progress notifications are monotonic and rate-limited, and precede the result', async () => {
  const c = await connect(fixtureBin);
  try {
    const seen = [];
    const r = await c.client.callTool({ name: 'slow', arguments: { steps: 40, interval_ms: 5 } }, undefined,
      { onprogress: (p) => seen.push(p) });
    assert.match(r.content[0].text, /done after 40 steps/);
    assert.ok(seen.length >= 1, 'at least one progress notification');
    assert.ok(seen.length < 40, `rate limit coalesces updates (got ${seen.length})`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress);
    assert.equal(seen.at(-1).total, 40);
    assert.match(seen.at(-1).message, /^step \d+ of 40$/);
    // The SDK handles notifications a microtask later than responses, so it may miss the last
    // update; raw_stdio.test.mjs checks on the wire that it is sent before the result.
  } finally {
    await c.close();
  }
});

test('cancellation stops the call and the session keeps serving', async () => {
  const c = await connect(fixtureBin);
  try {
    const ac = new AbortController();
    const p = c.client.callTool({ name: 'slow', arguments: { steps: 100000, interval_ms: 10 } }, undefined,
      { signal: ac.signal });
    await sleep(100);
    ac.abort('test cancels');
    await assert.rejects(p);
    await c.client.ping();
    const r = await c.client.callTool({ name: 'echo', arguments: { message: 'still here' } });
    assert.equal(r.content[0].text, 'still here');
  } finally {
    await c.close();
  }
});

test('logging/setLevel filters notifications/message', async () => {
  const got = [];
  const c = await connect(fixtureBin, [], {
    setup: (client) => client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => got.push(n.params)),
  });
  try {
    await c.client.callTool({ name: 'log', arguments: {} });
    await sleep(50);
    assert.deepEqual(got.map((m) => m.level), ['info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']);
    got.length = 0;
    await c.client.setLoggingLevel('error');
    await c.client.callTool({ name: 'log', arguments: {} });
    await sleep(50);
    assert.deepEqual(got.map((m) => m.level), ['error', 'critical', 'alert', 'emergency']);
    assert.equal(got[0].logger, 'fixture');
    assert.deepEqual(got[0].data, { text: 'error' });
    got.length = 0;
    await c.client.setLoggingLevel('debug');
    await c.client.callTool({ name: 'log', arguments: {} });
    await sleep(50);
    assert.equal(got.length, 8);
  } finally {
    await c.close();
  }
});

test('server-to-client requests reach the SDK client handlers and come back', async () => {
  const c = await connect(fixtureBin, [], {
    capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } },
    setup: (client) => {
      client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
        model: 'test-model', role: 'assistant',
        content: { type: 'text', text: `hi from the client (${req.params.messages[0].content.text})` },
      }));
      client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { ok: true } }));
      client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///data', name: 'data' }] }));
    },
  });
  try {
    const s = await c.client.callTool({ name: 'ask', arguments: { what: 'sampling' } });
    assert.ok(!s.isError, s.content[0].text);
    assert.equal(JSON.parse(s.content[0].text).content.text, 'hi from the client (say hi)');
    const e = await c.client.callTool({ name: 'ask', arguments: { what: 'elicitation' } });
    assert.deepEqual(JSON.parse(e.content[0].text), { action: 'accept', content: { ok: true } });
    const r = await c.client.callTool({ name: 'ask', arguments: { what: 'roots' } });
    assert.equal(JSON.parse(r.content[0].text).roots[0].uri, 'file:///data');
  } finally {
    await c.close();
  }
});

test('a server-to-client request fails cleanly without the capability, on an error and on timeout', async () => {
  const c = await connect(fixtureBin, [], {
    capabilities: { roots: {} },
    setup: (client) => {
      client.setRequestHandler(ListRootsRequestSchema, async () => new Promise(() => {})); // never answers
    },
  });
  try {
    const s = await c.client.callTool({ name: 'ask', arguments: { what: 'sampling' } });
    assert.equal(s.isError, true);
    assert.match(s.content[0].text, /did not declare that capability/);
    const t = await c.client.callTool({ name: 'ask', arguments: { what: 'roots', timeout_ms: 200 } });
    assert.equal(t.isError, true);
    assert.match(t.content[0].text, /did not answer roots\/list in time/);
    await c.client.ping();
  } finally {
    await c.close();
  }
  const e = await connect(fixtureBin, [], {
    capabilities: { sampling: {} },
    setup: (client) => client.setRequestHandler(CreateMessageRequestSchema, async () => {
      throw new McpError(-1, 'User rejected sampling request');
    }),
  });
  try {
    const r = await e.client.callTool({ name: 'ask', arguments: { what: 'sampling' } });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /User rejected sampling request/);
  } finally {
    await e.close();
  }
});

test('cancelling a call while it waits on the client cancels the request sent to the client', async () => {
  let handlerSignal;
  let handlerStarted;
  const started = new Promise((r) => { handlerStarted = r; });
  const c = await connect(fixtureBin, [], {
    capabilities: { sampling: {} },
    setup: (client) => client.setRequestHandler(CreateMessageRequestSchema, (req, extra) => {
      handlerSignal = extra.signal;
      handlerStarted();
      return new Promise(() => {}); // the user never answers
    }),
  });
  try {
    const ac = new AbortController();
    const p = c.client.callTool({ name: 'ask', arguments: { what: 'sampling' } }, undefined, { signal: ac.signal });
    await started;
    assert.equal(handlerSignal.aborted, false);
    ac.abort('user gave up');
    await assert.rejects(p);
    for (let i = 0; i < 50 && !handlerSignal.aborted; i++) await sleep(10);
    assert.equal(handlerSignal.aborted, true, 'the server sent notifications/cancelled for its sampling request');
    await c.client.ping();
  } finally {
    await c.close();
  }
});
