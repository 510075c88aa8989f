// A --mount HOST:PATH:rw folder through the official SDK client: what the code writes there is
// owned on the host by the server's user, or, when the server runs as root, by the folder's
// owner (an idmapped mount); a root-owned folder is never mapped to root (docs/sandbox.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, ptcBin } from './helpers.mjs';

const root = process.getuid() === 0;

async function ownerOfWritten(dir) {
  const c = await connect(ptcBin, ['--mount', `${dir}:/data:rw`]);
  try {
    await c.client.listTools();
    const r = await c.client.callTool({
      name: 'execute_code',
      arguments: { code: 'import os\nos.makedirs("/data/sub")\nopen("/data/sub/out.txt", "w").write("from the sandbox")\nprint(os.listdir("/data"))', max_repairs: 0 },
    });
    assert.equal(r.structuredContent.status, 'ok', JSON.stringify(r.structuredContent));
    const f = path.join(dir, 'sub', 'out.txt');
    assert.equal(fs.readFileSync(f, 'utf8'), 'from the sandbox');
    const st = [fs.statSync(path.join(dir, 'sub')), fs.statSync(f)];
    fs.rmSync(path.join(dir, 'sub'), { recursive: true });
    assert.equal(st[0].uid, st[1].uid);
    return { uid: st[1].uid, gid: st[1].gid };
  } finally {
    await c.close();
  }
}

test('files written to an rw mount belong to the folder owner (as root) or the server user', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ptc-mount-owner-'));
  try {
    if (!root) {
      assert.equal((await ownerOfWritten(dir)).uid, process.getuid());
      return;
    }
    fs.chownSync(dir, 4321, 4322);
    fs.chmodSync(dir, 0o755); // writable by its owner only: 65534 could not write here
    assert.deepEqual(await ownerOfWritten(dir), { uid: 4321, gid: 4322 });
    fs.chownSync(dir, 0, 0);
    fs.chmodSync(dir, 0o777);
    assert.deepEqual(await ownerOfWritten(dir), { uid: 65534, gid: 65534 });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
