// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) on ptc-mcp's execute_code, on
// the raw 2026-07-28 wire over stdio and Streamable HTTP (the pinned TypeScript client 2.4.0
// has no tasks surface of its own): a run that outlives its wait becomes a task that tasks/get
// follows to its result (pages and files included, read back by the same client), and a run
// that tasks/cancel stops is really killed (the only run slot is free again at once). Without
// the extension the same run comes back `running` with a run cursor, as before.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RawPeer, ptcBin, sleep, until } from './helpers.mjs';
import { startHttp } from './http_helpers.mjs';

const MODERN = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
// One run at a time and a short wait: a cancelled run that kept its slot would block the next.
const ARGS = ['--wait-seconds', '1', '--max-concurrent', '1', '--output-page-chars', '2000'];

const LONG_RUN = [
  'import os, time',
  'print("started", flush=True)',
  'time.sleep(3)',
  'open(os.environ["PTC_OUTPUT_DIR"] + "/answer.txt", "w").write("forty-two")',
  'print("x" * 5000)',
  'print("finished")',
].join('\n');

function meta(ext) {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': ext ? { sampling: {}, extensions: { [TASKS]: {} } } : {},
    'io.modelcontextprotocol/clientInfo': { name: 'ptc-tasks-test', version: '1' },
  };
}

// A client of one transport: rpc(method, params, ext) answers the whole JSON-RPC message.
let nextId = 1;
function stdioClient() {
  const peer = new RawPeer(ptcBin, ARGS);
  return {
    name: 'stdio',
    async rpc(method, params = {}, ext = true) {
      const id = nextId++;
      return peer.request(id, method, { ...params, _meta: meta(ext) });
    },
    stderr: () => peer.stderr,
    close: () => peer.close(),
  };
}

async function httpClient() {
  const srv = await startHttp(ARGS);
  return {
    name: 'http',
    async rpc(method, params = {}, ext = true) {
      const id = nextId++;
      const name = params.name ?? params.uri ?? params.taskId;
      const res = await fetch(srv.url, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          'MCP-Protocol-Version': MODERN,
          'Mcp-Method': method,
          ...(name ? { 'Mcp-Name': name } : {}),
        },
        body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta(ext) } }),
      });
      const text = await res.text();
      // One answer, as JSON or as the last data line of an event stream.
      const line = res.headers.get('content-type')?.includes('text/event-stream')
        ? text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5)).filter((l) => l.includes(`"id":${id}`)).at(-1)
        : text;
      const msg = JSON.parse(line);
      assert.equal(res.headers.get('mcp-session-id'), null, 'a stateless request has no session');
      return msg;
    },
    stderr: () => srv.stderr(),
    close: () => srv.stop(),
  };
}

const result = (msg) => {
  assert.ok(msg.result, `expected a result, got ${JSON.stringify(msg)}`);
  return msg.result;
};

// tasks/get until the task is terminal.
async function settle(c, taskId, ms = 120000) {
  const end = Date.now() + ms;
  for (;;) {
    const t = result(await c.rpc('tasks/get', { taskId }));
    assert.equal(t.taskId, taskId);
    if (['completed', 'failed', 'cancelled'].includes(t.status)) return t;
    assert.ok(Date.now() < end, `task ${taskId} still ${t.status} after ${ms} ms`);
    await sleep(200);
  }
}

for (const make of [stdioClient, httpClient]) {
  test(`execute_code over ${make.name.replace('Client', '')}: a long run becomes a task, polled to its result with pages and files`, async () => {
    const c = await make();
    try {
      const d = result(await c.rpc('server/discover'));
      assert.ok(d.capabilities.extensions?.[TASKS], `discover advertises ${TASKS}: ${JSON.stringify(d.capabilities)}`);

      const created = result(await c.rpc('tools/call', { name: 'execute_code', arguments: { code: LONG_RUN, timeout_seconds: 120 } }));
      assert.equal(created.resultType, 'task', JSON.stringify(created));
      assert.match(created.taskId, /^[0-9a-f]{32}$/);
      assert.equal(created.status, 'working');
      assert.ok(Number.isInteger(created.ttlMs) && created.ttlMs > 0);
      assert.ok(!('content' in created) && !('requestState' in created));

      const working = result(await c.rpc('tasks/get', { taskId: created.taskId }));
      assert.equal(working.resultType, 'complete');
      assert.ok(['working', 'completed'].includes(working.status));

      const done = await settle(c, created.taskId);
      assert.equal(done.status, 'completed', JSON.stringify(done));
      const sc = done.result.structuredContent;
      assert.equal(sc.status, 'ok', JSON.stringify(sc));
      assert.match(sc.stdout, /^started\n/);
      // The output is paged: the next pages come by their cursors, to the same client.
      assert.equal(typeof sc.next_cursor, 'string');
      let stdout = sc.stdout;
      for (let cursor = sc.next_cursor, n = 0; cursor; n++) {
        assert.ok(n < 10, 'at most a few pages');
        const page = result(await c.rpc('tools/call', { name: 'execute_code', arguments: { cursor } }));
        stdout += page.structuredContent.stdout;
        cursor = page.structuredContent.next_cursor;
      }
      assert.equal(stdout, `started\n${'x'.repeat(5000)}\nfinished\n`);
      // The file the run left is listed and reads back.
      const file = sc.files.find((f) => f.name === 'answer.txt');
      assert.ok(file?.uri, JSON.stringify(sc.files));
      const read = result(await c.rpc('resources/read', { uri: file.uri }));
      assert.equal(read.contents[0].text, 'forty-two');

      // An ended task stays readable; the removed v1 methods are unknown; the extension is needed.
      assert.equal(result(await c.rpc('tasks/get', { taskId: created.taskId })).status, 'completed');
      assert.equal((await c.rpc('tasks/result', { taskId: created.taskId })).error?.code, -32601);
      const gated = await c.rpc('tasks/get', { taskId: created.taskId }, false);
      assert.equal(gated.error?.code, -32021, JSON.stringify(gated));
      assert.ok(gated.error.data.requiredCapabilities.extensions[TASKS]);
      assert.equal((await c.rpc('tasks/get', { taskId: '0'.repeat(32) })).error?.code, -32602);
    } catch (e) {
      throw new Error(`${e.message}\nstderr:\n${c.stderr()}`);
    } finally {
      await c.close();
    }
  });

  test(`execute_code over ${make.name.replace('Client', '')}: tasks/cancel kills the run; without the extension the run comes back running`, async () => {
    const c = await make();
    let closed = false;
    try {
      const created = result(await c.rpc('tools/call', {
        name: 'execute_code', arguments: { code: 'import time\nprint("sleeping", flush=True)\ntime.sleep(100)', timeout_seconds: 120 },
      }));
      assert.equal(created.resultType, 'task', JSON.stringify(created));
      const ack = result(await c.rpc('tasks/cancel', { taskId: created.taskId }));
      assert.deepEqual(Object.keys(ack).filter((k) => k !== '_meta'), ['resultType']);
      assert.equal(ack.resultType, 'complete');
      const t = result(await c.rpc('tasks/get', { taskId: created.taskId }));
      assert.equal(t.status, 'cancelled');
      assert.ok(!('result' in t));
      // Idempotent on an ended task.
      assert.equal(result(await c.rpc('tasks/cancel', { taskId: created.taskId })).resultType, 'complete');

      // The only run slot is free: a short run answers at once (it would wait 100 s behind a
      // run that was not killed).
      const started = Date.now();
      const quick = result(await c.rpc('tools/call', { name: 'execute_code', arguments: { code: 'print(6 * 7)', wait_seconds: 60 } }));
      assert.equal(quick.resultType, 'complete');
      assert.equal(quick.structuredContent.status, 'ok', JSON.stringify(quick.structuredContent));
      assert.match(quick.structuredContent.stdout, /42/);
      assert.ok(Date.now() - started < 50000, `the next run took ${Date.now() - started} ms`);

      // No extension: the workspace issue's running + cursor path, unchanged.
      const running = result(await c.rpc('tools/call', {
        name: 'execute_code', arguments: { code: 'import time\ntime.sleep(100)', timeout_seconds: 120 },
      }, false));
      assert.equal(running.resultType, 'complete');
      assert.equal(running.structuredContent.status, 'running', JSON.stringify(running));
      assert.ok(!('taskId' in running));
      const cursor = running.structuredContent.next_cursor;
      const stopped = result(await c.rpc('tools/call', { name: 'execute_code', arguments: { cursor, cancel: true } }, false));
      assert.equal(stopped.structuredContent.status, 'killed', JSON.stringify(stopped.structuredContent));

      // A task still working when the server stops is cancelled with it: the exit below is
      // clean (status 0, no sanitizer report) and does not wait for the run.
      const left = result(await c.rpc('tools/call', {
        name: 'execute_code', arguments: { code: 'import time\ntime.sleep(100)', timeout_seconds: 120 },
      }));
      assert.equal(left.resultType, 'task');
      const t0 = Date.now();
      closed = true;
      await c.close();
      assert.ok(Date.now() - t0 < 40000, `the server took ${Date.now() - t0} ms to stop`);
    } catch (e) {
      throw new Error(`${e.message}\nstderr:\n${c.stderr()}`);
    } finally {
      if (!closed) await c.close();
    }
  });
}

// MRTR inside a task: a run that became a task fails, its repair asks the client's model
// (sampling) through the task (input_required, inputRequests.repair), tasks/update brings the
// model's answer and the repaired run's result is the task's.
test('execute_code over stdio: a task whose run fails is repaired through tasks/update (MRTR sampling inside the task)', async () => {
  const c = stdioClient();
  try {
    const broken = 'import time\ntime.sleep(2)\nprint("kept")\ntotal = 41\nprint(totl + 1)\n';
    const created = result(await c.rpc('tools/call', { name: 'execute_code', arguments: { code: broken, timeout_seconds: 60 } }));
    assert.equal(created.resultType, 'task', JSON.stringify(created));
    let t;
    for (let i = 0; ; i++) {
      t = result(await c.rpc('tasks/get', { taskId: created.taskId }));
      if (t.status !== 'working') break;
      assert.ok(i < 300, 'the task never asked for its repair');
      await sleep(200);
    }
    assert.equal(t.status, 'input_required', JSON.stringify(t));
    const ask = t.inputRequests.repair;
    assert.equal(ask.method, 'sampling/createMessage');
    const program = /```python\n([\s\S]*?)```/.exec(ask.params.messages[0].content.text)[1];
    assert.equal(program, broken);
    const fixed = program.replace('totl', 'total');
    const ack = result(await c.rpc('tasks/update', {
      taskId: created.taskId,
      inputResponses: { repair: { model: 'test-model', role: 'assistant', content: { type: 'text', text: '```python\n' + fixed + '```' } } },
    }));
    assert.equal(ack.resultType, 'complete');
    const done = await settle(c, created.taskId);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    const sc = done.result.structuredContent;
    assert.equal(sc.status, 'ok', JSON.stringify(sc));
    assert.equal(sc.stdout, 'kept\n42\n');
    assert.equal(sc.attempts.length, 2);
    assert.equal(sc.attempts[1].repaired_by, 'sampling');

    // Cancelled while it waits for its repair: the job parked for the next round goes at once.
    const second = result(await c.rpc('tools/call', { name: 'execute_code', arguments: { code: broken, timeout_seconds: 60 } }));
    assert.equal(second.resultType, 'task');
    for (let i = 0; (t = result(await c.rpc('tasks/get', { taskId: second.taskId }))).status === 'working'; i++) {
      assert.ok(i < 300, 'the task never asked for its repair');
      await sleep(200);
    }
    assert.equal(t.status, 'input_required');
    assert.equal(result(await c.rpc('tasks/cancel', { taskId: second.taskId })).resultType, 'complete');
    // The log line comes on stderr, which may arrive after the answer on stdout.
    const stopped = new RegExp(`task ${second.taskId.slice(0, 12)}\\.\\.\\. cancelled while it waited for input`);
    await until('the parked job to be stopped', () => stopped.test(c.stderr()), 10000);
    t = result(await c.rpc('tasks/get', { taskId: second.taskId }));
    assert.equal(t.status, 'cancelled');
    assert.ok(!('inputRequests' in t));
  } catch (e) {
    throw new Error(`${e.message}\nstderr:\n${c.stderr()}`);
  } finally {
    await c.close();
  }
});
