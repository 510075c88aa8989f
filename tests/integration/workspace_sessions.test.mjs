// execute_code's workspace through the official SDK client (issue 12): sessions (state kept
// across calls, invisible to one-shot runs and to other sessions, bound to the client that made
// them, idle expiry, the session limit, a timeout inside a session, cancel) and long runs
// (status "running", finished through the cursor). Over stdio and Streamable HTTP. The SDK
// validates every structuredContent against execute_code's outputSchema (after listTools).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, connectHttp, ptcBin, sleep, startHttp } from './helpers.mjs';

const call = (c, args, opts) => c.client.callTool({ name: 'execute_code', arguments: args }, undefined, opts);
const text = (r) => r.content.filter((b) => b.type === 'text').map((b) => b.text).join('\n');

async function withStdio(args, fn) {
  const c = await connect(ptcBin, args);
  try {
    await c.client.listTools(); // the SDK checks structuredContent against outputSchema from now on
    await fn(c);
  } finally {
    await c.close();
  }
}

test('a session keeps its state across calls; one-shot runs and other sessions do not see it', async () => {
  await withStdio([], async (c) => {
    const first = await call(c, { code: 'x = 41\nimport os\nopen("/tmp/kept.txt", "w").write("hi")\nos.chdir("/tmp")\nprint("set")', session: 'new' });
    assert.equal(first.isError, undefined, text(first));
    const h = first.structuredContent.session;
    assert.match(h, /^ses-[0-9a-f]{32}$/, 'a handle of 128 random bits');
    assert.ok(text(first).includes(h), 'the handle is in the text too');
    assert.equal(first.structuredContent.stdout, 'set\n');

    const second = await call(c, { code: 'x += 1\nprint(x, open("kept.txt").read(), os.getcwd())', session: h });
    assert.equal(second.isError, undefined, text(second));
    assert.equal(second.structuredContent.stdout, '42 hi /tmp\n');
    assert.equal(second.structuredContent.session, h);

    const oneShot = await call(c, { code: 'import os\nprint("x" in globals(), os.path.exists("/tmp/kept.txt"))' });
    assert.equal(oneShot.structuredContent.stdout, 'False False\n');
    assert.equal(oneShot.structuredContent.session, null);

    const other = await call(c, { code: 'import os\nprint("x" in globals(), os.path.exists("/tmp/kept.txt"))', session: 'new' });
    assert.equal(other.structuredContent.stdout, 'False False\n');
    assert.notEqual(other.structuredContent.session, h);

    const closed = await call(c, { session: h, close_session: true });
    assert.equal(closed.isError, undefined, text(closed));
    assert.match(text(closed), /closed/);
    const after = await call(c, { code: 'print(x)', session: h });
    assert.equal(after.isError, true);
    assert.match(text(after), /was closed/);

    const unknown = await call(c, { code: 'print(1)', session: 'ses-00000000000000000000000000000000' });
    assert.equal(unknown.isError, true);
    assert.match(text(unknown), /^Unknown session/);
  });
});

test('a timeout inside a session interrupts the cell and the session survives', async () => {
  await withStdio([], async (c) => {
    const r0 = await call(c, { code: 'state = "alive"', session: 'new' });
    const h = r0.structuredContent.session;
    const t = await call(c, { code: 'import time\nprint("before", flush=True)\ntime.sleep(30)', session: h, timeout_seconds: 1 });
    assert.equal(t.isError, true);
    assert.equal(t.structuredContent.status, 'timeout');
    assert.equal(t.structuredContent.interrupted, true);
    assert.equal(t.structuredContent.session_ended, false);
    assert.match(text(t), /interrupted \(KeyboardInterrupt\); the session lives on/);
    assert.match(text(t), /timeout_seconds \(at most 300/);
    assert.match(t.structuredContent.stderr, /KeyboardInterrupt/);
    const again = await call(c, { code: 'print(state)', session: h });
    assert.equal(again.structuredContent.stdout, 'alive\n');

    // A cell that ignores the interrupt: the session is killed after the grace.
    const stuck = await call(c, { code: 'import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass', session: h, timeout_seconds: 1 });
    assert.equal(stuck.structuredContent.status, 'timeout');
    assert.equal(stuck.structuredContent.session_ended, true);
    assert.match(text(stuck), /the session was killed/);
    const gone = await call(c, { code: 'print(state)', session: h });
    assert.equal(gone.isError, true);
    assert.match(text(gone), /has ended/);
  });
});

test('cells are serial: a second cell while one runs is refused as busy', async () => {
  await withStdio([], async (c) => {
    const h = (await call(c, { code: 'pass', session: 'new' })).structuredContent.session;
    const slow = call(c, { code: 'import time\ntime.sleep(1.5)\nprint("slow done")', session: h });
    await sleep(300);
    const busy = await call(c, { code: 'print(2)', session: h });
    assert.equal(busy.isError, true);
    assert.match(text(busy), /is busy/);
    assert.equal((await slow).structuredContent.stdout, 'slow done\n');
  });
});

test('the session limit names the oldest idle session', async () => {
  await withStdio(['--max-sessions', '2'], async (c) => {
    const a = (await call(c, { code: 'pass', session: 'new' })).structuredContent.session;
    await sleep(50);
    const b = (await call(c, { code: 'pass', session: 'new' })).structuredContent.session;
    await call(c, { code: 'pass', session: a }); // a is used last: b is now the oldest idle one
    const third = await call(c, { code: 'pass', session: 'new' });
    assert.equal(third.isError, true);
    assert.match(text(third), /--max-sessions 2/);
    assert.ok(text(third).includes(`"${b}"`), text(third));
    assert.ok(!text(third).includes(a));
    await call(c, { session: b, close_session: true });
    const ok = await call(c, { code: 'print("room")', session: 'new' });
    assert.equal(ok.structuredContent.stdout, 'room\n');
  });
});

test('an idle session expires and a later use says so', async () => {
  await withStdio(['--session-idle-timeout', '1'], async (c) => {
    const h = (await call(c, { code: 'y = 1', session: 'new' })).structuredContent.session;
    await sleep(2000);
    const r = await call(c, { code: 'print(y)', session: h });
    assert.equal(r.isError, true);
    assert.match(text(r), /expired: it was unused for 1 s \(--session-idle-timeout\)/);
  });
});

test('cancelling the request interrupts the cell; the session lives on', async () => {
  await withStdio([], async (c) => {
    const h = (await call(c, { code: 'z = "still here"', session: 'new' })).structuredContent.session;
    const ac = new AbortController();
    const p = call(c, { code: 'import time\ntime.sleep(30)', session: h }, { signal: ac.signal });
    await sleep(500);
    ac.abort();
    await assert.rejects(p);
    let r;
    for (let i = 0; i < 50; i++) { // the interrupt takes a moment to land
      r = await call(c, { code: 'print(z)', session: h });
      if (!r.isError) break;
      assert.match(text(r), /is busy/);
      await sleep(100);
    }
    assert.equal(r.structuredContent.stdout, 'still here\n');
  });
});

test('over Streamable HTTP a handle is refused to another MCP session exactly like an unknown one', async () => {
  const srv = await startHttp(ptcBin, []);
  const a = await connectHttp(srv.url);
  const b = await connectHttp(srv.url);
  try {
    await a.client.listTools();
    await b.client.listTools();
    const r = await call(a, { code: 'secret = 7', session: 'new' });
    const h = r.structuredContent.session;
    const mine = await call(a, { code: 'print(secret)', session: h });
    assert.equal(mine.structuredContent.stdout, '7\n');
    const stolen = await call(b, { code: 'print(secret)', session: h });
    assert.equal(stolen.isError, true);
    const fake = 'ses-' + 'f'.repeat(32);
    const unknown = await call(b, { code: 'print(secret)', session: fake });
    assert.equal(text(stolen), text(unknown).replace(fake, h));
    const close = await call(b, { session: h, close_session: true });
    assert.equal(close.isError, true);
    assert.equal((await call(a, { code: 'print(secret)', session: h })).structuredContent.stdout, '7\n');
  } finally {
    await a.close();
    await b.close();
    await srv.stop();
  }
});

test('a long run comes back as running with its output so far and is finished through its cursor', async () => {
  await withStdio(['--wait-seconds', '1'], async (c) => {
    const progress = [];
    const first = await call(c, { code: 'import time\nprint("start", flush=True)\ntime.sleep(2.5)\nprint("end")', timeout_seconds: 20 },
      { onprogress: (p) => progress.push(p) });
    assert.equal(first.isError, undefined, text(first));
    assert.equal(first.structuredContent.status, 'running');
    assert.equal(first.structuredContent.stdout, 'start\n');
    const cur = first.structuredContent.next_cursor;
    assert.match(cur, /^run-[0-9a-f]{32}$/);
    assert.ok(text(first).endsWith(`cursor "${cur}" to wait for more output or the result (wait_seconds sets how long), or with that cursor and cancel: true to stop it]`), text(first));

    // Cancelling the request that waits does not kill the run.
    const ac = new AbortController();
    const waiting = call(c, { cursor: cur, wait_seconds: 30 }, { signal: ac.signal });
    await sleep(200);
    ac.abort();
    await assert.rejects(waiting);

    const done = await call(c, { cursor: cur, wait_seconds: 30 });
    assert.equal(done.isError, undefined, text(done));
    assert.equal(done.structuredContent.status, 'ok');
    assert.equal(done.structuredContent.stdout, 'start\nend\n');
    assert.ok(done.structuredContent.duration_ms >= 2000);
    const again = await call(c, { cursor: cur, wait_seconds: 1 });
    assert.equal(again.isError, true, 'the cursor is spent once the result was read');
  });
});

test('{cursor, cancel: true} stops a long run and a long cell; timeout_seconds still bounds a long run', async () => {
  await withStdio(['--wait-seconds', '0.5'], async (c) => {
    const r = await call(c, { code: 'import time\nprint("working", flush=True)\ntime.sleep(60)', timeout_seconds: 120 });
    assert.equal(r.structuredContent.status, 'running');
    const k = await call(c, { cursor: r.structuredContent.next_cursor, cancel: true });
    assert.equal(k.isError, true);
    assert.equal(k.structuredContent.status, 'killed');
    assert.equal(k.structuredContent.stdout, 'working\n');
    assert.match(text(k), /cancelled \(cancel: true\)/);

    const h = (await call(c, { code: 'n = 5', session: 'new' })).structuredContent.session;
    const cell = await call(c, { code: 'import time\ntime.sleep(60)', session: h, timeout_seconds: 120 });
    assert.equal(cell.structuredContent.status, 'running');
    assert.equal(cell.structuredContent.session, h);
    const busy = await call(c, { code: 'print(n)', session: h });
    assert.match(text(busy), new RegExp(`is busy.*${cell.structuredContent.next_cursor}`));
    const kc = await call(c, { cursor: cell.structuredContent.next_cursor, cancel: true, wait_seconds: 10 });
    assert.equal(kc.structuredContent.interrupted, true);
    assert.match(text(kc), /cancelled \(cancel: true\) and interrupted/);
    assert.equal((await call(c, { code: 'print(n)', session: h })).structuredContent.stdout, '5\n');

    const t = await call(c, { code: 'import time\ntime.sleep(60)', timeout_seconds: 1.5 });
    assert.equal(t.structuredContent.status, 'running');
    const end = await call(c, { cursor: t.structuredContent.next_cursor, wait_seconds: 20 });
    assert.equal(end.structuredContent.status, 'timeout');
    assert.match(text(end), /timeout \(timeout_seconds\) and was killed\. For more time pass a larger timeout_seconds \(at most 300/);

    // Left running when the client goes: the server still exits cleanly (close checks it).
    const left = await call(c, { code: 'import time\ntime.sleep(60)', timeout_seconds: 120 });
    assert.equal(left.structuredContent.status, 'running');
  });
});

test('over Streamable HTTP a long run is finished through its cursor, and the cursor is bound to its client', async () => {
  const srv = await startHttp(ptcBin, ['--wait-seconds', '0.5']);
  const a = await connectHttp(srv.url);
  const b = await connectHttp(srv.url);
  try {
    await a.client.listTools();
    await b.client.listTools();
    const r = await call(a, { code: 'import time\ntime.sleep(1.5)\nprint("late")' });
    assert.equal(r.structuredContent.status, 'running');
    const cur = r.structuredContent.next_cursor;
    const other = await call(b, { cursor: cur, wait_seconds: 5 });
    assert.equal(other.isError, true);
    assert.match(text(other), /Unknown or expired cursor/);
    const done = await call(a, { cursor: cur, wait_seconds: 10 });
    assert.equal(done.structuredContent.status, 'ok');
    assert.equal(done.structuredContent.stdout, 'late\n');
    // A long run and a session left behind: stop() checks the clean exit.
    assert.equal((await call(b, { code: 'import time\ntime.sleep(60)', timeout_seconds: 120 })).structuredContent.status, 'running');
    assert.equal((await call(b, { code: 'import time\ntime.sleep(60)', session: 'new', timeout_seconds: 120 })).structuredContent.status, 'running');
  } finally {
    await a.close();
    await b.close();
    await srv.stop();
  }
});

test('a session cell hands back the files it writes to /tmp/outputs, and only the new ones', async () => {
  await withStdio([], async (c) => {
    const h = (await call(c, { code: 'import os\nopen(os.environ["PTC_OUTPUT_DIR"] + "/a.csv", "w").write("x,y\\n1,2\\n")', session: 'new' })).structuredContent.session;
    const again = await call(c, { code: 'open("/tmp/outputs/b.txt", "w").write("b")', session: h });
    assert.deepEqual(again.structuredContent.files.map((f) => f.name), ['b.txt']);
    const first = await call(c, { code: 'print(sorted(__import__("os").listdir("/tmp/outputs")))', session: h });
    assert.equal(first.structuredContent.stdout, "['a.csv', 'b.txt']\n");
    assert.deepEqual(first.structuredContent.files, []);
  });
});
