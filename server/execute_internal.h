/* execute_internal.h - what the files of the execute_code tool share (not a public header):
 * tool_execute.c (the handler, its arguments, the runs and the repair loop's operations),
 * execute_result.c (the result a model reads, in pages) and execute_bridge.c (tool calls from
 * sandboxed code routed to downstream servers and the registry). */
#ifndef PTC_SERVER_EXECUTE_INTERNAL_H
#define PTC_SERVER_EXECUTE_INTERNAL_H

#include "tools.h"

#include "bridge.h"
#include "executor.h"
#include "repair.h"
#include "repairers.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define EXECUTE_TRACEBACK_LINES 6
/* Past this much stdout on a failed run's page, the traceback's end is repeated up front. */
#define EXECUTE_INLINE_OUTPUT 1000
/* Clients read a message into a bounded buffer (the official SDK's stdio client: 10 MiB), so one
 * result carries at most this many image bytes (4/3 more as base64); the others are listed with
 * their URI. */
#define EXECUTE_IMAGES_MAX_RESULT_BYTES (6u << 20)
/* A file's bytes as resources/read returns them (base64 for binary types) must fit that buffer
 * too: the default per-file bound (--max-file-bytes) is this, under the executor's own. */
#define EXECUTE_FILE_MAX_BYTES (7u << 20)

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
    /* Programmatic tool calling (ptc_execute_attach): the bridge's settings and peers. */
    ptc_search_t *search;
    ptc_downstream_t *downstream;
    ptc_pybundle_cache_t *bundle;
    ptc_startup_t *startup; /* the first runs that use the tools package wait there */
    ptc_env_t *env;         /* the declared packages and the user's helpers, or NULL */
    const cJSON *modules;   /* the tools package's modules last described (borrowed) */
    ptc_bridge_limits_t lim;
    FILE *audit;
    unsigned long runs;
    /* Self-healing: the default budget, the request deadline, the fallback repairer. */
    long max_repairs;
    uint64_t deadline_ms;
    ptc_repairer_http_t *repairer;
    ptc_repairer_desc_t http_desc; /* how results name it */
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
    cJSON *files;        /* structuredContent.files: the listing, with ptc://files/ URIs */
    cJSON *images;       /* image content blocks (base64) for the first page */
    char *files_text;    /* the text's lines naming the files, or NULL */
} outcome_t;

/* One execute_code request: its runs, and with self-healing the repair loop around them. */
typedef struct job {
    ptc_execute_t *ex;
    mcp_call_t *call;
    exec_run_t *run;         /* the run in flight, or NULL */
    uint64_t timeout_ms;     /* asked for each run */
    uint64_t run_timeout_ms; /* the current run's, cut to the deadline */
    ptc_bridge_host_t *host; /* NULL when the run has no bridge */
    char run_id[32];
    ptc_repair_loop_t *loop;         /* attempts, repairs, the journal */
    bool sampling;                   /* the repairer asked is the client (else the fallback) */
    outcome_t last;                  /* the last finished run */
    char *code;                      /* the request's code, until the repair loop holds it */
    long max_repairs;                /* asked for the request */
    struct ptc_env_waiter *env_wait; /* waiting for the packages' build, or NULL */
    uint64_t env_wait_from;          /* uv_now when the wait began */
} job_t;

/* A downstream call or registry search made for sandboxed code. */
typedef struct bridge_op {
    bool is_search;
    ptc_bridge_done_cb done;
    void *done_data;
    mcp_client_call_t *call;
    ptc_downstream_owner_t *owner; /* routes the server's sampling/elicitation to our client */
    void *query;
    /* --confirm-writes: the call waits for the user's answer to an elicitation. */
    mcp_outreq_t *confirm;
    job_t *job;
    char *server, *tool;
    cJSON *args;
    unsigned timeout_ms;
} bridge_op_t;

/* --- a growable text buffer (the first failure sticks) ------------------------------------- */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool failed;
} sbuf_t;

void ptc__sb_put(sbuf_t *b, const char *s, size_t n);
void ptc__sb_str(sbuf_t *b, const char *s);
void ptc__sb_fmt(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --- execute_result.c ---------------------------------------------------------------------- */

/** Answers call with one page: sc (taken) holds the run's fields and gets the page's text and
 *  cursor; note, err_tail and heal (may be NULL) are the text's parts around the output. */
void ptc__execute_finish_page(mcp_call_t *call, cJSON *sc, const exec_page_t *page, bool first,
                              const char *note, const char *err_tail, const char *heal);
/** Keeps the files a finished run left (r->files) in ex's file store and fills o's listing,
 *  image blocks and text lines. MCP_ENOMEM when out of memory. */
int ptc__execute_keep_files(ptc_execute_t *ex, const exec_result_t *r, outcome_t *o);
/** Answers call with status "refused" and message. */
void ptc__execute_finish_refused(ptc_execute_t *ex, mcp_call_t *call, const char *message);
/** Answers with the request's result (its last run, the attempts) and frees the job. */
void ptc__execute_finish_job(job_t *j);
/** Answers a cursor call with the page behind it. */
void ptc__execute_fetch_page(ptc_execute_t *ex, mcp_call_t *call, const char *cursor);
/** The loop's view of a finished run (borrowing o). */
ptc_repair_run_t ptc__execute_run_of(const outcome_t *o);
void ptc__execute_outcome_clear(outcome_t *o);
/** Frees the job: its loop (and a repair request in flight), its bridge, the last outcome. */
void ptc__execute_job_free(job_t *j);

/* --- environment.c: what runs and results need of the environment --------------------- */

typedef struct ptc_env_waiter ptc_env_waiter_t;
typedef void (*ptc_env_wait_cb)(void *data);
typedef enum ptc_env_run {
    PTC_ENV_RUN,    /* run now (ready, none declared, or failed with --packages-optional) */
    PTC_ENV_WAIT,   /* the packages are being built */
    PTC_ENV_REFUSE, /* the build failed and the packages are not optional */
} ptc_env_run_t;

/** What a run should do now; *building_ms (may be NULL) gets how long the build has run. */
ptc_env_run_t ptc_env_for_run(const ptc_env_t *e, uint64_t *building_ms);
/** cb(data) once the build ends or max_ms passed, whichever first; NULL on ENOMEM. */
ptc_env_waiter_t *ptc_env_wait(ptc_env_t *e, uint64_t max_ms, ptc_env_wait_cb cb, void *data);
/** No callback afterwards; handle may be NULL. */
void ptc_env_wait_cancel(ptc_env_waiter_t *handle);
/** The folders a run puts on sys.path after the tools package: the packages' site folder once
 *  ready, the helpers' folder. Returns how many (at most max); borrowed until the next change. */
size_t ptc_env_path_dirs(const ptc_env_t *e, const char **dirs, size_t max);
/** What the tool description says the code can import (malloc'd; NULL on ENOMEM). */
char *ptc_env_describe(const ptc_env_t *e);
/** The result's "environment" field while building or after a failure, else NULL (caller
 *  deletes). */
cJSON *ptc_env_result_json(const ptc_env_t *e);
/** The result text's note about the packages (failure, building), else NULL (malloc'd). */
char *ptc_env_result_note(const ptc_env_t *e);
/** The executor pool (borrowed), for the helpers' scan. */
exec_pool_t *ptc__execute_pool(const ptc_execute_t *ex);

/* --- execute_bridge.c ---------------------------------------------------------------------- */

/** Opens the bridge of a run when the tools package is ready: returns the descriptor for the
 *  sandbox (-1 without a bridge). */
int ptc__execute_open_bridge(ptc_execute_t *ex, job_t *j);
/** Ends a run's bridge; its calls count, records and warnings go to o (may be NULL). */
void ptc__execute_close_bridge(job_t *j, outcome_t *o);

#endif
