// Reads the conformance suite's result folders (one per scenario, each with checks.json) and
// decides: a scenario fails when any of its checks is FAILURE. Compares with the expected
// failures file and prints the counts. Exit 0 when every scenario passed or failed as expected,
// 1 on an unexpected failure, a scenario that did not run, or a stale expected-failure entry.
//
// Usage: node summarize.mjs LABEL RESULTS_DIR EXPECTED_FAILURES_FILE SCENARIO...
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';

const [label, dir, expectedFile, ...scenarios] = process.argv.slice(2);

// "scenario-name   reason ..." per line; # starts a comment; blank lines are ignored.
const expected = new Map();
if (existsSync(expectedFile)) {
  for (const raw of readFileSync(expectedFile, 'utf8').split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) continue;
    const [name, ...why] = line.split(/\s+/);
    expected.set(name, why.join(' ') || '(no reason given)');
  }
}

// Folder names are "server-<scenario>-<ISO timestamp with : and . replaced by ->".
const results = new Map();
for (const d of existsSync(dir) ? readdirSync(dir) : []) {
  const m = /^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/.exec(d);
  const file = path.join(dir, d, 'checks.json');
  if (!m || !existsSync(file)) continue;
  results.set(m[1], JSON.parse(readFileSync(file, 'utf8')));
}

let passed = 0, expectedFail = 0, checks = 0, warnings = 0;
const problems = [];
for (const s of scenarios) {
  const c = results.get(s);
  if (!c) {
    problems.push(`${s}: did not run (no results)`);
    continue;
  }
  checks += c.filter((x) => x.status === 'SUCCESS' || x.status === 'FAILURE').length;
  warnings += c.filter((x) => x.status === 'WARNING').length;
  const failures = c.filter((x) => x.status === 'FAILURE');
  for (const w of c.filter((x) => x.status === 'WARNING')) console.log(`  warning ${s}: ${w.id}: ${w.errorMessage ?? w.description}`);
  if (failures.length === 0) {
    passed++;
    if (expected.has(s)) problems.push(`${s}: passes but is listed in ${path.basename(expectedFile)}; remove it`);
  } else if (expected.has(s)) {
    expectedFail++;
    console.log(`  expected failure ${s}: ${expected.get(s)}`);
  } else {
    for (const f of failures) problems.push(`${s}: ${f.id}: ${f.errorMessage ?? f.description}`);
  }
}
for (const p of problems) console.log(`  FAIL ${p}`);
console.log(`conformance ${label}: ${passed}/${scenarios.length} scenarios passed, ${expectedFail} expected failures, ` +
  `${checks} checks, ${warnings} warnings`);
process.exit(problems.length ? 1 : 0);
