// Helpers for the HTTP transport's tests: start `ptc-mcp --transport http` on a free loopback
// port, connect the SDK's Streamable HTTP client (optionally over HTTPS with a test CA), read the
// server's RSS, and stop it checking for a clean exit (SIGTERM -> exit 0, no sanitizer report).
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { assertCleanExit, buildDir, ptcBin } from './helpers.mjs';

// True when the binary under test was built with -DPTC_SANITIZE=ON (its CMake cache says so).
export function isSanitizerBuild() {
  try {
    return /^PTC_SANITIZE:BOOL=ON$/m.test(readFileSync(path.join(buildDir, 'CMakeCache.txt'), 'utf8'));
  } catch {
    return false;
  }
}

// Starts ptc-mcp over HTTP on 127.0.0.1 with a kernel-chosen port; resolves once the server logs
// `listening on http(s)://127.0.0.1:PORT/mcp`. `env` adds to this process's environment.
// `tls`: the URL is https whatever the log line says.
export async function startHttp(args = [], { env = {}, bin = ptcBin, waitFor, timeoutMs = 60000, tls = false } = {}) {
  const proc = spawn(bin, ['--transport', 'http', '--listen', '127.0.0.1:0', ...args], {
    // stdin stays an open pipe: an HTTP server must not stop on a closed stdin, nor need one.
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let stderr = '';
  let stdout = '';
  proc.stderr.on('data', (d) => { stderr += d.toString(); });
  proc.stdout.on('data', (d) => { stdout += d.toString(); });
  const exited = new Promise((resolve) => proc.once('close', (code, signal) => resolve({ code, signal })));
  let exitedEarly = null;
  exited.then((how) => { exitedEarly = how; });
  const deadline = Date.now() + timeoutMs;
  let m = null;
  while (!(m = /listening on (https?):\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(stderr)) || (waitFor && !waitFor.test(stderr))) {
    if (exitedEarly) throw new Error(`ptc-mcp exited ${JSON.stringify(exitedEarly)} before listening; stderr:\n${stderr}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`ptc-mcp did not log "listening on ..."${waitFor ? ` and ${waitFor}` : ''} in ${timeoutMs} ms; stderr:\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  const scheme = tls ? 'https' : m[1];
  const port = Number(m[2]);
  const origin = `${scheme}://127.0.0.1:${port}`;
  const server = {
    proc,
    pid: proc.pid,
    port,
    origin,
    url: `${origin}/mcp`,
    stderr: () => stderr,
    stdout: () => stdout,
    exited,
    // SIGTERM, then a clean exit: code 0 and no ASan/LSan/UBSan report. SIGKILL after timeoutMs.
    async stop({ timeoutMs: stopMs = 60000 } = {}) {
      if (!exitedEarly) proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), stopMs);
      const how = await exited;
      clearTimeout(t);
      if (stdout.length) throw new Error(`an HTTP server wrote to stdout: ${stdout.slice(0, 500)}`);
      assertCleanExit(how, stderr);
      return how;
    },
  };
  return server;
}

// The server's resident set in KiB (/proc/PID/status VmRSS), or its peak (VmHWM).
export function rssKiB(pid, field = 'VmRSS') {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no ${field} for pid ${pid}`);
  return Number(m[1]);
}

// A fetch for the SDK (and for tests) that trusts `ca` (PEM) over HTTPS; keeps connections alive.
// Node's built-in fetch cannot take a CA per call, so this wraps https.request into a Response.
export function fetchWithCa(ca) {
  const agent = new https.Agent({ ca, keepAlive: true });
  const fetchFn = (input, init = {}) => new Promise((resolve, reject) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const headers = {};
    new Headers(init.headers ?? {}).forEach((v, k) => { headers[k] = v; });
    const method = init.method ?? 'GET';
    const req = https.request(url, { method, headers, agent, signal: init.signal ?? undefined }, (res) => {
      const h = new Headers();
      for (const [k, v] of Object.entries(res.headers)) {
        for (const one of Array.isArray(v) ? v : [v]) h.append(k, one);
      }
      const noBody = method === 'HEAD' || [101, 204, 205, 304].includes(res.statusCode);
      if (noBody) res.resume();
      resolve(new Response(noBody ? null : Readable.toWeb(res), { status: res.statusCode, statusText: res.statusMessage, headers: h }));
    });
    req.on('error', reject);
    req.end(init.body ?? undefined);
  });
  fetchFn.agent = agent;
  return fetchFn;
}

// Connects the SDK's Streamable HTTP client. `headers` go on every request (e.g. Authorization);
// `fetch` replaces the global one (fetchWithCa for HTTPS). close() ends the session (DELETE).
export async function connectHttp(url, { headers, fetch, capabilities = {}, name = 'ptc-mcp-http-tests' } = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    ...(headers ? { requestInit: { headers } } : {}),
    ...(fetch ? { fetch } : {}),
  });
  const client = new Client({ name, version: '1.0.0' }, { capabilities });
  await client.connect(transport);
  return {
    client,
    transport,
    sessionId: transport.sessionId,
    async close() {
      await transport.terminateSession();
      await client.close();
    },
  };
}

// A normal session still works: handshake, tools/list, one execute_code with a checked answer.
export async function assertServes(url, opts = {}) {
  const c = await connectHttp(url, opts);
  try {
    if (!c.sessionId) throw new Error('no Mcp-Session-Id from initialize');
    const { tools } = await c.client.listTools();
    if (!tools.some((t) => t.name === 'execute_code')) throw new Error(`execute_code not listed: ${JSON.stringify(tools.map((t) => t.name))}`);
    const r = await c.client.callTool({ name: 'execute_code', arguments: { code: 'print(6 * 7)' } });
    if (r.isError || r.structuredContent?.stdout !== '42\n') throw new Error(`execute_code answered ${JSON.stringify(r)}`);
  } finally {
    await c.close();
  }
}

// Raw HTTP/1.1 over a plain socket: resolves with everything the server sent until it closed the
// connection or `until` matched the bytes so far, whichever first; `timeoutMs` bounds the wait.
export function rawExchange(port, bytes, { until, timeoutMs = 30000, halfClose = false } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    const chunks = [];
    let done = false;
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(t);
      sock.destroy();
      resolve({ text: Buffer.concat(chunks).toString('latin1'), closed });
    };
    const t = setTimeout(() => {
      done = true;
      sock.destroy();
      reject(new Error(`no answer in ${timeoutMs} ms; got so far: ${JSON.stringify(Buffer.concat(chunks).toString('latin1').slice(0, 500))}`));
    }, timeoutMs);
    sock.on('connect', () => {
      sock.write(bytes);
      if (halfClose) sock.end();
    });
    sock.on('data', (d) => {
      chunks.push(d);
      if (until && until(Buffer.concat(chunks).toString('latin1'))) finish(false);
    });
    sock.on('end', () => finish(true));
    sock.on('close', () => finish(true));
    sock.on('error', () => finish(true));
  });
}

// One JSON-RPC POST to /mcp as raw request bytes.
export function rawPost(port, message, headers = {}) {
  const body = Buffer.from(JSON.stringify(message));
  const h = {
    Host: `127.0.0.1:${port}`,
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'Content-Length': String(body.length),
    ...headers,
  };
  const head = `POST /mcp HTTP/1.1\r\n${Object.entries(h).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
  return Buffer.concat([Buffer.from(head), body]);
}

// One complete HTTP/1.1 response at the start of raw (latin1) text, or null when more is needed:
// { status, headers (lower-case names), body (latin1), json (the JSON body or the first SSE
// event's data, parsed; undefined when neither), length (bytes of text it used) }. A body
// without a length needs the close.
export function parseResponse(text, { closed = false } = {}) {
  const he = text.indexOf('\r\n\r\n');
  if (he < 0) return null;
  const head = text.slice(0, he);
  const rest = text.slice(he + 4);
  const status = statusOf(head);
  const headers = {};
  for (const line of head.split('\r\n').slice(1)) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  let body;
  let used = rest.length;
  if ((status >= 100 && status < 200) || status === 204 || status === 304) {
    body = '';
    used = 0;
  } else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    body = '';
    let at = 0;
    for (;;) {
      const eol = rest.indexOf('\r\n', at);
      if (eol < 0) return null;
      const size = parseInt(rest.slice(at, eol), 16);
      if (Number.isNaN(size)) throw new Error(`bad chunk size in ${JSON.stringify(rest.slice(at, eol + 2))}`);
      if (size === 0) {
        const end = rest.indexOf('\r\n\r\n', eol);
        if (end < 0) return null;
        used = end + 4;
        break;
      }
      if (rest.length < eol + 2 + size + 2) return null;
      body += rest.slice(eol + 2, eol + 2 + size);
      at = eol + 2 + size + 2;
    }
  } else if (headers['content-length'] !== undefined) {
    const n = Number(headers['content-length']);
    if (rest.length < n) return null;
    body = rest.slice(0, n);
    used = n;
  } else if (closed) body = rest;
  else return null;
  const utf8 = Buffer.from(body, 'latin1').toString('utf8');
  let json;
  try {
    if (/text\/event-stream/.test(headers['content-type'] ?? '')) {
      // The first event with data: a stream may start with an empty priming event.
      for (const data of utf8.matchAll(/^data:(.*)$/gm)) {
        if (!data[1].trim()) continue;
        json = JSON.parse(data[1]);
        break;
      }
    } else if (/json/.test(headers['content-type'] ?? '')) json = JSON.parse(utf8);
  } catch { /* not JSON: json stays undefined */ }
  return { status, headers, body, json, length: he + 4 + used };
}

// The status code of the first response in raw bytes, or null.
export const statusOf = (text) => {
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
  return m ? Number(m[1]) : null;
};

// A self-signed certificate for 127.0.0.1/localhost made with the openssl CLI (Debian: openssl).
// Returns { dir, cert, key, certPem } and a cleanup(); null when openssl is missing.
export function makeSelfSignedCert() {
  const probe = spawnSync('openssl', ['version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) return null;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-tls-'));
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
    '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl req failed: ${r.stderr}`);
  return { dir, cert, key, certPem: readFileSync(cert, 'utf8'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
