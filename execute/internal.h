/* internal.h - what the files of the execute_code engine share (not a public header):
 * handle.c (the handler, its arguments, the runs and the repair loop's operations), result.c
 * (the result shaped for MCP, over the executor's pages and texts), routes.c (the MCP side of
 * the bridge's routes: downstream calls, confirmations, searches), sessions.c, longrun.c,
 * mrtr.c, ends.c (the workspace's parts), setup.c and resources.c. */
#ifndef PTC_EXECUTE_INTERNAL_H
#define PTC_EXECUTE_INTERNAL_H

#include "execute.h"

#include "bridge.h"
#include "repair.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define PTC_SESSION_HANDLE_MAX EXEC_WS_HANDLE_MAX /* a prefix, 32 hex digits, NUL */
/* Clients read a message into a bounded buffer (the official SDK's stdio client: 10 MiB), so one
 * result carries at most this many image bytes (4/3 more as base64); the others are listed with
 * their URI. */
#define EXECUTE_IMAGES_MAX_RESULT_BYTES (6u << 20)

typedef struct ptc_xsession ptc_xsession_t;
struct job;

/* Whom a bridge's operations serve: a one-shot run's job, or the cell running in a session
 * (which changes from cell to cell while the session keeps one bridge for its life). */
typedef struct bridge_peer {
    struct ptc_execute *ex;
    struct job *job; /* NULL between a session's cells */
} bridge_peer_t;

struct ptc_execute {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    exec_pool_t *pool;
    exec_pages_t *pages;
    size_t page_chars;
    /* Files out (/tmp/outputs): kept for ptc://files/ URIs; images up to image_max_bytes
       become image content blocks. */
    exec_filestore_t *files;
    size_t image_max_bytes;
    size_t max_code_bytes; /* --max-code-bytes, at most EXEC_MAX_CODE_BYTES */
    double max_timeout_s;
    bool unsafe;
    bool confirm_writes;
    char *described; /* the description last registered, when not the static one */
    /* Programmatic tool calling (ptc_execute_attach): the bridge's settings and the wiring's
       peers (the registry, the servers, the start-up gate: attached false until then). */
    ptc_execute_peers_t peers;
    bool attached;
    ptc_pybundle_cache_t *bundle;
    env_host_t *env;      /* the declared packages and the user's helpers, or NULL */
    const cJSON *modules; /* the tools package's modules last described (borrowed) */
    ptc_bridge_limits_t lim;
    FILE *audit;
    unsigned long runs;
    /* Self-healing: the default budget, the request deadline, the fallback repairer. */
    long max_repairs;
    uint64_t deadline_ms;
    ptc_repair_http_t *repairer;
    ptc_repairer_desc_t http_desc; /* how results name it */
    /* The workspace (executor.h): sessions (sessions.c), runs handed back as running
       (longrun.c), jobs parked for a 2026 client's next round (mrtr.c), what
       goes when a client's MCP session ends (ends.c); and how long a call waits for
       its run. */
    exec_workspace_t *ws;
    uint64_t wait_ms;
    mcp_server_t *srv; /* the session-end hook is registered there (ends.c) */
};

/* What a finished run's answer needs, kept past its on_done. */
typedef struct outcome {
    exec_status_t status;
    int exit_code;
    char *signal_name;
    char *out, *err; /* valid UTF-8 */
    size_t out_len, err_len;
    uint64_t out_total, err_total;
    bool truncated;
    uint64_t duration_ms;
    exec_sandbox_level_t sandbox;
    cJSON *outputs, *warnings;
    uint64_t tool_calls; /* answered by a tool or from the journal */
    uint64_t timeout_ms; /* the run's own */
    bool deadline_cut;   /* its timeout was cut to the request's deadline */
    /* In a session: the cell was interrupted (the session lives) or the session ended. */
    bool interrupted, session_ended;
    bool cancelled;   /* {cursor, cancel: true} ended it */
    cJSON *files;     /* structuredContent.files: the listing, with ptc://files/ URIs */
    cJSON *images;    /* image content blocks (base64) for the first page */
    char *files_text; /* the text's lines naming the files, or NULL */
} outcome_t;

/* One execute_code request: its runs, and with self-healing the repair loop around them. */
typedef struct job {
    ptc_execute_t *ex;
    mcp_call_t *call;        /* NULL once the request was answered while the run goes on */
    exec_run_t *run;         /* the run in flight, or NULL */
    uint64_t timeout_ms;     /* asked for each run */
    uint64_t run_timeout_ms; /* the current run's, cut to the deadline */
    ptc_bridge_host_t *host; /* NULL when the run has no bridge */
    char run_id[32];
    ptc_repair_loop_t *loop; /* attempts, repairs, the journal */
    bool sampling;           /* the repairer asked is the client (else the fallback) */
    outcome_t last;          /* the last finished run */
    char *code;              /* the request's code, until the repair loop holds it */
    long max_repairs;        /* asked for the request */
    env_waiter_t *env_wait;  /* waiting for the packages' build, or NULL */
    uint64_t env_wait_from;  /* uv_now when the wait began */
    bridge_peer_t peer;      /* the one-shot run's bridge serves this job */
    ptc_xsession_t *sess;    /* the session the code runs in, or NULL (one-shot) */
    bool sess_new;           /* the request made it (session: "new") */
    bool abandoned;          /* cancelled: free the job when the cell ends */
    /* Long runs (longrun.c): the wait, the run cursor, what was answered so far. */
    uv_timer_t *wait_timer;
    char cursor[PTC_SESSION_HANDLE_MAX]; /* "" until handed back as running */
    mcp_identity_t owner;                /* the request's client: its cursors, files, session */
    uint64_t started_ms;
    uint64_t out_sent, err_sent; /* bytes of the current run answered while running */
    exec_ws_run_t *lr;           /* kept in ex->ws behind cursor, or NULL */
    bool ran_pending;            /* the run ended with no request waiting: last holds it */
    bool cancel_asked;           /* {cursor, cancel: true}: answer as it ends, no repair */
    char *refused_msg;           /* the run was refused with no request waiting */
    char *refused_final;         /* the loop answered "refused" with no request waiting */
    bool finish_pending;         /* the loop finished with no request waiting */
    /* MRTR (mrtr.c): the call was answered with an InputRequiredResult naming the
       handle of mrtr_park, under which the workspace keeps the job (exec_ws_park_*: handle,
       owner, task, bound); the client's next round resumes it with the answer to mrtr_ask (a
       repair through sampling) or mrtr_op (a --confirm-writes confirmation). */
    exec_ws_park_t *mrtr_park; /* NULL unless parked */
    bool mrtr_linked;          /* mrtr_park != NULL (read by routes.c) */
    ptc_repair_ask_t *mrtr_ask;
    ptc_bridge_route_op_t *mrtr_op;
    mcp_relay_held_t *mrtr_held; /* a downstream server's request passed on, or NULL */
} job_t;

/* A tool call from sandboxed code waiting for the user's confirmation (bridge/'s router). */
typedef ptc_bridge_route_op_t bridge_op_t;

/* --- resources.c ------------------------------------------------------------------------------ */

/** data as base64, NUL-terminated (malloc'd; NULL on ENOMEM): a file's bytes in a resource or
 *  an image block. */
char *ptc_base64(const unsigned char *data, size_t len);

/* --- result.c --------------------------------------------------------------------------------- */

/** Answers call with one page: sc (taken) holds the run's fields and gets the page's text and
 *  cursor; note, err_tail and heal (may be NULL) are the text's parts around the output. */
void ptc__execute_finish_page(mcp_call_t *call, cJSON *sc, const exec_page_t *page, bool first,
                              const char *note, const char *err_tail, const char *heal);
/** The fields every result carries, before the page's own (stdout, stderr, next_cursor);
 *  exit_code < 0 and signal NULL are null. NULL on ENOMEM. */
cJSON *ptc__execute_base_fields(const char *status, int exit_code, const char *signal,
                                uint64_t out_b, uint64_t err_b, bool truncated,
                                uint64_t duration_ms, const char *sandbox);
/** Keeps the files a finished run left (r->files) in ex's file store for owner and fills o's
 *  listing, image blocks and text lines. MCP_ENOMEM when out of memory. */
int ptc__execute_keep_files(ptc_execute_t *ex, const mcp_identity_t *owner, const exec_result_t *r,
                            outcome_t *o);
/** Answers call with status "refused" and message. */
void ptc__execute_finish_refused(ptc_execute_t *ex, mcp_call_t *call, const char *message);
/** Answers call with a result that ran no code: status ("ok", "refused") and message. */
void ptc__execute_finish_message(ptc_execute_t *ex, mcp_call_t *call, const char *status,
                                 const char *message);
/** Answers with the request's result (its last run, the attempts) and frees the job. */
void ptc__execute_finish_job(job_t *j);
/** Answers a cursor call with the page behind it. */
void ptc__execute_fetch_page(ptc_execute_t *ex, mcp_call_t *call, const char *cursor);
/** The loop's view of a finished run (borrowing o). */
ptc_repair_run_t ptc__execute_run_of(const outcome_t *o);
void ptc__execute_outcome_clear(outcome_t *o);
/** Frees the job: its loop (and a repair request in flight), its bridge, the last outcome. */
void ptc__execute_job_free(job_t *j);

/* --- routes.c --------------------------------------------------------------------------------- */

/** Opens the bridge of a run when the tools package is ready: returns the descriptor for the
 *  sandbox (-1 without a bridge). */
int ptc__execute_open_bridge(ptc_execute_t *ex, job_t *j);
/** Ends a run's bridge; its calls count, records and warnings go to o (may be NULL). */
void ptc__execute_close_bridge(job_t *j, outcome_t *o);
/** Opens a bridge serving peer (borrowed, must outlive the host) with journal and run_id:
 *  *host gets its host end; returns the sandbox's descriptor, or -1 (no bridge). */
int ptc__execute_bridge_new(ptc_execute_t *ex, bridge_peer_t *peer, ptc_journal_t *journal,
                            const char *run_id, ptc_bridge_host_t **host);
/** What a finished run hands its outcome from a bridge (records, warnings, call count). */
void ptc__execute_bridge_collect(ptc_bridge_host_t *h, outcome_t *o);

/* --- handle.c: what a session's cell reports back --------------------------------------------- */

/** The run or cell of j ended with r (valid during the call). May free j. */
void ptc__execute_job_ran(job_t *j, const exec_result_t *r);
/** Tells the repair loop of j's last run, kept while no request waited (may free j). */
void ptc__execute_job_deliver(job_t *j);
/** Progress of j's run or cell. */
void ptc__execute_job_progress(job_t *j, uint64_t elapsed_ms, uint64_t output_bytes);
/** The mcp_call_on_cancel hook of a call waiting on job data. */
void ptc__execute_job_cancelled(mcp_call_t *call, void *data);
/** The execute_code tool's handler (data: ex). */
void ptc__execute_handle(mcp_call_t *call, const cJSON *args, void *data);

/* --- sessions.c: live interpreters kept between calls (issue 12) ------------------------------ */
/* The table (handles, owners, limits, the idle check) is the executor's workspace; what a
 * session holds for the engine (its bridge for its life) is a ptc_xsession_t, its user data. */

/** The workspace's session callbacks (data: ex): a session it ended with a request's cell in
 *  it frees the job and answers the request (but at shutdown); the user data goes. */
void ptc__sessions_ended(const char *handle, exec_ws_end_t why, void *claimant, void *data);
void ptc__sessions_release(void *user, void *data);
/** Gives j the session its request names ("new": a new one), or answers the request with why
 *  not and frees j (false). */
bool ptc__session_take(job_t *j, const char *handle);
/** {session, close_session: true}: ends the session (a cell running in it dies, its request is
 *  answered so); extra: the call has other arguments too (refused). */
void ptc__session_close_call(ptc_execute_t *ex, mcp_call_t *call, const cJSON *session, bool extra);
/** Ends s now and remembers why (a later use says it); a cell running dies unanswered. */
void ptc__session_close(ptc_xsession_t *s, const char *why);
const char *ptc__session_handle(const ptc_xsession_t *s);
/** Runs code as j's cell in j->sess (the sandbox and its bridge first, at the first cell). */
int ptc__session_run(job_t *j, const char *code, uint64_t timeout_ms, char *msg, size_t n);
/** Interrupts the running cell (its on_done still comes); < 0 when none runs. */
int ptc__session_cancel(ptc_xsession_t *s);
/** The running cell's output so far (exec_session_output); < 0 when none runs. */
int ptc__session_output(const ptc_xsession_t *s, exec_output_t *out, exec_output_t *err);
/** The session's bridge host (NULL without one), for progress counters. */
ptc_bridge_host_t *ptc__session_host(const ptc_xsession_t *s);
/** The cell's share of the session's bridge (records, warnings, calls) into o (may be NULL). */
void ptc__session_bridge_end(job_t *j, outcome_t *o);
/** j no longer uses its session: idle again, or forgotten if it ended. */
void ptc__session_release(job_t *j);
/** The result's session fields ("session": handle or null; interrupted, session_ended) and the
 *  sentences about the session for the text (into note). false on ENOMEM. */
bool ptc__session_result(const job_t *j, cJSON *sc, ptc_buf_t *note);

/* --- longrun.c: runs that go on past the request's wait --------------------------------------- */

/* Runs handed back as running and not yet collected; past it a request just waits. */
#define EXECUTE_MAX_LONGRUNS 64u
/* A run that ended while nobody waited is kept this long for its cursor (as output pages). */
#define EXECUTE_LONGRUN_KEEP_MS (UINT64_C(30) * 60 * 1000)

/** Answers j's request with status "running" after wait_ms unless the run ended by then. */
int ptc__longrun_arm(job_t *j, uint64_t wait_ms);
/** call waits on j (up to wait_ms); a run that ended meanwhile is answered now. */
void ptc__longrun_attach(job_t *j, mcp_call_t *call, uint64_t wait_ms);
/** The run ended with no request waiting: kept (j->last) for its cursor, for a while. */
void ptc__longrun_park(job_t *j);
/** A call with cursor naming a run of its client handed back as running: waits on it again, or
 *  cancels it; true when answered so, false when the cursor names no such run. */
bool ptc__longrun_call(ptc_execute_t *ex, mcp_call_t *call, const char *cursor, uint64_t wait_ms,
                       bool cancel);
/** The workspace's run_ended (data: ex): the run is killed, j freed, a request waiting on it
 *  answered (a run kept past its time just goes). */
void ptc__longrun_ended(void *user, exec_ws_end_t why, void *data);

/* --- mrtr.c: jobs waiting for a 2026-07-28 client's next round (MRTR) ------------------------- */

/* At most EXEC_WS_MAX_PARKED jobs wait at once (the workspace's default bound). */
/* The keys of the input requests (and of the client's inputResponses). */
#define EXECUTE_MRTR_KEY_REPAIR  "repair"  /* sampling/createMessage for a repair */
#define EXECUTE_MRTR_KEY_CONFIRM "confirm" /* elicitation/create for --confirm-writes */
/* A downstream server's sampling/createMessage or elicitation/create, passed on. */
#define EXECUTE_MRTR_KEY_DOWNSTREAM "downstream"

/**
 * Answers j's call with an InputRequiredResult asking {key: {method, params}} (params taken)
 * and a requestState naming j, which then waits (its run goes on) for the round that brings the
 * answer, bound to j's owner, for keep_ms at most: past it a run still going is killed and j
 * freed. j->call is NULL afterwards. < 0 (MCP_ENOMEM, MCP_EBUSY at the limit, MCP_ESTATE when
 * j has no call or waits already) leaves the call unanswered.
 */
int ptc__mrtr_park(job_t *j, const char *key, const char *method, cJSON *params, uint64_t keep_ms);
/** If call carries a requestState (a next round), resumes the job it names with the answers
 *  (or answers why not) and returns true; false for a first round. args: the call's (they
 *  repeat the first round's), wait_ms: its wait. */
bool ptc__mrtr_resume(ptc_execute_t *ex, mcp_call_t *call, const cJSON *args, uint64_t wait_ms);
/** j waits no more (in ptc__execute_job_free). */
void ptc__mrtr_release(job_t *j);
/** The client cancelled task task_id while its job was parked here (it asked through the
 *  task): the job goes now, its run killed (mcp_server_on_task_cancel). */
void ptc__mrtr_cancel_task(const char *task_id, const mcp_identity_t *who, void *data);
/** The client's answer to a confirmation asked through MRTR (routes.c): result is its
 *  elicitation result (borrowed; NULL: none). Goes on with the call or denies it; frees op. */
void ptc__execute_confirm_answer(bridge_op_t *op, const cJSON *result);
/** A downstream server's sampling or elicitation request h, sent while j's stateless call
 *  (which declared the capability) waits: j's call is answered with it as an input request
 *  and j parks (ptc__mrtr_park, for keep_ms at most) holding h, which the next round answers
 *  (or j's end fails). < 0 with a sentence in msg when it cannot be asked. */
int ptc__mrtr_hold(job_t *j, mcp_relay_held_t *h, uint64_t keep_ms, char *msg, size_t n);

/* --- ends.c: what goes when a client's MCP session ends (issue 12) ---------------------------- */

/** Registers ex's session-end hook on srv: once a stateful MCP session has ended (HTTP DELETE,
 *  a legacy SSE client gone, its idle timeout, stdin closed), its workspace sessions, long runs,
 *  output pages and files go at the next loop turn. MCP_ENOMEM. */
int ptc__ends_register(ptc_execute_t *ex, mcp_server_t *srv);
/** Unregisters the hook and frees what it keeps (in ptc_execute_free). */
void ptc__ends_free(ptc_execute_t *ex);
/** The workspace's owner_dropped (data: ex): logs what went. */
void ptc__ends_dropped(size_t pages, size_t files, void *data);
/** Stops j's timer and forgets its cursor (in ptc__execute_job_free). */
void ptc__longrun_release(job_t *j);

#endif
