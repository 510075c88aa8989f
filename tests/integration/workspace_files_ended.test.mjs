// Files a one-shot run wrote to /tmp/outputs before it was stopped still come back, through the
// official SDK client: after its timeout (init kills the code, not itself, and sends them), after
// a kill signal, and after the memory limit's OOM kill; and a session cell that ends its session.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, ptcBin } from './helpers.mjs';

const run = (c, code, extra = {}) =>
  c.client.callTool({ name: 'execute_code', arguments: { code, max_repairs: 0, ...extra } });

const writeFile = 'import os\nopen("/tmp/outputs/before.txt", "w").write("written before the end\\n")\n';

async function readBack(c, r, name) {
  const files = r.structuredContent.files;
  const f = files.find((x) => x.name === name);
  assert.ok(f, `${name} listed: ${JSON.stringify(files)}`);
  assert.equal(f.omitted ?? false, false);
  const rr = await c.client.readResource({ uri: f.uri });
  return rr.contents[0].text;
}

test('a run stopped by its timeout returns the files it wrote, its children killed too', async () => {
  const c = await connect(ptcBin);
  try {
    await c.client.listTools(); // the SDK then validates structuredContent against outputSchema
    // A child that keeps writing would change the file after the timeout if it survived.
    const code = writeFile + [
      'import subprocess, sys, time',
      'child = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True:\\n    time.sleep(0.05)\\n    open(\\"/tmp/outputs/child.txt\\", \\"a\\").write(\\"x\\")"])',
      'print("waiting", flush=True)',
      'while True:',
      '    time.sleep(0.1)',
    ].join('\n');
    const t0 = Date.now();
    const r = await run(c, code, { timeout_seconds: 2 });
    const took = Date.now() - t0;
    assert.equal(r.structuredContent.status, 'timeout', JSON.stringify(r.structuredContent));
    assert.equal(r.structuredContent.stdout, 'waiting\n');
    assert.equal(await readBack(c, r, 'before.txt'), 'written before the end\n');
    assert.ok(r.structuredContent.files.some((f) => f.name === 'child.txt'), 'the child wrote too');
    const text = r.content.filter((b) => b.type === 'text').map((b) => b.text).join('\n');
    assert.ok(text.includes('before.txt'), 'the text names the file');
    // The files cost at most the files' grace (1 s) past the timeout; a child left alive would
    // hold the output pipes open and make the call wait for them.
    assert.ok(took < 2000 + 2500, `took ${took} ms`);
  } finally {
    await c.close();
  }
});

test('a spinning run with its signals blocked still returns its files at the timeout', async () => {
  const c = await connect(ptcBin);
  try {
    await c.client.listTools();
    // signals blocked and a busy loop: only SIGKILL ends it
    const code = writeFile + 'import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals))\nwhile True:\n    pass\n';
    const r = await run(c, code, { timeout_seconds: 1.5 });
    assert.equal(r.structuredContent.status, 'timeout', JSON.stringify(r.structuredContent));
    assert.equal(await readBack(c, r, 'before.txt'), 'written before the end\n');
  } finally {
    await c.close();
  }
});

test('a run killed by a signal returns the files it wrote', async () => {
  const c = await connect(ptcBin);
  try {
    await c.client.listTools();
    const r = await run(c, writeFile + 'os.kill(os.getpid(), 9)\n');
    assert.equal(r.structuredContent.status, 'killed', JSON.stringify(r.structuredContent));
    assert.equal(r.structuredContent.signal, 'SIGKILL');
    assert.equal(await readBack(c, r, 'before.txt'), 'written before the end\n');
  } finally {
    await c.close();
  }
});

test('a run past the memory limit returns the files it wrote', async () => {
  const c = await connect(ptcBin, ['--memory-limit', '64M']);
  try {
    await c.client.listTools();
    const big = 'b = bytearray(160 << 20)\nb[::4096] = b"x" * len(b[::4096])\nprint("allocated")\n';
    const r = await run(c, writeFile + big);
    // oom with a memory cgroup; a MemoryError (status error) where only RLIMIT_AS holds
    assert.ok(['oom', 'error'].includes(r.structuredContent.status), JSON.stringify(r.structuredContent));
    assert.equal(await readBack(c, r, 'before.txt'), 'written before the end\n');
  } finally {
    await c.close();
  }
});

test('a session cell that ends its session (an exit, the memory limit) still returns its files', async () => {
  const c = await connect(ptcBin, ['--memory-limit', '64M']);
  try {
    await c.client.listTools();
    const big = 'b = bytearray(160 << 20)\nb[::4096] = b"x" * len(b[::4096])\n';
    for (const [end, statuses] of [['os._exit(3)\n', ['error']], [big, ['oom', 'error']]]) {
      const first = await run(c, 'import os\nopen("/tmp/outputs/old.txt", "w").write("earlier cell")', { session: 'new' });
      const h = first.structuredContent.session;
      const r = await run(c, writeFile + end, { session: h });
      const sc = r.structuredContent;
      assert.ok(statuses.includes(sc.status), JSON.stringify(sc));
      assert.equal(sc.session_ended, true, JSON.stringify(sc));
      assert.equal(await readBack(c, r, 'before.txt'), 'written before the end\n');
      assert.deepEqual(sc.files.map((f) => f.name), ['before.txt'], 'only what the cell changed');
    }
  } finally {
    await c.close();
  }
});
