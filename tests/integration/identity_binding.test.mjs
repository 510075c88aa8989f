// What crosses between clients over HTTP (issues 15 and 12), through the official SDK clients:
// execute_code's output cursors, run cursors, ptc://output/ and ptc://files/ URIs and session
// handles are bound to the client that made them (its MCP session and bearer token; on the
// 2026-07-28 stateless protocol, the token alone). Presented by another client they get the very
// answer an unknown one gets. And when an MCP session ends (DELETE, a legacy SSE client gone),
// its workspace sessions and long runs end at once and its pages and files are dropped.
//
// The server takes one bearer token (--auth-token-env), so "another token" cannot be shown
// here: two clients differ by their MCP session; the stores' unit tests cover the owner check.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { connectHttp as connectSdk, sleep, until } from './helpers.mjs';
import { connectHttp, startHttp } from './http_helpers.mjs';

const TOKEN = `tok-${randomBytes(16).toString('hex')}`;
const AUTH = { Authorization: `Bearer ${TOKEN}` };
const withToken = (args = []) => startHttp(['--auth-token-env', 'PTC_TEST_TOKEN', ...args], { env: { PTC_TEST_TOKEN: TOKEN } });

// Code waits for its end (a loaded machine starts sandboxes slowly) unless the call says otherwise.
const call = (c, args, opts) => c.client.callTool({
  name: 'execute_code',
  arguments: args.code !== undefined && args.wait_seconds === undefined ? { ...args, wait_seconds: 120 } : args,
}, undefined, { timeout: 180000, ...opts });
const text = (r) => r.content.filter((b) => b.type === 'text').map((b) => b.text).join('\n');
const hex32 = () => randomBytes(16).toString('hex');

// A run whose output takes several pages and which leaves a file: its cursor and the file's URI.
const SECRET_RUN = 'import os\nopen(os.environ["PTC_OUTPUT_DIR"] + "/secret.csv", "w").write("k,v\\nsecret,42\\n")\nprint("S3CRET" * 20)';
async function secretRun(c) {
  const r = await call(c, { code: SECRET_RUN });
  assert.equal(r.structuredContent.status, 'ok', text(r));
  const cursor = r.structuredContent.next_cursor;
  assert.match(cursor, /^[0-9a-f]{32}\.\d+$/);
  const file = r.structuredContent.files.find((f) => f.name === 'secret.csv');
  assert.ok(file?.uri, JSON.stringify(r.structuredContent.files));
  return { cursor, fileUri: file.uri };
}

// The rejection of a resources/read (code and message), with the URI it names put back to `as`.
async function readRefusal(c, uri, as = uri) {
  const e = await c.client.readResource({ uri }).then(() => null, (err) => err);
  assert.ok(e, `reading ${uri} was not refused`);
  return { code: e.code, message: e.message.split(uri).join(as) };
}

// Another client presenting cursor, fileUri and handle gets what a never-made one gets.
async function assertRefusedLikeUnknown(thief, { cursor, fileUri, handle, runCursor }) {
  const fakeCursor = `${hex32()}.20`;
  const stolen = await call(thief, { cursor });
  const unknown = await call(thief, { cursor: fakeCursor });
  assert.equal(stolen.isError, true);
  assert.equal(text(stolen), text(unknown));
  assert.deepEqual(stolen.structuredContent, unknown.structuredContent);
  assert.doesNotMatch(JSON.stringify(stolen), /S3CRET/);
  if (runCursor) {
    const waited = await call(thief, { cursor: runCursor, wait_seconds: 1 });
    assert.equal(waited.isError, true);
    assert.equal(text(waited), text(unknown));
    const cancelled = await call(thief, { cursor: runCursor, cancel: true });
    const cancelUnknown = await call(thief, { cursor: `run-${hex32()}`, cancel: true });
    assert.equal(cancelled.isError, true);
    assert.equal(text(cancelled), text(cancelUnknown));
  }
  const fakeOut = `ptc://output/${fakeCursor}`;
  assert.deepEqual(await readRefusal(thief, `ptc://output/${cursor}`, fakeOut), await readRefusal(thief, fakeOut));
  const fakeFile = fileUri.replace(/^ptc:\/\/files\/[0-9a-f]{32}\//, `ptc://files/${hex32()}/`);
  assert.deepEqual(await readRefusal(thief, fileUri, fakeFile), await readRefusal(thief, fakeFile));
  if (handle) {
    const fake = `ses-${hex32()}`;
    const used = await call(thief, { code: 'print(secret)', session: handle });
    const unknownSession = await call(thief, { code: 'print(secret)', session: fake });
    assert.equal(used.isError, true);
    assert.equal(text(used), text(unknownSession).split(fake).join(handle));
    const closed = await call(thief, { session: handle, close_session: true });
    assert.equal(closed.isError, true);
    assert.equal(text(closed), text(await call(thief, { session: fake, close_session: true })).split(fake).join(handle));
  }
}

// The maker still reads all of it.
async function assertOwnerReads(owner, { cursor, fileUri, handle }) {
  const page = await call(owner, { cursor });
  assert.equal(page.isError ?? false, false, text(page));
  assert.match(page.structuredContent.stdout, /S3CRET/);
  assert.match((await owner.client.readResource({ uri: `ptc://output/${cursor}` })).contents[0].text, /S3CRET/);
  assert.equal((await owner.client.readResource({ uri: fileUri })).contents[0].text, 'k,v\nsecret,42\n');
  if (handle) assert.equal((await call(owner, { code: 'print(secret)', session: handle })).structuredContent.stdout, '7\n');
}

test('over Streamable HTTP with a bearer token, another MCP session gets "unknown" for a cursor, a run cursor, an output or file URI and a session handle', async () => {
  const srv = await withToken(['--output-page-chars', '20']);
  const a = await connectHttp(srv.url, { headers: AUTH });
  const b = await connectHttp(srv.url, { headers: AUTH });
  try {
    await a.client.listTools();
    await b.client.listTools();
    const made = await secretRun(a);
    const h = (await call(a, { code: 'secret = 7', session: 'new' })).structuredContent.session;
    const running = await call(a, { code: 'import time\ntime.sleep(30)', timeout_seconds: 60, wait_seconds: 0.5 });
    assert.equal(running.structuredContent.status, 'running');
    const runCursor = running.structuredContent.next_cursor;
    await assertRefusedLikeUnknown(b, { ...made, handle: h, runCursor });
    await assertOwnerReads(a, { ...made, handle: h });
    // The run is still a's: b's cancel did nothing.
    const cancelled = await call(a, { cursor: runCursor, cancel: true });
    assert.equal(cancelled.structuredContent.status, 'killed', text(cancelled));
  } finally {
    await a.close();
    await b.close();
    await srv.stop();
  }
});

test('DELETE of an MCP session ends its workspace sessions and long runs at once and drops its pages and files', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-identity-'));
  chmodSync(dir, 0o777); // the sandbox writes as an unprivileged user
  const srv = await withToken(['--max-sessions', '1', '--output-page-chars', '20', '--mount', `${dir}:/beat:rw`]);
  const a = await connectHttp(srv.url, { headers: AUTH });
  const b = await connectHttp(srv.url, { headers: AUTH });
  try {
    await a.client.listTools();
    await b.client.listTools();
    await secretRun(a);
    assert.equal((await call(a, { code: 'secret = 7', session: 'new' })).isError ?? false, false);
    // A long run that shows it is alive by growing a file on the host.
    const beat = 'import time\nwhile True:\n    with open("/beat/beat", "a") as f:\n        f.write(".")\n    time.sleep(0.05)';
    const running = await call(a, { code: beat, timeout_seconds: 120, wait_seconds: 0.5 });
    assert.equal(running.structuredContent.status, 'running', text(running));
    const beatFile = path.join(dir, 'beat');
    await until('the long run writes', () => existsSync(beatFile) && statSync(beatFile).size > 2, 30000);
    // The one session place is a's.
    const refused = await call(b, { code: 'print(1)', session: 'new' });
    assert.equal(refused.isError, true);
    assert.match(text(refused), /Too many sessions/);

    await a.transport.terminateSession(); // DELETE /mcp
    // Right after the DELETE's answer the place is free: a's interpreter is gone.
    const mine = await call(b, { code: 'print("b has it")', session: 'new' });
    assert.equal(mine.isError ?? false, false, text(mine));
    assert.equal(mine.structuredContent.stdout, 'b has it\n');
    // And a's long run was killed: the file stops growing.
    const size = statSync(beatFile).size;
    await sleep(600);
    assert.equal(statSync(beatFile).size, size, 'the long run of the ended session still writes');
    await until('the drop is logged', () => /an MCP session ended; dropped 1 output\(s\) and 1 file\(s\)/.test(srv.stderr()), 5000);
    assert.match(srv.stderr(), /session ses-[0-9a-f]{8}\S*\.\.\. closed: its client's MCP session ended/);
    assert.match(srv.stderr(), /run run-[0-9a-f]{8}\S*\.\.\. stopped: its client's MCP session ended/);
  } finally {
    await a.client.close();
    await b.close();
    try {
      await srv.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

test('a legacy SSE client that goes away takes its workspace session with it', async () => {
  const srv = await withToken(['--max-sessions', '1', '--output-page-chars', '20']);
  const legacy = await connectSdk(srv.url, { legacy: true, headers: AUTH });
  const b = await connectHttp(srv.url, { headers: AUTH });
  try {
    await legacy.client.listTools();
    await b.client.listTools();
    const made = await call(legacy, { code: 'secret = 7', session: 'new' });
    assert.equal(made.isError ?? false, false, text(made));
    const h = made.structuredContent.session;
    await assertRefusedLikeUnknown(b, { ...(await secretRun(legacy)), handle: h });
    assert.match(text(await call(b, { code: 'print(1)', session: 'new' })), /Too many sessions/);
    await legacy.close(); // drops the GET /sse stream: the session ends
    await until('the place is free', async () => {
      const r = await call(b, { code: 'print(1)', session: 'new' });
      return (r.isError ?? false) === false;
    }, 10000);
  } finally {
    await b.close();
    await srv.stop();
  }
});

// The 2.x SDK client pinned to 2026-07-28: no MCP session, every request carries the token.
async function connectModern(url) {
  const client = new ModernClient({ name: 'ptc-identity-2026', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  const transport = new ModernTransport(new URL(url), { requestInit: { headers: AUTH } });
  await client.connect(transport);
  assert.equal(transport.sessionId, undefined);
  return { client, close: () => client.close() };
}

test('on 2026-07-28 (stateless) the token alone is the identity: another stateless client with it reads, a legacy MCP session does not, nor the other way', async () => {
  const srv = await withToken(['--output-page-chars', '20']);
  const m1 = await connectModern(srv.url);
  const m2 = await connectModern(srv.url);
  const legacy = await connectHttp(srv.url, { headers: AUTH });
  try {
    await m1.client.listTools();
    await m2.client.listTools();
    await legacy.client.listTools();
    const fromModern = await secretRun(m1);
    const mh = (await call(m1, { code: 'secret = 7', session: 'new' })).structuredContent.session;
    assert.match(mh, /^ses-[0-9a-f]{32}$/);
    // Each stateless request is a session of its own; the token is what they share.
    await assertOwnerReads(m2, { ...fromModern, handle: mh });
    await assertRefusedLikeUnknown(legacy, { ...fromModern, handle: mh });
    const fromLegacy = await secretRun(legacy);
    const lh = (await call(legacy, { code: 'secret = 7', session: 'new' })).structuredContent.session;
    await assertRefusedLikeUnknown(m1, { ...fromLegacy, handle: lh });
    await assertOwnerReads(legacy, { ...fromLegacy, handle: lh });
  } finally {
    await m1.close();
    await m2.close();
    await legacy.close();
    await srv.stop();
  }
});
