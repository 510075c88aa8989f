/* workspace.c - what a client keeps between its requests (issue 12): live sessions (one
 * exec_session_t each) behind unguessable handles, runs kept behind a cursor while no request
 * waits on them, requests parked for a next round (workspace_park.c), and the end of
 * everything an owner had once the owner is gone. Every entry is bound to its owner's bytes;
 * whatever another owner presents reads as unknown.
 *
 * The lists are walked from the head again after each entry ended, since a callback may change
 * them; clang-analyzer does not follow the unlinking (it assumes a list may loop back on a
 * freed entry) and reports those walks as uses after free: the NOLINTs below are those. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define WS_RANDOM_BYTES 16 /* 128 bits */
/* The idle check runs this often (a quarter of the idle timeout, within these bounds). */
#define WS_SWEEP_MIN_MS 200u
#define WS_SWEEP_MAX_MS 30000u
#define WS_WHY_MAX      200

struct exec_ws_session {
    exec_ws_session_t *prev, *next;
    exec_workspace_t *ws;
    char handle[EXEC_WS_HANDLE_MAX];
    unsigned char owner[EXEC_OWNER_BYTES];
    exec_session_t *es; /* NULL until exec_ws_session_start */
    void *user;         /* the caller's, released with the session */
    void *claimant;     /* what uses the session now, or NULL when idle */
    uint64_t created_ms;
    unsigned long cells;
};

struct exec_ws_run {
    exec_ws_run_t *prev, *next;
    exec_workspace_t *ws;
    char cursor[EXEC_WS_HANDLE_MAX];
    unsigned char owner[EXEC_OWNER_BYTES];
    void *user;
    bool kept;           /* ended with nobody waiting: expires at kept_until */
    uint64_t kept_until; /* uv_now */
};

typedef struct gone {
    char handle[EXEC_WS_HANDLE_MAX];
    unsigned char owner[EXEC_OWNER_BYTES];
    char why[WS_WHY_MAX];
} gone_t;

struct exec_workspace {
    uv_loop_t *loop;
    exec_ws_options_t o;
    exec_ws_callbacks_t cb;
    exec_ws_session_t *sessions;
    size_t live;
    uv_timer_t *sweep; /* running while sessions live */
    gone_t gone[EXEC_WS_GONE_KEPT];
    unsigned gone_next;
    exec_ws_run_t *runs;
    size_t n_runs;
    uv_timer_t *expiry; /* due at the earliest kept run's end */
    /* Owners that ended, their entries dropped at the loop's next turn (owner_ended). */
    uv_timer_t *ends_timer;
    unsigned char (*ends)[EXEC_OWNER_BYTES];
    size_t n_ends, cap_ends;
    exec__parking_t *parking; /* requests parked for a next round (workspace_park.c) */
};

bool exec_random_handle(const char *prefix, char *buf, size_t size)
{
    unsigned char rnd[WS_RANDOM_BYTES];
    size_t k = strlen(prefix);
    if (size > EXEC_WS_HANDLE_MAX) size = EXEC_WS_HANDLE_MAX;
    if (k + 2 * sizeof rnd >= size || getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return false;
    /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): the hex digits follow, NUL-ended */
    memcpy(buf, prefix, k);
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(buf + k + 2 * i, 3, "%02x", rnd[i]);
    return true;
}

static bool same_owner(const unsigned char *a, const unsigned char *b)
{
    return memcmp(a, b, EXEC_OWNER_BYTES) == 0;
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

uv_timer_t *exec__timer_new(uv_loop_t *loop, void *data)
{
    uv_timer_t *t = calloc(1, sizeof *t);
    if (t == NULL || uv_timer_init(loop, t) != 0) {
        free(t);
        return NULL;
    }
    t->data = data;
    return t;
}

void exec__timer_close(uv_timer_t *t)
{
    if (t != NULL) uv_close((uv_handle_t *)t, timer_closed);
}

/* --- sessions ------------------------------------------------------------------------------ */

static void remember(exec_workspace_t *ws, const exec_ws_session_t *s, const char *why)
{
    gone_t *g = &ws->gone[ws->gone_next++ % EXEC_WS_GONE_KEPT];
    snprintf(g->handle, sizeof g->handle, "%s", s->handle);
    memcpy(g->owner, s->owner, sizeof g->owner);
    snprintf(g->why, sizeof g->why, "%s", why);
}

static void session_free(exec_ws_session_t *s)
{
    exec_workspace_t *ws = s->ws;
    if (s->prev)
        s->prev->next = s->next;
    else
        ws->sessions = s->next;
    if (s->next) s->next->prev = s->prev;
    ws->live--;
    exec_session_close(s->es); /* a running cell's on_done does not fire */
    if (ws->cb.session_release != NULL) ws->cb.session_release(s->user, ws->cb.data);
    if (ws->live == 0) uv_timer_stop(ws->sweep);
    free(s);
}

/* Ends s for the workspace's own reason and hands its claimant back (after the free: the
 * callee may answer requests, which may come back here). */
static void session_end(exec_ws_session_t *s, const char *why, exec_ws_end_t reason)
{
    exec_workspace_t *ws = s->ws;
    char handle[EXEC_WS_HANDLE_MAX];
    void *claimant = s->claimant;
    snprintf(handle, sizeof handle, "%s", s->handle);
    remember(ws, s, why);
    session_free(s);
    if (ws->cb.session_ended != NULL) ws->cb.session_ended(handle, reason, claimant, ws->cb.data);
}

static uint64_t last_used(const exec_ws_session_t *s)
{
    return s->es != NULL ? exec_session_last_used(s->es) : s->created_ms;
}

static void ended_why(const exec_ws_session_t *s, char why[WS_WHY_MAX])
{
    snprintf(why, WS_WHY_MAX, "has ended (%s)", exec_session_end_reason(s->es));
}

static void on_sweep(uv_timer_t *timer)
{
    exec_workspace_t *ws = timer->data;
    uint64_t now = uv_now(ws->loop);
    for (;;) {
        /* From the start each time: a callback may change the list. */
        exec_ws_session_t *s = ws->sessions;
        char why[WS_WHY_MAX];
        exec_ws_end_t reason = EXEC_WS_EXPIRED;
        for (; s != NULL; s = s->next) {
            /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the list walk (see the top) */
            if (s->claimant != NULL) continue;
            if (exec_ws_session_end_reason(s) != NULL) {
                ended_why(s, why);
                reason = EXEC_WS_DIED;
                break;
            }
            if (now - last_used(s) >= ws->o.session_idle_ms) {
                snprintf(why, sizeof why,
                         "expired: it was unused for %.0f s (--session-idle-timeout) and was "
                         "closed",
                         (double)ws->o.session_idle_ms / 1000.0);
                break;
            }
        }
        if (s == NULL) return;
        session_end(s, why, reason);
    }
}

/* Names the oldest idle session in a message about the limit, without handing one owner
 * another's handle. */
static void limit_message(const exec_workspace_t *ws, const unsigned char *owner, char *msg,
                          size_t n)
{
    const exec_ws_session_t *oldest = NULL;
    for (const exec_ws_session_t *s = ws->sessions; s != NULL; s = s->next)
        if (s->claimant == NULL && (oldest == NULL || last_used(s) < last_used(oldest))) oldest = s;
    int k = snprintf(msg, n,
                     "Too many sessions: %zu are open, the most this server keeps "
                     "(--max-sessions %zu). ",
                     ws->live, ws->o.max_sessions);
    if (k < 0 || (size_t)k >= n) return;
    double idle = oldest ? (double)(uv_now(ws->loop) - last_used(oldest)) / 1000.0 : 0;
    if (oldest == NULL)
        snprintf(msg + k, n - (size_t)k,
                 "Every one is running a cell now; try again when one is done, or run this "
                 "code without session (a one-shot run).");
    else if (same_owner(oldest->owner, owner))
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
                 idle, (double)ws->o.session_idle_ms / 1000.0);
}

exec_ws_session_t *exec_ws_session_create(exec_workspace_t *ws, const unsigned char *owner,
                                          void *user, char *msg, size_t n)
{
    if (ws->live >= ws->o.max_sessions) {
        on_sweep(ws->sweep); /* an expired or dead one may free a place */
        if (ws->live >= ws->o.max_sessions) {
            limit_message(ws, owner, msg, n);
            return NULL;
        }
    }
    exec_ws_session_t *s = calloc(1, sizeof *s);
    if (s == NULL || !exec_random_handle("ses-", s->handle, sizeof s->handle)) {
        snprintf(msg, n, "The session could not be made: %s.",
                 s == NULL ? "out of memory" : "no random bytes for its handle");
        free(s);
        return NULL;
    }
    s->ws = ws;
    memcpy(s->owner, owner, sizeof s->owner);
    s->user = user;
    s->created_ms = uv_now(ws->loop);
    s->next = ws->sessions;
    if (ws->sessions) ws->sessions->prev = s;
    ws->sessions = s;
    if (ws->live++ == 0) {
        uint64_t every = ws->o.session_idle_ms / 4;
        if (every < WS_SWEEP_MIN_MS) every = WS_SWEEP_MIN_MS;
        if (every > WS_SWEEP_MAX_MS) every = WS_SWEEP_MAX_MS;
        uv_timer_start(ws->sweep, on_sweep, every, every);
    }
    return s;
}

exec_ws_session_t *exec_ws_session_find(exec_workspace_t *ws, const char *handle,
                                        const unsigned char *owner, char *msg, size_t n)
{
    for (exec_ws_session_t *s = ws->sessions; s != NULL; s = s->next) {
        if (strcmp(s->handle, handle) != 0 || !same_owner(s->owner, owner)) continue;
        if (s->claimant != NULL || exec_ws_session_end_reason(s) == NULL) return s;
        char why[WS_WHY_MAX];
        ended_why(s, why);
        exec_ws_session_close(s, why);
        break;
    }
    for (unsigned i = 0; i < EXEC_WS_GONE_KEPT; i++) {
        const gone_t *g = &ws->gone[i];
        if (g->handle[0] == '\0' || strcmp(g->handle, handle) != 0 || !same_owner(g->owner, owner))
            continue;
        snprintf(msg, n,
                 "Session \"%.60s\" %s; its variables and files are gone. Start a new one with "
                 "session: \"new\" (and run the set-up code again).",
                 handle, g->why);
        return NULL;
    }
    /* The same words whether the handle never existed or belongs to another owner. */
    snprintf(msg, n,
             "Unknown session \"%.60s\": this client has no live session with that handle. "
             "Sessions end when closed, after %.0f s unused (--session-idle-timeout) or when the "
             "server restarts. Start one with session: \"new\".",
             handle, (double)ws->o.session_idle_ms / 1000.0);
    return NULL;
}

void exec_ws_session_claim(exec_ws_session_t *s, void *claimant)
{
    s->claimant = claimant;
}

void *exec_ws_session_claimant(const exec_ws_session_t *s)
{
    return s->claimant;
}

void *exec_ws_session_user(const exec_ws_session_t *s)
{
    return s->user;
}

bool exec_ws_session_busy(const exec_ws_session_t *s)
{
    return s->claimant != NULL || (s->es != NULL && exec_session_busy(s->es));
}

void exec_ws_session_release(exec_ws_session_t *s, const void *claimant, bool forget_unstarted)
{
    if (s->claimant != NULL && s->claimant != claimant) return; /* not the caller's */
    s->claimant = NULL;
    if (exec_ws_session_end_reason(s) != NULL) {
        char why[WS_WHY_MAX];
        ended_why(s, why);
        exec_ws_session_close(s, why);
    } else if (forget_unstarted && s->es == NULL) {
        session_free(s); /* nothing ran in it: nothing to say about it later */
    }
}

void exec_ws_session_close(exec_ws_session_t *s, const char *why)
{
    remember(s->ws, s, why);
    session_free(s);
}

const char *exec_ws_session_handle(const exec_ws_session_t *s)
{
    return s->handle;
}

unsigned long exec_ws_session_cells(const exec_ws_session_t *s)
{
    return s->cells;
}

exec_session_t *exec_ws_session_sandbox(const exec_ws_session_t *s)
{
    return s->es;
}

const char *exec_ws_session_end_reason(const exec_ws_session_t *s)
{
    return s->es != NULL ? exec_session_end_reason(s->es) : NULL;
}

int exec_ws_session_start(exec_ws_session_t *s, const exec_session_opts_t *so)
{
    if (s->ws->o.pool == NULL || s->es != NULL) {
        if (so != NULL && so->bridge_fd >= 0) close(so->bridge_fd);
        return EXEC_EINVAL;
    }
    int rc = exec_session_new(s->ws->o.pool, so, &s->es);
    if (rc < 0) s->es = NULL;
    return rc;
}

int exec_ws_session_run(exec_ws_session_t *s, const char *code, uint64_t timeout_ms,
                        const exec_session_callbacks_t *cb)
{
    if (s->es == NULL) return EXEC_EINVAL;
    int rc = exec_session_run(s->es, code, timeout_ms, cb);
    if (rc == 0) s->cells++;
    return rc;
}

int exec_ws_session_output(const exec_ws_session_t *s, exec_output_t *out, exec_output_t *err)
{
    return s->es != NULL ? exec_session_output(s->es, out, err) : EXEC_EINVAL;
}

int exec_ws_session_cancel(exec_ws_session_t *s)
{
    return s->es != NULL ? exec_session_cancel(s->es) : EXEC_EINVAL;
}

/* --- runs kept behind a cursor ------------------------------------------------------------- */

static void run_unlink(exec_ws_run_t *r)
{
    exec_workspace_t *ws = r->ws;
    if (r->prev)
        r->prev->next = r->next;
    else
        ws->runs = r->next;
    /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the list walk (see the top) */
    if (r->next) r->next->prev = r->prev;
    ws->n_runs--;
}

static void run_end(exec_ws_run_t *r, exec_ws_end_t why)
{
    exec_workspace_t *ws = r->ws;
    void *user = r->user;
    run_unlink(r);
    free(r);
    ws->cb.run_ended(user, why, ws->cb.data);
}

static void arm_expiry(exec_workspace_t *ws);

static void on_expiry(uv_timer_t *t)
{
    exec_workspace_t *ws = t->data;
    uint64_t now = uv_now(ws->loop);
    for (;;) {
        /* From the start each time: run_ended may change the list. */
        exec_ws_run_t *r = ws->runs;
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the list walk (see the top) */
        while (r != NULL && !(r->kept && r->kept_until <= now))
            r = r->next;
        if (r == NULL) break;
        run_end(r, EXEC_WS_EXPIRED);
    }
    arm_expiry(ws);
}

/* Due at the earliest kept run's end; stopped when none is kept. */
static void arm_expiry(exec_workspace_t *ws)
{
    const exec_ws_run_t *first = NULL;
    for (const exec_ws_run_t *r = ws->runs; r != NULL; r = r->next)
        if (r->kept && (first == NULL || r->kept_until < first->kept_until)) first = r;
    if (first == NULL) {
        uv_timer_stop(ws->expiry);
        return;
    }
    uint64_t now = uv_now(ws->loop);
    uv_timer_start(ws->expiry, on_expiry, first->kept_until > now ? first->kept_until - now : 0, 0);
}

int exec_ws_run_add(exec_workspace_t *ws, const unsigned char *owner, void *user,
                    exec_ws_run_t **out)
{
    *out = NULL;
    if (exec_ws_runs_full(ws)) return EXEC_EBUSY;
    exec_ws_run_t *r = calloc(1, sizeof *r);
    if (r == NULL || !exec_random_handle("run-", r->cursor, sizeof r->cursor)) {
        free(r);
        return EXEC_ENOMEM;
    }
    r->ws = ws;
    memcpy(r->owner, owner, sizeof r->owner);
    r->user = user;
    r->next = ws->runs;
    if (ws->runs) ws->runs->prev = r;
    ws->runs = r;
    ws->n_runs++;
    *out = r;
    return EXEC_OK;
}

bool exec_ws_runs_full(const exec_workspace_t *ws)
{
    return ws->n_runs >= ws->o.max_runs;
}

void *exec_ws_run_find(const exec_workspace_t *ws, const char *cursor, const unsigned char *owner)
{
    for (const exec_ws_run_t *r = ws->runs; r != NULL; r = r->next)
        if (same_owner(r->owner, owner) && strcmp(r->cursor, cursor) == 0) return r->user;
    return NULL;
}

const char *exec_ws_run_cursor(const exec_ws_run_t *r)
{
    return r->cursor;
}

void exec_ws_run_keep(exec_ws_run_t *r)
{
    r->kept = true;
    r->kept_until = uv_now(r->ws->loop) + r->ws->o.run_keep_ms;
    arm_expiry(r->ws);
}

void exec_ws_run_hold(exec_ws_run_t *r)
{
    /* The timer may still fire for it: it then finds nothing due and re-arms. */
    r->kept = false;
}

void exec_ws_run_remove(exec_ws_run_t *r)
{
    if (r == NULL) return;
    run_unlink(r);
    free(r);
}

/* --- the workspace, and the end of an owner ------------------------------------------------ */

int exec_workspace_new(uv_loop_t *loop, const exec_ws_options_t *o, const exec_ws_callbacks_t *cb,
                       exec_workspace_t **out)
{
    *out = NULL;
    exec_workspace_t *ws = calloc(1, sizeof *ws);
    if (ws == NULL) return EXEC_ENOMEM;
    ws->loop = loop;
    ws->o = *o;
    ws->cb = *cb;
    if (ws->o.session_idle_ms == 0) ws->o.session_idle_ms = 1;
    if (ws->o.run_keep_ms == 0) ws->o.run_keep_ms = 1;
    ws->sweep = exec__timer_new(loop, ws);
    ws->expiry = exec__timer_new(loop, ws);
    ws->ends_timer = exec__timer_new(loop, ws);
    ws->parking = exec__parking_new(loop, o->max_parked);
    if (ws->sweep == NULL || ws->expiry == NULL || ws->ends_timer == NULL || ws->parking == NULL) {
        exec__timer_close(ws->sweep);
        exec__timer_close(ws->expiry);
        exec__timer_close(ws->ends_timer);
        exec__parking_free(ws->parking);
        free(ws);
        return EXEC_ENOMEM;
    }
    /* It must not keep the loop alive on its own (a server's exit waits for the loop). */
    uv_unref((uv_handle_t *)ws->ends_timer);
    *out = ws;
    return EXEC_OK;
}

exec__parking_t *exec__ws_parking(const exec_workspace_t *ws)
{
    return ws->parking;
}

/* Runs first: a session's cell kept as a run leaves its session idle, to be closed next. */
static void drop_owner(exec_workspace_t *ws, const unsigned char *owner)
{
    for (;;) {
        exec_ws_run_t *r = ws->runs;
        while (r != NULL && !same_owner(r->owner, owner))
            /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the list walk (see the top) */
            r = r->next;
        if (r == NULL) break;
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the list walk (see the top) */
        run_end(r, EXEC_WS_OWNER_ENDED);
    }
    for (;;) {
        exec_ws_session_t *s = ws->sessions;
        while (s != NULL && !same_owner(s->owner, owner))
            /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the list walk (see the top) */
            s = s->next;
        if (s == NULL) break;
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the list walk (see the top) */
        session_end(s, "was closed: the MCP session that made it ended", EXEC_WS_OWNER_ENDED);
    }
    size_t pages = ws->o.pages != NULL ? exec_pages_drop_owner(ws->o.pages, owner) : 0;
    size_t files = ws->o.files != NULL ? exec_filestore_drop_owner(ws->o.files, owner) : 0;
    if (ws->cb.owner_dropped != NULL) ws->cb.owner_dropped(pages, files, ws->cb.data);
}

static void on_ends(uv_timer_t *t)
{
    exec_workspace_t *ws = t->data;
    /* One at a time from the end: dropping may end more owners, which append. */
    while (ws->n_ends > 0) {
        unsigned char owner[EXEC_OWNER_BYTES];
        memcpy(owner, ws->ends[--ws->n_ends], sizeof owner);
        drop_owner(ws, owner);
    }
}

int exec_ws_owner_ended(exec_workspace_t *ws, const unsigned char *owner)
{
    /* the codes are base's (EXEC_ENOMEM is PTC_ENOMEM; past the cap PTC_ETOOBIG) */
    int rc = ptc_array_reserve(&ws->ends, &ws->cap_ends, ws->n_ends + 1, sizeof *ws->ends,
                               PTC_CAP_ENDED_OWNERS);
    if (rc < 0) return rc;
    memcpy(ws->ends[ws->n_ends++], owner, EXEC_OWNER_BYTES);
    uv_timer_start(ws->ends_timer, on_ends, 0, 0);
    return EXEC_OK;
}

void exec_workspace_stop(exec_workspace_t *ws)
{
    if (ws == NULL) return;
    /* Parked entries first: what they hold may have a run or a session of its own. */
    exec__parking_stop(ws->parking);
    while (ws->runs != NULL)
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the list walk (see the top) */
        run_end(ws->runs, EXEC_WS_STOPPED);
    while (ws->sessions != NULL)
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the list walk (see the top) */
        session_end(ws->sessions, "was closed: the server stopped", EXEC_WS_STOPPED);
    uv_timer_stop(ws->expiry);
}

void exec_workspace_free(exec_workspace_t *ws)
{
    if (ws == NULL) return;
    exec_workspace_stop(ws);
    exec__timer_close(ws->sweep);
    exec__timer_close(ws->expiry);
    exec__timer_close(ws->ends_timer);
    exec__parking_free(ws->parking);
    free(ws->ends);
    free(ws);
}
