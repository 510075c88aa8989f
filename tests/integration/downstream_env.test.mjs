// What a downstream server's process sees of ptc-mcp's environment: only the MCP SDKs' default
// set (HOME, LOGNAME, PATH, SHELL, TERM, USER), the locale and the entry's own "env", never the
// variables that hold ptc-mcp's secrets. Checked the way an attack would: sandboxed code calls
// server-everything's get-env tool, which returns its whole environment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, ptcBin, repoRoot, sleep } from './helpers.mjs';

const modules = path.join(repoRoot, 'tests', 'node_modules', '@modelcontextprotocol');

test('a downstream server gets the default set and its entry\'s env, none of ptc-mcp\'s secrets', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-dsenv-'));
  const config = path.join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({
    mcpServers: {
      everything: {
        command: process.execPath,
        args: [path.join(modules, 'server-everything', 'dist', 'index.js'), 'stdio'],
        // A literal value under a withheld name is the user's explicit choice: it passes.
        env: { PTC_T_ENTRY: 'from-the-entry', PTC_T_EMBED_KEY: 'entry-literal', PTC_T_FROM_VAR: '${PTC_T_PLAIN}' },
      },
    },
  }));
  const env = {
    PTC_T_AUTH: 'auth-secret-1', PTC_T_REPAIR_KEY: 'repair-secret-2', PTC_T_EMBED_KEY: 'embed-secret-3',
    PTC_T_PLAIN: 'plain-not-passed', LANG: 'C.UTF-8', LC_TIME: 'C', HOME: dir, USER: 'ptc-test',
  };
  const c = await connect(ptcBin, ['--config', config, '--auth-token-env', 'PTC_T_AUTH',
    '--repair-key-env', 'PTC_T_REPAIR_KEY', '--repair-url', 'http://127.0.0.1:9/v1', '--repair-model', 'none',
    '--embed-key-env', 'PTC_T_EMBED_KEY', '--max-repairs', '0'], { env });
  try {
    let desc = '';
    for (let i = 0; i < 300 && !/modules: .*everything/.test(desc); i++) {
      desc = (await c.client.listTools()).tools.find((x) => x.name === 'execute_code').description;
      if (!/modules: .*everything/.test(desc)) await sleep(100);
    }
    assert.match(desc, /modules: .*everything/, c.stderr.join(''));
    const r = await c.client.callTool({
      name: 'execute_code',
      arguments: { code: 'import json\nfrom tools.everything import get_env\ne = get_env()\nprint(json.dumps(e if isinstance(e, dict) else json.loads(e)))' },
    });
    assert.equal(r.structuredContent.status, 'ok', JSON.stringify(r.structuredContent));
    const seen = JSON.parse(r.structuredContent.stdout);
    // the entry's env, ${VAR} expanded from ptc-mcp's environment
    assert.equal(seen.PTC_T_ENTRY, 'from-the-entry');
    assert.equal(seen.PTC_T_FROM_VAR, 'plain-not-passed');
    assert.equal(seen.PTC_T_EMBED_KEY, 'entry-literal');
    // the default set and the locale
    assert.equal(seen.HOME, dir);
    assert.equal(seen.USER, 'ptc-test');
    assert.equal(seen.LANG, 'C.UTF-8');
    assert.equal(seen.LC_TIME, 'C');
    assert.ok(seen.PATH);
    // nothing else of ptc-mcp's: not its secrets, not an ordinary variable
    assert.equal(seen.PTC_T_AUTH, undefined);
    assert.equal(seen.PTC_T_REPAIR_KEY, undefined);
    assert.equal(seen.PTC_T_PLAIN, undefined);
    for (const v of Object.values(seen)) assert.ok(!/secret-/.test(v), `a secret's value reached the server: ${v}`);
    assert.match(c.stderr.join(''), /its "env" passes PTC_T_EMBED_KEY/);
  } finally {
    await c.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
