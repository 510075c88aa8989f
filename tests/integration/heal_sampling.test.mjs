// Self-healing through MCP sampling, with the official SDK client as the model: one repair then
// success, a repeated error, a rejection, a client that cannot sample, a repair after a timeout,
// cancelling while the server waits for the sampling answer, and the overall deadline.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CreateMessageRequestSchema, ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { connect, ptcBin, sleep } from './helpers.mjs';

const run = (c, code, extra = {}, opts) =>
  c.client.callTool({ name: 'execute_code', arguments: { code, ...extra } }, undefined, opts);

// A client whose model is `answer(params, extra)`; every sampling request is kept in `asked`.
async function withModel(answer, { args = [], env } = {}) {
  const asked = [];
  const c = await connect(ptcBin, args, {
    env,
    capabilities: { sampling: {} },
    setup: (client) => client.setRequestHandler(CreateMessageRequestSchema, async (req, extra) => {
      asked.push(req.params);
      return answer(req.params, extra);
    }),
  });
  await c.client.listTools(); // the SDK validates structuredContent against the outputSchema
  return { c, asked };
}

const reply = (text) => ({ model: 'test-model', role: 'assistant', content: { type: 'text', text } });
// The program inside the repair request's first ```python block.
const programOf = (params) => /```python\n([\s\S]*?)```/.exec(params.messages[0].content.text)[1];

test('a failing run is repaired once through sampling and the result shows both attempts', async () => {
  const { c, asked } = await withModel((params) => {
    const code = programOf(params);
    return reply('Here is the fix:\n\n```python\n' + code.replace('totl', 'total') + '```\nThat should work.');
  });
  try {
    const progress = [];
    const code = 'print("this output stays in the sandbox")\ntotal = 41\nprint(totl + 1)\n';
    const r = await run(c, code, {}, { onprogress: (p) => progress.push(p) });
    assert.equal(r.isError, undefined, r.content[0].text);
    const sc = r.structuredContent;
    assert.equal(sc.status, 'ok');
    assert.equal(sc.stdout, 'this output stays in the sandbox\n42\n');
    assert.equal(sc.attempts.length, 2);
    assert.equal(sc.attempts[0].status, 'error');
    assert.match(sc.attempts[0].error, /^NameError: name 'totl' is not defined/);
    assert.equal(sc.attempts[0].changes, null);
    assert.equal(sc.attempts[1].status, 'ok');
    assert.equal(sc.attempts[1].error, null);
    assert.equal(sc.attempts[1].changes, '+1 -1 lines');
    assert.equal(sc.attempts[1].repaired_by, 'sampling');
    assert.equal(sc.final_code, code.replace('totl', 'total'));
    assert.equal(sc.repair, undefined);
    const text = r.content[0].text;
    assert.match(text, /Self-healing: 2 attempts, 1 repair by the client's model \(sampling\); the last one succeeded/);
    assert.match(text, /attempt 1: error: NameError/);
    assert.match(text, /Final code that worked:\n```python\n[\s\S]*print\(total \+ 1\)\n```\n--- stdout ---\nthis output stays/);

    // One sampling request: short system prompt, maxTokens, preferences, only the error's end.
    assert.equal(asked.length, 1);
    const p = asked[0];
    assert.ok(p.systemPrompt.length > 20 && p.systemPrompt.length < 600);
    assert.ok(p.maxTokens > 0);
    assert.ok(p.modelPreferences.intelligencePriority > 0);
    assert.equal(p.includeContext, 'none');
    const prompt = p.messages[0].content.text;
    assert.equal(programOf(p), code);
    assert.match(prompt, /NameError: name 'totl' is not defined/);
    assert.doesNotMatch(prompt, /this output stays in the sandbox\n(?!")/, 'no output of the run is sent');
    const errorBlock = /The last lines of the error:\n\n```\n([\s\S]*?)```/.exec(prompt)[1];
    assert.ok(errorBlock.trim().split('\n').length <= 5, errorBlock);

    // Progress names the attempt and keeps increasing across attempts.
    assert.ok(progress.some((x) => /attempt 1 of 3 failed \(NameError/.test(x.message ?? '')), JSON.stringify(progress));
    for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress);
  } finally {
    await c.close();
  }
});

test('the loop stops at a repeated error before the budget is spent', async () => {
  // The model sends the failing program back unchanged, then (second server) a program that
  // is different but fails the same way.
  const same = await withModel((params) => reply('```python\n' + programOf(params) + '```'));
  try {
    const r = await run(same.c, 'import json\njson.loads("{bad json 1}")\n', { max_repairs: 5 });
    assert.equal(r.isError, true);
    const sc = r.structuredContent;
    assert.equal(same.asked.length, 1);
    assert.equal(sc.attempts.length, 1);
    assert.match(sc.repair.stopped, /the repair changed nothing/);
    assert.match(sc.repair.fingerprint, /^json\.decoder\.JSONDecodeError|^JSONDecodeError/);
    assert.match(r.content[0].text, /Repairs stopped: the repair changed nothing/);
  } finally {
    await same.c.close();
  }
  let n = 0;
  const moved = await withModel((params) => reply('```python\n# try ' + (++n) + '\n' + programOf(params).replace(/^# try \d+\n/, '').replace('1}', '23}') + '```'));
  try {
    const r = await run(moved.c, 'import json\njson.loads("{bad json 1}")\n', { max_repairs: 5 });
    assert.equal(r.isError, true);
    const sc = r.structuredContent;
    assert.equal(moved.asked.length, 1, 'a second request would have been made if the loop went on');
    assert.equal(sc.attempts.length, 2);
    assert.equal(sc.attempts[0].error, sc.attempts[1].error, 'numbers are stripped from the fingerprint');
    assert.match(sc.repair.stopped, /the same error came back/);
    assert.equal(sc.final_code, '# try 1\nimport json\njson.loads("{bad json 23}")\n');
    assert.match(r.content[0].text, /Last code tried:/);
  } finally {
    await moved.c.close();
  }
});

test('a client that rejects the sampling request ends the loop cleanly with the original error', async () => {
  const { c, asked } = await withModel(() => { throw new McpError(ErrorCode.InvalidRequest, 'User rejected sampling request'); });
  try {
    const r = await run(c, 'def f():\n    raise ValueError("no value 7")\nf()\n');
    assert.equal(r.isError, true);
    const sc = r.structuredContent;
    assert.equal(asked.length, 1);
    assert.equal(sc.status, 'error');
    assert.equal(sc.attempts.length, 1);
    assert.match(sc.stderr, /ValueError: no value 7/);
    assert.match(sc.repair.stopped, /did not give a fix: .*User rejected sampling request/);
    assert.equal(sc.repair.line, 2);
    assert.equal(sc.repair.failing_line, 'raise ValueError("no value 7")');
    // The server goes on serving.
    const ok = await run(c, 'print("still here")');
    assert.equal(ok.structuredContent.stdout, 'still here\n');
  } finally {
    await c.close();
  }
});

test('a client without sampling gets the repair packet and no sampling request', async () => {
  // The SDK client answers a request it has no handler for with an error, which would show in
  // the stop reason; the server must not send one at all.
  const c = await connect(ptcBin);
  try {
    await c.client.listTools();
    const code = 'import os\nrows = [1, 2, 3]\nprint(rows[3])\n';
    const r = await run(c, code);
    assert.equal(r.isError, true);
    const sc = r.structuredContent;
    assert.equal(sc.attempts.length, 1);
    // Nobody can repair here: nothing is said about repairs, only the packet for the client.
    assert.deepEqual(Object.keys(sc.repair).sort(), ['failing_line', 'fingerprint', 'last_lines', 'line']);
    assert.equal(sc.repair.fingerprint, 'IndexError: list index out of range @ <string>:<module>');
    assert.equal(sc.repair.line, 3);
    assert.equal(sc.repair.failing_line, 'print(rows[3])');
    assert.match(sc.repair.last_lines, /IndexError: list index out of range\n?$/);
    assert.doesNotMatch(r.content[0].text, /Repairs stopped|cannot sample|attempt/);
    assert.match(r.content[0].text, /Repair packet: error IndexError: list index out of range @ <string>:<module>; failing line 3: print\(rows\[3\]\)/);
    assert.doesNotMatch(c.stderr.join(''), /sampling/);

    const off = await run(c, code, { max_repairs: 0 });
    assert.equal(off.isError, true);
    assert.equal(off.structuredContent.repair, undefined, 'max_repairs 0 turns self-healing off');
  } finally {
    await c.close();
  }
});

test('a run killed at its timeout is repaired', async () => {
  const { c, asked } = await withModel(() => reply('```py\nprint("finished in time")\n```'));
  try {
    const r = await run(c, 'while True:\n    pass\n', { timeout_seconds: 1 });
    assert.equal(r.isError, undefined, r.content[0].text);
    const sc = r.structuredContent;
    assert.equal(sc.stdout, 'finished in time\n');
    assert.deepEqual(sc.attempts.map((a) => [a.status, a.error]), [['timeout', 'timeout'], ['ok', null]]);
    assert.match(asked[0].messages[0].content.text, /killed at its 1\.0 s timeout/);
  } finally {
    await c.close();
  }
});

test('cancelling while the server waits for the sampling answer stops the loop', async () => {
  let seen, aborted;
  const waiting = new Promise((resolve) => { seen = resolve; });
  const abortedP = new Promise((resolve) => { aborted = resolve; });
  const { c } = await withModel((params, extra) => new Promise((resolve) => {
    extra.signal.addEventListener('abort', () => { aborted(extra.signal.reason); resolve(reply('```python\nprint(1)\n```')); });
    seen();
  }));
  try {
    const ac = new AbortController();
    const call = run(c, 'raise SystemExit(4)', {}, { signal: ac.signal });
    await waiting;
    ac.abort('the user pressed stop');
    await assert.rejects(call, /AbortError|abort|stop/i);
    // The server passes the cancellation on to its own sampling request.
    await abortedP;
    const ok = await run(c, 'print("after the cancel")', { max_repairs: 0 });
    assert.equal(ok.structuredContent.stdout, 'after the cancel\n');
  } finally {
    await c.close();
  }
});

test('one deadline covers runs and repairs together', async () => {
  // A 5 s deadline (--request-deadline; 50 s by default): the first run takes 3 s and fails, the
  // repaired one would sleep for 20 s but only gets what is left of the deadline.
  const { c, asked } = await withModel(() => reply('```python\nimport time\ntime.sleep(20)\nprint("never")\n```'), {
    args: ['--request-deadline', '5'],
  });
  try {
    const r = await run(c, 'import time\ntime.sleep(3)\nraise RuntimeError("late")\n', { timeout_seconds: 4, max_repairs: 3 });
    assert.equal(r.isError, true);
    const sc = r.structuredContent;
    assert.equal(asked.length, 1);
    assert.deepEqual(sc.attempts.map((a) => a.status), ['error', 'timeout']);
    assert.ok(sc.attempts[1].duration_ms < 4000, 'the second run got less than its own timeout');
    assert.match(r.content[0].text, /cut to the request's overall deadline/);
    assert.match(sc.repair.stopped, /the request's overall deadline \(5 s\) leaves no time for a repair/);
  } finally {
    await c.close();
  }
});

test('the repair request lists the signatures of the tools the program called', async () => {
  // No downstream servers here: tools.call of an unknown tool fails, and no signature is sent.
  const { c, asked } = await withModel(() => reply('```python\nprint("fine")\n```'));
  try {
    const r = await run(c, 'raise KeyError("k")');
    assert.equal(r.structuredContent.status, 'ok');
    assert.doesNotMatch(asked[0].messages[0].content.text, /Tools the program uses/);
    await sleep(10);
  } finally {
    await c.close();
  }
});
