// stdio output: answers to pipelined requests come back complete and in order (they are
// coalesced into one write per loop turn), and a client that stops reading makes the server stop
// taking input once about 64 MiB of answers wait, instead of buffering without bound; when the
// client reads again, every answer arrives.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RawPeer, ptcBin, sleep } from './helpers.mjs';

test('20,000 pipelined pings sent in one write are each answered once, in order', async () => {
  const p = new RawPeer(ptcBin, ['--embedder', 'lexical']);
  try {
    await p.initialize();
    const n = 20000;
    let text = '';
    for (let i = 1; i <= n; i++) text += `{"jsonrpc":"2.0","id":${i},"method":"ping"}\n`;
    p.write(text);
    const last = await p.response(n, 120000);
    assert.deepEqual(last.result, {});
    const ids = p.messages.map((m) => m.id);
    assert.equal(ids.length, n - 1);
    ids.forEach((id, i) => assert.equal(id, i + 1));
  } finally {
    await p.close();
  }
});

test('a client that stops reading stops the server taking input; reading again gets every answer', async () => {
  const p = new RawPeer(ptcBin, ['--embedder', 'lexical']);
  try {
    await p.initialize();
    p.proc.stdout.pause(); // from now on nothing is read from the server
    // Each ping carries a 256 KiB id, and its answer the same id: 400 of them are 100 MiB of
    // answers, more than the 64 MiB the server lets wait.
    const pad = 'x'.repeat(256 * 1024);
    const total = 400;
    let flushed = 0; // bytes the server's stdin pipe took
    for (let i = 0; i < total; i++) {
      const line = `{"jsonrpc":"2.0","id":"${i}-${pad}","method":"ping"}\n`;
      p.proc.stdin.write(line, () => { flushed += line.length; });
    }
    // Wait until the server's input stops moving.
    let seen = -1;
    while (flushed !== seen) {
      seen = flushed;
      await sleep(1500);
    }
    const mib = flushed / 1048576;
    assert.ok(mib < 72, `the server took ${mib.toFixed(1)} MiB of input while nothing was read`);
    assert.ok(flushed < total * pad.length, 'the whole burst went in: there was no back-pressure');
    p.proc.stdout.resume();
    await p.response(`${total - 1}-${pad}`, 120000);
    const ids = p.messages.map((m) => m.id);
    assert.equal(ids.length, total - 1);
    ids.forEach((id, i) => assert.equal(id, `${i}-${pad}`));
  } finally {
    await p.close();
  }
});
