// execute_code's output pages as the tests read them: the paged program (500 numbered lines on
// stdout, one on stderr) and a walk along the cursors with any SDK's client.
import assert from 'node:assert/strict';

export const PAGED_CODE = 'import sys\nfor i in range(500):\n    print(f"{i:05d}")\nprint("tail", file=sys.stderr)';
export const PAGED_STDOUT = Array.from({ length: 500 }, (_, i) => String(i).padStart(5, '0') + '\n').join('');

// Follows next_cursor from a first result's structuredContent; every page must be `ok`.
// Returns the stdout and stderr put together and the number of pages (the first included).
export async function followPages(client, first, maxPages = 100) {
  let out = first.stdout;
  let err = first.stderr;
  let cursor = first.next_cursor;
  let pages = 1;
  while (cursor) {
    assert.ok(pages < maxPages, `the cursors do not end after ${pages} pages`);
    const p = await client.callTool({ name: 'execute_code', arguments: { cursor } });
    assert.equal(p.structuredContent.status, 'ok', JSON.stringify(p.content));
    out += p.structuredContent.stdout;
    err += p.structuredContent.stderr;
    cursor = p.structuredContent.next_cursor;
    pages++;
  }
  return { out, err, pages };
}
