// The sandbox's environment through the official SDK client: declared packages (installed from a
// local wheelhouse the test builds with `pip wheel`, so no network is needed; the first test
// serves it on 127.0.0.1 with a delay, so that pip is reliably still busy), read-only and
// reused by a second start; a failing package in results and --check, with and without
// --packages-optional; the user's own helpers importable, searchable, refused through the bridge,
// and a broken helper file reported by name. The SDK validates structuredContent against the
// outputSchema once the tools were listed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { connect, ptcBin, sleep } from './helpers.mjs';

const python = '/usr/bin/python3'; // the sandbox's default interpreter, whose pip installs
const hasPip = spawnSync(python, ['-m', 'pip', '--version']).status === 0;
const skip = hasPip ? false : `${python} has no pip`;

const run = (c, code, extra = {}) =>
  c.client.callTool({ name: 'execute_code', arguments: { code, ...extra } });

// One tiny pure-Python package per name, built into dir/wheelhouse by pip wheel (setuptools of
// the interpreter, no build isolation, no index).
function wheelhouse(dir, packages) {
  const wh = path.join(dir, 'wheelhouse');
  for (const [name, value] of Object.entries(packages)) {
    const src = path.join(dir, `src-${name}`);
    mkdirSync(path.join(src, name), { recursive: true });
    writeFileSync(path.join(src, 'pyproject.toml'),
      `[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n` +
      `[project]\nname = "${name}"\nversion = "1.${value}"\n\n[tool.setuptools]\npackages = ["${name}"]\n`);
    writeFileSync(path.join(src, name, '__init__.py'), `VALUE = ${value}\n`);
    execFileSync(python, ['-m', 'pip', 'wheel', '-q', '--no-deps', '--no-build-isolation', '--no-index', '-w', wh, src],
      { cwd: dir, env: { ...process.env, PIP_CONFIG_FILE: '/dev/null' }, stdio: 'pipe' });
  }
  return wh;
}

// The wheelhouse served over HTTP on 127.0.0.1 (pip takes a local http origin as secure), each
// wheel answered after delayMs: pip then needs at least that long, so a test can rely on the
// build still going (an idle machine's pip finished two local wheels within a short run's wait).
async function slowWheelhouse(wh, delayMs) {
  const server = http.createServer((req, res) => {
    const files = readdirSync(wh);
    const name = decodeURIComponent(new URL(req.url, 'http://x').pathname.slice(1));
    if (name === '') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(files.map((f) => `<a href="${encodeURIComponent(f)}">${f}</a>`).join('\n'));
    } else if (files.includes(name)) {
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.end(readFileSync(path.join(wh, name)));
      }, delayMs);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}/`, close: () => new Promise((resolve) => server.close(resolve)) };
}

async function waitFor(c, re, ms = 60000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (re.test(c.stderr.join(''))) return;
    await sleep(100);
  }
  throw new Error(`no ${re} in the server's log:\n${c.stderr.join('')}`);
}

const description = async (c) => (await c.client.listTools()).tools.find((t) => t.name === 'execute_code').description;

test('declared packages: command line and requirements file, read-only, reused by a second start', { skip }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-env-'));
  let wh = null;
  try {
    wh = await slowWheelhouse(wheelhouse(dir, { ptcpkga: 1, ptcpkgb: 2 }), 1500);
    const req = path.join(dir, 'requirements.txt');
    writeFileSync(req, 'ptcpkgb==1.2\n');
    const env = { XDG_CACHE_HOME: path.join(dir, 'cache') };
    const args = ['--packages', 'ptcpkga>=1,<2', '--requirements', req, '--pip-find-links', wh.url];

    let changed = 0;
    const c = await connect(ptcBin, args, {
      env,
      setup: (client) => client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; }),
    });
    try {
      await c.client.listTools();
      assert.match(await description(c), /being installed .*ptcpkga>=1,<2/);
      // A run during the build waits at most its own timeout (here shorter than pip needs),
      // then says the environment is still being built.
      const early = await run(c, 'print(1)', { timeout_seconds: 0.3 });
      assert.equal(early.isError, true);
      assert.equal(early.structuredContent.status, 'refused');
      assert.equal(early.structuredContent.environment.state, 'building');
      assert.match(early.content[0].text, /still being built \(\d+ s so far\): pip is installing ptcpkga>=1,<2/);
      // A longer one waits for it (bounded to about 10 s) and then sees the packages.
      const first = await run(c, 'import ptcpkga, ptcpkgb\nprint(ptcpkga.VALUE, ptcpkgb.VALUE)', { timeout_seconds: 60 });
      if (first.structuredContent.status === 'refused') {
        // a slow machine: the build took longer than the wait; the result said so
        assert.match(first.content[0].text, /still being built \(\d+ s so far\)/);
        await waitFor(c, /packages installed in/);
      } else {
        assert.equal(first.structuredContent.stdout, '1 2\n');
      }
      await waitFor(c, /packages installed in [\d.]+ s/);
      assert.ok(changed >= 1, 'tools/list_changed after the packages became ready');
      assert.match(await description(c), /ptcpkga 1\.1/);
      assert.doesNotMatch(await description(c), /the standard library is available\./);
      const r = await run(c, 'import ptcpkga, ptcpkgb\nprint(ptcpkga.VALUE, ptcpkgb.VALUE)');
      assert.equal(r.structuredContent.status, 'ok', JSON.stringify(r));
      assert.equal(r.structuredContent.stdout, '1 2\n');
      assert.equal(r.structuredContent.environment, undefined);

      // Nothing in the folder is writable from a run.
      const w = await run(c, [
        'import os, ptcpkga',
        'd = os.path.dirname(ptcpkga.__file__)',
        'for target in (os.path.join(d, "x.py"), os.path.join(d, "..", "new.txt")):',
        '    try:',
        '        open(target, "w").write("x")',
        '        print("WROTE", target)',
        '    except OSError as e:',
        '        print("refused", e.errno)',
        'try:',
        '    os.unlink(ptcpkga.__file__)',
        '    print("REMOVED")',
        'except OSError as e:',
        '    print("refused", e.errno)',
      ].join('\n'));
      assert.equal(w.structuredContent.status, 'ok');
      assert.doesNotMatch(w.structuredContent.stdout, /WROTE|REMOVED/);
      assert.equal(w.structuredContent.stdout.split('\n').filter((l) => l.startsWith('refused')).length, 3);
    } finally {
      await c.close();
    }

    // The second start finds the folder: no pip run, ready at once.
    const c2 = await connect(ptcBin, args, { env });
    try {
      await waitFor(c2, /packages ready \(reused .*no pip run\)/, 20000);
      assert.doesNotMatch(c2.stderr.join(''), /packages installed in/);
      const r = await run(c2, 'import ptcpkga, ptcpkgb\nprint(ptcpkga.VALUE + ptcpkgb.VALUE)');
      assert.equal(r.structuredContent.stdout, '3\n');
    } finally {
      await c2.close();
    }

    // --check: the normalised set, the key, ready, what is installed.
    const check = spawnSync(ptcBin, ['--check', ...args], { env: { ...process.env, ...env }, encoding: 'utf8' });
    assert.match(check.stdout, /packages: ptcpkga>=1,<2, -r /);
    assert.match(check.stdout, /key: [0-9a-f]{12}\n/);
    assert.match(check.stdout, /state: ready/);
    assert.match(check.stdout, /installed: .*ptcpkga 1\.1/);
  } finally {
    await wh?.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a failing package is reported in every result and by --check; the server keeps serving', { skip }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-env-'));
  try {
    const wh = wheelhouse(dir, { ptcpkga: 1 });
    const env = { XDG_CACHE_HOME: path.join(dir, 'cache') };
    const args = ['--packages', 'ptcpkga,ptc-no-such-package', '--pip-find-links', wh];
    const c = await connect(ptcBin, args, { env });
    try {
      await waitFor(c, /installing .* failed/);
      await c.client.listTools();
      assert.match(await description(c), /standard library only \(installing ptc-no-such-package failed\)/);
      for (let i = 0; i < 2; i++) {
        const r = await run(c, 'print("hi")');
        assert.equal(r.isError, true);
        assert.equal(r.structuredContent.status, 'refused');
        assert.equal(r.structuredContent.environment.state, 'failed');
        assert.equal(r.structuredContent.environment.failed_package, 'ptc-no-such-package');
        assert.match(r.structuredContent.environment.pip_tail, /ptc-no-such-package/);
        assert.match(r.content[0].text, /installing ptc-no-such-package failed/);
        assert.match(r.content[0].text, /pip's last lines/);
      }
      // still serving
      const s = await c.client.callTool({ name: 'search_tools', arguments: { query: 'anything' } });
      assert.notEqual(s.isError, true);
    } finally {
      await c.close();
    }
    const check = spawnSync(ptcBin, ['--check', ...args], { env: { ...process.env, ...env }, encoding: 'utf8' });
    assert.match(check.stdout, /packages: ptc-no-such-package, ptcpkga/);
    assert.match(check.stdout, /state: not built yet; the last start failed installing ptc-no-such-package/);

    // --packages-optional: runs go on without the packages, and say so.
    const c2 = await connect(ptcBin, [...args, '--packages-optional'], { env });
    try {
      await waitFor(c2, /installing .* failed/);
      await c2.client.listTools();
      const r = await run(c2, 'print("hi")');
      assert.equal(r.structuredContent.status, 'ok');
      assert.equal(r.structuredContent.stdout, 'hi\n');
      assert.equal(r.structuredContent.environment.optional, true);
      assert.match(r.content[0].text, /went without them \(--packages-optional\)/);
      const imp = await run(c2, 'import ptcpkga');
      assert.equal(imp.structuredContent.status, 'error');
    } finally {
      await c2.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('custom helpers: importable, searchable, private ones absent, refused through the bridge, a broken file named', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-custom-'));
  try {
    const textutils = path.join(dir, 'textutils.py');
    writeFileSync(textutils, [
      'def slugify(text: str, sep: str = "-") -> str:',
      '    """Turns a title into a lower-case URL slug."""',
      '    return sep.join(text.lower().split())',
      '',
      'def _hidden(x: int) -> int:',
      '    """A private helper."""',
      '    return x',
      '',
      'def undocumented(x):',
      '    return x',
      '',
    ].join('\n'));
    const pkg = path.join(dir, 'mathkit');
    mkdirSync(pkg);
    writeFileSync(path.join(pkg, '__init__.py'), 'def double(n: int) -> int:\n    """Doubles an integer."""\n    return 2 * n\n');
    const broken = path.join(dir, 'brokenhelper.py');
    writeFileSync(broken, 'def ok():\n    """fine"""\n\ndef bad(:\n    pass\n');
    const env = { XDG_CACHE_HOME: path.join(dir, 'cache') };
    const args = ['--custom-tools', textutils, '--custom-tools', pkg, '--custom-tools', broken, '--embedder', 'lexical'];
    const c = await connect(ptcBin, args, { env });
    try {
      await waitFor(c, /custom helpers: \d+ function\(s\) listed/, 30000);
      const log = c.stderr.join('');
      assert.ok(log.includes(`${broken}:4`), log);
      assert.match(await description(c), /`import textutils`/);

      const r = await run(c, 'import textutils, mathkit\nprint(textutils.slugify("Hello Big World"), mathkit.double(21))');
      assert.equal(r.structuredContent.status, 'ok', JSON.stringify(r));
      assert.equal(r.structuredContent.stdout, 'hello-big-world 42\n');

      const s = await c.client.callTool({ name: 'search_tools', arguments: { query: 'slug of a title', top_k: 10 } });
      const ids = s.structuredContent.tools.map((t) => t.id);
      assert.ok(ids.includes('custom__textutils.slugify'), JSON.stringify(ids));
      const hit = s.structuredContent.tools.find((t) => t.id === 'custom__textutils.slugify');
      assert.match(hit.description, /slugify\(text: str, sep: str ?= ?'-'\) -> str/);
      assert.match(hit.description, /import textutils; a plain Python call, no bridge/);
      assert.deepEqual(hit.inputSchema.required, ['text']);
      const all = await c.client.callTool({ name: 'search_tools', arguments: { query: 'hidden private undocumented double', top_k: 50 } });
      const allIds = all.structuredContent.tools.map((t) => t.id);
      assert.ok(allIds.includes('custom__mathkit.double'), JSON.stringify(allIds));
      assert.ok(!allIds.some((id) => /_hidden|undocumented|brokenhelper/.test(id)), JSON.stringify(allIds));

      // tools.search lists them; a call through the bridge is refused with what to do instead.
      await waitFor(c, /tools package generated/, 30000);
      // the helpers are imported directly: the description does not offer them as tools.custom
      assert.doesNotMatch(await description(c), /\(modules: [^)]*custom/);
      const code = [
        'import tools',
        'print([t["id"] for t in tools.search("slug of a title", top_k=10)])',
        'try:',
        '    tools.call("custom", "textutils.slugify", text="A B")',
        'except tools.ToolError as e:',
        '    print("REFUSED", e)',
      ].join('\n');
      const b = await run(c, code);
      assert.equal(b.structuredContent.status, 'ok', JSON.stringify(b));
      assert.match(b.structuredContent.stdout, /custom__textutils\.slugify/);
      assert.match(b.structuredContent.stdout, /REFUSED .*import textutils/);
    } finally {
      await c.close();
    }
    const check = spawnSync(ptcBin, ['--check', ...args], { env: { ...process.env, ...env }, encoding: 'utf8' });
    assert.match(check.stdout, /import textutils/);
    assert.match(check.stdout, /custom__textutils\.slugify/);
    assert.ok(check.stdout.includes(`ERROR ${broken}:4`), check.stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--packages splitting and the ptc config keys, seen by --check', { skip }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-env-'));
  try {
    const helper = path.join(dir, 'cfghelper.py');
    writeFileSync(helper, 'def hello(name: str) -> str:\n    """Greets."""\n    return "hi " + name\n');
    const cfg = path.join(dir, 'config.json');
    writeFileSync(cfg, JSON.stringify({ mcpServers: {}, ptc: { packages: ['Foo_Bar[x]>=1,<2, baz', 'qux==3'], 'custom-tools': [helper], 'package-install-timeout': 30 } }));
    const env = { ...process.env, XDG_CACHE_HOME: path.join(dir, 'cache') };
    const r = spawnSync(ptcBin, ['--check', '--config', cfg], { env, encoding: 'utf8' });
    assert.match(r.stdout, /packages: baz, foo-bar\[x\]>=1,<2, qux==3\n/);
    assert.match(r.stdout, /state: not built yet/);
    assert.match(r.stdout, /import cfghelper/);
    assert.match(r.stdout, /custom__cfghelper\.hello: hello\(name: str\) -> str/);
    // A spec whose version clauses, joined, pass the cap is refused by name, not cut.
    const long = spawnSync(ptcBin, ['--check', '--packages', 'foo>=1', '--packages', '<' + '9'.repeat(70000)], { env, encoding: 'utf8' });
    assert.notEqual(long.status, 0);
    assert.match(long.stdout, /--packages: a specifier longer than 65536 bytes/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('start-up pruning: package and helper folders unused for 30 days go, the one in use stays', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-env-'));
  try {
    const cache = path.join(dir, 'cache', 'ptc-mcp');
    const old = (Date.now() / 1000) - 40 * 24 * 3600;
    const twoDays = (Date.now() / 1000) - 2 * 24 * 3600;
    const mk = (name, t) => {
      mkdirSync(path.join(cache, name, 'site'), { recursive: true });
      writeFileSync(path.join(cache, name, 'site', 'f.py'), 'x = 1\n');
      utimesSync(path.join(cache, name), t, t);
    };
    mk('env-' + 'a'.repeat(64), old);
    mk('custom-' + 'b'.repeat(64), old);
    mk('.env-' + 'c'.repeat(64) + '.tmp-XYZ123', twoDays);
    mk('env-' + 'd'.repeat(64), twoDays); // recent enough: kept
    const helper = path.join(dir, 'keepme.py');
    writeFileSync(helper, 'def f():\n    """f."""\n');
    const c = await connect(ptcBin, ['--custom-tools', helper, '--embedder', 'lexical'], { env: { XDG_CACHE_HOME: path.join(dir, 'cache') } });
    try {
      await waitFor(c, /removed 3 package or helper folder/, 20000);
      assert.ok(!existsSync(path.join(cache, 'env-' + 'a'.repeat(64))));
      assert.ok(!existsSync(path.join(cache, 'custom-' + 'b'.repeat(64))));
      assert.ok(existsSync(path.join(cache, 'env-' + 'd'.repeat(64))));
      const r = await run(c, 'import keepme\nprint("ok")');
      assert.equal(r.structuredContent.stdout, 'ok\n');
    } finally {
      await c.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('start-up errors: a bad helper path and a bad spec stop the server with a message', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-env-'));
  try {
    const env = { ...process.env, XDG_CACHE_HOME: path.join(dir, 'cache') };
    const missing = path.join(dir, 'nope.py');
    const r = spawnSync(ptcBin, ['--custom-tools', missing], { env, input: '', encoding: 'utf8' });
    assert.notEqual(r.status, 0);
    assert.ok(r.stderr.includes(missing), r.stderr);
    const r2 = spawnSync(ptcBin, ['--packages', '-e .'], { env, input: '', encoding: 'utf8' });
    assert.notEqual(r2.status, 0);
    assert.match(r2.stderr, /--packages/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
