/* sessions.c - execute_code's sessions (issue 12) on the executor's workspace, which
 * keeps the live interpreters behind unguessable handles bound to the client that made them
 * (at most --max-sessions, closed after --session-idle-timeout unused, ended handles
 * remembered to say why); here a session gets its bridge, kept for its life and lent to the
 * cell running, a request takes or closes one, and the result says what became of it. The
 * client is mcp_call_identity: the MCP session and the bearer token (only the token for a
 * stateless 2026-07-28 request). */
#include "internal.h"

#include "pybundle.h"

#include <stdlib.h>
#include <string.h>

/* What a session holds for the engine: the workspace's user data, freed with it. */
struct ptc_xsession {
    exec_ws_session_t *ws;
    ptc_bridge_host_t *host; /* for the session's life; NULL without the tools package */
    bridge_peer_t peer;      /* the host serves the cell running now */
    char run_id[PTC_SESSION_HANDLE_MAX + 8];
};

void ptc__sessions_release(void *user, void *data)
{
    (void)data;
    ptc_xsession_t *x = user;
    ptc_bridge_host_close(x->host, NULL);
    free(x);
}

void ptc__sessions_ended(const char *handle, exec_ws_end_t why, void *claimant, void *data)
{
    ptc_execute_t *ex = data;
    if (why == EXEC_WS_EXPIRED)
        mcp_log(ex->lg, MCP_LOG_INFO, "execute_code: session %.12s... expired", handle);
    if (why == EXEC_WS_OWNER_ENDED)
        mcp_log(ex->lg, MCP_LOG_INFO,
                "execute_code: session %.12s... closed: its client's MCP session ended", handle);
    job_t *j = claimant;
    if (j == NULL) return;
    mcp_call_t *waiting = j->call;
    j->sess = NULL; /* gone with the session */
    ptc__execute_job_free(j);
    /* At shutdown a call waiting belongs to a session that is going away too: no answer. */
    if (waiting != NULL && why == EXEC_WS_OWNER_ENDED)
        mcp_call_finish_text(waiting, true,
                             "The session was closed while this cell ran: its client's MCP "
                             "session ended.");
}

static ptc_xsession_t *session_create(ptc_execute_t *ex, const mcp_identity_t *owner, char *msg,
                                      size_t n)
{
    ptc_xsession_t *x = calloc(1, sizeof *x);
    if (x == NULL) {
        snprintf(msg, n, "The session could not be made: out of memory.");
        return NULL;
    }
    x->ws = exec_ws_session_create(ex->ws, owner->b, x, msg, n);
    if (x->ws == NULL) {
        free(x);
        return NULL;
    }
    x->peer.ex = ex;
    snprintf(x->run_id, sizeof x->run_id, "%.12s", exec_ws_session_handle(x->ws));
    return x;
}

static ptc_xsession_t *session_find(ptc_execute_t *ex, const char *handle,
                                    const mcp_identity_t *owner, char *msg, size_t n)
{
    exec_ws_session_t *s = exec_ws_session_find(ex->ws, handle, owner->b, msg, n);
    return s != NULL ? exec_ws_session_user(s) : NULL;
}

/* The run cursor of the cell running in s when it was handed back as running, else NULL. */
static const char *busy_cursor(const ptc_xsession_t *s)
{
    const job_t *j = exec_ws_session_claimant(s->ws);
    return j != NULL && j->cursor[0] != '\0' ? j->cursor : NULL;
}

bool ptc__session_take(job_t *j, const char *handle)
{
    ptc_execute_t *ex = j->ex;
    mcp_call_t *call = j->call;
    char msg[700];
    bool fresh = strcmp(handle, "new") == 0;
    ptc_xsession_t *s = fresh ? session_create(ex, &j->owner, msg, sizeof msg)
                              : session_find(ex, handle, &j->owner, msg, sizeof msg);
    if (s != NULL && !fresh && exec_ws_session_busy(s->ws)) {
        snprintf(msg, sizeof msg,
                 "Session \"%s\" is busy: a cell is still running in it (cells run one at a "
                 "time). Wait for its result%s%s%s, or cancel it, then send this code again.",
                 handle, busy_cursor(s) ? " (call execute_code with cursor \"" : "",
                 busy_cursor(s) ? busy_cursor(s) : "", busy_cursor(s) ? "\")" : "");
        s = NULL;
    }
    if (s == NULL) {
        ptc__execute_job_free(j);
        mcp_call_finish_text(call, true, "%s", msg);
        return false;
    }
    j->sess = s;
    j->sess_new = fresh;
    exec_ws_session_claim(s->ws, j);
    return true;
}

void ptc__session_close_call(ptc_execute_t *ex, mcp_call_t *call, const cJSON *session, bool extra)
{
    if (session == NULL || extra || strcmp(session->valuestring, "new") == 0) {
        mcp_call_finish_text(call, true,
                             "Invalid arguments: close_session takes the handle of a session "
                             "(session) and nothing else.");
        return;
    }
    char msg[700];
    mcp_identity_t who;
    mcp_call_identity(call, &who);
    ptc_xsession_t *s = session_find(ex, session->valuestring, &who, msg, sizeof msg);
    if (s == NULL) {
        mcp_call_finish_text(call, true, "%s", msg);
        return;
    }
    job_t *running = exec_ws_session_claimant(s->ws);
    ptc__session_close(s, "was closed (close_session)"); /* no on_done for a cell running */
    if (running != NULL) {
        mcp_call_t *waiting = running->call;
        running->sess = NULL;
        ptc__execute_job_free(running);
        if (waiting != NULL)
            mcp_call_finish_text(waiting, true,
                                 "The session was closed (close_session) while this cell ran.");
    }
    snprintf(msg, sizeof msg, "Session \"%s\" closed: its interpreter and files are gone.",
             session->valuestring);
    ptc__execute_finish_message(ex, call, "ok", msg);
}

void ptc__session_close(ptc_xsession_t *s, const char *why)
{
    exec_ws_session_close(s->ws, why); /* frees s (ptc__sessions_release) */
}

const char *ptc__session_handle(const ptc_xsession_t *s)
{
    return exec_ws_session_handle(s->ws);
}

int ptc__session_output(const ptc_xsession_t *s, exec_output_t *out, exec_output_t *err)
{
    return exec_ws_session_output(s->ws, out, err);
}

ptc_bridge_host_t *ptc__session_host(const ptc_xsession_t *s)
{
    return s->host;
}

static void cell_done(exec_session_t *es, const exec_result_t *r, void *user)
{
    (void)es;
    ptc__execute_job_ran(user, r);
}

static void cell_progress(exec_session_t *es, uint64_t elapsed_ms, uint64_t bytes, void *user)
{
    (void)es;
    ptc__execute_job_progress(user, elapsed_ms, bytes);
}

/* The sandbox, at the first cell: with its bridge (when the tools package is ready) and the
 * folders a run would get, kept for the session's life. */
static int start_sandbox(ptc_xsession_t *s, job_t *j)
{
    ptc_execute_t *ex = j->ex;
    exec_session_opts_t so;
    exec_session_opts_init(&so);
    so.bridge_fd = ptc__execute_bridge_new(ex, &s->peer, ptc_repair_loop_journal(j->loop),
                                           s->run_id, &s->host);
    if (so.bridge_fd >= 0) so.ro_dir = ptc_pybundle_cache_root(ex->bundle);
    const char *dirs[EXEC_MAX_PATH_DIRS];
    so.n_path_dirs = env_host_path_dirs(ex->env, dirs, EXEC_MAX_PATH_DIRS);
    so.path_dirs = dirs;
    int rc = exec_ws_session_start(s->ws, &so);
    if (rc < 0) {
        ptc_bridge_host_close(s->host, NULL);
        s->host = NULL;
    }
    return rc;
}

int ptc__session_run(job_t *j, const char *code, uint64_t timeout_ms, char *msg, size_t n)
{
    ptc_xsession_t *s = j->sess;
    int rc = exec_ws_session_sandbox(s->ws) == NULL ? start_sandbox(s, j) : 0;
    if (rc == 0) {
        if (s->host != NULL) ptc_bridge_host_rearm(s->host, ptc_repair_loop_journal(j->loop));
        s->peer.job = j;
        exec_session_callbacks_t cb = {
            .on_done = cell_done, .on_progress = cell_progress, .user = j};
        rc = exec_ws_session_run(s->ws, code, timeout_ms, &cb);
        if (rc == 0) return 0;
        s->peer.job = NULL;
    }
    const char *ended = exec_ws_session_end_reason(s->ws);
    if (rc == EXEC_ESESSIONENDED)
        snprintf(msg, n,
                 "The cell was not run: the session has ended (%s). Start a new one with "
                 "session: \"new\".",
                 ended ? ended : "unknown");
    else
        snprintf(msg, n, "The cell was not run: %s. %s", exec_strerror(rc), exec_error_hint(rc));
    return rc;
}

int ptc__session_cancel(ptc_xsession_t *s)
{
    return exec_ws_session_cancel(s->ws);
}

void ptc__session_bridge_end(job_t *j, outcome_t *o)
{
    ptc_xsession_t *s = j->sess;
    if (s->peer.job == j) s->peer.job = NULL;
    if (s->host != NULL && o != NULL) ptc__execute_bridge_collect(s->host, o);
}

void ptc__session_release(job_t *j)
{
    ptc_xsession_t *s = j->sess;
    j->sess = NULL;
    if (s == NULL) return;
    if (s->peer.job == j) s->peer.job = NULL;
    /* Its first cell never started (refused, cancelled while waiting): nothing to keep. */
    exec_ws_session_release(s->ws, j, j->sess_new); /* may free s */
}

bool ptc__session_result(const job_t *j, cJSON *sc, ptc_buf_t *note)
{
    const ptc_xsession_t *s = j->sess;
    if (s == NULL) return cJSON_AddNullToObject(sc, "session") != NULL;
    const outcome_t *o = &j->last;
    const char *handle = exec_ws_session_handle(s->ws);
    bool ok = cJSON_AddStringToObject(sc, "session", handle) != NULL &&
              cJSON_AddBoolToObject(sc, "interrupted", o->interrupted) != NULL &&
              cJSON_AddBoolToObject(sc, "session_ended", o->session_ended) != NULL;
    const exec_cell_end_t c = {
        .handle = handle,
        .fresh = j->sess_new,
        .cells = exec_ws_session_cells(s->ws),
        .timed_out = o->status == EXEC_STATUS_TIMEOUT,
        .cancelled = o->cancelled,
        .interrupted = o->interrupted,
        .session_ended = o->session_ended,
        .end_reason = exec_ws_session_end_reason(s->ws),
        .timeout_s = (double)o->timeout_ms / 1000.0,
        .max_timeout_s = j->ex->max_timeout_s,
    };
    return ok && exec_cell_end_note(note, &c) == 0;
}
