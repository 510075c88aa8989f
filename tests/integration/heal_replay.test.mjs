// The replay journal with a real side-effecting downstream server (npm server-memory): code
// creates an entity and then fails; after the repair the entity exists exactly once, because
// the repaired run got the first run's result instead of calling the tool again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { connect, ptcBin, repoRoot, sleep } from './helpers.mjs';

const modules = path.join(repoRoot, 'tests', 'node_modules', '@modelcontextprotocol');

function setup() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-heal-'));
  const config = path.join(dir, 'config.json');
  const memoryFile = path.join(dir, 'memory.jsonl');
  writeFileSync(config, JSON.stringify({
    mcpServers: {
      memory: { command: process.execPath, args: [path.join(modules, 'server-memory', 'dist', 'index.js')], env: { MEMORY_FILE_PATH: memoryFile } },
    },
  }));
  return { dir, config, memoryFile, env: { XDG_CACHE_HOME: path.join(dir, 'cache') }, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

async function ready(c) {
  for (let i = 0; i < 300; i++) {
    const t = (await c.client.listTools()).tools.find((x) => x.name === 'execute_code');
    if (/modules: .*memory/.test(t.description)) return;
    await sleep(100);
  }
  throw new Error(`memory server not ready: ${c.stderr.join('')}`);
}

const run = (c, code, extra = {}) => c.client.callTool({ name: 'execute_code', arguments: { code, ...extra } });

test('a repaired run gets the journaled result of a side-effecting call instead of repeating it', async () => {
  const s = setup();
  const asked = [];
  const c = await connect(ptcBin, ['--config', s.config, '--audit-log', path.join(s.dir, 'audit.jsonl')], {
    env: s.env,
    capabilities: { sampling: {} },
    setup: (client) => client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      asked.push(req.params.messages[0].content.text);
      const code = /```python\n([\s\S]*?)```/.exec(req.params.messages[0].content.text)[1];
      return { model: 'm', role: 'assistant', content: { type: 'text', text: '```python\n' + code.replace('len(made[0])', 'len(made["entities"])') + '```' } };
    }),
  });
  try {
    await ready(c);
    const code = [
      'from tools.memory import create_entities, add_observations, read_graph',
      'made = create_entities(entities=[{"name": "Grace", "entityType": "person", "observations": ["wrote a compiler"]}])',
      // The same call twice is two occurrences: the second is not the first one's replay.
      'again = create_entities(entities=[{"name": "Grace", "entityType": "person", "observations": ["wrote a compiler"]}])',
      'print("created:", [e["name"] for e in made["entities"]], "again:", again["entities"])',
      'print("count:", len(made[0]))',
      'g = read_graph()',
      'print("in graph:", sum(1 for e in g["entities"] if e["name"] == "Grace"))',
    ].join('\n') + '\n';
    const r = await run(c, code);
    assert.equal(r.isError, undefined, r.content[0].text);
    const sc = r.structuredContent;
    // The first create returned Grace and the second (a real call in the first run) nothing; the
    // repaired run saw exactly those results again, in that order.
    assert.match(sc.stdout, /^created: \['Grace'\] again: \[\]\ncount: 1\nin graph: 1\n$/);
    assert.equal(sc.attempts.length, 2);
    assert.deepEqual(sc.attempts[0].replayed, []);
    assert.deepEqual(sc.attempts[1].replayed, [
      { tool: 'memory__create_entities', occurrence: 1 },
      { tool: 'memory__create_entities', occurrence: 2 },
    ]);
    assert.equal(sc.tool_calls, 3, 'two replayed calls and read_graph');
    assert.match(r.content[0].text, /2 calls replayed, not run again: memory__create_entities #1 memory__create_entities #2/);
    // The repair request named the tool the program called, as a Python signature.
    assert.match(asked[0], /- tools\.memory\.create_entities\(entities: list\)/);

    // The server's own file holds Grace once; the audit log shows the replays.
    const lines = readFileSync(s.memoryFile, 'utf8').trim().split('\n').filter((l) => /"Grace"/.test(l));
    assert.equal(lines.length, 1, readFileSync(s.memoryFile, 'utf8'));
    const audit = readFileSync(path.join(s.dir, 'audit.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const creates = audit.filter((a) => a.tool === 'memory__create_entities');
    assert.deepEqual(creates.map((a) => a.outcome), ['ok', 'ok', 'replayed', 'replayed']);

    // A new request starts with an empty journal: the call really runs (and creates nothing new).
    const fresh = await run(c, 'from tools.memory import create_entities\nprint(create_entities(entities=[{"name": "Grace", "entityType": "person", "observations": []}]))', { max_repairs: 0 });
    assert.equal(fresh.structuredContent.stdout, "{'entities': []}\n");
  } finally {
    await c.close();
    s.cleanup();
  }
});

test('a call that failed in the first run is made again in the repaired one', async () => {
  const s = setup();
  const c = await connect(ptcBin, ['--config', s.config], {
    env: s.env,
    capabilities: { sampling: {} },
    setup: (client) => client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      const code = /```python\n([\s\S]*?)```/.exec(req.params.messages[0].content.text)[1];
      const fixed = code.replace('r = add_observations', 'create_entities(entities=[{"name": "Nobody", "entityType": "person", "observations": []}])\nr = add_observations');
      return { model: 'm', role: 'assistant', content: { type: 'text', text: '```python\n' + fixed + '```' } };
    }),
  });
  try {
    await ready(c);
    // add_observations on an unknown entity is an error result (isError): it is not kept, so
    // the identical call of the repaired run (the same tool, arguments and occurrence) is made
    // again, and now succeeds.
    const code = [
      'from tools.memory import add_observations, create_entities',
      'r = add_observations(observations=[{"entityName": "Nobody", "contents": ["was here"]}])',
      'print(r)',
    ].join('\n') + '\n';
    const r = await run(c, code);
    assert.equal(r.isError, undefined, r.content[0].text);
    const sc = r.structuredContent;
    assert.equal(sc.attempts.length, 2);
    assert.equal(sc.attempts[0].status, 'error');
    assert.match(sc.attempts[0].error, /ToolError: Entity with name Nobody not found/);
    assert.deepEqual(sc.attempts[1].replayed, []);
    assert.equal(sc.tool_calls, 2);
    assert.match(sc.stdout, /was here/);
  } finally {
    await c.close();
    s.cleanup();
  }
});

test('a wrong import gets the signatures of the module it names in the repair request', async () => {
  const s = setup();
  const asked = [];
  const c = await connect(ptcBin, ['--config', s.config], {
    env: s.env,
    capabilities: { sampling: {} },
    setup: (client) => client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      asked.push(req.params.messages[0].content.text);
      return { model: 'm', role: 'assistant', content: { type: 'text', text: '```python\nfrom tools.memory import read_graph\nprint(len(read_graph()["entities"]) >= 0)\n```' } };
    }),
  });
  try {
    await ready(c);
    // No call was made (the import fails first), so only the code names the module.
    const r = await run(c, 'from tools.memory import create_entity\ncreate_entity(name="x")\n');
    assert.equal(r.isError, undefined, r.content[0].text);
    assert.equal(r.structuredContent.stdout, 'True\n');
    assert.equal(asked.length, 1);
    assert.match(asked[0], /ImportError: cannot import name 'create_entity'/);
    assert.match(asked[0], /Tools the program uses/);
    for (const fn of ['create_entities', 'read_graph', 'open_nodes']) {
      assert.match(asked[0], new RegExp(`- tools\\.memory\\.${fn}\\(`), `${fn} listed:\n${asked[0]}`);
    }
  } finally {
    await c.close();
    s.cleanup();
  }
});
