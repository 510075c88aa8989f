// ptc-mcp over HTTP, raw requests: each malformed or refused request gets its HTTP status
// (400, 401, 403, 404, 405 (also for a GET without a session), 406, 409, 413, 415), /healthz needs nothing, a bearer token is
// checked, a public address without one is refused, and HTTPS works with a certificate made here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startHttp, ptcBin } from './helpers.mjs';

const JSON_SSE = 'application/json, text/event-stream';
const INIT = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

function post(url, body, headers = {}) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: JSON_SSE, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

// One raw HTTP/1.1 exchange on a fresh socket (fetch refuses to send some of these headers).
function rawRequest(port, text, { halfClose = false } = {}) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => (halfClose ? s.end(text) : s.write(text)));
    let out = '';
    s.on('data', (d) => { out += d.toString(); });
    s.on('end', () => resolve(out));
    s.on('error', reject);
    s.setTimeout(5000, () => { s.destroy(); resolve(out); });
  });
}

test('status codes for refused requests, and the server keeps serving', async () => {
  const srv = await startHttp(undefined, ['--max-message-bytes', '4096']);
  try {
    const health = await fetch(`${srv.base}/healthz`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok' });

    const init = await post(srv.url, INIT);
    assert.equal(init.status, 200);
    const sid = init.headers.get('mcp-session-id');
    await init.json();
    const ping = { jsonrpc: '2.0', id: 1, method: 'ping' };

    const noSession = await post(srv.url, ping);
    assert.equal(noSession.status, 400);
    assert.match((await noSession.json()).error.message, /Mcp-Session-Id/);
    assert.equal((await post(srv.url, ping, { 'mcp-session-id': 'f'.repeat(32) })).status, 404);
    assert.equal((await post(srv.url, ping, { 'mcp-session-id': sid, accept: 'application/json' })).status, 406);
    assert.equal((await post(srv.url, ping, { 'mcp-session-id': sid, 'content-type': 'text/plain' })).status, 415);
    assert.equal((await post(srv.url, ping, { 'mcp-session-id': sid, 'mcp-protocol-version': '1999-01-01' })).status, 400);
    const ok = await post(srv.url, ping, { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' });
    assert.equal(ok.status, 200);
    assert.deepEqual((await ok.json()).result, {});
    const bad = await post(srv.url, '{"jsonrpc": "2.0", "id": ', { 'mcp-session-id': sid });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.code, -32700);
    const invalid = await post(srv.url, { jsonrpc: '1.0', id: 1, method: 'ping' }, { 'mcp-session-id': sid });
    assert.equal(invalid.status, 400);
    assert.equal((await invalid.json()).error.code, -32600);
    const big = await post(srv.url, { jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(5000) } }, { 'mcp-session-id': sid });
    assert.equal(big.status, 413);
    const put = await fetch(srv.url, { method: 'PUT', headers: { 'mcp-session-id': sid } });
    assert.equal(put.status, 405);
    assert.equal((await fetch(`${srv.base}/nope`)).status, 404);
    const getNoAccept = await fetch(srv.url, { headers: { accept: 'application/json', 'mcp-session-id': sid } });
    assert.equal(getNoAccept.status, 406);
    // A GET without a session: no stream to offer, 405 (what the spec asks of a GET the server
    // does not serve as SSE), whatever the Accept header; an unknown session is still 404.
    for (const accept of ['text/event-stream', 'application/json']) {
      const getNoSession = await fetch(srv.url, { headers: { accept } });
      assert.equal(getNoSession.status, 405);
      assert.equal(getNoSession.headers.get('allow'), 'GET, POST, DELETE');
      assert.match((await getNoSession.json()).error.message, /needs a session/);
    }
    assert.equal((await fetch(srv.url, { headers: { accept: 'text/event-stream', 'mcp-session-id': 'f'.repeat(32) } })).status, 404);
    // A notification is accepted without a body.
    const note = await post(srv.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-session-id': sid });
    assert.equal(note.status, 202);
    assert.equal(await note.text(), '');

    // DNS rebinding: a foreign Origin or Host is refused.
    const evil = await post(srv.url, INIT, { origin: 'http://evil.example.com' });
    assert.equal(evil.status, 403);
    const port = new URL(srv.url).port;
    const evilHost = await rawRequest(port, `POST /mcp HTTP/1.1\r\nHost: evil.example.com:${port}\r\nContent-Type: application/json\r\nAccept: ${JSON_SSE}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
    assert.match(evilHost, /^HTTP\/1\.1 403 /);
    const friendly = await post(srv.url, INIT, { origin: `http://localhost:${port}` });
    assert.equal(friendly.status, 200);
    await friendly.json();

    // Garbage gets a 400 and the connection is closed; chunked bodies and pipelining work.
    assert.match(await rawRequest(port, 'HELLO THERE\r\n\r\n'), /^HTTP\/1\.1 400 /);
    const noHost = await rawRequest(port, `POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: ${JSON_SSE}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
    assert.match(noHost, /^HTTP\/1\.1 400 /);
    assert.match(noHost, /Host header required/);
    const chunked = await rawRequest(port,
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAccept: ${JSON_SSE}\r\nMcp-Session-Id: ${sid}\r\nTransfer-Encoding: chunked\r\n\r\n` +
      ['{"jsonrpc":"2.0"', ',"id":7,"method":"p', 'ing"}'].map((c) => `${c.length.toString(16)}\r\n${c}\r\n`).join('') + '0\r\n\r\n' +
      `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
    assert.match(chunked, /^HTTP\/1\.1 200 [\s\S]*"id":7,"result":\{\}[\s\S]*HTTP\/1\.1 200 [\s\S]*\{"status":"ok"\}/);
    // A client that half-closes after its request still gets the answer.
    const half = await rawRequest(port,
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAccept: ${JSON_SSE}\r\nMcp-Session-Id: ${sid}\r\nContent-Length: 40\r\n\r\n{"jsonrpc":"2.0","id":8,"method":"ping"}`,
      { halfClose: true });
    assert.match(half, /^HTTP\/1\.1 200 [\s\S]*"id":8,"result":\{\}/);
    // A half-closed partial request gets a 400.
    assert.match(await rawRequest(port, `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`, { halfClose: true }), /^HTTP\/1\.1 400 /);
    // An event stream asked for with Connection: close (or over HTTP/1.0) runs to its answer.
    for (const [version, extra] of [['1.1', 'Connection: close\r\n'], ['1.0', '']]) {
      const body = JSON.stringify({ jsonrpc: '2.0', id: 11, method: 'tools/call', params: { name: 'execute_code', arguments: { code: 'print("streamed")' } } });
      const out = await rawRequest(port,
        `POST /mcp HTTP/${version}\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAccept: ${JSON_SSE}\r\nMcp-Session-Id: ${sid}\r\n${extra}Content-Length: ${body.length}\r\n\r\n${body}`);
      assert.match(out, /text\/event-stream[\s\S]*"id":11,"result"[\s\S]*streamed/, `HTTP/${version}`);
    }
    // Headers past the limit.
    const huge = await rawRequest(port, `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`);
    assert.match(huge, /^HTTP\/1\.1 431 /);

    const after = await post(srv.url, ping, { 'mcp-session-id': sid });
    assert.equal(after.status, 200);
  } finally {
    await srv.stop();
  }
});

test('HEAD answers carry the Content-Length GET would have and no body bytes', async () => {
  const srv = await startHttp();
  try {
    const port = new URL(srv.base).port;
    const host = `Host: 127.0.0.1:${port}\r\n`;
    // Pipelined on one connection: a body byte after a HEAD answer would show up in front of the
    // next status line.
    const out = await rawRequest(port,
      `HEAD /healthz HTTP/1.1\r\n${host}\r\n` +
      `HEAD /mcp HTTP/1.1\r\n${host}\r\n` +
      `GET /healthz HTTP/1.1\r\n${host}Connection: close\r\n\r\n`);
    const answers = out.split(/(?=HTTP\/1\.1 )/);
    assert.equal(answers.length, 3, out);
    const [headHealth, headMcp, getHealth] = answers;
    assert.match(headHealth, /^HTTP\/1\.1 200 /);
    assert.match(headHealth, /\r\nContent-Length: 15\r\n/i);
    assert.ok(headHealth.endsWith('\r\n\r\n'), `HEAD /healthz sent body bytes: ${JSON.stringify(headHealth)}`);
    assert.match(headMcp, /^HTTP\/1\.1 405 /);
    const len = Number(/\r\nContent-Length: (\d+)\r\n/i.exec(headMcp)?.[1]);
    assert.ok(len > 0, headMcp);
    assert.ok(headMcp.endsWith('\r\n\r\n'), `HEAD /mcp sent body bytes: ${JSON.stringify(headMcp)}`);
    assert.match(getHealth, /^HTTP\/1\.1 200 [\s\S]*\r\nContent-Length: 15\r\n[\s\S]*\r\n\r\n\{"status":"ok"\}$/i);
  } finally {
    await srv.stop();
  }
});

test('--auth-token-env: 401 without or with a wrong token, /healthz exempt', async () => {
  const srv = await startHttp(undefined, ['--auth-token-env', 'PTC_TEST_TOKEN'], { env: { PTC_TEST_TOKEN: 'sesame-123' } });
  try {
    const none = await post(srv.url, INIT);
    assert.equal(none.status, 401);
    assert.match(none.headers.get('www-authenticate'), /^Bearer /);
    const wrong = await post(srv.url, INIT, { authorization: 'Bearer sesame-124' });
    assert.equal(wrong.status, 401);
    assert.match(wrong.headers.get('www-authenticate'), /invalid_token/);
    const right = await post(srv.url, INIT, { authorization: 'Bearer sesame-123' });
    assert.equal(right.status, 200);
    await right.json();
    assert.equal((await fetch(`${srv.base}/healthz`)).status, 200);
    assert.doesNotMatch(srv.stderr, /sesame/, 'the token never reaches the log');
  } finally {
    await srv.stop();
  }
});

test('a non-loopback --listen without a token is refused with a clear message', async () => {
  const p = spawn(ptcBin, ['--transport', 'http', '--listen', '0.0.0.0:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  p.stderr.on('data', (d) => { err += d; });
  const code = await new Promise((r) => p.on('close', r));
  assert.notEqual(code, 0);
  assert.match(err, /refusing to listen on 0\.0\.0\.0 without a bearer token.*--auth-token-env/);
  const q = spawn(ptcBin, ['--transport', 'http', '--auth-token-env', 'PTC_NOT_SET_ANYWHERE'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err2 = '';
  q.stderr.on('data', (d) => { err2 += d; });
  assert.notEqual(await new Promise((r) => q.on('close', r)), 0);
  assert.match(err2, /PTC_NOT_SET_ANYWHERE: that environment variable is not set/);
});

test('HTTPS with --tls-cert/--tls-key (a self-signed certificate made for the test)', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-tls-'));
  try {
    try {
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
        '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'), '-days', '1',
        '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'], { stdio: 'ignore' });
    } catch {
      t.skip('openssl is not installed');
      return;
    }
    const srv = await startHttp(undefined, ['--tls-cert', path.join(dir, 'cert.pem'), '--tls-key', path.join(dir, 'key.pem')]);
    try {
      assert.match(srv.url, /^https:\/\/127\.0\.0\.1:\d+\/mcp$/);
      const ca = readFileSync(path.join(dir, 'cert.pem'));
      const request = (body) => new Promise((resolve, reject) => {
        const req = https.request(srv.url, { method: 'POST', ca, headers: { 'content-type': 'application/json', accept: JSON_SSE } }, (res) => {
          let data = '';
          res.on('data', (d) => { data += d; });
          res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
        });
        req.on('error', reject);
        req.end(JSON.stringify(body));
      });
      const r = await request(INIT);
      assert.equal(r.status, 200);
      assert.equal(JSON.parse(r.body).result.serverInfo.name, 'ptc-mcp');
      assert.match(r.headers['mcp-session-id'], /^[0-9a-f]{32}$/);
      // A plaintext client on the TLS port gets nothing useful and the server stays up.
      const port = new URL(srv.url).port;
      await new Promise((resolve) => {
        const s = net.connect(port, '127.0.0.1', () => s.end('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
        s.on('data', () => {});
        s.on('close', resolve);
        s.on('error', resolve);
      });
      assert.equal((await request(INIT)).status, 200);
    } finally {
      await srv.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
