// ptc-mcp's own prompt (execute_code_guide) and output-page resources (ptc://output/{cursor})
// through the official SDK client over stdio.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { connect, ptcBin } from './helpers.mjs';

test('ptc-mcp offers the execute_code guide as a prompt, with the task appended', async () => {
  const { client, close } = await connect(ptcBin);
  try {
    const caps = client.getServerCapabilities();
    assert.deepEqual(caps.prompts, { listChanged: true });
    assert.deepEqual(caps.resources, { subscribe: true, listChanged: true });
    assert.equal(caps.completions, undefined, 'nothing completes, so completions are not advertised');
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

test('a task past the prompt\'s cap is cut before the character the cap would split', async () => {
  const { client, close } = await connect(ptcBin);
  try {
    // 8,191 bytes, then a 2-byte character across the 8,192-byte cap.
    const task = 'a'.repeat(8191) + 'é' + 'b'.repeat(10);
    const cut = await client.getPrompt({ name: 'execute_code_guide', arguments: { task } });
    const text = cut.messages[0].content.text;
    assert.ok(!text.includes('\uFFFD'), 'no replacement character: the cut kept the text valid');
    assert.ok(text.endsWith(`The task: ${'a'.repeat(8191)} [task cut]`));
    const whole = await client.getPrompt({ name: 'execute_code_guide', arguments: { task: 'a'.repeat(8190) + 'é' } });
    assert.ok(whole.messages[0].content.text.endsWith(`${'a'.repeat(8190)}é`), 'a task that fits is whole');
  } finally {
    await close();
  }
});

test('execute_code output pages can be read as resources behind their cursor', async () => {
  const { client, close } = await connect(ptcBin, ['--output-page-chars', '1000']);
  try {
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate), ['ptc://files/{id}/{name}', 'ptc://output/{cursor}']);
    assert.deepEqual((await client.listResources()).resources, []);
    const code = "import sys\nfor i in range(300): print(f'line {i:04d}')\nsys.stderr.write('done\\n')";
    const r = await client.callTool({ name: 'execute_code', arguments: { code } });
    const first = r.structuredContent;
    assert.equal(first.status, 'ok');
    assert.equal(typeof first.next_cursor, 'string');
    // Reading the resource gives the same page as fetching it with the cursor, and may repeat.
    const viaTool = (await client.callTool({ name: 'execute_code', arguments: { cursor: first.next_cursor } })).structuredContent;
    const uri = `ptc://output/${first.next_cursor}`;
    const res = await client.readResource({ uri });
    assert.equal(res.contents[0].uri, uri);
    assert.equal(res.contents[0].mimeType, 'text/plain');
    const text = res.contents[0].text;
    assert.ok(text.startsWith(viaTool.stdout.slice(0, 200)), 'the page starts where the cursor points');
    assert.ok(text.includes(viaTool.stdout.trimEnd().split('\n').pop()));
    if (viaTool.next_cursor) assert.ok(text.endsWith(`[more output: ptc://output/${viaTool.next_cursor}]`));
    assert.equal((await client.readResource({ uri })).contents[0].text, text);
    // Walk to the last page through resources only: it holds stderr and no further link.
    let next = uri, last = '', all = '';
    for (let i = 0; next && i < 50; i++) {
      last = (await client.readResource({ uri: next })).contents[0].text;
      all += last;
      const m = /\[more output: (ptc:\/\/output\/[^\]]+)\]$/.exec(last);
      next = m ? m[1] : null;
    }
    assert.equal(next, null);
    assert.match(last, /--- stderr ---\ndone/);
    assert.match(all, /line 0299/);
    await assert.rejects(client.readResource({ uri: 'ptc://output/0123456789abcdef0123456789abcdef.0' }),
      (e) => e instanceof McpError && e.code === -32002 && /expired cursor/.test(e.message));
  } finally {
    await close();
  }
});
