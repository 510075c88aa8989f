// Files and plots out of execute_code, through the official SDK client: images as image content
// blocks (never mirrored into structuredContent or the text), every file listed with a
// ptc://files/ URI that resources/read returns, the bounds, and the limit flags.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { buildDir, connect, ptcBin } from './helpers.mjs';

const run = (c, code, extra = {}) =>
  c.client.callTool({ name: 'execute_code', arguments: { code, ...extra } });

// The plot test's interpreter: a venv with matplotlib, made once per build tree (the same one
// as the executor's unit test).
function mplPython() {
  const venv = path.join(buildDir, 'test-mpl-venv');
  const py = path.join(venv, 'bin', 'python3');
  const has = () => {
    try {
      execFileSync(py, ['-c', 'import matplotlib'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  };
  if (has()) return py;
  try {
    execFileSync('python3', ['-m', 'venv', venv], { stdio: 'ignore' });
    execFileSync(path.join(venv, 'bin', 'pip'), ['install', '-q', 'matplotlib'], { stdio: 'ignore', timeout: 300000 });
  } catch {
    return null;
  }
  return has() ? py : null;
}

test('a matplotlib plot comes back as an image block, its bytes nowhere else', async (t) => {
  const py = mplPython();
  if (py === null) {
    t.skip('cannot install matplotlib into the test venv (no package index?)');
    return;
  }
  const c = await connect(ptcBin, ['--python', py]);
  try {
    await c.client.listTools(); // the SDK then validates structuredContent against outputSchema
    const r = await run(c, 'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title("t")\nplt.show()\nprint("plotted")', { timeout_seconds: 120 });
    assert.equal(r.structuredContent.status, 'ok', JSON.stringify(r.structuredContent));
    const images = r.content.filter((b) => b.type === 'image');
    assert.equal(images.length, 1, JSON.stringify(r.content.map((b) => b.type)));
    assert.equal(images[0].mimeType, 'image/png');
    const png = Buffer.from(images[0].data, 'base64');
    assert.equal(png.subarray(0, 8).toString('latin1'), '\x89PNG\r\n\x1a\n');
    assert.ok(png.length > 1000, `a real picture: ${png.length} bytes`);
    const files = r.structuredContent.files;
    assert.equal(files.length, 1);
    assert.equal(files[0].mime_type, 'image/png');
    assert.equal(files[0].bytes, png.length);
    assert.match(files[0].name, /\.png$/);
    assert.match(files[0].uri, /^ptc:\/\/files\/[0-9a-f]{32}\//);
    // The picture is in the image block only: not in structuredContent, not in the text.
    const piece = images[0].data.slice(100, 160);
    assert.ok(!JSON.stringify(r.structuredContent).includes(piece));
    const text = r.content.filter((b) => b.type === 'text').map((b) => b.text).join('\n');
    assert.ok(!text.includes(piece));
    assert.match(text, /plotted/);
    assert.ok(text.includes(files[0].uri), 'the text names the file and its URI');
    // Its URI reads back the same bytes, as a blob.
    const rr = await c.client.readResource({ uri: files[0].uri });
    assert.equal(rr.contents[0].mimeType, 'image/png');
    assert.equal(rr.contents[0].blob, images[0].data);
  } finally {
    await c.close();
  }
});

test('a CSV in /tmp/outputs is listed and readable as a resource; odd names are escaped', async () => {
  const c = await connect(ptcBin);
  try {
    await c.client.listTools();
    const code = [
      'import os',
      'assert os.environ["PTC_OUTPUT_DIR"] == "/tmp/outputs"',
      'open("/tmp/outputs/data.csv", "w").write("x,y\\n1,2\\n3,4\\n")',
      'open("/tmp/outputs/a b#?%é.txt", "w").write("odd name")',
      'print("written")',
    ].join('\n');
    const r = await run(c, code);
    assert.equal(r.structuredContent.status, 'ok', JSON.stringify(r.structuredContent));
    assert.equal(r.content.filter((b) => b.type === 'image').length, 0);
    const byName = Object.fromEntries(r.structuredContent.files.map((f) => [f.name, f]));
    const csv = byName['data.csv'];
    assert.deepEqual({ ...csv, uri: undefined }, { name: 'data.csv', mime_type: 'text/csv', bytes: 12, uri: undefined });
    const read = await c.client.readResource({ uri: csv.uri });
    assert.equal(read.contents[0].text, 'x,y\n1,2\n3,4\n');
    assert.equal(read.contents[0].mimeType, 'text/csv');
    const odd = byName['a b#?%é.txt'];
    assert.ok(odd, JSON.stringify(Object.keys(byName)));
    assert.match(odd.uri, /\/a%20b%23%3F%25%C3%A9\.txt$/);
    assert.equal((await c.client.readResource({ uri: odd.uri })).contents[0].text, 'odd name');
    // The URI is a capability: one hex digit off, or the right name alone, reads nothing.
    const id = csv.uri.slice('ptc://files/'.length, 'ptc://files/'.length + 32);
    const other = id.slice(0, 31) + (id[31] === '0' ? '1' : '0');
    await assert.rejects(c.client.readResource({ uri: csv.uri.replace(id, other) }), /unknown or expired file/);
    await assert.rejects(c.client.readResource({ uri: 'ptc://files/data.csv' }));
    // A run that writes nothing returns no files.
    const none = await run(c, 'print(1)');
    assert.deepEqual(none.structuredContent.files, []);
  } finally {
    await c.close();
  }
});

test('past the bounds a file is listed truncated or omitted with a reason, never dropped', async () => {
  const c = await connect(ptcBin, ['--max-file-bytes', '64K', '--max-call-files-bytes', '100K', '--max-image-bytes', '1K']);
  try {
    await c.client.listTools();
    const code = [
      'import base64',
      'open("/tmp/outputs/a_big.txt", "w").write("a" * 80000)',
      'open("/tmp/outputs/b_mid.txt", "w").write("b" * 50000)',
      'open("/tmp/outputs/c_more.txt", "w").write("c" * 50000)',
      'png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")',
      'open("/tmp/outputs/d_dot.png", "wb").write(png + b"\\0" * 2000)',
    ].join('\n');
    const r = await run(c, code);
    assert.equal(r.structuredContent.status, 'ok', JSON.stringify(r.structuredContent));
    const byName = Object.fromEntries(r.structuredContent.files.map((f) => [f.name, f]));
    assert.deepEqual(Object.keys(byName).sort(), ['a_big.txt', 'b_mid.txt', 'c_more.txt', 'd_dot.png']);
    const big = byName['a_big.txt'];
    assert.equal(big.truncated, true);
    assert.equal(big.bytes, 80000);
    assert.ok(big.reason.length > 0);
    assert.equal((await c.client.readResource({ uri: big.uri })).contents[0].text.length, 65536);
    // 64 KiB + 50000 bytes fills the 100 KiB call bound: the later files are omitted.
    const omitted = r.structuredContent.files.filter((f) => f.omitted);
    assert.ok(omitted.length >= 1, JSON.stringify(r.structuredContent.files));
    for (const f of omitted) {
      assert.equal(f.uri, null);
      assert.ok(f.reason.length > 0);
    }
    const text = r.content.find((b) => b.type === 'text').text;
    assert.match(text, /omitted/);
    // An image over --max-image-bytes is listed (and readable when kept) but not shown.
    assert.equal(r.content.filter((b) => b.type === 'image').length, 0);
  } finally {
    await c.close();
  }
});

test('a run that printed more than --max-output-bytes says so on its first page', async () => {
  const c = await connect(ptcBin, ['--max-output-bytes', '64K', '--output-page-chars', '1000']);
  try {
    await c.client.listTools();
    const r = await run(c, 'import sys\nsys.stdout.write("x" * 200000)');
    assert.equal(r.structuredContent.truncated, true);
    assert.equal(r.structuredContent.stdout_bytes, 200000);
    assert.ok(r.structuredContent.next_cursor, 'more pages follow');
    assert.match(r.content[0].text, /\[output truncated: 200000 bytes of stdout .*--max-output-bytes/);
    // The kept amount is the flag's: 64 KiB over pages of 1000 characters.
    let cursor = r.structuredContent.next_cursor;
    let kept = r.structuredContent.stdout.length;
    while (cursor) {
      const p = await c.client.callTool({ name: 'execute_code', arguments: { cursor } });
      kept += p.structuredContent.stdout.length;
      cursor = p.structuredContent.next_cursor;
    }
    assert.equal(kept, 65536);
  } finally {
    await c.close();
  }
});

test('--memory-limit, --tmp-size and --max-code-bytes take effect', async () => {
  const big = 'b = bytearray(160 << 20)\nb[::4096] = b"x" * len(b[::4096])\nprint("allocated")';
  const fill = 'open("/tmp/fill", "wb").write(b"x" * (4 << 20))\nprint("filled")';
  const dflt = await connect(ptcBin);
  try {
    assert.equal((await run(dflt, big)).structuredContent.status, 'ok');
    assert.equal((await run(dflt, fill)).structuredContent.status, 'ok');
  } finally {
    await dflt.close();
  }
  const c = await connect(ptcBin, ['--memory-limit', '64M', '--tmp-size', '1M', '--max-code-bytes', '1K']);
  try {
    const mem = await run(c, big);
    assert.equal(mem.isError, true);
    assert.ok(['oom', 'error'].includes(mem.structuredContent.status), JSON.stringify(mem.structuredContent));
    if (mem.structuredContent.status === 'error') assert.match(mem.structuredContent.stderr, /MemoryError/);
    const tmp = await run(c, fill);
    assert.equal(tmp.structuredContent.status, 'error');
    assert.match(tmp.structuredContent.stderr, /No space left on device/);
    const long = await run(c, `print(${'1 + '.repeat(300)}1)`);
    assert.equal(long.isError, true);
    assert.match(long.content[0].text, /longer than the 1024 .*--max-code-bytes/);
    assert.equal((await run(c, 'print(2)')).structuredContent.stdout, '2\n');
  } finally {
    await c.close();
  }
  // The code travels to the sandbox as one argument: a bound past the executor's is refused.
  const r = spawnSync(ptcBin, ['--max-code-bytes', '1M'], { input: '', encoding: 'utf8', timeout: 30000 });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /--max-code-bytes: at most 122880/);
});
