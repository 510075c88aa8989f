// notifications/tasks on subscriptions/listen (the tasks extension, SEP-2663; issue 17): a
// listen request that declared the extension and names its own tasks in notifications.taskIds
// is granted them in the acknowledgement and told, on its stream, each time one changes status
// (the task's DetailedTask: a completed one with its result inlined, as tasks/get shows it).
// ptc-mcp's execute_code long runs, on the raw 2026-07-28 wire over stdio and Streamable HTTP
// (the HTTP listen is read as its event stream arrives).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RawPeer, ptcBin } from './helpers.mjs';
import { startHttp } from './http_helpers.mjs';
import { meta26, post26 } from './modern_wire.mjs';

const TASKS = 'io.modelcontextprotocol/tasks';
const EXT = { extensions: { [TASKS]: {} } };
const ARGS = ['--wait-seconds', '1', '--max-concurrent', '1'];
const SLOW = 'import time\nprint("started", flush=True)\ntime.sleep(3)\nprint("done")\n';
const SUB = 'io.modelcontextprotocol/subscriptionId';

function checkAck(ack, taskId) {
  assert.equal(ack.method, 'notifications/subscriptions/acknowledged', JSON.stringify(ack));
  assert.deepEqual(ack.params.notifications.taskIds, [taskId]);
  return ack.params._meta[SUB];
}

function checkCompleted(note, taskId, sub) {
  assert.equal(note.params.taskId, taskId);
  assert.equal(note.params._meta[SUB], sub);
  assert.equal(note.params.result.structuredContent.status, 'ok', JSON.stringify(note.params));
  assert.equal(note.params.result.structuredContent.stdout, 'started\ndone\n');
  assert.ok(Number.isInteger(note.params.ttlMs) && note.params.lastUpdatedAt);
}

test('stdio: a listen stream granted a task hears it complete, with its result', async () => {
  const peer = new RawPeer(ptcBin, ARGS);
  try {
    const created = await peer.request(1, 'tools/call', { name: 'execute_code', arguments: { code: SLOW, timeout_seconds: 60 }, _meta: meta26(EXT) });
    const taskId = created.result?.taskId;
    assert.equal(created.result?.resultType, 'task', JSON.stringify(created));
    // Without the extension the same ids are not granted (no taskIds in the acknowledgement).
    peer.send({ jsonrpc: '2.0', id: 'plain', method: 'subscriptions/listen', params: { notifications: { taskIds: [taskId] }, _meta: meta26({}) } });
    const plain = await peer.next((m) => m.method === 'notifications/subscriptions/acknowledged' && m.params._meta[SUB]);
    assert.equal(plain.params.notifications.taskIds, undefined);
    peer.send({ jsonrpc: '2.0', id: 'L', method: 'subscriptions/listen', params: { notifications: { taskIds: [taskId, 'f'.repeat(32)] }, _meta: meta26(EXT) } });
    const sub = checkAck(await peer.next((m) => m.method === 'notifications/subscriptions/acknowledged'), taskId);
    const note = await peer.next((m) => m.method === 'notifications/tasks' && m.params.status === 'completed', 60000);
    checkCompleted(note, taskId, sub);
    // Told once per change: the stream carried nothing else for the plain listen.
    assert.equal(peer.messages.filter((m) => m.method === 'notifications/tasks').length, 0);
    const t = await peer.request(2, 'tasks/get', { taskId, _meta: meta26(EXT) });
    assert.equal(t.result.status, 'completed');
    peer.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'L', _meta: meta26(EXT) } });
  } finally {
    await peer.close();
  }
});

// The listen POST's event stream, read as it comes: next(pred) waits for a message on it.
async function openListen(url, params, caps) {
  const ctl = new AbortController();
  const res = await fetch(url, {
    method: 'POST',
    signal: ctl.signal,
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'subscriptions/listen' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'listen', method: 'subscriptions/listen', params: { ...params, _meta: meta26(caps) } }),
  });
  assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const seen = [];
  let buf = '';
  return {
    seen,
    async next(pred, ms = 60000) {
      const end = Date.now() + ms;
      for (;;) {
        const hit = seen.find(pred);
        if (hit) return hit;
        assert.ok(Date.now() < end, `no matching event in ${ms} ms; got ${JSON.stringify(seen)}`);
        const { value, done } = await reader.read();
        assert.ok(!done, `the listen stream ended; got ${JSON.stringify(seen)}`);
        buf += decoder.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.startsWith('data:')) seen.push(JSON.parse(line.slice(5)));
        }
      }
    },
    close: () => ctl.abort(),
  };
}

test('Streamable HTTP: the listen POST streams a task\'s completion, and a cancelled task\'s end', async () => {
  const srv = await startHttp(ARGS);
  try {
    const call = () => post26(srv.url, 'tools/call', { name: 'execute_code', arguments: { code: SLOW, timeout_seconds: 60 } }, EXT);
    const created = (await call()).msg.result;
    assert.equal(created?.resultType, 'task', JSON.stringify(created));
    const l = await openListen(srv.url, { notifications: { taskIds: [created.taskId] } }, EXT);
    try {
      const sub = checkAck(await l.next((m) => m.method === 'notifications/subscriptions/acknowledged'), created.taskId);
      checkCompleted(await l.next((m) => m.method === 'notifications/tasks' && m.params.status === 'completed'), created.taskId, sub);
    } finally {
      l.close();
    }
    // A second run, cancelled by its client: its stream hears `cancelled`.
    const second = (await call()).msg.result;
    const m = await openListen(srv.url, { notifications: { taskIds: [second.taskId] } }, EXT);
    try {
      const sub = checkAck(await m.next((x) => x.method === 'notifications/subscriptions/acknowledged'), second.taskId);
      const ack = await post26(srv.url, 'tasks/cancel', { taskId: second.taskId }, EXT);
      assert.equal(ack.msg.result?.resultType, 'complete', JSON.stringify(ack.msg));
      const note = await m.next((x) => x.method === 'notifications/tasks');
      assert.equal(note.params.status, 'cancelled');
      assert.equal(note.params._meta[SUB], sub);
      assert.match(note.params.statusMessage, /tasks\/cancel/);
    } finally {
      m.close();
    }
  } finally {
    await srv.stop();
  }
});
