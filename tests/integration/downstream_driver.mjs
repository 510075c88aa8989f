// The C driver of mcp/'s downstream client (tests/fixtures/downstream_driver.c) as the
// downstream tests use it: commands and answers as JSON lines, plus state and tools events.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildDir, assertCleanExit } from './helpers.mjs';

export const driverBin = path.join(buildDir, 'mcp_downstream_driver');

// config(dir) gives the Claude Desktop config; dir is a fresh folder removed by close().
export class Driver {
  constructor(config, args = []) {
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'ptc-downstream-'));
    this.configPath = path.join(this.dir, 'config.json');
    writeFileSync(this.configPath, JSON.stringify(config(this.dir)));
    this.proc = spawn(driverBin, [this.configPath, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.buf = '';
    this.lines = [];
    this.waiters = [];
    this.stderr = '';
    this.nextId = 1;
    this.exit = new Promise((resolve) => this.proc.on('close', (code, signal) => resolve({ code, signal })));
    this.proc.stdout.on('data', (d) => {
      this.buf += d.toString();
      let i;
      while ((i = this.buf.indexOf('\n')) >= 0) {
        const msg = JSON.parse(this.buf.slice(0, i));
        this.buf = this.buf.slice(i + 1);
        this.lines.push(msg);
        this.waiters = this.waiters.filter((w) => !w(msg));
      }
    });
    this.proc.stderr.on('data', (d) => { this.stderr += d.toString(); });
  }

  // Waits for a line (seen already or coming) that matches pred.
  next(pred, timeoutMs = 30000) {
    const found = this.lines.find(pred);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no matching line in ${timeoutMs} ms; lines: ${JSON.stringify(this.lines)}\nstderr:\n${this.stderr}`)), timeoutMs);
      this.waiters.push((m) => {
        if (!pred(m)) return false;
        clearTimeout(t);
        resolve(m);
        return true;
      });
    });
  }

  // Resolves with the number of matching events seen so far and a wait for the next one.
  nextEvent(pred) {
    const seen = this.lines.filter(pred).length;
    let count = 0;
    return this.next((m) => pred(m) && ++count > seen);
  }

  async cmd(obj) {
    const id = this.nextId++;
    this.proc.stdin.write(JSON.stringify({ id, ...obj }) + '\n');
    return this.next((m) => m.id === id);
  }

  ready(server) {
    return this.next((m) => m.event === 'state' && m.server === server && m.state === 'ready');
  }

  async close() {
    this.proc.stdin.end();
    const how = await this.exit;
    rmSync(this.dir, { recursive: true, force: true });
    assertCleanExit(how, this.stderr);
  }
}
