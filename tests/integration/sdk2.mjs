// Connecting the official TypeScript SDK 2.x client (@modelcontextprotocol/client, pinned) to
// ptc-mcp over stdio (a child process whose stderr is kept) or Streamable HTTP (a running server).
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { ptcBin } from './helpers.mjs';

// Connects client: transport 'stdio' spawns ptc-mcp with args and env (added to this process's),
// else url is the HTTP server's. Resolves to stderr(), the child's stderr so far ('' over HTTP).
export async function connectSdk2(client, transport, { args = [], env, url } = {}) {
  if (transport !== 'stdio') {
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    return () => '';
  }
  const t = new StdioClientTransport({ command: ptcBin, args, env: { ...process.env, ...env }, stderr: 'pipe' });
  let err = '';
  t.stderr?.on('data', (d) => { err += d.toString(); });
  await client.connect(t);
  return () => err;
}
