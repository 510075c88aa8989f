/* execute_ends.c - what goes when a client's MCP session ends (issue 12): HTTP DELETE, a
 * legacy SSE client gone, the session's idle timeout, stdin closed. Everything execute_code
 * made for that client is bound to its identity (mcp_call_identity), which nobody can present
 * again once the session is over; rather than wait for the idle timeouts and TTLs, its
 * workspace sessions (their interpreters) and long runs are ended and its output pages and
 * files dropped.
 *
 * Why at the next loop turn and not inside the hook: the library tells the end from wherever
 * the session's last call finished, and that finish may come from code of ours that still
 * holds a job or a session (a cancel answering another request first). A zero timer runs
 * before the loop reads the next request, so a client that sees its DELETE answered already
 * finds the state gone. */
#include "execute_internal.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(((mcp_identity_t *)0)->b) == EXEC_OWNER_BYTES,
               "the executor's owner bytes are the MCP layer's identity");

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

static void drop_owner(ptc_execute_t *ex, const mcp_identity_t *who)
{
    /* Long runs first: a session's cell handed back as running leaves its session idle. */
    ptc__longrun_close_owner(ex, who);
    ptc__sessions_close_owner(ex->sessions, who);
    size_t pages = exec_pages_drop_owner(ex->pages, who->b);
    size_t files = exec_filestore_drop_owner(ex->files, who->b);
    if (pages + files > 0)
        mcp_log(ex->lg, MCP_LOG_INFO,
                "execute_code: an MCP session ended; dropped %zu output(s) and %zu file(s) kept "
                "for it",
                pages, files);
}

static void on_ends(uv_timer_t *t)
{
    ptc_execute_t *ex = t->data;
    /* One at a time from the end: dropping may end more sessions (none today), which append. */
    while (ex->n_ends > 0) {
        mcp_identity_t who = ex->ends[--ex->n_ends];
        drop_owner(ex, &who);
    }
}

static void on_session_end(const mcp_identity_t *who, void *data)
{
    ptc_execute_t *ex = data;
    if (ex->n_ends == ex->cap_ends) {
        size_t cap = ex->cap_ends ? 2 * ex->cap_ends : 8;
        mcp_identity_t *v = realloc(ex->ends, cap * sizeof *v);
        if (v == NULL) {
            /* What it kept still goes by its own idle timeout and TTL. */
            mcp_log(ex->lg, MCP_LOG_WARNING,
                    "execute_code: out of memory: an ended MCP session's workspace sessions and "
                    "outputs stay until their idle timeout");
            return;
        }
        ex->ends = v;
        ex->cap_ends = cap;
    }
    ex->ends[ex->n_ends++] = *who;
    uv_timer_start(ex->ends_timer, on_ends, 0, 0);
}

int ptc__ends_register(ptc_execute_t *ex, mcp_server_t *srv)
{
    if (ex->ends_timer == NULL) {
        uv_timer_t *t = calloc(1, sizeof *t);
        if (t == NULL || uv_timer_init(ex->loop, t) != 0) {
            free(t);
            return MCP_ENOMEM;
        }
        t->data = ex;
        /* It must not keep the loop alive on its own (the server's exit waits for the loop). */
        uv_unref((uv_handle_t *)t);
        ex->ends_timer = t;
    }
    ex->srv = srv;
    mcp_server_on_session_end(srv, on_session_end, ex);
    return MCP_OK;
}

void ptc__ends_free(ptc_execute_t *ex)
{
    if (ex->srv != NULL) mcp_server_on_session_end(ex->srv, NULL, NULL);
    ex->srv = NULL;
    if (ex->ends_timer != NULL) uv_close((uv_handle_t *)ex->ends_timer, timer_closed);
    ex->ends_timer = NULL;
    free(ex->ends);
    ex->ends = NULL;
    ex->n_ends = ex->cap_ends = 0;
}
