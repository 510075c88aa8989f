// Self-healing of a failing session cell, with the official SDK client as the model (sampling):
// the repair reruns only the failing cell, in the same live interpreter, so the state of earlier
// cells is there, and so is whatever the failed attempt did before it failed (the interpreter is
// not rolled back); `attempts` holds the history and later cells see the repaired cell's work.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { connect, ptcBin } from './helpers.mjs';

const call = (c, args) => c.client.callTool({ name: 'execute_code', arguments: args });
const text = (r) => r.content.filter((b) => b.type === 'text').map((b) => b.text).join('\n');
const reply = (t) => ({ model: 'test-model', role: 'assistant', content: { type: 'text', text: t } });
// The program inside the repair request's first ```python block.
const programOf = (params) => /```python\n([\s\S]*?)```/.exec(params.messages[0].content.text)[1];

async function withModel(fix, fn) {
  const asked = [];
  const c = await connect(ptcBin, [], {
    capabilities: { sampling: {} },
    setup: (client) => client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      asked.push(req.params);
      return reply('Fixed:\n\n```python\n' + fix(programOf(req.params)) + '```\n');
    }),
  });
  try {
    await c.client.listTools(); // the SDK validates structuredContent against the outputSchema
    await fn(c, asked);
  } finally {
    await c.close();
  }
}

test('a failing session cell is repaired in the same interpreter; attempts show the history', async () => {
  await withModel((code) => code.replace('dta', 'data'), async (c, asked) => {
    const first = await call(c, { code: 'data = [1, 2, 3]\nruns = 0\nprint("loaded")', session: 'new' });
    assert.equal(first.isError, undefined, text(first));
    const h = first.structuredContent.session;
    assert.equal(asked.length, 0, 'a cell that works asks for nothing');

    // Side effects before the failing line: a global and a file in the session's /tmp.
    const cell = 'runs += 1\nopen("/tmp/side.txt", "a").write("x")\ntotal = sum(dta)\nprint(total, runs, open("/tmp/side.txt").read())\n';
    const r = await call(c, { code: cell, session: h });
    assert.equal(r.isError, undefined, text(r));
    const sc = r.structuredContent;
    assert.equal(sc.status, 'ok');
    assert.equal(sc.session, h, 'the repaired cell ran in the same session');
    // data came from the first cell; runs and side.txt show the failed attempt ran there first
    assert.equal(sc.stdout, '6 2 xx\n');
    assert.equal(sc.attempts.length, 2);
    assert.equal(sc.attempts[0].status, 'error');
    assert.match(sc.attempts[0].error, /^NameError: name 'dta' is not defined/);
    assert.equal(sc.attempts[1].status, 'ok');
    assert.equal(sc.attempts[1].repaired_by, 'sampling');
    assert.equal(sc.final_code, cell.replace('dta', 'data'));
    assert.match(text(r), /Self-healing: 2 attempts, 1 repair by the client's model \(sampling\); the last one succeeded/);
    // The model saw only the failing cell, not the session's earlier cells.
    assert.equal(asked.length, 1);
    assert.equal(programOf(asked[0]), cell);
    assert.doesNotMatch(asked[0].messages[0].content.text, /data = \[1, 2, 3\]/);

    // The next cell sees what the repaired cell left.
    const next = await call(c, { code: 'print(total, runs)', session: h });
    assert.equal(next.structuredContent.stdout, '6 2\n');
    assert.equal(next.structuredContent.attempts.length, 1);
    assert.equal(asked.length, 1);
  });
});

test('a session cell interrupted at its timeout is repaired in the session that survived it', async () => {
  await withModel((code) => code.replace('while True:\n    time.sleep(0.05)\n', ''), async (c, asked) => {
    const first = await call(c, { code: 'import time\nstate = "kept"', session: 'new' });
    const h = first.structuredContent.session;
    const cell = 'while True:\n    time.sleep(0.05)\nprint(state)\n';
    const r = await call(c, { code: cell, session: h, timeout_seconds: 1 });
    assert.equal(r.isError, undefined, text(r));
    const sc = r.structuredContent;
    assert.equal(sc.status, 'ok', JSON.stringify(sc));
    assert.equal(sc.stdout, 'kept\n');
    assert.equal(sc.session, h);
    assert.deepEqual(sc.attempts.map((a) => a.status), ['timeout', 'ok']);
    assert.equal(asked.length, 1);
  });
});

test('a cell that ends its session is not repaired: no fix is asked for that could not run', async () => {
  await withModel((code) => code.replace('os._exit(3)', 'print("fixed")'), async (c, asked) => {
    const first = await call(c, { code: 'import os\nstate = "kept"', session: 'new' });
    const h = first.structuredContent.session;
    const r = await call(c, { code: 'os._exit(3)\n', session: h });
    const sc = r.structuredContent;
    assert.equal(r.isError, true, JSON.stringify(sc));
    assert.equal(sc.status, 'error');
    assert.equal(sc.exit_code, 3);
    assert.equal(sc.session_ended, true);
    assert.equal(sc.attempts.length, 1);
    assert.match(sc.repair.stopped, /^the cell ended its session \(its state is gone\), so a repaired version could not run/);
    assert.match(text(r), /The session has ended \(the interpreter exited with status 3\)/);
    assert.equal(asked.length, 0, 'the client was not asked for a fix');
    const later = await call(c, { code: 'print(state)', session: h });
    assert.equal(later.isError, true);
    assert.match(text(later), /has ended/);
  });
});
