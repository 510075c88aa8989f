/* framer.c - newline-delimited message framing with a hard size cap. */
#include "mcp.h"

#include <stdlib.h>
#include <string.h>

#define FRAMER_INITIAL_CAP 4096

int mcp_framer_init(mcp_framer_t *f, size_t max, mcp_line_cb cb, void *data)
{
    memset(f, 0, sizeof *f);
    if (max == 0 || cb == NULL) return MCP_EINVAL;
    f->max = max;
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
    if (f->len + n > f->max) {
        f->discarding = f->len + n;
        f->len = 0;
        return MCP_OK;
    }
    if (f->len + n > f->cap) {
        size_t cap = f->cap != 0 ? f->cap : FRAMER_INITIAL_CAP;
        while (cap < f->len + n)
            cap *= 2;
        if (cap > f->max) cap = f->max;
        char *nb = realloc(f->buf, cap);
        if (nb == NULL) {
            /* Drop this line, reported like an oversized one so that the client gets an
             * answer; framing resumes at the next newline. */
            f->discarding = f->len + n > f->max ? f->len + n : f->max + 1;
            f->len = 0;
            return MCP_ENOMEM;
        }
        f->buf = nb;
        f->cap = cap;
    }
    memcpy(f->buf + f->len, p, n);
    f->len += n;
    return MCP_OK;
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
        } else if (nl != NULL && f->len == 0) {
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
                    size_t len = f->len;
                    f->len = 0;
                    deliver(f, f->buf, len);
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
    } else if (f->len > 0) {
        size_t len = f->len;
        f->len = 0;
        deliver(f, f->buf, len);
    }
}

void mcp_framer_close(mcp_framer_t *f)
{
    free(f->buf);
    memset(f, 0, sizeof *f);
}
