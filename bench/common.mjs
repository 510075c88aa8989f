// bench/common.mjs: what every Node benchmark here starts with: the repository root, a require()
// that resolves the npm packages pinned under tests/, the command-line options, the check that
// the binaries under test are built, the reference servers' entry points, and the percentile
// helpers. One copy, so that an option or a path changes in one place.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const require = createRequire(path.join(root, 'tests', 'package.json'));

// The release tree's binaries, the default thing each benchmark measures.
export const releasePath = (...parts) => path.join(root, 'build', 'release', ...parts);

// process.argv's options: `opt(name, dflt)` the value after name, `all(name)` every value
// after a repeatable one, `has(name)` a flag.
export function cliArgs(argv = process.argv.slice(2)) {
  return {
    opt(name, dflt) {
      const i = argv.indexOf(name);
      return i >= 0 ? argv[i + 1] : dflt;
    },
    all(name) {
      return argv.flatMap((a, i) => (a === name ? [argv[i + 1]] : []));
    },
    has(name) {
      return argv.includes(name);
    },
  };
}

// Fails early, naming the file, when a binary under test was not built.
export function requireBuilt(files, hint = 'build the release tree first (or pass --bin)') {
  for (const f of files) if (!existsSync(f)) throw new Error(`missing ${f}: ${hint}`);
}

// The entry point of a reference server pinned under tests/ (`server-everything`, ...).
export function referenceServer(name) {
  const js = path.join(path.dirname(require.resolve(`@modelcontextprotocol/${name}/package.json`)), 'dist', 'index.js');
  if (!existsSync(js)) throw new Error(`missing ${js}: run ./bootstrap.sh deps`);
  return js;
}

// The official TypeScript SDK's client classes, from the pinned copy.
export async function sdkClient() {
  const { Client } = await import(require.resolve('@modelcontextprotocol/sdk/client/index.js'));
  const stdio = await import(require.resolve('@modelcontextprotocol/sdk/client/stdio.js'));
  return { Client, StdioClientTransport: stdio.StdioClientTransport, getDefaultEnvironment: stdio.getDefaultEnvironment };
}

export const sleep = (t) => new Promise((r) => setTimeout(r, t));
export const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

// The p-th percentile (nearest rank, p in 0..100) and the median (mean of the middle two).
export function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

// A field of /proc/PID/status in KiB (VmRSS, VmHWM), 0 when absent.
export function statusKiB(pid, field) {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

// /proc/PID/stat's fields after the command name: [0] is field 3 (state), [1] the ppid, [11..14]
// utime, stime, cutime, cstime in clock ticks.
export function statFields(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}
