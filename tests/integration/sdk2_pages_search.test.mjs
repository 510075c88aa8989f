// ptc-mcp through the official TypeScript SDK 2.x client (@modelcontextprotocol/client, pinned),
// pinned to 2026-07-28 (stateless) and in the legacy mode, over stdio and Streamable HTTP: the
// output of execute_code paged behind cursors (which a stateless client follows without a
// session), and search_tools finding a downstream server's tool (the modern-only server of
// tests/fixtures/modern_only_server.mjs). mcp_2026.test.mjs covers tools/list and one call.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { node22, ptcBin } from './helpers.mjs';
import { startHttp } from './http_helpers.mjs';
import { PAGED_CODE, PAGED_STDOUT, followPages } from './pages.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixture = path.resolve(here, '..', 'fixtures', 'modern_only_server.mjs');
const MODERN = '2026-07-28';
const PAGE_CHARS = 1000;
const textOf = (r) => r.content.map((c) => c.text ?? '').join('');

function setup() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-sdk2-'));
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers: { modern: { command: node22, args: [fixture, 'stdio'] } } }));
  const args = ['--config', config, '--embedder', 'lexical', '--output-page-chars', String(PAGE_CHARS)];
  return { dir, args, env: { XDG_CACHE_HOME: path.join(dir, 'cache') } };
}

function newClient(era) {
  const versionNegotiation = era === 'modern' ? { mode: { pin: MODERN } } : { mode: 'legacy' };
  return new Client({ name: 'ptc-sdk2-test', version: '1.0.0' }, { capabilities: {}, versionNegotiation });
}

async function pagesAndSearch(client, era) {
  assert.equal(client.getProtocolEra(), era);
  const first = await client.callTool({ name: 'execute_code', arguments: { code: PAGED_CODE, max_repairs: 0 } });
  const sc = first.structuredContent;
  assert.equal(sc.status, 'ok', textOf(first));
  assert.equal(sc.stdout.length, PAGE_CHARS);
  assert.equal(typeof sc.next_cursor, 'string');
  assert.ok(textOf(first).endsWith(`[more output: call execute_code with cursor "${sc.next_cursor}"]`));
  const { out, err, pages } = await followPages(client, sc);
  assert.equal(pages, 4);
  assert.equal(out, PAGED_STDOUT);
  assert.equal(err, 'tail\n');

  const found = await client.callTool({ name: 'search_tools', arguments: { query: 'repeat a text in capital letters', top_k: 3 } });
  assert.notEqual(found.isError, true, textOf(found));
  const hits = found.structuredContent.tools.map((t) => `${t.server}/${t.name}`);
  assert.equal(hits[0], 'modern/shout', `hits: ${hits}`);
}

for (const era of ['modern', 'legacy']) {
  test(`SDK 2.x client over stdio, ${era}: execute_code pages and search_tools`, async () => {
    const s = setup();
    const client = newClient(era);
    const transport = new StdioClientTransport({ command: ptcBin, args: s.args, env: { ...process.env, ...s.env }, stderr: 'pipe' });
    let stderr = '';
    transport.stderr?.on('data', (d) => { stderr += d.toString(); });
    try {
      await client.connect(transport);
      await pagesAndSearch(client, era);
    } catch (e) {
      throw new Error(`${e.message}\nstderr:\n${stderr}`);
    } finally {
      await client.close();
      rmSync(s.dir, { recursive: true, force: true });
    }
  });

  test(`SDK 2.x client over Streamable HTTP, ${era}: execute_code pages and search_tools`, async () => {
    const s = setup();
    const srv = await startHttp(s.args, { env: s.env });
    try {
      const client = newClient(era);
      const transport = new StreamableHTTPClientTransport(new URL(srv.url));
      await client.connect(transport);
      try {
        await pagesAndSearch(client, era);
        if (era === 'modern') assert.equal(transport.sessionId, undefined, 'a stateless client has no session');
      } finally {
        await client.close();
      }
    } finally {
      await srv.stop();
      rmSync(s.dir, { recursive: true, force: true });
    }
  });
}
