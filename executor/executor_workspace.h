/* executor_workspace.h - part of executor.h, the library's one public header: the workspace: what a
 * client keeps between its requests. Include executor.h, never this file: it is read at its place
 * inside executor.h (the declarations above it there are in scope), and it is a file of its own
 * only to keep each file short. */
#ifndef PTC_EXECUTOR_WORKSPACE_H
#define PTC_EXECUTOR_WORKSPACE_H
#ifndef PTC_EXECUTOR_H
#error "include executor.h, not executor_workspace.h"
#endif

/* ---- the workspace: what a client keeps between its requests (workspace.c) ---------------- */
/* Live sessions behind unguessable handles, runs that go on with no request waiting behind a
 * cursor, requests parked for their client's next round (below), and what goes once their
 * owner has ended. Every entry is bound to an owner
 * (EXEC_OWNER_BYTES, compared as bytes, like the pages' and the files'): a handle or cursor
 * presented by another owner reads exactly as an unknown one. The workspace knows nothing of
 * requests: a session is claimed by, and a run kept for, an opaque pointer of the caller's,
 * which the callbacks hand back when the workspace itself ends the entry.
 * Bounds: at most max_sessions live sessions (each closed after session_idle_ms unused; the
 * message at the limit names the oldest idle one, to its owner only), EXEC_WS_GONE_KEPT ended
 * handles remembered with why they ended, at most max_runs runs kept, each ended one for
 * run_keep_ms. */
#define EXEC_WS_HANDLE_MAX 48 /* a prefix ("ses-", "run-"), 32 hex digits (128 bits), NUL */
#define EXEC_WS_GONE_KEPT  64 /* ended session handles remembered, to say why a later use fails */

typedef struct exec_workspace exec_workspace_t;
typedef struct exec_ws_session exec_ws_session_t;
typedef struct exec_ws_run exec_ws_run_t;

/* Why the workspace itself ended an entry (the callbacks' why). */
typedef enum exec_ws_end {
    EXEC_WS_EXPIRED,     /* unused for session_idle_ms, kept run_keep_ms, parked keep_ms */
    EXEC_WS_DIED,        /* an idle session's interpreter had stopped */
    EXEC_WS_OWNER_ENDED, /* exec_ws_owner_ended */
    EXEC_WS_STOPPED,     /* exec_workspace_stop (or _free) */
} exec_ws_end_t;

typedef struct exec_ws_callbacks {
    /* The workspace ended a session (never for exec_ws_session_close): handle is valid during
       the call; claimant (what exec_ws_session_claim gave, or NULL) is the callee's now, its
       cell dead with no on_done. The session and its user data are gone already. Optional. */
    void (*session_ended)(const char *handle, exec_ws_end_t why, void *claimant, void *data);
    /* The workspace removed a run (EXPIRED, OWNER_ENDED, STOPPED): user (exec_ws_run_add's)
       is the callee's to end; the entry is gone already. Required when runs are added. */
    void (*run_ended)(void *user, exec_ws_end_t why, void *data);
    /* A session is freed, however it ended: its user data (exec_ws_session_create's) goes.
       Called before session_ended. Optional. */
    void (*session_release)(void *user, void *data);
    /* exec_ws_owner_ended's work is done: pages and files dropped for the owner. Optional. */
    void (*owner_dropped)(size_t pages, size_t files, void *data);
    void *data;
} exec_ws_callbacks_t;

typedef struct exec_ws_options {
    exec_pool_t *pool;        /* the sessions' sandboxes (borrowed); NULL: none can start */
    exec_pages_t *pages;      /* an ended owner's outputs go from here (borrowed; may be NULL) */
    exec_filestore_t *files;  /* and its files (borrowed; may be NULL) */
    size_t max_sessions;      /* live at once */
    uint64_t session_idle_ms; /* unused this long: closed (0 counts as 1) */
    size_t max_runs;          /* kept at once */
    uint64_t run_keep_ms;     /* an ended run nobody waits on is kept this long (0 counts as 1) */
    size_t max_parked;        /* parked at once (0 counts as EXEC_WS_MAX_PARKED) */
} exec_ws_options_t;

/** A workspace on loop with o and cb (both copied). EXEC_ENOMEM. *out is the caller's until
 *  exec_workspace_free. */
int exec_workspace_new(uv_loop_t *loop, const exec_ws_options_t *o, const exec_ws_callbacks_t *cb,
                       exec_workspace_t **out);
/** Ends every parked entry (its end callback), then every run (run_ended) and then every
 *  session (session_ended), EXEC_WS_STOPPED. The workspace stays usable. */
void exec_workspace_stop(exec_workspace_t *ws);
/** exec_workspace_stop, then frees ws (its timers close at the loop's next turn). NULL allowed. */
void exec_workspace_free(exec_workspace_t *ws);
/** owner (EXEC_OWNER_BYTES, copied) has ended for good: at the loop's next turn its runs go
 *  (run_ended), then its sessions (session_ended), its pages and its files (owner_dropped).
 *  Not at once, because the caller may hold one of its entries now. EXEC_ENOMEM, or
 *  EXEC_ETOOBIG past PTC_CAP_ENDED_OWNERS ends waiting for that turn: nothing goes
 *  early (each entry still ends by its own bound). */
int exec_ws_owner_ended(exec_workspace_t *ws, const unsigned char *owner);
/** Writes prefix and 32 hex digits of fresh random bytes (128 bits) into buf (size bytes, at
 *  most EXEC_WS_HANDLE_MAX are used): an unguessable handle. false when it does not fit or the
 *  kernel gives no random bytes. */
bool exec_random_handle(const char *prefix, char *buf, size_t size);

/** A new session ("ses-" handle) for owner (copied), with user data (see session_release); its
 *  sandbox starts with exec_ws_session_start. NULL with a sentence in msg: at the limit (after
 *  closing what expired or died), naming the oldest idle session if owner's; out of memory. */
exec_ws_session_t *exec_ws_session_create(exec_workspace_t *ws, const unsigned char *owner,
                                          void *user, char *msg, size_t n);
/** The live session with handle for owner, or NULL with a sentence in msg: unknown (the same
 *  words for another owner's handle), expired, closed or ended, and why. An idle session whose
 *  interpreter stopped is closed here. */
exec_ws_session_t *exec_ws_session_find(exec_workspace_t *ws, const char *handle,
                                        const unsigned char *owner, char *msg, size_t n);
/** claimant (borrowed) uses s now: the idle check leaves s alone, a session_ended hands it
 *  back. */
void exec_ws_session_claim(exec_ws_session_t *s, void *claimant);
/** What claimed s, or NULL when idle. */
void *exec_ws_session_claimant(const exec_ws_session_t *s);
/** s's user data. */
void *exec_ws_session_user(const exec_ws_session_t *s);
/** True while s is claimed or a cell runs in it. */
bool exec_ws_session_busy(const exec_ws_session_t *s);
/** claimant no longer uses s: s is idle again, or closed if its interpreter ended, or (with
 *  forget_unstarted, when its sandbox never started) freed without a trace. Nothing when s is
 *  claimed by another. */
void exec_ws_session_release(exec_ws_session_t *s, const void *claimant, bool forget_unstarted);
/** Ends s now and remembers why (a sentence after "Session X ", e.g. "was closed (...)") for a
 *  later use; a cell running dies without on_done and the claimant stays the caller's (no
 *  callback but session_release). */
void exec_ws_session_close(exec_ws_session_t *s, const char *why);
/** s's handle (borrowed: valid while s lives). */
const char *exec_ws_session_handle(const exec_ws_session_t *s);
/** Cells run in s so far. */
unsigned long exec_ws_session_cells(const exec_ws_session_t *s);
/** The interpreter (exec_session_t, borrowed), or NULL before exec_ws_session_start. */
exec_session_t *exec_ws_session_sandbox(const exec_ws_session_t *s);
/** Why s's interpreter ended (exec_session_end_reason), or NULL while it lives or never ran. */
const char *exec_ws_session_end_reason(const exec_ws_session_t *s);
/** Starts s's sandbox with so (exec_session_new's errors; EXEC_EINVAL without a pool or when
 *  started already; so's bridge descriptor is taken over either way). */
int exec_ws_session_start(exec_ws_session_t *s, const exec_session_opts_t *so);
/** Runs code as s's next cell (exec_session_run; EXEC_EINVAL before the start). */
int exec_ws_session_run(exec_ws_session_t *s, const char *code, uint64_t timeout_ms,
                        const exec_session_callbacks_t *cb);
/** The output so far of the cell running in s (exec_session_output). EXEC_EINVAL when no
 *  cell runs (also before the start). */
int exec_ws_session_output(const exec_ws_session_t *s, exec_output_t *out, exec_output_t *err);
/** Interrupts the cell running in s (exec_session_cancel: its on_done still comes, with
 *  cancelled set). EXEC_EINVAL when no cell runs (also before the start). */
int exec_ws_session_cancel(exec_ws_session_t *s);

/** Keeps user (borrowed) for owner (copied) behind a fresh "run-" cursor (exec_ws_run_cursor).
 *  EXEC_EBUSY when max_runs are kept, EXEC_ENOMEM (also: no random bytes). */
int exec_ws_run_add(exec_workspace_t *ws, const unsigned char *owner, void *user,
                    exec_ws_run_t **out);
/** True when no more runs can be added. */
bool exec_ws_runs_full(const exec_workspace_t *ws);
/** The user kept behind cursor for owner, or NULL (also for another owner's cursor). */
void *exec_ws_run_find(const exec_workspace_t *ws, const char *cursor, const unsigned char *owner);
/** r's cursor (borrowed: valid while r is kept). */
const char *exec_ws_run_cursor(const exec_ws_run_t *r);
/** r's run ended with nobody waiting: in run_keep_ms unless exec_ws_run_hold comes first, r
 *  goes (run_ended, EXEC_WS_EXPIRED). */
void exec_ws_run_keep(exec_ws_run_t *r);
/** Somebody waits on r again: it does not expire. */
void exec_ws_run_hold(exec_ws_run_t *r);
/** Forgets r (no callback). NULL allowed. */
void exec_ws_run_remove(exec_ws_run_t *r);

/* Parked requests (workspace_park.c): something of the caller's that waits for an answer only a
 * later request of the same owner can bring (a client's next round) is kept behind a fresh
 * unguessable handle bound to the owner, for keep_ms at most, optionally tagged (e.g. with the
 * task it ran as) so that it can be found without its handle. The workspace knows nothing of
 * the request or the answer: it keeps an opaque pointer and tells the end callback given at
 * exec_ws_park_add when it ends the entry itself (expired, or the workspace stopped). An entry
 * is found until it is removed; handles are never reused, so a removed handle stays unknown.
 * Bounds: max_parked entries at once (EXEC_EBUSY past it), EXEC_WS_PARK_TAG_MAX per tag. An
 * owner's end does not touch its parked entries: each goes by its own keep_ms. */
#define EXEC_WS_MAX_PARKED      64 /* exec_ws_options_t.max_parked's default */
#define EXEC_WS_PARK_TAG_MAX    48 /* a tag's bytes with its NUL */
#define EXEC_WS_PARK_PREFIX_MAX 8  /* a handle's prefix, without NUL */

typedef struct exec_ws_park exec_ws_park_t;
/** The workspace ended a parked entry itself (EXEC_WS_EXPIRED: its keep_ms passed;
 *  EXEC_WS_STOPPED: exec_workspace_stop): the entry is gone already, user is the callee's to
 *  end, handle (the entry's) is valid during the call only. The callee may park or remove
 *  other entries. */
typedef void (*exec_ws_park_end_cb)(void *user, exec_ws_end_t why, const char *handle);

/** Parks user (borrowed) for owner (copied) behind a fresh handle, prefix (at most
 *  EXEC_WS_PARK_PREFIX_MAX bytes) and 32 hex digits (exec_ws_park_handle), tagged with tag
 *  (copied; NULL or "" for none), for keep_ms: then end(user, EXEC_WS_EXPIRED, handle) unless
 *  it was removed first. *out is the entry (valid until removed or ended), NULL on error:
 *  EXEC_EBUSY when max_parked wait, EXEC_EINVAL (end NULL, prefix or tag too long),
 *  EXEC_ENOMEM (also: no random bytes). */
int exec_ws_park_add(exec_workspace_t *ws, const unsigned char *owner, const char *prefix,
                     const char *tag, uint64_t keep_ms, exec_ws_park_end_cb end, void *user,
                     exec_ws_park_t **out);
/** The entry parked behind handle for owner, or NULL (unknown, removed, ended, or another
 *  owner's: all read alike). */
exec_ws_park_t *exec_ws_park_find(const exec_workspace_t *ws, const char *handle,
                                  const unsigned char *owner);
/** The most recently parked entry with tag (not "") for owner, or NULL. */
exec_ws_park_t *exec_ws_park_find_tag(const exec_workspace_t *ws, const char *tag,
                                      const unsigned char *owner);
/** p's user pointer (exec_ws_park_add's). */
void *exec_ws_park_user(const exec_ws_park_t *p);
/** p's handle (borrowed: valid while p is parked). */
const char *exec_ws_park_handle(const exec_ws_park_t *p);
/** Forgets p: no end callback, its handle is unknown from now on. NULL allowed. */
void exec_ws_park_remove(exec_ws_park_t *p);
/** How many entries are parked now. */
size_t exec_ws_parked(const exec_workspace_t *ws);

#endif /* PTC_EXECUTOR_WORKSPACE_H */
