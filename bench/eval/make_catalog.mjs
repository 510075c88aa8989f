#!/usr/bin/env node
// make_catalog.mjs - builds a retrieval development set's catalog from real MCP servers.
//
// usage: node bench/eval/make_catalog.mjs SERVERS.json OUTDIR [--work DIR] [--only NAME,...]
//                                          [--timeout SECONDS]
//
// For each entry of SERVERS.json ({"server", "npm_package", "version", "args"?, "env_keys"?,
// "bin"?}) it installs the package at that version into a scratch folder (never the checkout),
// starts it over stdio without network (in a new network namespace, `unshare -rn`, when the
// machine allows one) with placeholder values for the environment variables it expects, sends
// initialize + tools/list (following nextCursor) through the MCP SDK client the test suite pins
// (tests/node_modules), and keeps every tool exactly as it came. It writes OUTDIR/catalog.json
// (an array of {"id": "server__name", "server", "name", "description", "inputSchema"}) and
// OUTDIR/servers_manifest.json (package, version, serverInfo, tools, pages, launch). A server that
// does not start or lists no tools is reported and left out of both.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const sdk = path.join(here, '..', '..', 'tests', 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm', 'client');
const { Client } = await import(pathToFileURL(path.join(sdk, 'index.js')).href);
const { StdioClientTransport, getDefaultEnvironment } = await import(pathToFileURL(path.join(sdk, 'stdio.js')).href);

const argv = process.argv.slice(2);
if (argv.length < 2) {
  console.error('usage: make_catalog.mjs SERVERS.json OUTDIR [--work DIR] [--only NAME,...] [--timeout S]');
  process.exit(2);
}
const [serversPath, outDir] = argv;
let work = path.join(os.tmpdir(), 'ptc-eval-servers');
let only = null;
let timeoutMs = 120000; // a server's start and listing; some take tens of seconds on a busy machine
for (let i = 2; i < argv.length; i++) {
  if (argv[i] === '--work') work = argv[++i];
  else if (argv[i] === '--only') only = new Set(argv[++i].split(','));
  else if (argv[i] === '--timeout') timeoutMs = 1000 * Number(argv[++i]);
  else { console.error(`unknown option ${argv[i]}`); process.exit(2); }
}
const servers = JSON.parse(fs.readFileSync(serversPath, 'utf8'));

function canUnshare() {
  try { execFileSync('unshare', ['-rn', 'true'], { stdio: 'ignore' }); return true; } catch { return false; }
}
const isolate = canUnshare();
if (!isolate) console.error('make_catalog: no network namespace available, servers run with the network');

function install(s) {
  const dir = path.join(work, s.server);
  const pkgDir = path.join(dir, 'node_modules', ...s.npm_package.split('/'));
  if (!fs.existsSync(path.join(pkgDir, 'package.json'))) {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'package.json'), '{"private": true}\n');
    const npm = (extra) => execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...extra, `${s.npm_package}@${s.version}`],
                                        { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'] });
    // Some packages' install scripts build optional native parts (a keychain binding) or insist
    // on another package manager; listing tools needs neither, so a failed install is retried
    // without scripts.
    try { npm([]); } catch { npm(['--ignore-scripts']); }
  }
  const pj = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
  let bin = pj.bin;
  if (typeof bin === 'object' && bin !== null) bin = bin[s.bin] ?? Object.values(bin)[0];
  if (typeof bin !== 'string') throw new Error(`${s.npm_package} has no bin`);
  const binName = typeof pj.bin === 'object' ? (s.bin ?? Object.keys(pj.bin)[0]) : pj.name.split('/').pop();
  return { version: pj.version, binPath: path.join(pkgDir, bin), binName };
}

async function list(s, inst) {
  const env = { ...getDefaultEnvironment(), HOME: path.join(work, s.server, 'home') };
  fs.mkdirSync(env.HOME, { recursive: true });
  for (const k of s.env_keys ?? []) env[k] = k.endsWith('URL') || k.endsWith('ENDPOINT') || k === 'ENDPOINT' ? 'http://127.0.0.1:9/' : 'placeholder';
  const cmd = [process.execPath, inst.binPath, ...(s.args ?? [])];
  const transport = new StdioClientTransport({
    command: isolate ? 'unshare' : cmd[0], args: isolate ? ['-rn', ...cmd] : cmd.slice(1),
    env, cwd: path.join(work, s.server), stderr: 'ignore',
  });
  const client = new Client({ name: 'ptc-mcp-eval', version: '1' });
  const timer = setTimeout(() => transport.close(), timeoutMs);
  try {
    await client.connect(transport);
    const tools = [];
    let cursor, pages = 0;
    do {
      const r = await client.listTools(cursor ? { cursor } : {});
      pages++;
      tools.push(...r.tools);
      cursor = r.nextCursor;
    } while (cursor);
    return { tools, pages, serverInfo: client.getServerVersion() };
  } finally {
    clearTimeout(timer);
    await client.close().catch(() => {});
  }
}

const catalog = [], manifest = [];
for (const s of servers) {
  if (only && !only.has(s.server)) continue;
  try {
    const inst = install(s);
    const r = await list(s, inst);
    if (r.tools.length === 0) throw new Error('no tools');
    for (const t of r.tools)
      catalog.push({ id: `${s.server}__${t.name}`, server: s.server, name: t.name, description: t.description ?? '', inputSchema: t.inputSchema ?? {} });
    manifest.push({ server: s.server, npm_package: s.npm_package, version: inst.version, serverInfo: r.serverInfo,
                    tools: r.tools.length, pages: r.pages,
                    extraction: isolate ? 'live tools/list over stdio (network-less namespace)' : 'live tools/list over stdio',
                    launch: { cmd: inst.binName, args: s.args ?? [], env_keys: s.env_keys ?? [] } });
    console.error(`make_catalog: ${s.server}: ${r.tools.length} tools`);
  } catch (e) {
    console.error(`make_catalog: ${s.server}: left out (${String(e.message ?? e).split('\n')[0]})`);
  }
}
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, 'catalog.json'), JSON.stringify(catalog, null, 1) + '\n');
fs.writeFileSync(path.join(outDir, 'servers_manifest.json'), JSON.stringify(manifest, null, 1) + '\n');
console.error(`make_catalog: ${manifest.length} servers, ${catalog.length} tools`);
