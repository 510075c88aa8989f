// tests/conformance/summarize.mjs decides whether the conformance stage passes: these cases show
// it fails on a failed check, a scenario that did not run and a stale expected-failure entry,
// and passes on warnings and listed failures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from './helpers.mjs';

const script = path.join(repoRoot, 'tests', 'conformance', 'summarize.mjs');

function results(dir, scenarios) {
  for (const [name, statuses] of Object.entries(scenarios)) {
    const d = path.join(dir, `server-${name}-2026-01-02T03-04-05-678Z`);
    mkdirSync(d, { recursive: true });
    writeFileSync(path.join(d, 'checks.json'), JSON.stringify(statuses.map((status, i) => ({ id: `${name}-${i}`, status, description: 'd' }))));
  }
}

function summarize(dir, expected, scenarios) {
  const file = path.join(dir, 'expected.txt');
  writeFileSync(file, expected);
  const r = spawnSync(process.execPath, [script, 'fixture', path.join(dir, 'r'), file, ...scenarios], { encoding: 'utf8' });
  return { code: r.status, out: r.stdout };
}

test('the conformance summary fails on failures, missing scenarios and stale entries only', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-conf-'));
  try {
    results(path.join(dir, 'r'), {
      'ping': ['SUCCESS', 'INFO'],
      'tools-list': ['SUCCESS', 'WARNING'],
      'resources-read-text': ['SUCCESS', 'FAILURE'],
    });
    let r = summarize(dir, '', ['ping', 'tools-list']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /conformance fixture: 2\/2 scenarios passed, 0 expected failures, 2 checks, 1 warnings/);
    r = summarize(dir, '', ['ping', 'resources-read-text']);
    assert.equal(r.code, 1);
    assert.match(r.out, /FAIL resources-read-text: resources-read-text-1/);
    r = summarize(dir, '# comment\nresources-read-text  the reason\n', ['ping', 'resources-read-text']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /expected failure resources-read-text: the reason/);
    assert.match(r.out, /1\/2 scenarios passed, 1 expected failures/);
    r = summarize(dir, 'ping  fixed long ago\n', ['ping']);
    assert.equal(r.code, 1);
    assert.match(r.out, /ping: passes but is listed/);
    r = summarize(dir, '', ['ping', 'prompts-list']);
    assert.equal(r.code, 1);
    assert.match(r.out, /prompts-list: did not run/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
