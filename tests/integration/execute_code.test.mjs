// execute_code through the official SDK client: runs, failures, output pages, limits, progress,
// cancellation and concurrency. The SDK validates structuredContent against the outputSchema.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, ptcBin, sleep } from './helpers.mjs';
import { PAGED_CODE, PAGED_STDOUT, followPages } from './pages.mjs';

const run = (c, code, extra = {}, opts) =>
  c.client.callTool({ name: 'execute_code', arguments: { code, ...extra } }, undefined, opts);

test('execute_code is listed with input and output schemas', async () => {
  const c = await connect(ptcBin);
  try {
    const { tools } = await c.client.listTools();
    const t = tools.find((x) => x.name === 'execute_code');
    assert.ok(t, 'execute_code is listed');
    assert.deepEqual(Object.keys(t.inputSchema.properties).sort(), ['cancel', 'close_session', 'code', 'cursor', 'max_repairs', 'session', 'timeout_seconds', 'wait_seconds']);
    assert.ok(t.outputSchema.required.includes('next_cursor'));
  } finally {
    await c.close();
  }
});

test('hello world, exit codes, empty stdin, unicode and invalid UTF-8', async () => {
  const c = await connect(ptcBin);
  try {
    await c.client.listTools(); // lets the SDK validate structuredContent against outputSchema
    const ok = await run(c, 'print("hello, world")');
    assert.equal(ok.isError, undefined);
    assert.equal(ok.content[0].text, 'hello, world');
    assert.equal(ok.structuredContent.status, 'ok');
    assert.equal(ok.structuredContent.exit_code, 0);
    assert.equal(ok.structuredContent.stdout, 'hello, world\n');
    assert.equal(ok.structuredContent.sandbox, 'full');
    assert.equal(ok.structuredContent.next_cursor, null);

    const exit3 = await run(c, 'import sys\nprint("bye")\nsys.exit(3)');
    assert.equal(exit3.isError, true);
    assert.equal(exit3.structuredContent.status, 'error');
    assert.equal(exit3.structuredContent.exit_code, 3);
    assert.match(exit3.content[0].text, /exit code 3/);

    const stdin = await run(c, 'import sys\nprint(repr(sys.stdin.read()))');
    assert.equal(stdin.structuredContent.stdout, "''\n");

    const uni = await run(c, 'import sys\nprint("héllo ✓ 😀")\nsys.stdout.flush()\nsys.stdout.buffer.write(b"bad:\\xff\\xfe end\\n")');
    assert.equal(uni.structuredContent.stdout, 'héllo ✓ 😀\nbad:\uFFFD\uFFFD end\n');
    assert.equal(uni.structuredContent.stdout_bytes, Buffer.byteLength('héllo ✓ 😀\n') + 11);
  } finally {
    await c.close();
  }
});

test('an exception comes back as isError with the end of the traceback up front', async () => {
  const c = await connect(ptcBin);
  try {
    const code = 'for i in range(300):\n    print("line", i)\ndef f():\n    raise ValueError("bad value 42")\nf()';
    const r = await run(c, code);
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.status, 'error');
    assert.equal(r.structuredContent.exit_code, 1);
    const text = r.content[0].text;
    assert.match(text.split('\n')[0], /^Status: error \(exit code 1\)/);
    const head = text.slice(0, text.indexOf('--- stdout ---'));
    assert.match(head, /ValueError: bad value 42/, 'the traceback tail precedes the output');
    assert.match(r.structuredContent.stderr, /Traceback \(most recent call last\)/);
  } finally {
    await c.close();
  }
});

test('long output is paged behind cursors; the text ends with the cursor line', async () => {
  const c = await connect(ptcBin, ['--output-page-chars', '1000']);
  try {
    const r = await run(c, PAGED_CODE);
    const sc = r.structuredContent;
    assert.equal(sc.status, 'ok');
    assert.equal(sc.stdout.length, 1000);
    assert.equal(sc.stdout_bytes, 3000);
    assert.equal(typeof sc.next_cursor, 'string');
    assert.ok(r.content[0].text.endsWith(`[more output: call execute_code with cursor "${sc.next_cursor}"]`));
    const { out, err, pages } = await followPages(c.client, sc);
    assert.equal(pages, 4);
    assert.equal(out, PAGED_STDOUT);
    assert.equal(err, 'tail\n');

    const bad = await c.client.callTool({ name: 'execute_code', arguments: { cursor: 'f'.repeat(32) + '.1000' } });
    assert.equal(bad.isError, true);
    assert.match(bad.content[0].text, /Unknown or expired cursor/);
    const both = await c.client.callTool({ name: 'execute_code', arguments: { cursor: sc.next_cursor, code: 'print(1)' } });
    assert.equal(both.isError, true);
    assert.match(both.content[0].text, /cursor alone/);
    const neither = await c.client.callTool({ name: 'execute_code', arguments: {} });
    assert.equal(neither.isError, true);
    const extra = await c.client.callTool({ name: 'execute_code', arguments: { code: 'print(1)', repairs: 1 } });
    assert.equal(extra.isError, true);
    assert.match(extra.content[0].text, /repairs: is not an allowed property/);
    const tooMany = await c.client.callTool({ name: 'execute_code', arguments: { code: 'print(1)', max_repairs: 11 } });
    assert.equal(tooMany.isError, true);
    assert.match(tooMany.content[0].text, /max_repairs/);
    const pageAndRepairs = await c.client.callTool({ name: 'execute_code', arguments: { cursor: sc.next_cursor, max_repairs: 1 } });
    assert.equal(pageAndRepairs.isError, true);
    assert.match(pageAndRepairs.content[0].text, /cursor alone/);
  } finally {
    await c.close();
  }
});

test('a timeout kills the run, and timeout_seconds is bounded by --max-timeout', async () => {
  const c = await connect(ptcBin, ['--max-timeout', '5']);
  try {
    const t0 = Date.now();
    const r = await run(c, 'import time\nprint("start", flush=True)\nwhile True:\n    time.sleep(0.01)', { timeout_seconds: 1 });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.status, 'timeout');
    assert.equal(r.structuredContent.stdout, 'start\n');
    assert.match(r.content[0].text, /timeout/);
    assert.ok(Date.now() - t0 < 4000);
    const big = await run(c, 'print(1)', { timeout_seconds: 6 });
    assert.equal(big.isError, true);
    assert.match(big.content[0].text, /at most 5/);
  } finally {
    await c.close();
  }
});

test('progress notifications report elapsed time while a run goes on', async () => {
  const c = await connect(ptcBin);
  try {
    const seen = [];
    const r = await run(c, 'import time\nprint("x" * 10, flush=True)\ntime.sleep(2.6)\nprint("done")', {},
      { onprogress: (p) => seen.push(p) });
    assert.equal(r.structuredContent.status, 'ok');
    assert.ok(seen.length >= 2, `got ${seen.length} progress notifications`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress);
    assert.match(seen.at(-1).message, /running \d+\.\d s, \d+ bytes of output/);
    // This client cannot sample and no --repair-url is set: no attempt numbers, and total is
    // the run's timeout (heal_sampling.test.mjs covers progress with repairs).
    assert.equal(seen[0].total, 30000);
    assert.match(seen.at(-1).message, /^running/);
    const off = [];
    await run(c, 'import time\ntime.sleep(1.5)', { max_repairs: 0 }, { onprogress: (p) => off.push(p) });
    assert.ok(off.length >= 1);
    assert.equal(off[0].total, 30000, 'without repairs, total is the run\'s timeout');
    assert.match(off.at(-1).message, /^running/);
  } finally {
    await c.close();
  }
});

test('cancellation kills the run at once and the server keeps serving', async () => {
  const c = await connect(ptcBin);
  try {
    const ac = new AbortController();
    const t0 = Date.now();
    const p = run(c, 'import time\nwhile True:\n    time.sleep(0.05)', { timeout_seconds: 60 }, { signal: ac.signal });
    await sleep(500);
    ac.abort('changed my mind');
    await assert.rejects(p);
    const r = await run(c, 'print("after")');
    assert.equal(r.content[0].text, 'after');
    assert.ok(Date.now() - t0 < 10000);
  } finally {
    await c.close();
  }
});

test('20 concurrent runs all come back with their own answers', async () => {
  const c = await connect(ptcBin);
  try {
    const runs = Array.from({ length: 20 }, (_, i) => run(c, `import os\nprint(${i} * ${i}, os.getpid() > 0)`, { timeout_seconds: 120 }));
    const results = await Promise.all(runs);
    results.forEach((r, i) => {
      assert.equal(r.structuredContent.status, 'ok', JSON.stringify(r.structuredContent));
      assert.equal(r.structuredContent.stdout, `${i * i} True\n`);
    });
  } finally {
    await c.close();
  }
});

test('an old protocol version gets the text alone', async () => {
  const c = await connect(ptcBin, [], { version: '2024-11-05' });
  try {
    const r = await run(c, 'print(6 * 7)');
    assert.equal(r.content[0].text, '42');
    assert.equal(r.structuredContent, undefined);
  } finally {
    await c.close();
  }
});

test('runs share no state: each takes a sandbox and interpreter of its own (warm start)', async () => {
  const c = await connect(ptcBin);
  try {
    const first = await run(c, 'import json, os\n'
      + 'open("/tmp/leak", "w").write("x")\n'
      + 'leak_var = 1\njson.leak = 1\nos.environ["PTC_LEAK"] = "1"\n'
      + 'print(os.listdir("/tmp"))');
    assert.equal(first.structuredContent.stdout, "['leak', 'outputs']\n");
    for (let i = 0; i < 3; i++) {
      const r = await run(c, 'import json, os\n'
        + 'print(os.path.exists("/tmp/leak"), "leak_var" in globals(), hasattr(json, "leak"), '
        + '"PTC_LEAK" in os.environ, os.listdir("/tmp"), os.getpid())');
      assert.equal(r.structuredContent.status, 'ok');
      assert.equal(r.structuredContent.stdout, "False False False False ['outputs'] 2\n");
    }
  } finally {
    await c.close();
  }
});

test('a warm run counts its timeout from its code, not from when its sandbox was made', async () => {
  const c = await connect(ptcBin);
  try {
    await run(c, 'pass');
    await sleep(1500); // the next run's sandbox waits this long, set up
    const r = await run(c, 'import time\ntime.sleep(0.3)\nprint("ok")', { timeout_seconds: 1 });
    assert.equal(r.structuredContent.status, 'ok');
    assert.equal(r.structuredContent.stdout, 'ok\n');
    const spin = await run(c, 'while True: pass', { timeout_seconds: 1 });
    assert.equal(spin.structuredContent.status, 'timeout');
  } finally {
    await c.close();
  }
});

test('a NUL character in code is refused with its offset, never cut off', async () => {
  const c = await connect(ptcBin);
  try {
    await c.client.listTools();
    // JSON carries it as \u0000; the parsed string would end there and run only the first line.
    const r = await run(c, 'print("é😀")\u0000print("cut")');
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /argument "code" contains a NUL character .* at offset 11; remove it/);
    assert.equal(r.structuredContent, undefined, 'nothing ran');
    // A Python escape spelled \u0000 in the source (an escaped backslash in JSON) is no NUL.
    const ok = await run(c, 'print(len("\\u0000"), "\\\\u0000")');
    assert.equal(ok.isError, undefined, ok.content[0].text);
    assert.equal(ok.structuredContent.stdout, '1 \\u0000\n');
  } finally {
    await c.close();
  }
});
