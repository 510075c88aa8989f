/* ends.c - what goes when a client's MCP session ends (issue 12): HTTP DELETE, a
 * legacy SSE client gone, the session's idle timeout, stdin closed. Everything execute_code
 * made for that client is bound to its identity (mcp_call_identity), which nobody can present
 * again once the session is over; rather than wait for the idle timeouts and TTLs, its
 * workspace sessions (their interpreters) and long runs are ended and its output pages and
 * files dropped.
 *
 * The executor's workspace does the ending (exec_ws_owner_ended); this is the hook that tells
 * it, and the log of what went.
 *
 * Why at the next loop turn and not inside the hook: the library tells the end from wherever
 * the session's last call finished, and that finish may come from code of ours that still
 * holds a job or a session (a cancel answering another request first). A zero timer runs
 * before the loop reads the next request, so a client that sees its DELETE answered already
 * finds the state gone. */
#include "internal.h"

_Static_assert(sizeof(((mcp_identity_t *)0)->b) == EXEC_OWNER_BYTES,
               "the executor's owner bytes are the MCP layer's identity");

void ptc__ends_dropped(size_t pages, size_t files, void *data)
{
    ptc_execute_t *ex = data;
    if (pages + files > 0)
        mcp_log(ex->lg, MCP_LOG_INFO,
                "execute_code: an MCP session ended; dropped %zu output(s) and %zu file(s) kept "
                "for it",
                pages, files);
}

static void on_session_end(const mcp_identity_t *who, void *data)
{
    ptc_execute_t *ex = data;
    int rc = exec_ws_owner_ended(ex->ws, who->b);
    if (rc < 0) /* What it kept still goes by its own idle timeout and TTL. */
        mcp_log(ex->lg, MCP_LOG_WARNING,
                "execute_code: %s: an ended MCP session's workspace sessions and outputs stay "
                "until their idle timeout",
                rc == EXEC_ETOOBIG ? "too many MCP sessions ended at once" : exec_strerror(rc));
}

int ptc__ends_register(ptc_execute_t *ex, mcp_server_t *srv)
{
    ex->srv = srv;
    mcp_server_on_session_end(srv, on_session_end, ex);
    return MCP_OK;
}

void ptc__ends_free(ptc_execute_t *ex)
{
    if (ex->srv != NULL) mcp_server_on_session_end(ex->srv, NULL, NULL);
    ex->srv = NULL;
}
