/* execute_sessions.c - execute_code's sessions (issue 12): live interpreters (exec_session_t)
 * behind unguessable handles bound to the client that made them, at most --max-sessions at
 * once, closed after --session-idle-timeout unused; each keeps one bridge for its life and
 * lends it to the cell running. Ended handles are remembered (a bounded ring) so that a later
 * use says why, and only to the client that owned them. The client is mcp_call_identity: the
 * MCP session and the bearer token (only the token for a stateless 2026-07-28 request). */
#include "execute_internal.h"

#include "pybundle.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define SESSION_RANDOM_BYTES 16 /* 128 bits */
/* The idle check runs this often (a quarter of the timeout, within these bounds). */
#define SESSION_SWEEP_MIN_MS 200u
#define SESSION_SWEEP_MAX_MS 30000u

struct ptc_xsession {
    ptc_xsession_t *prev, *next;
    ptc_xsessions_t *t;
    char handle[PTC_SESSION_HANDLE_MAX];
    mcp_identity_t owner;
    exec_session_t *es;      /* NULL until the first cell starts it */
    ptc_bridge_host_t *host; /* for the session's life; NULL without the tools package */
    bridge_peer_t peer;      /* the host serves the cell running now */
    job_t *job;              /* the request using the session, or NULL when idle */
    uint64_t created_ms;
    unsigned long cells;
    char run_id[PTC_SESSION_HANDLE_MAX + 8];
};

typedef struct gone {
    char handle[PTC_SESSION_HANDLE_MAX];
    mcp_identity_t owner;
    char why[200];
} gone_t;

struct ptc_xsessions {
    ptc_execute_t *ex;
    size_t max, live;
    uint64_t idle_ms;
    ptc_xsession_t *list;
    uv_timer_t *sweep; /* running while sessions live */
    gone_t gone[PTC_SESSIONS_GONE_KEPT];
    unsigned gone_next;
};

bool ptc__execute_random_id(const char *prefix, char buf[PTC_SESSION_HANDLE_MAX])
{
    unsigned char rnd[SESSION_RANDOM_BYTES];
    size_t k = strlen(prefix);
    if (k + 2 * sizeof rnd >= PTC_SESSION_HANDLE_MAX ||
        getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return false;
    memcpy(buf, prefix, k);
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(buf + k + 2 * i, 3, "%02x", rnd[i]);
    return true;
}

static void sweep_closed(uv_handle_t *h)
{
    free(h);
}

static void remember(ptc_xsessions_t *t, const ptc_xsession_t *s, const char *why)
{
    gone_t *g = &t->gone[t->gone_next++ % PTC_SESSIONS_GONE_KEPT];
    snprintf(g->handle, sizeof g->handle, "%s", s->handle);
    g->owner = s->owner;
    snprintf(g->why, sizeof g->why, "%s", why);
}

static void session_free(ptc_xsession_t *s)
{
    ptc_xsessions_t *t = s->t;
    if (s->prev)
        s->prev->next = s->next;
    else
        t->list = s->next;
    if (s->next) s->next->prev = s->prev;
    t->live--;
    exec_session_close(s->es); /* a running cell's on_done does not fire */
    ptc_bridge_host_close(s->host, NULL);
    if (t->live == 0 && t->sweep != NULL) uv_timer_stop(t->sweep);
    free(s);
}

static uint64_t last_used(const ptc_xsession_t *s)
{
    return s->es != NULL ? exec_session_last_used(s->es) : s->created_ms;
}

static void on_sweep(uv_timer_t *timer)
{
    ptc_xsessions_t *t = timer->data;
    uint64_t now = uv_now(t->ex->loop);
    ptc_xsession_t *next;
    for (ptc_xsession_t *s = t->list; s != NULL; s = next) {
        next = s->next;
        if (s->job != NULL) continue;
        const char *ended = s->es != NULL ? exec_session_end_reason(s->es) : NULL;
        char why[200];
        if (ended != NULL) {
            snprintf(why, sizeof why, "has ended (%s)", ended);
        } else if (now - last_used(s) >= t->idle_ms) {
            snprintf(why, sizeof why,
                     "expired: it was unused for %.0f s (--session-idle-timeout) and was closed",
                     (double)t->idle_ms / 1000.0);
            mcp_log(t->ex->lg, MCP_LOG_INFO, "execute_code: session %.12s... expired", s->handle);
        } else {
            continue;
        }
        remember(t, s, why);
        session_free(s);
    }
}

int ptc__sessions_new(ptc_execute_t *ex, size_t max, uint64_t idle_ms, ptc_xsessions_t **out)
{
    *out = NULL;
    ptc_xsessions_t *t = calloc(1, sizeof *t);
    uv_timer_t *timer = t != NULL ? calloc(1, sizeof *timer) : NULL;
    if (timer == NULL || uv_timer_init(ex->loop, timer) != 0) {
        free(timer);
        free(t);
        return MCP_ENOMEM;
    }
    timer->data = t;
    t->sweep = timer;
    t->ex = ex;
    t->max = max;
    t->idle_ms = idle_ms > 0 ? idle_ms : 1;
    *out = t;
    return MCP_OK;
}

/* Ends s and the job of a cell running in it; returns the request that waited on that cell
 * (NULL: none), for the caller to answer once the tables are consistent again. */
static mcp_call_t *end_with_job(ptc_xsession_t *s)
{
    job_t *j = s->job;
    mcp_call_t *waiting = NULL;
    if (j != NULL) {
        waiting = j->call;
        j->sess = NULL;
        s->job = NULL;
        s->peer.job = NULL;
        ptc__execute_job_free(j);
    }
    session_free(s);
    return waiting;
}

void ptc__sessions_close_all(ptc_xsessions_t *t)
{
    if (t == NULL) return;
    /* A call waiting belongs to a session that is going away too: no answer. */
    while (t->list != NULL)
        (void)end_with_job(t->list);
}

void ptc__sessions_close_owner(ptc_xsessions_t *t, const mcp_identity_t *owner)
{
    if (t == NULL) return;
    for (;;) {
        /* From the start each time: answering a request below may change the list. */
        ptc_xsession_t *s = t->list;
        while (s != NULL && !mcp_identity_equal(&s->owner, owner))
            s = s->next;
        if (s == NULL) return;
        mcp_log(t->ex->lg, MCP_LOG_INFO,
                "execute_code: session %.12s... closed: its client's MCP session ended", s->handle);
        remember(t, s, "was closed: the MCP session that made it ended");
        mcp_call_t *waiting = end_with_job(s);
        if (waiting != NULL)
            mcp_call_finish_text(waiting, true,
                                 "The session was closed while this cell ran: its client's MCP "
                                 "session ended.");
    }
}

void ptc__sessions_free(ptc_xsessions_t *t)
{
    if (t == NULL) return;
    ptc__sessions_close_all(t);
    uv_close((uv_handle_t *)t->sweep, sweep_closed);
    free(t);
}

/* Names the oldest idle session in a message about the limit, without handing one client
 * another's handle. */
static void limit_message(const ptc_xsessions_t *t, const mcp_identity_t *owner, char *msg,
                          size_t n)
{
    const ptc_xsession_t *oldest = NULL;
    for (const ptc_xsession_t *s = t->list; s != NULL; s = s->next)
        if (s->job == NULL && (oldest == NULL || last_used(s) < last_used(oldest))) oldest = s;
    int k = snprintf(msg, n,
                     "Too many sessions: %zu are open, the most this server keeps "
                     "(--max-sessions %zu). ",
                     t->live, t->max);
    if (k < 0 || (size_t)k >= n) return;
    double idle = oldest ? (double)(uv_now(t->ex->loop) - last_used(oldest)) / 1000.0 : 0;
    if (oldest == NULL)
        snprintf(msg + k, n - (size_t)k,
                 "Every one is running a cell now; try again when one is done, or run this "
                 "code without session (a one-shot run).");
    else if (mcp_identity_equal(&oldest->owner, owner))
        snprintf(msg + k, n - (size_t)k,
                 "The oldest idle one is \"%s\" (unused for %.0f s): end it with "
                 "{\"session\": \"%s\", \"close_session\": true} and try again, or run this code "
                 "in it.",
                 oldest->handle, idle, oldest->handle);
    else
        snprintf(msg + k, n - (size_t)k,
                 "The oldest idle one (unused for %.0f s) belongs to another client; it is closed "
                 "after %.0f s unused (--session-idle-timeout). Close one of yours with "
                 "{\"session\": HANDLE, \"close_session\": true}, or run without session.",
                 idle, (double)t->idle_ms / 1000.0);
}

ptc_xsession_t *ptc__session_create(ptc_xsessions_t *t, const mcp_identity_t *owner, char *msg,
                                    size_t n)
{
    if (t->live >= t->max) {
        on_sweep(t->sweep); /* an expired or dead one may free a place */
        if (t->live >= t->max) {
            limit_message(t, owner, msg, n);
            return NULL;
        }
    }
    ptc_xsession_t *s = calloc(1, sizeof *s);
    if (s == NULL || !ptc__execute_random_id("ses-", s->handle)) {
        snprintf(msg, n, "The session could not be made: %s.",
                 s == NULL ? "out of memory" : "no random bytes for its handle");
        free(s);
        return NULL;
    }
    s->t = t;
    s->owner = *owner;
    s->created_ms = uv_now(t->ex->loop);
    s->peer.ex = t->ex;
    snprintf(s->run_id, sizeof s->run_id, "%.12s", s->handle);
    s->next = t->list;
    if (t->list) t->list->prev = s;
    t->list = s;
    if (t->live++ == 0) {
        uint64_t every = t->idle_ms / 4;
        if (every < SESSION_SWEEP_MIN_MS) every = SESSION_SWEEP_MIN_MS;
        if (every > SESSION_SWEEP_MAX_MS) every = SESSION_SWEEP_MAX_MS;
        uv_timer_start(t->sweep, on_sweep, every, every);
    }
    return s;
}

ptc_xsession_t *ptc__session_find(ptc_xsessions_t *t, const char *handle,
                                  const mcp_identity_t *owner, char *msg, size_t n)
{
    for (ptc_xsession_t *s = t->list; s != NULL; s = s->next) {
        if (strcmp(s->handle, handle) != 0 || !mcp_identity_equal(&s->owner, owner)) continue;
        const char *ended = s->job == NULL && s->es ? exec_session_end_reason(s->es) : NULL;
        if (ended == NULL) return s;
        char why[200];
        snprintf(why, sizeof why, "has ended (%s)", ended);
        remember(t, s, why);
        session_free(s);
        break;
    }
    for (unsigned i = 0; i < PTC_SESSIONS_GONE_KEPT; i++) {
        const gone_t *g = &t->gone[i];
        if (g->handle[0] == '\0' || strcmp(g->handle, handle) != 0 ||
            !mcp_identity_equal(&g->owner, owner))
            continue;
        snprintf(msg, n,
                 "Session \"%.60s\" %s; its variables and files are gone. Start a new one with "
                 "session: \"new\" (and run the set-up code again).",
                 handle, g->why);
        return NULL;
    }
    /* The same words whether the handle never existed or belongs to another client. */
    snprintf(msg, n,
             "Unknown session \"%.60s\": this client has no live session with that handle. "
             "Sessions end when closed, after %.0f s unused (--session-idle-timeout) or when the "
             "server restarts. Start one with session: \"new\".",
             handle, (double)t->idle_ms / 1000.0);
    return NULL;
}

void ptc__session_claim(ptc_xsession_t *s, job_t *j)
{
    s->job = j;
}

job_t *ptc__session_job(const ptc_xsession_t *s)
{
    return s->job;
}

bool ptc__session_busy(const ptc_xsession_t *s)
{
    return s->job != NULL || (s->es != NULL && exec_session_busy(s->es));
}

void ptc__session_close(ptc_xsession_t *s, const char *why)
{
    remember(s->t, s, why);
    session_free(s);
}

const char *ptc__session_handle(const ptc_xsession_t *s)
{
    return s->handle;
}

int ptc__session_output(const ptc_xsession_t *s, exec_output_t *out, exec_output_t *err)
{
    return s->es != NULL ? exec_session_output(s->es, out, err) : EXEC_EINVAL;
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
    ptc_execute_t *ex = s->t->ex;
    exec_session_opts_t so;
    exec_session_opts_init(&so);
    so.bridge_fd = ptc__execute_bridge_new(ex, &s->peer, ptc_repair_loop_journal(j->loop),
                                           s->run_id, &s->host);
    if (so.bridge_fd >= 0) so.ro_dir = ptc_pybundle_cache_root(ex->bundle);
    const char *dirs[EXEC_MAX_PATH_DIRS];
    so.n_path_dirs = ptc_env_path_dirs(ex->env, dirs, EXEC_MAX_PATH_DIRS);
    so.path_dirs = dirs;
    int rc = exec_session_new(ex->pool, &so, &s->es);
    if (rc < 0) {
        s->es = NULL;
        ptc_bridge_host_close(s->host, NULL);
        s->host = NULL;
    }
    return rc;
}

int ptc__session_run(job_t *j, const char *code, uint64_t timeout_ms, char *msg, size_t n)
{
    ptc_xsession_t *s = j->sess;
    int rc = s->es == NULL ? start_sandbox(s, j) : 0;
    if (rc == 0) {
        if (s->host != NULL) ptc_bridge_host_rearm(s->host, ptc_repair_loop_journal(j->loop));
        s->peer.job = j;
        exec_session_callbacks_t cb = {
            .on_done = cell_done, .on_progress = cell_progress, .user = j};
        rc = exec_session_run(s->es, code, timeout_ms, &cb);
        if (rc == 0) {
            s->cells++;
            return 0;
        }
        s->peer.job = NULL;
    }
    if (rc == EXEC_ESESSIONENDED)
        snprintf(msg, n,
                 "The cell was not run: the session has ended (%s). Start a new one with "
                 "session: \"new\".",
                 exec_session_end_reason(s->es) ? exec_session_end_reason(s->es) : "unknown");
    else
        snprintf(msg, n, "The cell was not run: %s. %s", exec_strerror(rc), exec_error_hint(rc));
    return rc;
}

int ptc__session_cancel(ptc_xsession_t *s)
{
    return s->es != NULL && exec_session_busy(s->es) ? exec_session_cancel(s->es) : EXEC_EINVAL;
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
    if (s->job == j) s->job = NULL;
    const char *ended = s->es ? exec_session_end_reason(s->es) : NULL;
    if (ended != NULL) {
        char why[200];
        snprintf(why, sizeof why, "has ended (%s)", ended);
        ptc__session_close(s, why);
    } else if (j->sess_new && s->es == NULL) {
        /* Its first cell never started (refused, cancelled while waiting): nothing to keep. */
        session_free(s);
    }
}

bool ptc__session_result(const job_t *j, cJSON *sc, sbuf_t *note)
{
    const ptc_xsession_t *s = j->sess;
    if (s == NULL) return cJSON_AddNullToObject(sc, "session") != NULL;
    const outcome_t *o = &j->last;
    bool ok = cJSON_AddStringToObject(sc, "session", s->handle) != NULL &&
              cJSON_AddBoolToObject(sc, "interrupted", o->interrupted) != NULL &&
              cJSON_AddBoolToObject(sc, "session_ended", o->session_ended) != NULL;
    if (!ok) return false;
    if (note->len) ptc__sb_str(note, "\n");
    double secs = (double)o->timeout_ms / 1000.0;
    if (o->cancelled)
        ptc__sb_str(note, o->session_ended
                              ? "The cell was cancelled (cancel: true) and, as it did not stop on "
                                "KeyboardInterrupt, the session was killed: its state is gone."
                              : "The cell was cancelled (cancel: true) and interrupted "
                                "(KeyboardInterrupt); the session lives on with its state.");
    else if (o->status == EXEC_STATUS_TIMEOUT && o->interrupted)
        ptc__sb_fmt(note,
                    "The cell hit its %.1f s timeout (timeout_seconds) and was interrupted "
                    "(KeyboardInterrupt); the session lives on with its state. For more time pass "
                    "a larger timeout_seconds (at most %g, the server's --max-timeout).",
                    secs, j->ex->max_timeout_s);
    else if (o->status == EXEC_STATUS_TIMEOUT && o->session_ended)
        ptc__sb_fmt(note,
                    "The cell hit its %.1f s timeout (timeout_seconds) and did not stop within "
                    "%.0f s of the KeyboardInterrupt, so the session was killed: its state is "
                    "gone. Start a new one with session: \"new\"; for more time pass a larger "
                    "timeout_seconds (at most %g, the server's --max-timeout).",
                    secs, EXEC_SESSION_INTERRUPT_GRACE_MS / 1000.0, j->ex->max_timeout_s);
    else if (o->session_ended)
        ptc__sb_fmt(note,
                    "The session has ended (%s): its state is gone. Start a new one with "
                    "session: \"new\".",
                    s->es && exec_session_end_reason(s->es) ? exec_session_end_reason(s->es)
                                                            : "its interpreter stopped");
    if (o->session_ended) return true;
    if (note->len && note->s[note->len - 1] != '\n') ptc__sb_str(note, "\n");
    if (j->sess_new)
        ptc__sb_fmt(note,
                    "Session \"%s\" started: pass \"session\": \"%s\" to run more code in this "
                    "interpreter (variables, imports and files in /tmp are kept); "
                    "{\"session\": \"%s\", \"close_session\": true} ends it.",
                    s->handle, s->handle, s->handle);
    else
        ptc__sb_fmt(note, "Session \"%s\", cell %lu.", s->handle, s->cells);
    return true;
}
