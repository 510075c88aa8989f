// ptc-mcp's own prompt (execute_code_guide) through the official SDK client over stdio.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { connect, ptcBin } from './helpers.mjs';

test('ptc-mcp offers the execute_code guide as a prompt, with the task appended', async () => {
  const { client, close } = await connect(ptcBin);
  try {
    const caps = client.getServerCapabilities();
    assert.deepEqual(caps.prompts, { listChanged: true });
    assert.equal(caps.resources, undefined, 'no resources are registered, so none are advertised');
    const { prompts } = await client.listPrompts();
    const guide = prompts.find((p) => p.name === 'execute_code_guide');
    assert.ok(guide.description);
    assert.deepEqual(guide.arguments.map((a) => [a.name, a.required]), [['task', false]]);
    const plain = await client.getPrompt({ name: 'execute_code_guide' });
    assert.equal(plain.messages.length, 1);
    assert.equal(plain.messages[0].role, 'user');
    assert.match(plain.messages[0].content.text, /execute_code/);
    assert.match(plain.messages[0].content.text, /from tools\.SERVER import TOOL/);
    const withTask = await client.getPrompt({ name: 'execute_code_guide', arguments: { task: 'count the open issues' } });
    assert.match(withTask.messages[0].content.text, /The task: count the open issues$/);
    await assert.rejects(client.getPrompt({ name: 'execute_code_guide', arguments: { topic: 'x' } }),
      (e) => e instanceof McpError && e.code === -32602 && /unknown argument topic/.test(e.message));
  } finally {
    await close();
  }
});
