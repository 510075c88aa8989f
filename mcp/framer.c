/* framer.c - newline-delimited message framing with a hard size cap. */
#include "mcp.h"

#include <stdlib.h>
#include <string.h>

int mcp_framer_init(mcp_framer_t *f, size_t max, mcp_line_cb cb, void *data)
{
    memset(f, 0, sizeof *f);
    if (max == 0 || cb == NULL) return MCP_EINVAL;
    f->max = max;
    ptc_buf_init(&f->line, max);
    f->cb = cb;
    f->data = data;
    return MCP_OK;
}

static void deliver(mcp_framer_t *f, const char *line, size_t len)
{
    if (len > 0 && line[len - 1] == '\r') len--;
    f->cb(f->data, line, len, false);
}

/* Appends to the partial line; past the cap the line switches to discard mode so that an
 * endless line costs no memory. */
static int append(mcp_framer_t *f, const char *p, size_t n)
{
    size_t len = ptc_buf_len(&f->line);
    if (len + n > f->max) {
        f->discarding = len + n;
        ptc_buf_truncate(&f->line, 0);
        return MCP_OK;
    }
    if (ptc_buf_append(&f->line, p, n) < 0) {
        /* Out of memory: drop this line, reported like an oversized one so that the client
         * gets an answer; framing resumes at the next newline. */
        f->discarding = f->max + 1;
        ptc_buf_truncate(&f->line, 0);
        return MCP_ENOMEM;
    }
    return MCP_OK;
}

/* Hands the partial line to the callback, then empties it (its memory is kept for the next).
 * Every owner goes on using the framer after a feed or a finish: the callback never frees it. */
static void deliver_partial(mcp_framer_t *f)
{
    deliver(f, ptc_buf_cstr(&f->line), ptc_buf_len(&f->line));
    ptc_buf_truncate(&f->line, 0);
}

int mcp_framer_feed(mcp_framer_t *f, const char *bytes, size_t n)
{
    int rc = MCP_OK;
    while (n > 0) {
        const char *nl = memchr(bytes, '\n', n);
        size_t chunk = nl != NULL ? (size_t)(nl - bytes) : n;
        if (f->discarding > 0) {
            f->discarding += chunk;
            if (nl != NULL) {
                size_t dropped = f->discarding;
                f->discarding = 0;
                if (dropped > f->max) f->cb(f->data, NULL, dropped, true);
            }
        } else if (nl != NULL && ptc_buf_len(&f->line) == 0) {
            /* Fast path: a whole line inside this read needs no copy. */
            if (chunk > f->max)
                f->cb(f->data, NULL, chunk, true);
            else
                deliver(f, bytes, chunk);
        } else {
            int r = append(f, bytes, chunk);
            if (r < 0) rc = r;
            if (nl != NULL) {
                if (f->discarding > 0) {
                    size_t dropped = f->discarding;
                    f->discarding = 0;
                    if (dropped > f->max) f->cb(f->data, NULL, dropped, true);
                } else {
                    deliver_partial(f);
                }
            }
        }
        if (nl == NULL) break;
        bytes = nl + 1;
        n -= chunk + 1;
    }
    return rc;
}

void mcp_framer_finish(mcp_framer_t *f)
{
    if (f->discarding > 0) {
        if (f->discarding > f->max) f->cb(f->data, NULL, f->discarding, true);
        f->discarding = 0;
    } else if (ptc_buf_len(&f->line) > 0) {
        deliver_partial(f);
    }
}

void mcp_framer_close(mcp_framer_t *f)
{
    ptc_buf_free(&f->line);
    memset(f, 0, sizeof *f);
}
