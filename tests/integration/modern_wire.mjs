// The raw 2026-07-28 wire over Streamable HTTP, for what the SDKs hide (a requestState carried
// to another instance, custom headers, a listen stream's notifications): one POST whose body
// carries the stateless `_meta` and whose headers repeat the method and name, as a client must.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { node22 } from './helpers.mjs';

export const MODERN = '2026-07-28';

// tests/fixtures/modern_only_server.mjs (the TypeScript SDK 2.x, modern only).
export const modernFixture = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'modern_only_server.mjs');

// That fixture over HTTP on a free port (extra: its arguments after "http"); stop() ends it.
export async function startModernHttp(extra = []) {
  const proc = spawn(node22, [modernFixture, 'http', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stderr.on('data', (d) => { err += d.toString(); });
  const port = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`the modern-only server did not start: ${err}`)), 20000);
    proc.stdout.on('data', (d) => {
      out += d.toString();
      const m = /listening (\d+)/.exec(out);
      if (m) { clearTimeout(t); resolve(Number(m[1])); }
    });
    proc.on('exit', () => { clearTimeout(t); reject(new Error(`the modern-only server exited: ${err}`)); });
  });
  return { url: `http://127.0.0.1:${port}/mcp`, stop: () => { proc.kill('SIGTERM'); } };
}

export function meta26(caps = {}, extra = {}) {
  return { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': caps, ...extra };
}

// POSTs one request; resolves { status, msg (the answer), before (what came first on its stream) }.
export async function post26(url, method, params, caps = {}, { meta = {}, headers = {} } = {}) {
  const body = { jsonrpc: '2.0', id: Math.floor(Math.random() * 1e9), method, params: { ...params, _meta: meta26(caps, meta) } };
  const name = params.name ?? params.uri ?? params.taskId;
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': MODERN, 'Mcp-Method': method, ...(name ? { 'Mcp-Name': name } : {}), ...headers,
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  const events = text.startsWith('{') ? [text] : text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
  const all = events.map((e) => JSON.parse(e));
  return { status: res.status, msg: all.at(-1), before: all.slice(0, -1) };
}
