// The fallback repairer for clients without sampling: an OpenAI-compatible chat-completions
// endpoint over HTTPS, here a local Node https server with a certificate from a CA made by the
// test (openssl CLI), trusted through --ca-file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import https from 'node:https';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, ptcBin } from './helpers.mjs';

const haveOpenssl = spawnSync('openssl', ['version']).status === 0;

// A CA and a server certificate for localhost signed by it, in a fresh folder.
function makePki() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-heal-tls-'));
  const f = (n) => path.join(dir, n);
  const ssl = (...args) => execFileSync('openssl', args, { stdio: 'pipe' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2',
    '-subj', '/CN=ptc-mcp heal test CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('srv.key'), '-out', f('srv.csr'), '-subj', '/CN=localhost');
  writeFileSync(f('ext.cnf'), 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n');
  ssl('x509', '-req', '-in', f('srv.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial',
    '-out', f('srv.pem'), '-days', '2', '-extfile', f('ext.cnf'));
  return { dir, ca: f('ca.pem'), key: readFileSync(f('srv.key')), cert: readFileSync(f('srv.pem')), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

// Starts the endpoint: answer(req, body) gives [status, json]. Requests are kept in `seen`.
async function endpoint(pki, answer) {
  const seen = [];
  const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      const parsed = JSON.parse(body);
      seen.push({ url: req.url, headers: req.headers, body: parsed });
      const [status, json] = answer(req, parsed);
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(json));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { seen, url: `https://localhost:${server.address().port}/v1`, close: () => new Promise((r) => server.close(r)) };
}

const completion = (text) => [200, { id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }] }];
const run = (c, code, extra = {}) => c.client.callTool({ name: 'execute_code', arguments: { code, ...extra } });

test('a client without sampling is repaired by the HTTPS fallback trusted through --ca-file', { skip: !haveOpenssl && 'openssl is not installed' }, async () => {
  const pki = makePki();
  const ep = await endpoint(pki, () => completion('Fixed:\n```python\nprint("fixed over https")\n```'));
  const c = await connect(ptcBin, ['--repair-url', ep.url, '--repair-model', 'test-model', '--repair-key-env', 'PTC_TEST_REPAIR_KEY', '--ca-file', pki.ca],
    { env: { PTC_TEST_REPAIR_KEY: 'sk-test-123' } });
  try {
    await c.client.listTools();
    const r = await run(c, 'print(undefined_thing)');
    assert.equal(r.isError, undefined, r.content[0].text);
    const sc = r.structuredContent;
    assert.equal(sc.stdout, 'fixed over https\n');
    assert.deepEqual(sc.attempts.map((a) => [a.status, a.repaired_by]), [['error', null], ['ok', 'http']]);
    assert.match(r.content[0].text, /1 repair by the fallback repairer/);
    assert.equal(ep.seen.length, 1);
    const req = ep.seen[0];
    assert.equal(req.url, '/v1/chat/completions');
    assert.equal(req.headers.authorization, 'Bearer sk-test-123');
    assert.equal(req.body.model, 'test-model');
    assert.ok(req.body.max_tokens > 0);
    assert.deepEqual(req.body.messages.map((m) => m.role), ['system', 'user']);
    assert.match(req.body.messages[1].content, /```python\nprint\(undefined_thing\)\n```/);
    assert.match(req.body.messages[1].content, /NameError: name 'undefined_thing' is not defined/);
  } finally {
    await c.close();
    await ep.close();
    pki.cleanup();
  }
});

test('the fallback verifies the certificate, and its refusals end the loop with the original error', { skip: !haveOpenssl && 'openssl is not installed' }, async () => {
  const pki = makePki();
  const ep = await endpoint(pki, () => completion('```python\nprint(1)\n```'));
  const failing = await endpoint(pki, () => [500, { error: { message: 'the model is overloaded' } }]);
  // Without --ca-file the system bundle does not know the test's CA: the handshake fails.
  const untrusted = await connect(ptcBin, ['--repair-url', ep.url, '--repair-model', 'm']);
  const refused = await connect(ptcBin, ['--repair-url', failing.url, '--repair-model', 'm', '--ca-file', pki.ca]);
  try {
    const r = await run(untrusted, 'raise ValueError("v")');
    assert.equal(r.isError, true);
    assert.match(r.structuredContent.repair.stopped, /fallback repairer did not give a fix: .*(certificate|verif|TLS)/i);
    assert.equal(ep.seen.length, 0, 'nothing was sent to an unverified server');
    assert.match(r.structuredContent.stderr, /ValueError: v/);

    const r2 = await run(refused, 'raise ValueError("v")');
    assert.equal(r2.isError, true);
    assert.match(r2.structuredContent.repair.stopped, /answered HTTP 500: .*overloaded/);
    assert.equal(failing.seen.length, 1);
  } finally {
    await untrusted.close();
    await refused.close();
    await ep.close();
    await failing.close();
    pki.cleanup();
  }
});

test('repair flags that cannot work are refused at start with what to do', () => {
  const noModel = spawnSync(ptcBin, ['--repair-url', 'https://localhost:1/v1'], { input: '', encoding: 'utf8' });
  assert.notEqual(noModel.status, 0);
  assert.match(noModel.stderr, /--repair-url needs --repair-model/);
  const noKey = spawnSync(ptcBin, ['--repair-url', 'https://localhost:1/v1', '--repair-model', 'm', '--repair-key-env', 'PTC_TEST_UNSET_KEY'],
    { input: '', encoding: 'utf8', env: { PATH: process.env.PATH } });
  assert.notEqual(noKey.status, 0);
  assert.match(noKey.stderr, /PTC_TEST_UNSET_KEY: the variable is not set/);
  const tooMany = spawnSync(ptcBin, ['--max-repairs', '11'], { input: '', encoding: 'utf8' });
  assert.notEqual(tooMany.status, 0);
  assert.match(tooMany.stderr, /--max-repairs: at most 10/);
  const longDeadline = spawnSync(ptcBin, ['--request-deadline', '86401'], { input: '', encoding: 'utf8' });
  assert.notEqual(longDeadline.status, 0);
  assert.match(longDeadline.stderr, /--request-deadline: at most 86400 seconds/);
  const zeroDeadline = spawnSync(ptcBin, ['--request-deadline', '0'], { input: '', encoding: 'utf8' });
  assert.equal(zeroDeadline.status, 2);
  const help = spawnSync(ptcBin, ['--help'], { encoding: 'utf8' });
  assert.match(help.stdout, /--max-repairs N +self-healing budget/);
  assert.doesNotMatch(help.stdout, /--repair-url.*not available yet/);
});
