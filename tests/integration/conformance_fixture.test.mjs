// The conformance fixture server (tests/fixtures/conformance_server.c) over stdio, driven by the
// official SDK client: resources, templates, subscriptions, prompts, completions, image/audio/
// embedded content, logging and progress inside a call, sampling and elicitation from a call.
// The same server serves the official conformance suite over HTTP (tests/conformance/run.sh).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { buildDir, connect, sleep } from './helpers.mjs';

const bin = path.join(buildDir, 'mcp_conformance_server');

test('content tools return image, audio and embedded resources the SDK accepts', async () => {
  const { client, close } = await connect(bin);
  try {
    const { tools } = await client.listTools();
    for (const t of tools) assert.ok(t.description, `${t.name} has a description`);
    const names = tools.map((t) => t.name);
    for (const n of ['test_simple_text', 'test_image_content', 'test_audio_content', 'test_embedded_resource',
      'test_multiple_content_types', 'test_sampling', 'test_elicitation', 'json_schema_2020_12_tool']) {
      assert.ok(names.includes(n), `${n} is listed`);
    }
    const schema = tools.find((t) => t.name === 'json_schema_2020_12_tool').inputSchema;
    assert.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema');
    assert.equal(schema.additionalProperties, false);
    assert.ok(schema.$defs.address);

    const img = await client.callTool({ name: 'test_image_content', arguments: {} });
    assert.equal(img.content[0].type, 'image');
    assert.equal(img.content[0].mimeType, 'image/png');
    assert.equal(Buffer.from(img.content[0].data, 'base64').subarray(1, 4).toString(), 'PNG');
    const audio = await client.callTool({ name: 'test_audio_content', arguments: {} });
    assert.equal(audio.content[0].mimeType, 'audio/wav');
    assert.equal(Buffer.from(audio.content[0].data, 'base64').subarray(0, 4).toString(), 'RIFF');
    const emb = await client.callTool({ name: 'test_embedded_resource', arguments: {} });
    assert.deepEqual(emb.content[0].resource, {
      uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.',
    });
    const mixed = await client.callTool({ name: 'test_multiple_content_types', arguments: {} });
    assert.deepEqual(mixed.content.map((c) => c.type), ['text', 'image', 'resource']);
    const err = await client.callTool({ name: 'test_error_handling', arguments: {} });
    assert.equal(err.isError, true);
  } finally {
    await close();
  }
});

test('logging and progress arrive during the call, in order, before its result', async () => {
  const logs = [];
  const { client, close } = await connect(bin, [], {
    setup: (c) => c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params)),
  });
  try {
    await client.setLoggingLevel('debug');
    await client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    assert.deepEqual(logs.map((l) => l.data),
      ['Tool execution started', 'Tool processing data', 'Tool execution completed']);
    assert.ok(logs.every((l) => l.level === 'info'));
    const progress = [];
    await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined,
      { onprogress: (p) => progress.push(p) });
    assert.deepEqual(progress.map((p) => [p.progress, p.total]), [[0, 100], [50, 100], [100, 100]]);
    // Logging below the level the client set is not sent.
    logs.length = 0;
    await client.setLoggingLevel('error');
    await client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    assert.equal(logs.length, 0);
  } finally {
    await close();
  }
});

test('sampling and elicitation go to the client from inside a call and shape its result', async () => {
  const seen = [];
  const { client, close } = await connect(bin, [], {
    capabilities: { sampling: {}, elicitation: {} },
    setup: (c) => {
      c.setRequestHandler(CreateMessageRequestSchema, async (r) => {
        seen.push(r.params);
        return { role: 'assistant', content: { type: 'text', text: 'sampled!' }, model: 'm', stopReason: 'endTurn' };
      });
      c.setRequestHandler(ElicitRequestSchema, async (r) => {
        seen.push(r.params);
        return { action: 'accept', content: { username: 'ada', email: 'ada@example.com' } };
      });
    },
  });
  try {
    const s = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'hello there' } });
    assert.equal(s.content[0].text, 'LLM response: sampled!');
    assert.equal(seen[0].messages[0].content.text, 'hello there');
    assert.equal(seen[0].maxTokens, 100);
    const e = await client.callTool({ name: 'test_elicitation', arguments: { message: 'Who are you?' } });
    assert.equal(e.content[0].text, 'User response: action=accept, content={"username":"ada","email":"ada@example.com"}');
    assert.deepEqual(seen[1].requestedSchema.required, ['username', 'email']);
    const d = await client.callTool({ name: 'test_elicitation_sep1034_defaults', arguments: {} });
    assert.match(d.content[0].text, /^Elicitation completed: action=accept/);
    assert.equal(seen[2].requestedSchema.properties.age.default, 30);
    // A missing required argument is refused before the client is asked anything.
    const bad = await client.callTool({ name: 'test_sampling', arguments: {} });
    assert.equal(bad.isError, true);
    assert.equal(seen.length, 3);
  } finally {
    await close();
  }
});

test('a client without the capability gets a tool error, not a request', async () => {
  const { client, close } = await connect(bin);
  try {
    const r = await client.callTool({ name: 'test_elicitation', arguments: { message: 'x' } });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /elicitation\/create is not possible/);
  } finally {
    await close();
  }
});

test('cancelling a call that waits for the client cancels the request to the client too', async () => {
  const cancelled = [];
  let asked;
  const askedP = new Promise((resolve) => { asked = resolve; });
  const { client, close } = await connect(bin, [], {
    capabilities: { sampling: {} },
    setup: (c) => c.setRequestHandler(CreateMessageRequestSchema, (_r, extra) => new Promise((_res, rej) => {
      asked();
      extra.signal.addEventListener('abort', () => { cancelled.push(true); rej(new Error('aborted')); });
    })),
  });
  try {
    const ac = new AbortController();
    const call = client.callTool({ name: 'test_sampling', arguments: { prompt: 'wait' } }, undefined, { signal: ac.signal });
    await askedP;
    ac.abort();
    await assert.rejects(call);
    for (let i = 0; i < 100 && cancelled.length === 0; i++) await sleep(20);
    assert.equal(cancelled.length, 1);
    // The session still works afterwards.
    assert.equal((await client.callTool({ name: 'test_simple_text', arguments: {} })).content[0].type, 'text');
  } finally {
    await close();
  }
});

test('resources: list, read text, binary and templates, subscribe to updates', async () => {
  const updates = [];
  const { client, close } = await connect(bin, [], {
    setup: (c) => c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.push(n.params.uri)),
  });
  try {
    const caps = client.getServerCapabilities();
    assert.deepEqual(caps.resources, { subscribe: true, listChanged: true });
    assert.deepEqual(caps.prompts, { listChanged: true });
    assert.deepEqual(caps.completions, {});
    const { resources } = await client.listResources();
    assert.deepEqual(resources.map((r) => r.uri).sort(),
      ['test://static-binary', 'test://static-text', 'test://watched-resource']);
    for (const r of resources) assert.ok(r.name && r.description);
    const text = await client.readResource({ uri: 'test://static-text' });
    assert.equal(text.contents[0].text, 'This is the content of the static text resource.');
    const binary = await client.readResource({ uri: 'test://static-binary' });
    assert.equal(binary.contents[0].mimeType, 'image/png');
    assert.ok(binary.contents[0].blob.length > 0);
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.equal(resourceTemplates[0].uriTemplate, 'test://template/{id}/data');
    const t = await client.readResource({ uri: 'test://template/123/data' });
    assert.deepEqual(JSON.parse(t.contents[0].text), { id: '123', templateTest: true, data: 'Data for ID: 123' });
    await assert.rejects(client.readResource({ uri: 'test://nope' }), (e) => e instanceof McpError && e.code === -32002);

    await client.subscribeResource({ uri: 'test://watched-resource' });
    await client.callTool({ name: 'touch_watched_resource', arguments: {} });
    assert.deepEqual(updates, ['test://watched-resource']);
    await client.unsubscribeResource({ uri: 'test://watched-resource' });
    await client.callTool({ name: 'touch_watched_resource', arguments: {} });
    assert.deepEqual(updates, ['test://watched-resource']);
  } finally {
    await close();
  }
});

test('prompts: list, get with arguments, argument validation, completion', async () => {
  const { client, close } = await connect(bin);
  try {
    const { prompts } = await client.listPrompts();
    assert.deepEqual(prompts.map((p) => p.name).sort(), ['test_input_required_result_prompt',
      'test_prompt_with_arguments', 'test_prompt_with_embedded_resource', 'test_prompt_with_image',
      'test_simple_prompt']);
    const withArgs = prompts.find((p) => p.name === 'test_prompt_with_arguments');
    assert.deepEqual(withArgs.arguments.map((a) => [a.name, a.required]), [['arg1', true], ['arg2', true]]);
    const got = await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'hello', arg2: 'world' } });
    assert.equal(got.messages[0].content.text, "Prompt with arguments: arg1='hello', arg2='world'");
    await assert.rejects(client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'x' } }),
      (e) => e instanceof McpError && e.code === -32602 && /missing required argument arg2/.test(e.message));
    await assert.rejects(client.getPrompt({ name: 'no_such_prompt' }), (e) => e.code === -32602);
    const emb = await client.getPrompt({ name: 'test_prompt_with_embedded_resource', arguments: { resourceUri: 'test://x' } });
    assert.equal(emb.messages[0].content.resource.uri, 'test://x');
    const img = await client.getPrompt({ name: 'test_prompt_with_image' });
    assert.equal(img.messages[0].content.type, 'image');
    const c = await client.complete({ ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' }, argument: { name: 'arg1', value: 'par' } });
    assert.deepEqual(c.completion.values, ['paris', 'park', 'party']);
    assert.equal(c.completion.hasMore, false);
    const tc = await client.complete({ ref: { type: 'ref/resource', uri: 'test://template/{id}/data' }, argument: { name: 'id', value: 'test' } });
    assert.deepEqual(tc.completion.values, ['test', 'testValue1', 'testValue2']);
  } finally {
    await close();
  }
});
