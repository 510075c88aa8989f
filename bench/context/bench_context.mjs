// bench/context: how many bytes (and tokens, estimated as bytes / 4) reach the model for a task
// done by calling the tools directly one by one, versus one execute_code call doing the same
// work. Both paths really run, in the same run, against real servers (server-memory and
// server-everything from tests/node_modules): the direct path through the official SDK client
// to the downstream servers, the code path through the SDK client to ptc-mcp with the same
// servers behind --config. Each task's answer must be identical on both paths.
//
// What is counted, per tool call: the request (tool name and arguments, as JSON) and the
// result's content as a client puts it in the context (the text of text items, the JSON of any
// other item; structuredContent, which repeats the text, is not counted). For execute_code that
// is the code and the returned text. Not counted on either side: the tool list and schemas, the
// task prompt, and the model's final answer.
//
// usage: node bench/context/bench_context.mjs [--bin PATH] [--verbose]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cliArgs, referenceServer, releasePath, requireBuilt, sdkClient, sleep } from '../common.mjs';

const { Client, StdioClientTransport, getDefaultEnvironment } = await sdkClient();
const { opt, has } = cliArgs();
const verbose = has('--verbose');
const bin = opt('--bin', releasePath('ptc-mcp'));
requireBuilt([bin]);
const everythingJs = referenceServer('server-everything');
const memoryJs = referenceServer('server-memory');

// ---- deterministic task data -------------------------------------------------------------
// A small seeded generator (xorshift32) so that every run uses the same data.
let seed = 20261129;
const rand = (n) => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) % n;
};
const FIRST = ['Ada', 'Alan', 'Grace', 'Linus', 'Barbara', 'Dennis', 'Ken', 'Margaret', 'Edsger', 'Donald',
  'Frances', 'John', 'Radia', 'Tim', 'Sophie', 'Niklaus', 'Leslie', 'Shafi', 'Whitfield', 'Karen'];
const LAST = ['Lovelace', 'Turing', 'Hopper', 'Torvalds', 'Liskov', 'Ritchie', 'Thompson', 'Hamilton',
  'Dijkstra', 'Knuth', 'Allen', 'McCarthy', 'Perlman', 'Berners', 'Wilson', 'Wirth'];
const COMPANIES = ['Acme', 'Globex', 'Initech', 'Umbrella', 'Hooli'];
const CITIES = ['Oslo', 'Lyon', 'Porto', 'Graz', 'Turku', 'Ghent'];
const RELS = ['knows', 'works_with', 'mentors'];

const people = [];
while (people.length < 30) {
  const name = `${FIRST[rand(FIRST.length)]} ${LAST[rand(LAST.length)]}`;
  if (!people.some((p) => p[0] === name)) people.push([name, COMPANIES[rand(COMPANIES.length)], CITIES[rand(CITIES.length)]]);
}
const relations = [];
while (relations.length < 30) {
  const a = people[rand(30)][0], b = people[rand(30)][0];
  if (a !== b && !relations.some((r) => r[0] === a && r[1] === b)) relations.push([a, b, RELS[rand(RELS.length)]]);
}
const rows = Array.from({ length: 50 }, () => [rand(1000), rand(1000)]);
const invoices = Array.from({ length: 40 }, (_, i) => ({
  name: `INV-${String(i + 1).padStart(3, '0')}`,
  entityType: 'invoice',
  observations: [`customer: ${COMPANIES[rand(COMPANIES.length)]}`, `amount: ${50 + rand(950)}`,
    `status: ${['paid', 'open', 'overdue'][rand(3)]}`, `due: 2026-${String(1 + rand(12)).padStart(2, '0')}-${String(1 + rand(28)).padStart(2, '0')}`],
}));

// The summary both paths must reach from the graph the memory server returns.
function summarize(graph) {
  const persons = graph.entities.filter((e) => e.entityType === 'person');
  const degree = new Map(persons.map((p) => [p.name, 0]));
  for (const r of graph.relations) {
    degree.set(r.from, degree.get(r.from) + 1);
    degree.set(r.to, degree.get(r.to) + 1);
  }
  const best = (m) => [...m.entries()].sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1))[0];
  const employers = new Map();
  for (const p of persons) {
    const c = p.observations.find((o) => o.startsWith('works at ')).slice(9);
    employers.set(c, (employers.get(c) ?? 0) + 1);
  }
  const [who, deg] = best(degree), [co, n] = best(employers);
  return `${persons.length} people, ${graph.relations.length} relations\nmost connected: ${who} (${deg} relations)\nlargest employer: ${co} (${n} people)`;
}

// ---- counting ----------------------------------------------------------------------------
const bytes = (s) => Buffer.byteLength(s, 'utf8');
function resultText(r) {
  return r.content.map((c) => (c.type === 'text' ? c.text : JSON.stringify(c))).join('\n');
}
class Meter {
  constructor() { this.calls = 0; this.bytes = 0; }
  async call(client, name, args) {
    const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 120000 });
    if (r.isError) throw new Error(`${name} failed: ${resultText(r)}`);
    this.calls += 1;
    this.bytes += bytes(JSON.stringify({ name, arguments: args })) + bytes(resultText(r));
    return r;
  }
}
const data = (r) => r.structuredContent ?? JSON.parse(r.content[0].text);

// ---- servers -----------------------------------------------------------------------------
const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-context-'));
const invoiceLines = invoices.map((e) => JSON.stringify({ type: 'entity', ...e })).join('\n');
for (const side of ['direct', 'ptc']) {
  writeFileSync(path.join(dir, `${side}-invoices.jsonl`), invoiceLines); // the "database" the agent queries
}
const servers = (side) => ({
  everything: { command: process.execPath, args: [everythingJs, 'stdio'] },
  memory: { command: process.execPath, args: [memoryJs], env: { MEMORY_FILE_PATH: path.join(dir, `${side}-memory.jsonl`) } },
  invoices: { command: process.execPath, args: [memoryJs], env: { MEMORY_FILE_PATH: path.join(dir, `${side}-invoices.jsonl`) } },
});
async function connect(command, argv, env = {}) {
  const client = new Client({ name: 'bench-context', version: '1' });
  await client.connect(new StdioClientTransport({ command, args: argv, stderr: 'ignore', env: { ...getDefaultEnvironment(), ...env } }));
  return client;
}
const direct = {};
for (const [k, v] of Object.entries(servers('direct'))) direct[k] = await connect(v.command, v.args, v.env);
const config = path.join(dir, 'ptc-servers.json');
writeFileSync(config, JSON.stringify({ mcpServers: servers('ptc') }));
const ptc = await connect(bin, ['--config', config, '--log-level', 'warning'], { XDG_CACHE_HOME: path.join(dir, 'cache') });
for (let i = 0, ok = false; !ok; i++) {
  if (i === 300) throw new Error('the downstream servers did not come up behind ptc-mcp');
  const d = (await ptc.listTools()).tools.find((t) => t.name === 'execute_code').description;
  ok = /modules: /.test(d) && ['everything', 'memory', 'invoices'].every((m) => d.includes(m));
  if (!ok) await sleep(100);
}
async function executeCode(code) {
  const m = new Meter();
  const r = await m.call(ptc, 'execute_code', { code });
  if (r.structuredContent?.status !== 'ok') throw new Error(`execute_code failed: ${resultText(r)}`);
  return { answer: r.structuredContent.stdout.trim(), meter: m, toolCalls: r.structuredContent.tool_calls };
}

// ---- tasks -------------------------------------------------------------------------------
const tasks = [
  {
    name: 'knowledge graph: 30 people + 30 relations, 3-line summary',
    async direct() {
      const m = new Meter();
      for (const [name, company, city] of people) {
        await m.call(direct.memory, 'create_entities', { entities: [{ name, entityType: 'person', observations: [`works at ${company}`, `lives in ${city}`] }] });
      }
      for (const [from, to, relationType] of relations) {
        await m.call(direct.memory, 'create_relations', { relations: [{ from, to, relationType }] });
      }
      const g = data(await m.call(direct.memory, 'read_graph', {}));
      return { answer: summarize(g), meter: m };
    },
    code: () => [
      'from collections import Counter',
      'from tools.memory import create_entities, create_relations, read_graph',
      `people = ${JSON.stringify(people)}`,
      `rels = ${JSON.stringify(relations)}`,
      'create_entities(entities=[{"name": n, "entityType": "person", "observations": ["works at " + c, "lives in " + t]} for n, c, t in people])',
      'create_relations(relations=[{"from": a, "to": b, "relationType": r} for a, b, r in rels])',
      'g = read_graph()',
      'ps = [e for e in g["entities"] if e["entityType"] == "person"]',
      'deg = Counter({p["name"]: 0 for p in ps})',
      'for r in g["relations"]:',
      '    deg[r["from"]] += 1',
      '    deg[r["to"]] += 1',
      'emp = Counter(next(o[9:] for o in p["observations"] if o.startswith("works at ")) for p in ps)',
      'best = lambda c: sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0]',
      'who, d = best(deg)',
      'co, n = best(emp)',
      'print(f"{len(ps)} people, {len(g[\'relations\'])} relations")',
      'print(f"most connected: {who} ({d} relations)")',
      'print(f"largest employer: {co} ({n} people)")',
    ].join('\n'),
  },
  {
    name: 'sum a column of 50 rows computed by get-sum',
    async direct() {
      const m = new Meter();
      let total = 0;
      for (const [a, b] of rows) {
        const r = await m.call(direct.everything, 'get-sum', { a, b });
        total += Number(resultText(r).match(/is (-?[\d.]+)\.$/)[1]);
      }
      return { answer: String(total), meter: m };
    },
    code: () => [
      'from tools.everything import get_sum',
      `rows = ${JSON.stringify(rows)}`,
      'print(sum(int(get_sum(a=a, b=b).rsplit(" ", 1)[1].rstrip(".")) for a, b in rows))',
    ].join('\n'),
  },
  {
    name: 'which of 40 invoices are overdue and over 500',
    async direct() {
      const m = new Meter();
      const hits = [];
      for (let i = 1; i <= 40; i++) {
        const id = `INV-${String(i).padStart(3, '0')}`;
        const e = data(await m.call(direct.invoices, 'open_nodes', { names: [id] })).entities[0];
        const f = Object.fromEntries(e.observations.map((o) => o.split(': ')));
        if (f.status === 'overdue' && Number(f.amount) > 500) hits.push(id);
      }
      return { answer: hits.join(' '), meter: m };
    },
    code: () => [
      'from tools.invoices import open_nodes',
      'hits = []',
      'for i in range(1, 41):',
      '    e = open_nodes(names=[f"INV-{i:03d}"])["entities"][0]',
      '    f = dict(o.split(": ", 1) for o in e["observations"])',
      '    if f["status"] == "overdue" and int(f["amount"]) > 500:',
      '        hits.append(e["name"])',
      'print(" ".join(hits))',
    ].join('\n'),
  },
];

// ---- run -----------------------------------------------------------------------------------
const tok = (b) => Math.round(b / 4);
const rowsOut = [];
let failed = false;
try {
  for (const t of tasks) {
    const d = await t.direct();
    const c = await executeCode(t.code());
    if (d.answer !== c.answer) {
      failed = true;
      console.error(`${t.name}: answers differ\n  direct: ${JSON.stringify(d.answer)}\n  code:   ${JSON.stringify(c.answer)}`);
    }
    if (verbose) console.log(`--- ${t.name}\n${c.answer}\n`);
    rowsOut.push({ name: t.name, d, c });
  }
} finally {
  await Promise.all([...Object.values(direct), ptc].map((c) => c.close()));
  rmSync(dir, { recursive: true, force: true });
}
console.log('bench/context: bytes (tokens ~ bytes/4) reaching the model, direct tool calls vs one execute_code');
console.log('task                                                       direct calls  direct bytes (tok)   code bytes (tok)  ratio');
let dt = 0, ct = 0;
for (const { name, d, c } of rowsOut) {
  dt += d.meter.bytes;
  ct += c.meter.bytes;
  console.log(`${name.padEnd(58)} ${String(d.meter.calls).padStart(12)}  ${String(d.meter.bytes).padStart(7)} (${String(tok(d.meter.bytes)).padStart(6)})  ` +
    `${String(c.meter.bytes).padStart(7)} (${String(tok(c.meter.bytes)).padStart(5)})  ${(d.meter.bytes / c.meter.bytes).toFixed(1).padStart(5)}x`);
}
console.log(`${'overall'.padEnd(58)} ${String(rowsOut.reduce((s, r) => s + r.d.meter.calls, 0)).padStart(12)}  ${String(dt).padStart(7)} (${String(tok(dt)).padStart(6)})  ` +
  `${String(ct).padStart(7)} (${String(tok(ct)).padStart(5)})  ${(dt / ct).toFixed(1).padStart(5)}x`);
console.log(failed ? 'answers: DIFFER (see above)' : 'answers: identical on both paths for every task');
process.exitCode = failed ? 1 : 0;
