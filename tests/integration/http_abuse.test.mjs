// Abuse of the HTTP transport through raw sockets and fetch: a foreign Origin or Host, a 100 MB
// body (refused early, never buffered), a slowloris client, garbage bytes, a half-closed socket;
// over HTTPS with a self-signed certificate made here: a missing or wrong bearer token, plain
// HTTP on the TLS port. After each abuse a normal SDK session must still work, and each server
// must end cleanly on SIGTERM (exit 0, no sanitizer or leak report).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, chmodSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { sleep } from './helpers.mjs';
import {
  assertServes, connectHttp, fetchWithCa, makeSelfSignedCert, parseResponse, rawExchange, rawPost, rssKiB,
  startHttp, statusOf,
} from './http_helpers.mjs';

const MAX_MESSAGE = 1 << 20; // --max-message-bytes for the plain server
const BIG = 100 * 1024 * 1024; // the abusive body
const PROTOCOL = '2025-11-25';
const initMsg = (id = 1) => ({
  jsonrpc: '2.0', id, method: 'initialize',
  params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'abuse', version: '1' } },
});
const complete = (t) => parseResponse(t) !== null;

let plain; // one server for the plain-HTTP abuse; every test checks it still serves

before(async () => {
  plain = await startHttp(['--max-message-bytes', String(MAX_MESSAGE)]);
});

after(async () => {
  await plain?.stop();
});

test('/healthz answers 200 without a session', async () => {
  const r = await fetch(`${plain.origin}/healthz`);
  await r.arrayBuffer();
  assert.equal(r.status, 200);
});

test('a foreign Origin gets 403, a foreign Host is refused, the loopback Origin is served', async () => {
  const evil = await rawExchange(plain.port, rawPost(plain.port, initMsg(), { Origin: 'http://evil.example' }), { until: complete });
  assert.equal(statusOf(evil.text), 403, evil.text);
  const evilTls = await rawExchange(plain.port, rawPost(plain.port, initMsg(), { Origin: 'https://attacker.example:443' }), { until: complete });
  assert.equal(statusOf(evilTls.text), 403, evilTls.text);
  // DNS rebinding: the attacker's name resolving to 127.0.0.1 arrives as the Host header.
  const rebound = await rawExchange(plain.port, rawPost(plain.port, initMsg(), { Host: `evil.example:${plain.port}` }), { until: complete });
  assert.ok([400, 403, 421].includes(statusOf(rebound.text)), rebound.text);
  const ok = await rawExchange(plain.port, rawPost(plain.port, initMsg(), { Origin: plain.origin }), { until: complete });
  const r = parseResponse(ok.text);
  assert.equal(r.status, 200, ok.text);
  assert.ok(r.headers['mcp-session-id'], 'initialize issues Mcp-Session-Id');
  assert.equal(r.json?.result?.serverInfo?.name !== undefined, true, ok.text);
  await assertServes(plain.url);
});

// Sends `head` and the first `first` bytes of a `total`-byte body, then waits for the answer: a
// server that buffers or waits for the whole body never answers here (or only with 408 at its
// body timeout). Then streams the rest with backpressure until the server closes the connection
// or all is sent, and waits up to 60 s for the close. Resolves { text (the answer),
// sentBeforeAnswer, sent, closed }.
function streamBody(port, head, total, { chunked = false, first = 4 << 20 } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    const chunk = Buffer.alloc(64 << 10, 0x61); // 'aaaa...': the size, not the content, is the abuse
    const chunks = [];
    let sent = 0;
    let closed = false;
    let answered = null;
    const answer = new Promise((r) => { answered = r; });
    const t = setTimeout(() => { sock.destroy(); reject(new Error(`no answer after ${sent} bytes: ${Buffer.concat(chunks).toString('latin1').slice(0, 200)}`)); }, 120000);
    const seen = () => Buffer.concat(chunks).toString('latin1');
    sock.on('data', (d) => {
      chunks.push(d);
      if (complete(seen())) answered();
    });
    const gone = () => { closed = true; answered(); };
    sock.on('end', gone);
    sock.on('close', gone);
    sock.on('error', gone);
    const send = async (upTo) => {
      while (!closed && sent < upTo) {
        const n = Math.min(chunk.length, upTo - sent);
        const piece = chunked ? Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), chunk.subarray(0, n), Buffer.from('\r\n')]) : chunk.subarray(0, n);
        sent += n;
        if (!sock.write(piece)) await new Promise((r) => { sock.once('drain', r); sock.once('close', r); });
      }
    };
    sock.on('connect', async () => {
      sock.write(head);
      await send(first);
      await answer; // the rest of the body is held back until the server has answered
      const text = seen();
      const sentBeforeAnswer = sent;
      await send(total); // a client that keeps sending anyway: the server must not store it
      if (!closed && chunked) sock.write('0\r\n\r\n');
      // It said "Connection: close": it must close, whether or not all was sent by then.
      for (let i = 0; i < 1200 && !closed; i++) await new Promise((r) => setTimeout(r, 50));
      clearTimeout(t);
      sock.destroy();
      resolve({ text, sentBeforeAnswer, sent, closed });
    });
  });
}

for (const chunked of [false, true]) {
  test(`a 100 MB body (${chunked ? 'chunked' : 'Content-Length'}) gets 413 before it is sent and is not buffered`, async (t) => {
    const rssBefore = rssKiB(plain.pid);
    const head = [
      'POST /mcp HTTP/1.1', `Host: 127.0.0.1:${plain.port}`, 'Content-Type: application/json',
      'Accept: application/json, text/event-stream',
      chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${BIG}`, '', '',
    ].join('\r\n');
    const r = await streamBody(plain.port, head, BIG, { chunked });
    assert.equal(statusOf(r.text), 413, `answer after ${r.sentBeforeAnswer} bytes: ${JSON.stringify(r.text.slice(0, 300))}`);
    t.diagnostic(`413 with ${r.sentBeforeAnswer} of ${BIG} body bytes sent; ${r.sent} sent when the server closed`);
    assert.match(r.text, /\r\nconnection: close\r\n/i, 'a 413 before the body ends must close the connection');
    assert.ok(r.closed, 'the server closed the connection');
    const grown = rssKiB(plain.pid) - rssBefore;
    assert.ok(grown < 32 * 1024, `server RSS grew by ${grown} KiB for a refused body`);
    await assertServes(plain.url);
  });
}

test('a slowloris client is closed by the server while other clients are served', { timeout: 600000 }, async () => {
  // Headers trickled one byte every 200 ms, never finished; and a client that sends nothing.
  const trickle = new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port: plain.port });
    const text = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${plain.port}\r\n${'X-Slow: '.padEnd(8, 'x')}`;
    let i = 0;
    let got = '';
    let timer = null;
    const giveUp = setTimeout(() => { clearInterval(timer); sock.destroy(); reject(new Error(`not closed after ${i} trickled bytes`)); }, 540000);
    sock.on('connect', () => {
      timer = setInterval(() => {
        // Endless header bytes: a header value that never ends.
        if (!sock.destroyed) sock.write(i < text.length ? text[i] : 'x');
        i++;
      }, 200);
    });
    sock.on('data', (d) => { got += d.toString('latin1'); });
    const done = () => { clearInterval(timer); clearTimeout(giveUp); resolve({ got, trickled: i }); };
    sock.on('close', done);
    sock.on('error', () => {});
  });
  const idle = rawExchange(plain.port, Buffer.alloc(0), { timeoutMs: 540000 });
  // Meanwhile the server keeps serving normal sessions, one after another.
  let served = 0;
  let slowDone = false;
  const both = Promise.all([trickle, idle]).finally(() => { slowDone = true; });
  while (!slowDone) {
    await assertServes(plain.url);
    served++;
    await Promise.race([both, new Promise((r) => setTimeout(r, 500))]);
  }
  const [slow, silent] = await both;
  assert.ok(served >= 1);
  assert.ok([null, 408].includes(statusOf(slow.got)), `slowloris answered ${JSON.stringify(slow.got.slice(0, 200))}`);
  assert.ok(silent.closed, 'the idle connection was closed by the server');
  assert.ok([null, 408].includes(statusOf(silent.text)), `idle client answered ${JSON.stringify(silent.text.slice(0, 200))}`);
  await assertServes(plain.url);
});

// A fixed pseudo-random byte string (xorshift32), so every run sends the same garbage.
function noise(n, seed) {
  const b = Buffer.alloc(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    b[i] = x & 0xff;
  }
  return b;
}

test('garbage bytes get 400 (505 for an HTTP version other than 1.x)', async () => {
  const port = plain.port;
  const version = [400, 505]; // a request line an HTTP parser reads as another version
  const cases = [
    ['random bytes', noise(4096, 0x5eed)],
    ['a TLS ClientHello on the plain port', Buffer.from('160301002c010000280303' + '00'.repeat(32) + '000002002f0100', 'hex')],
    ['a request line without a version (HTTP/0.9)', Buffer.from('POST /mcp\r\n\r\n'), version],
    ['an unknown HTTP version', Buffer.from(`POST /mcp HTTP/9.9\r\nHost: 127.0.0.1:${port}\r\n\r\n`), version],
    ['a header line without a colon', Buffer.from(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nthis is not a header\r\n\r\n`)],
    ['a non-numeric Content-Length', Buffer.from(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Length: abc\r\n\r\n`)],
    ['a bad chunk size', Buffer.from(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`)],
    ['NUL bytes', Buffer.alloc(64)],
  ];
  for (const [what, bytes, allowed = [400]] of cases) {
    const r = await rawExchange(port, bytes, { until: complete });
    assert.ok(allowed.includes(statusOf(r.text)), `${what}: ${JSON.stringify(r.text.slice(0, 300))}`);
  }
  // Well-formed HTTP whose body is not JSON-RPC.
  const notJson = await rawExchange(port, Buffer.concat([
    Buffer.from(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 9\r\n\r\n`),
    Buffer.from('{"a":\x00\xff]'),
  ]), { until: complete });
  assert.equal(statusOf(notJson.text), 400, `a body that is not JSON: ${JSON.stringify(notJson.text.slice(0, 300))}`);
  await assertServes(plain.url);
});

test('a half-closed socket (write side shut after the request) still gets its answer', async () => {
  const init = await rawExchange(plain.port, rawPost(plain.port, initMsg(7)), { until: complete, halfClose: true });
  const r = parseResponse(init.text, { closed: init.closed });
  assert.ok(r, `no complete response: ${JSON.stringify(init.text.slice(0, 300))}`);
  assert.equal(r.status, 200, init.text);
  assert.equal(r.json?.id, 7, init.text);
  assert.ok(r.json?.result?.protocolVersion, init.text);
  const sid = r.headers['mcp-session-id'];
  assert.ok(sid, 'initialize issues Mcp-Session-Id');
  const h = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': r.json.result.protocolVersion };
  const note = await rawExchange(plain.port, rawPost(plain.port, { jsonrpc: '2.0', method: 'notifications/initialized' }, h), { until: complete, halfClose: true });
  assert.equal(statusOf(note.text), 202, note.text);
  const list = await rawExchange(plain.port, rawPost(plain.port, { jsonrpc: '2.0', id: 8, method: 'tools/list' }, h), { until: complete, halfClose: true });
  const lr = parseResponse(list.text, { closed: list.closed });
  assert.equal(lr?.status, 200, list.text);
  assert.ok(lr.json.result.tools.some((t) => t.name === 'execute_code'), list.text);
  await assertServes(plain.url);
});

// RFC 9112 section 3.2: "A server MUST respond with a 400 (Bad Request) status code to any
// HTTP/1.1 request message that lacks a Host header field and to any request message that
// contains more than one Host header field line". A second Host or Origin is also how a request
// would slip an unchecked name past the DNS-rebinding check.
test('a missing or repeated Host gets 400; a repeated Origin is refused', async () => {
  const port = plain.port;
  const body = JSON.stringify(initMsg());
  const rest = `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  for (const [what, head, allowed] of [
    ['no Host', 'POST /mcp HTTP/1.1\r\n', [400]],
    ['the good Host, then a foreign one', `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nHost: evil.example\r\n`, [400]],
    ['the loopback Origin, then a foreign one', `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: ${plain.origin}\r\nOrigin: http://evil.example\r\n`, [400, 403]],
    ['two Authorization lines', `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n`, [400]],
  ]) {
    const r = await rawExchange(port, Buffer.from(head + rest), { until: complete });
    assert.ok(allowed.includes(statusOf(r.text)), `${what}: ${JSON.stringify(r.text.slice(0, 200))}`);
  }
});

test('oversized or too many headers are refused (431 or 400)', async () => {
  const port = plain.port;
  const big = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Big: ${'b'.repeat(64 * 1024)}\r\n\r\n`;
  const many = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${Array.from({ length: 500 }, (_, i) => `X-H${i}: v\r\n`).join('')}\r\n`;
  const longUrl = `GET /mcp?${'q'.repeat(64 * 1024)} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;
  for (const [what, text] of [['a 64 KiB header', big], ['500 headers', many], ['a 64 KiB URL', longUrl]]) {
    const r = await rawExchange(port, Buffer.from(text), { until: complete });
    assert.ok([400, 414, 431].includes(statusOf(r.text)), `${what}: ${JSON.stringify(r.text.slice(0, 300))}`);
  }
  await assertServes(plain.url);
});

test('pipelined requests on one keep-alive connection are answered in order', async () => {
  const init = await rawExchange(plain.port, rawPost(plain.port, initMsg(1)), { until: complete });
  const r = parseResponse(init.text);
  assert.equal(r.status, 200, init.text);
  const h = { 'Mcp-Session-Id': r.headers['mcp-session-id'], 'MCP-Protocol-Version': r.json.result.protocolVersion };
  const burst = Buffer.concat([
    rawPost(plain.port, { jsonrpc: '2.0', method: 'notifications/initialized' }, h),
    rawPost(plain.port, { jsonrpc: '2.0', id: 11, method: 'tools/list' }, h),
    rawPost(plain.port, { jsonrpc: '2.0', id: 12, method: 'ping' }, h),
    rawPost(plain.port, { jsonrpc: '2.0', id: 13, method: 'no/such/method' }, h),
  ]);
  const split = (text) => {
    const out = [];
    for (let at = 0; ;) {
      const one = parseResponse(text.slice(at));
      if (!one) return out;
      out.push(one);
      at += one.length;
    }
  };
  const got = await rawExchange(plain.port, burst, { until: (t) => split(t).length >= 4 });
  const answers = split(got.text);
  assert.deepEqual(answers.map((a) => a.status), [202, 200, 200, 200], got.text);
  assert.deepEqual(answers.slice(1).map((a) => a.json?.id), [11, 12, 13], got.text);
  assert.ok(answers[1].json.result.tools.length >= 2);
  assert.deepEqual(answers[2].json.result, {});
  assert.equal(answers[3].json.error.code, -32601);
  await assertServes(plain.url);
});

test('ending a session mid-run cancels its run: DELETE, and a dropped legacy SSE stream', { timeout: 300000 }, async () => {
  // One run slot: a run left behind by an ended session would block every later run.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-http-abuse-'));
  chmodSync(dir, 0o777); // the sandbox writes as an unprivileged user
  const srv = await startHttp(['--max-concurrent', '1', '--mount', `${dir}:/data:rw`]);
  const started = async (marker) => {
    for (let i = 0; i < 1200 && !existsSync(path.join(dir, marker)); i++) await sleep(50);
    assert.ok(existsSync(path.join(dir, marker)), `the run never started (${marker})`);
  };
  const hang = (marker) => ({
    name: 'execute_code',
    arguments: { code: `open("/data/${marker}", "w").close()\nimport time\ntime.sleep(600)`, timeout_seconds: 300 },
  });
  try {
    // Streamable HTTP: DELETE while the run holds the only slot.
    const a = await connectHttp(srv.url);
    const pendingA = a.client.callTool(hang('a'), undefined, { timeout: 600000 }).then((r) => r, (e) => e);
    await started('a');
    await a.transport.terminateSession();
    await a.client.close();
    await pendingA;
    await assertServes(srv.url); // its execute_code needs the slot: the hanging run was cancelled

    // Legacy HTTP+SSE: the session lives as long as its GET /sse stream.
    const legacy = new Client({ name: 'abuse-legacy', version: '1' });
    await legacy.connect(new SSEClientTransport(new URL(`${srv.origin}/sse`)));
    const pendingB = legacy.callTool(hang('b'), undefined, { timeout: 600000 }).then((r) => r, (e) => e);
    await started('b');
    await legacy.close(); // drops the stream without any goodbye
    await pendingB;
    await assertServes(srv.url);
  } finally {
    try {
      await srv.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

test('HTTPS with a self-signed certificate; a missing or wrong bearer token gets 401', async (t) => {
  const cert = makeSelfSignedCert();
  if (!cert) {
    t.skip('the openssl CLI is missing (Debian package: openssl)');
    return;
  }
  const token = randomBytes(24).toString('hex');
  const server = await startHttp(['--tls-cert', cert.cert, '--tls-key', cert.key, '--auth-token-env', 'PTC_TEST_TOKEN'],
    { env: { PTC_TEST_TOKEN: token }, tls: true });
  try {
    assert.match(server.url, /^https:/);
    // A handshake that stalls after the first bytes of a ClientHello: the server must drop it
    // (its header timeout covers the handshake); checked at the end, meanwhile the rest runs.
    const stalled = rawExchange(server.port, Buffer.from('1603010200', 'hex'), { timeoutMs: 300000 });
    const f = fetchWithCa(cert.certPem);
    const post = (headers) => f(server.url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
      body: JSON.stringify(initMsg()),
    }).then(async (r) => ({ status: r.status, body: await r.text() }));
    const wrongSameLength = token.slice(0, -1) + (token.endsWith('0') ? '1' : '0');
    for (const [what, headers] of [
      ['no Authorization', {}],
      ['a wrong token', { Authorization: 'Bearer not-the-token' }],
      ['a wrong token of the right length', { Authorization: `Bearer ${wrongSameLength}` }],
      ['the token with another scheme', { Authorization: `Basic ${token}` }],
      ['the token with nothing after it', { Authorization: 'Bearer ' }],
    ]) {
      const r = await post(headers);
      assert.equal(r.status, 401, `${what}: ${r.status} ${r.body}`);
    }
    const good = await post({ Authorization: `Bearer ${token}` });
    assert.equal(good.status, 200, good.body);

    // The SDK client over HTTPS with the test CA and the token; and it keeps working after abuse.
    const opts = { fetch: f, headers: { Authorization: `Bearer ${token}` } };
    await assertServes(server.url, opts);

    // A client that does not trust the certificate cannot connect.
    await assert.rejects(fetch(server.url, { method: 'POST', body: '{}' }));

    // Plain HTTP on the TLS port: closed (or a TLS alert), never an HTTP answer.
    const plainOnTls = await rawExchange(server.port, rawPost(server.port, initMsg(), { Authorization: `Bearer ${token}` }), { timeoutMs: 60000 });
    assert.ok(plainOnTls.closed);
    assert.equal(statusOf(plainOnTls.text), null, JSON.stringify(plainOnTls.text.slice(0, 200)));

    // Garbage inside TLS gets 400, like on the plain port.
    const garbage = await new Promise((resolve, reject) => {
      const s = tls.connect({ host: '127.0.0.1', port: server.port, ca: cert.certPem, servername: 'localhost' }, () => s.write(noise(2048, 42)));
      let got = '';
      const to = setTimeout(() => { s.destroy(); reject(new Error(`no answer over TLS: ${got}`)); }, 30000);
      s.on('data', (d) => { got += d.toString('latin1'); if (complete(got)) { clearTimeout(to); s.destroy(); resolve(got); } });
      s.on('close', () => { clearTimeout(to); resolve(got); });
      s.on('error', () => {});
    });
    assert.equal(statusOf(garbage), 400, JSON.stringify(garbage.slice(0, 200)));
    const s = await stalled;
    assert.ok(s.closed, 'the stalled handshake was closed by the server');
    await assertServes(server.url, opts);
    f.agent.destroy();
  } finally {
    try {
      await server.stop();
    } finally {
      cert.cleanup();
    }
  }
});
