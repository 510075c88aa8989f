/* tool_execute.c - the execute_code tool: an MCP call becomes an executor run, and the run's
 * output becomes a result shaped for a model, paged behind cursors. */
#include "tools.h"

#include "bridge.h"
#include "executor.h"
#include "pybundle.h"
#include "repairers.h"

#include <errno.h>
#include <stdarg.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define EXECUTE_DEFAULT_TIMEOUT_S 30.0
#define EXECUTE_TRACEBACK_LINES   6
/* Past this much stdout on a failed run's page, the traceback's end is repeated up front. */
#define EXECUTE_INLINE_OUTPUT 1000
/* The page store: at most this much output is kept for cursors, for this long when idle. */
#define EXECUTE_PAGES_MAX_BYTES (64u << 20)
#define EXECUTE_PAGES_MAX_RUNS  256u
#define EXECUTE_PAGES_TTL_MS    (30u * 60 * 1000)
/* One deadline covers a request's runs and repairs (--request-deadline, by default 50 s: under
 * the common 60 s client timeout); a day at most keeps the milliseconds far from overflow. */
#define EXECUTE_REQUEST_DEADLINE_MAX_S 86400
/* A repair is not asked for with less time than this left before the deadline. */
#define EXECUTE_REPAIR_MIN_LEFT_MS 1000u

struct ptc_execute {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    exec_pool_t *pool;
    exec_pages_t *pages;
    size_t page_chars;
    double max_timeout_s;
    bool unsafe;
    bool confirm_writes;
    char *described; /* the description last registered, when not the static one */
    /* Programmatic tool calling (ptc_execute_attach): the bridge's settings and peers. */
    ptc_search_t *search;
    ptc_downstream_t *downstream;
    ptc_bundle_t *bundle;
    ptc_bridge_limits_t lim;
    FILE *audit;
    unsigned long runs;
    /* Self-healing: the default budget, the request deadline, the fallback repairer. */
    long max_repairs;
    uint64_t deadline_ms;
    ptc_repairer_http_t *repairer;
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
} outcome_t;

/* One execute_code request: a run, and with self-healing the runs of its repairs. */
typedef struct job {
    ptc_execute_t *ex;
    mcp_call_t *call;
    exec_run_t *run;         /* the run in flight, or NULL */
    uint64_t timeout_ms;     /* asked for each run */
    uint64_t run_timeout_ms; /* the current run's, cut to the deadline */
    uint64_t t0, deadline;   /* uv_now() at the start, and when the request must end */
    ptc_bridge_host_t *host; /* NULL when the run has no bridge */
    char run_id[32];
    long max_repairs, repairs_used;
    unsigned attempt;                /* 1-based, the current run's */
    char *codes[PTC_REPAIR_MAX + 1]; /* every attempt's program */
    cJSON *attempts;                 /* the history for the result */
    ptc_journal_t *journal;          /* NULL without self-healing */
    outcome_t last;                  /* the last finished run */
    bool have_last;
    char last_fp[PTC_REPAIR_FP_MAX]; /* its fingerprint */
    ptc_repair_ask_t *ask;           /* a repair request in flight */
    const char *repairer;            /* "sampling" or "http": who repaired */
    uv_timer_t *timer;               /* the deadline while a repair is asked for */
    char stop_reason[400];
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

static const char input_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"code\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Python 3 source to run. "
    "Print what you want to see; only stdout and stderr come back.\"},"
    "\"timeout_seconds\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"description\":\"Wall-clock "
    "limit for this run (default 30).\"},"
    "\"cursor\":{\"type\":\"string\",\"description\":\"The next_cursor of an earlier result: pass "
    "it alone to get the next page of that run's output.\"},"
    "\"max_repairs\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":10,\"description\":\"How "
    "many times a failed run may be repaired and run again (the client's model fixes it through "
    "sampling; tool calls that already succeeded are replayed, not repeated). 0 turns it off; "
    "the default is the server's --max-repairs.\"}},"
    "\"additionalProperties\":false}";

/* Every result, a run's or a page's, success or failure, validates against this. */
static const char output_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"status\":{\"type\":\"string\",\"enum\":[\"ok\",\"error\",\"timeout\",\"killed\",\"oom\","
    "\"refused\"]},"
    "\"exit_code\":{\"type\":[\"integer\",\"null\"]},"
    "\"signal\":{\"type\":[\"string\",\"null\"]},"
    "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"
    "\"stdout_bytes\":{\"type\":\"integer\"},\"stderr_bytes\":{\"type\":\"integer\"},"
    "\"truncated\":{\"type\":\"boolean\"},"
    "\"duration_ms\":{\"type\":\"integer\"},"
    "\"next_cursor\":{\"type\":[\"string\",\"null\"]},"
    "\"tool_calls\":{\"type\":\"integer\"},"
    "\"outputs\":{\"type\":\"array\"},"
    "\"attempts\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"
    "\"final_code\":{\"type\":\"string\"},"
    "\"repair\":{\"type\":\"object\"},"
    "\"sandbox\":{\"type\":\"string\",\"enum\":[\"full\",\"degraded\",\"none\"]}},"
    "\"required\":[\"status\",\"exit_code\",\"signal\",\"stdout\",\"stderr\",\"stdout_bytes\","
    "\"stderr_bytes\",\"truncated\",\"duration_ms\",\"next_cursor\",\"tool_calls\",\"outputs\","
    "\"attempts\",\"sandbox\"]}";

static const char description[] =
    "Run Python 3 code in a sandbox and return its output. Each call starts fresh (no state is "
    "kept between calls); there is no network; /tmp is a small private scratch space; the "
    "standard library is available. Print results to stdout. Long output comes in pages: call "
    "again with only the returned cursor for the next page. A failed run returns isError with "
    "the end of the traceback first. A failed run is repaired and run again where the client "
    "can sample (max_repairs); calls to tools that already succeeded are not repeated.";

/* --- the model-facing text ----------------------------------------------------------------- */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool failed;
} sbuf_t;

static void sb_put(sbuf_t *b, const char *s, size_t n)
{
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (ns == NULL) {
            b->failed = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_str(sbuf_t *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_fmt(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_fmt(sbuf_t *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static cJSON *meta_of(const cJSON *sc)
{
    /* What a page repeats of its run: everything but the page's own text and cursor. */
    cJSON *m = cJSON_Duplicate(sc, true);
    if (m == NULL) return NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(m, "stdout");
    cJSON_DeleteItemFromObjectCaseSensitive(m, "stderr");
    cJSON_DeleteItemFromObjectCaseSensitive(m, "next_cursor");
    /* Emitted records come with the first page only. */
    cJSON_ReplaceItemInObjectCaseSensitive(m, "outputs", cJSON_CreateArray());
    return m;
}

/*
 * Builds the result of one page: sc holds the run's fields (status, codes, byte counts...) and
 * gets the page's stdout, stderr and next_cursor added; the text puts failures' last traceback
 * lines first and always ends with the cursor line when there is more.
 */
static void finish_page(mcp_call_t *call, cJSON *sc, const exec_page_t *page, bool first,
                        const char *note, const char *err_tail, const char *heal)
{
    const char *status = cJSON_GetObjectItemCaseSensitive(sc, "status")->valuestring;
    bool failed = strcmp(status, "ok") != 0;
    cJSON_AddStringToObject(sc, "stdout", page->out);
    cJSON_AddStringToObject(sc, "stderr", page->err);
    if (page->cursor)
        cJSON_AddStringToObject(sc, "next_cursor", page->cursor);
    else
        cJSON_AddNullToObject(sc, "next_cursor");

    sbuf_t t = {0};
    const cJSON *sandbox = cJSON_GetObjectItemCaseSensitive(sc, "sandbox");
    if (cJSON_IsString(sandbox) && strcmp(sandbox->valuestring, "none") == 0)
        sb_str(&t, "WARNING: this code ran WITHOUT a sandbox (--unsafe-no-sandbox).\n");
    if (note) {
        sb_str(&t, note);
        sb_str(&t, "\n");
    }
    if (failed && first) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(sc, "exit_code");
        const cJSON *sig = cJSON_GetObjectItemCaseSensitive(sc, "signal");
        sb_fmt(&t, "Status: %s", status);
        if (cJSON_IsNumber(code)) sb_fmt(&t, " (exit code %d)", code->valueint);
        if (cJSON_IsString(sig)) sb_fmt(&t, " (signal %s)", sig->valuestring);
        sb_str(&t, "\n");
        /* The end of the traceback goes first unless the page shows all of it anyway. */
        bool tail_first = err_tail != NULL && err_tail[0] != '\0' &&
                          (page->cursor != NULL || strlen(page->err) < strlen(err_tail) ||
                           strlen(page->out) > EXECUTE_INLINE_OUTPUT);
        if (tail_first) {
            sb_str(&t, "Last lines of stderr:\n");
            sb_str(&t, ptc_repair_last_lines(err_tail, EXECUTE_TRACEBACK_LINES));
            sb_str(&t, "\n");
        }
    }
    /* What self-healing did comes after the status, before the output it explains. */
    if (heal != NULL && heal[0] != '\0') {
        sb_str(&t, heal);
        sb_str(&t, "\n");
    }
    if (page->out[0] != '\0') {
        if (failed || page->err[0] != '\0' || (heal != NULL && heal[0] != '\0'))
            sb_str(&t, "--- stdout ---\n");
        sb_str(&t, page->out);
        if (page->out[strlen(page->out) - 1] != '\n') sb_str(&t, "\n");
    }
    if (page->err[0] != '\0') {
        sb_str(&t, "--- stderr ---\n");
        sb_str(&t, page->err);
        if (page->err[strlen(page->err) - 1] != '\n') sb_str(&t, "\n");
    }
    if (first && page->out[0] == '\0' && page->err[0] == '\0' && !failed)
        sb_str(&t, "(no output)\n");
    const cJSON *trunc = cJSON_GetObjectItemCaseSensitive(sc, "truncated");
    if (cJSON_IsTrue(trunc) && page->cursor == NULL) {
        sb_fmt(&t,
               "[output truncated: %.0f bytes of stdout and %.0f of stderr were produced; "
               "only the first part was kept]\n",
               cJSON_GetObjectItemCaseSensitive(sc, "stdout_bytes")->valuedouble,
               cJSON_GetObjectItemCaseSensitive(sc, "stderr_bytes")->valuedouble);
    }
    if (page->cursor)
        sb_fmt(&t, "[more output: call execute_code with cursor \"%s\"]", page->cursor);
    if (t.failed || t.s == NULL) {
        free(t.s);
        cJSON_Delete(sc);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    /* Trailing newline off, so the text ends with the cursor line or the output itself. */
    while (t.len > 0 && t.s[t.len - 1] == '\n')
        t.s[--t.len] = '\0';
    cJSON *content = mcp_text_content(t.s);
    free(t.s);
    mcp_call_finish(call, content, sc, failed);
}

/* The fields every result carries, before the page's own. Takes nothing. */
static cJSON *base_fields(const char *status, int exit_code, const char *signal, uint64_t out_b,
                          uint64_t err_b, bool truncated, uint64_t duration_ms, const char *sandbox)
{
    cJSON *sc = cJSON_CreateObject();
    if (sc == NULL) return NULL;
    bool ok = cJSON_AddStringToObject(sc, "status", status) &&
              (exit_code >= 0 ? cJSON_AddNumberToObject(sc, "exit_code", exit_code)
                              : cJSON_AddNullToObject(sc, "exit_code")) &&
              (signal ? cJSON_AddStringToObject(sc, "signal", signal)
                      : cJSON_AddNullToObject(sc, "signal")) &&
              cJSON_AddNumberToObject(sc, "stdout_bytes", (double)out_b) &&
              cJSON_AddNumberToObject(sc, "stderr_bytes", (double)err_b) &&
              cJSON_AddBoolToObject(sc, "truncated", truncated) &&
              cJSON_AddNumberToObject(sc, "duration_ms", (double)duration_ms) &&
              cJSON_AddNumberToObject(sc, "tool_calls", 0) &&
              cJSON_AddArrayToObject(sc, "outputs") && cJSON_AddArrayToObject(sc, "attempts") &&
              cJSON_AddStringToObject(sc, "sandbox", sandbox);
    if (!ok) {
        cJSON_Delete(sc);
        return NULL;
    }
    return sc;
}

static void finish_refused(ptc_execute_t *ex, mcp_call_t *call, const char *message)
{
    cJSON *sc = base_fields("refused", -1, NULL, 0, 0, false, 0, ex->unsafe ? "none" : "full");
    char empty_out[1] = "", empty_err[1] = "";
    exec_page_t page = {.out = empty_out, .err = empty_err, .cursor = NULL};
    if (sc == NULL) {
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    finish_page(call, sc, &page, true, message, NULL, NULL);
}

/* --- the bridge: tool calls from sandboxed code --------------------------------------------- */

static const reg_tool_t *op_find_tool(void *data, const char *server, const char *tool)
{
    job_t *j = data;
    const reg_catalog_t *cat = reg_registry_catalog(ptc_search_registry(j->ex->search));
    for (size_t i = 0; i < reg_catalog_count(cat); i++) {
        const reg_tool_t *t = reg_catalog_at(cat, i);
        if (strcmp(t->server, server) == 0 && strcmp(t->name, tool) == 0) return t;
    }
    return NULL;
}

static void op_free(bridge_op_t *op)
{
    ptc_downstream_disown(op->owner);
    free(op->server);
    free(op->tool);
    cJSON_Delete(op->args);
    free(op);
}

static void op_call_done(void *data, int err, const cJSON *result, const cJSON *error,
                         const char *message)
{
    bridge_op_t *op = data;
    (void)error;
    op->done(op->done_data, err, result, message);
    op_free(op);
}

/* Sends the call downstream; on failure answers through done, frees op and returns false. */
static bool op_forward(bridge_op_t *op, mcp_client_t *c, const char *name, const cJSON *args)
{
    op->owner = ptc_downstream_own(op->job->ex->downstream, c, op->job->call);
    int rc = mcp_client_call_tool(c, name, args, op->timeout_ms, NULL, op_call_done, op, &op->call);
    if (rc < 0) {
        char m[400];
        ptc_downstream_refusal(c, rc, m, sizeof m);
        op->done(op->done_data, rc, NULL, m);
        op_free(op);
        return false;
    }
    return true;
}

static void op_confirmed(void *data, int err, const cJSON *result, const cJSON *error,
                         const char *message)
{
    bridge_op_t *op = data;
    (void)error;
    op->confirm = NULL;
    const cJSON *action = cJSON_GetObjectItemCaseSensitive(result, "action");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
    bool yes = err == 0 && cJSON_IsString(action) && strcmp(action->valuestring, "accept") == 0 &&
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(content, "approve"));
    mcp_client_t *c = yes ? ptc_downstream_client(op->job->ex->downstream, op->server) : NULL;
    if (c == NULL) {
        char m[300];
        snprintf(m, sizeof m, "%s__%s was not confirmed by the user (--confirm-writes)%s%s",
                 op->server, op->tool, err < 0 ? ": " : "", err < 0 && message ? message : "");
        op->done(op->done_data, err < 0 ? err : MCP_EREMOTE, NULL, m);
        op_free(op);
        return;
    }
    (void)op_forward(op, c, op->tool, op->args);
}

/* --confirm-writes: asks the user (elicitation) before a call to a tool not marked read-only.
 * Returns 1 when waiting for the answer, 0 when it answered (refused) already, < 0 on error. */
static int op_ask_confirmation(job_t *j, bridge_op_t *op, const reg_tool_t *tool, const cJSON *args)
{
    mcp_session_t *s = j->call ? mcp_call_session(j->call) : NULL;
    if (s == NULL || !mcp_session_client_has(s, "elicitation")) {
        char m[300];
        snprintf(m, sizeof m,
                 "%s is not marked read-only and --confirm-writes is on, but this client cannot "
                 "ask the user (no elicitation): refused",
                 tool->id);
        op->done(op->done_data, MCP_ENOTSUP, NULL, m);
        op_free(op);
        return 0;
    }
    char *argtext = cJSON_PrintUnformatted(args);
    char msg[1200];
    snprintf(msg, sizeof msg,
             "Code running in execute_code wants to call %s with %.900s. Allow it?", tool->id,
             argtext ? argtext : "{}");
    cJSON_free(argtext);
    cJSON *params = cJSON_CreateObject();
    cJSON *schema = cJSON_AddObjectToObject(params, "requestedSchema");
    cJSON *props = schema ? cJSON_AddObjectToObject(schema, "properties") : NULL;
    cJSON *approve = props ? cJSON_AddObjectToObject(props, "approve") : NULL;
    cJSON *req = schema ? cJSON_AddArrayToObject(schema, "required") : NULL;
    if (approve == NULL || req == NULL || !cJSON_AddStringToObject(params, "message", msg) ||
        !cJSON_AddStringToObject(schema, "type", "object") ||
        !cJSON_AddStringToObject(approve, "type", "boolean") ||
        !cJSON_AddStringToObject(approve, "title", "Allow this call") ||
        !cJSON_AddItemToArray(req, cJSON_CreateString("approve")) ||
        !(op->server = strdup(tool->server)) || !(op->tool = strdup(tool->name)) ||
        !(op->args = cJSON_Duplicate(args, true))) {
        cJSON_Delete(params);
        op_free(op);
        return MCP_ENOMEM;
    }
    /* Made with the call, so that over Streamable HTTP it rides the call's own stream. */
    int rc = mcp_call_request_ex(j->call, "elicitation/create", params, "elicitation",
                                 op->timeout_ms, op_confirmed, op, &op->confirm);
    if (rc < 0) {
        op_free(op);
        return rc;
    }
    return 1;
}

static int op_call(void *data, const reg_tool_t *tool, const cJSON *args, unsigned timeout_ms,
                   ptc_bridge_done_cb done, void *done_data, void **cancel_handle)
{
    job_t *j = data;
    *cancel_handle = NULL;
    mcp_client_t *c = ptc_downstream_client(j->ex->downstream, tool->server);
    if (c == NULL) {
        char m[300];
        snprintf(m, sizeof m, "%s is only described (--tools-file): no configured server serves it",
                 tool->id);
        done(done_data, MCP_ENOTSUP, NULL, m);
        return 0;
    }
    bridge_op_t *op = calloc(1, sizeof *op);
    if (op == NULL) return MCP_ENOMEM;
    op->done = done;
    op->done_data = done_data;
    op->job = j;
    op->timeout_ms = timeout_ms;
    /* The handle is given only while op lives (done never runs after a cancel returns); an op
     * answered at once is already freed. */
    bool read_only =
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tool->annotations, "readOnlyHint"));
    if (j->ex->confirm_writes && !read_only) {
        int rc = op_ask_confirmation(j, op, tool, args);
        if (rc == 1) *cancel_handle = op;
        return rc < 0 ? rc : 0;
    }
    if (op_forward(op, c, tool->name, args)) *cancel_handle = op;
    return 0;
}

static void op_search_done(void *data, int err, const cJSON *sc, const char *message)
{
    bridge_op_t *op = data;
    op->done(op->done_data, err, sc, message);
    op_free(op);
}

static int op_search(void *data, const char *query, int top_k, ptc_bridge_done_cb done,
                     void *done_data, void **cancel_handle)
{
    job_t *j = data;
    *cancel_handle = NULL;
    bridge_op_t *op = calloc(1, sizeof *op);
    if (op == NULL) return MCP_ENOMEM;
    op->is_search = true;
    op->done = done;
    op->done_data = done_data;
    void *q = NULL;
    int rc = ptc_search_query(j->ex->search, query, top_k > 0 ? (size_t)top_k : 5, op_search_done,
                              op, &q);
    if (rc < 0) {
        free(op);
        return rc;
    }
    if (q != NULL) { /* still running: op is alive until its done */
        op->query = q;
        *cancel_handle = op;
    }
    return 0;
}

static void op_cancel(void *data, void *handle)
{
    bridge_op_t *op = handle;
    (void)data;
    if (op == NULL) return;
    if (op->is_search) {
        ptc_search_query_cancel(op->query); /* its done never runs now */
        op_free(op);
    } else if (op->confirm != NULL) {
        mcp_outreq_cancel(op->confirm, "the run ended"); /* runs op_confirmed, which frees */
    } else {
        mcp_client_call_cancel(op->call, "the run ended"); /* runs op_call_done, which frees */
    }
}

static void op_audit(void *data, const cJSON *record)
{
    job_t *j = data;
    if (j->call != NULL && mcp_call_session(j->call) != NULL)
        mcp_call_log(j->call, MCP_LOG_INFO, "ptc-audit", cJSON_Duplicate(record, true));
}

static const ptc_bridge_ops_t bridge_ops = {
    .find_tool = op_find_tool,
    .call = op_call,
    .search = op_search,
    .cancel = op_cancel,
    .audit = op_audit,
};

/* Opens the bridge of a run when the tools package is ready: returns the descriptor for the
 * sandbox (-1 without a bridge). */
static int open_bridge(ptc_execute_t *ex, job_t *j)
{
    if (ex->bundle == NULL || ptc_bundle_root(ex->bundle) == NULL) return -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        mcp_log(ex->lg, MCP_LOG_ERROR, "bridge: socketpair: %s", strerror(errno));
        return -1;
    }
    snprintf(j->run_id, sizeof j->run_id, "run-%lu", ++ex->runs);
    ptc_bridge_limits_t lim = ex->lim;
    lim.run_id = j->run_id;
    lim.journal = j->journal;
    char msg[256];
    if (ptc_bridge_host_new(ex->loop, sv[0], &lim, &bridge_ops, j, ex->lg, &j->host, msg,
                            sizeof msg) < 0) {
        mcp_log(ex->lg, MCP_LOG_ERROR, "bridge: %s", msg);
        close(sv[1]);
        j->host = NULL;
        return -1;
    }
    return sv[1];
}

/* Ends a run's bridge; its calls count, records and warnings go to o (may be NULL). */
static void close_bridge(job_t *j, outcome_t *o)
{
    if (j->host == NULL) return;
    cJSON *outputs = ptc_bridge_host_take_outputs(j->host);
    cJSON *warn = ptc_bridge_host_take_warnings(j->host);
    ptc_bridge_counters_t c;
    ptc_bridge_host_close(j->host, &c);
    j->host = NULL;
    if (o != NULL) {
        o->tool_calls = c.tool_calls + c.replayed;
        o->outputs = outputs;
        outputs = NULL;
        if (cJSON_GetArraySize(warn) > 0) {
            o->warnings = warn;
            warn = NULL;
        }
    }
    cJSON_Delete(outputs);
    cJSON_Delete(warn);
}

/* --- runs and repairs ---------------------------------------------------------------------- */

static void outcome_clear(outcome_t *o)
{
    free(o->out);
    free(o->err);
    free(o->signal_name);
    cJSON_Delete(o->outputs);
    cJSON_Delete(o->warnings);
    memset(o, 0, sizeof *o);
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

static void job_free(job_t *j)
{
    if (j->timer != NULL) {
        uv_timer_stop(j->timer);
        uv_close((uv_handle_t *)j->timer, timer_closed);
    }
    ptc_repair_ask_cancel(j->ask);
    close_bridge(j, NULL);
    ptc_journal_free(j->journal);
    for (size_t i = 0; i < sizeof j->codes / sizeof j->codes[0]; i++)
        free(j->codes[i]);
    cJSON_Delete(j->attempts);
    outcome_clear(&j->last);
    free(j);
}

static const char *job_code(const job_t *j)
{
    return j->codes[j->attempt - 1];
}

static bool healing(const job_t *j)
{
    return j->max_repairs > 0;
}

static void job_cancelled(mcp_call_t *call, void *data)
{
    job_t *j = data;
    exec_run_cancel(j->run); /* kills the whole tree now; no on_done follows */
    j->run = NULL;
    mcp_log(j->ex->lg, MCP_LOG_INFO, "execute_code: request cancelled (attempt %u%s)", j->attempt,
            j->ask != NULL ? ", while waiting for a repair" : "");
    job_free(j); /* cancels the bridge's downstream calls and a repair request in flight */
    mcp_call_finish_text(call, true, "cancelled: the run was killed");
}

static void job_progress(exec_run_t *run, uint64_t elapsed_ms, uint64_t output_bytes, void *user)
{
    job_t *j = user;
    (void)run;
    char msg[160];
    ptc_bridge_counters_t c = {0};
    if (j->host != NULL) ptc_bridge_host_counters(j->host, &c);
    int k = 0;
    if (healing(j))
        k = snprintf(msg, sizeof msg, "attempt %u of %ld: ", j->attempt, j->max_repairs + 1);
    snprintf(msg + k, sizeof msg - (size_t)k,
             "running %.1f s, %llu bytes of output, %llu tool calls", (double)elapsed_ms / 1000.0,
             (unsigned long long)output_bytes, (unsigned long long)(c.tool_calls + c.replayed));
    /* Without repairs progress is the run's own clock; with them, the request's (runs and
     * repairs together), so that it keeps increasing from one attempt to the next. */
    if (healing(j))
        mcp_call_progress(j->call, (double)(uv_now(j->ex->loop) - j->t0),
                          (double)(j->deadline - j->t0), msg);
    else
        mcp_call_progress(j->call, (double)elapsed_ms, (double)j->timeout_ms, msg);
}

/* Keeps what the finished run's answer needs (the exec result is only valid during on_done),
 * and ends its bridge. */
static int capture(job_t *j, const exec_result_t *r, outcome_t *o)
{
    memset(o, 0, sizeof *o);
    o->status = r->status;
    o->exit_code = r->exit_code;
    o->out = exec_pages_utf8_sanitize((const char *)r->out.data, r->out.len, &o->out_len);
    o->err = exec_pages_utf8_sanitize((const char *)r->err.data, r->err.len, &o->err_len);
    o->signal_name = r->signal_name ? strdup(r->signal_name) : NULL;
    o->out_total = r->out.total;
    o->err_total = r->err.total;
    o->truncated = r->out.truncated || r->err.truncated;
    o->duration_ms = r->duration_ms;
    o->sandbox = r->sandbox;
    o->timeout_ms = j->run_timeout_ms;
    o->deadline_cut = j->run_timeout_ms < j->timeout_ms;
    /* Every answer the sandbox waited for was read before it exited: the records are whole. */
    close_bridge(j, o);
    if (o->outputs == NULL) o->outputs = cJSON_CreateArray();
    if (o->out == NULL || o->err == NULL || o->outputs == NULL ||
        (r->signal_name != NULL && o->signal_name == NULL))
        return MCP_ENOMEM;
    return 0;
}

/* Appends the finished attempt to the history. */
static void record_attempt(job_t *j, const outcome_t *o, const char *fp, cJSON *replayed)
{
    cJSON *a = cJSON_CreateObject();
    char changes[64] = "";
    if (j->attempt > 1)
        ptc_repair_diff_summary(j->codes[j->attempt - 2], job_code(j), changes, sizeof changes);
    bool ok = a != NULL && cJSON_AddNumberToObject(a, "attempt", j->attempt) &&
              cJSON_AddStringToObject(a, "status", exec_status_name(o->status)) &&
              (o->exit_code >= 0 ? cJSON_AddNumberToObject(a, "exit_code", o->exit_code)
                                 : cJSON_AddNullToObject(a, "exit_code")) &&
              (fp != NULL ? cJSON_AddStringToObject(a, "error", fp)
                          : cJSON_AddNullToObject(a, "error")) &&
              (j->attempt > 1 ? cJSON_AddStringToObject(a, "changes", changes)
                              : cJSON_AddNullToObject(a, "changes")) &&
              (j->attempt > 1 ? cJSON_AddStringToObject(a, "repaired_by", j->repairer)
                              : cJSON_AddNullToObject(a, "repaired_by")) &&
              cJSON_AddNumberToObject(a, "duration_ms", (double)o->duration_ms) &&
              cJSON_AddNumberToObject(a, "tool_calls", (double)o->tool_calls);
    if (ok && replayed != NULL) {
        ok = cJSON_AddItemToObject(a, "replayed", replayed);
        if (ok) replayed = NULL;
    } else if (ok) {
        ok = cJSON_AddArrayToObject(a, "replayed") != NULL;
    }
    cJSON_Delete(replayed);
    if (!ok || !cJSON_AddItemToArray(j->attempts, a)) cJSON_Delete(a);
}

/* Appends tool t's line of the repair request: its Python signature and summary. */
static void signature_line(sbuf_t *s, const reg_tool_t *t)
{
    char mod[PTC_PYBUNDLE_IDENT_MAX + 1], fn[PTC_PYBUNDLE_IDENT_MAX + 1];
    ptc_pybundle_identifier(t->server, mod, sizeof mod);
    ptc_pybundle_identifier(t->name, fn, sizeof fn);
    sb_fmt(s, "- tools.%s.%s(", mod, fn);
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(t->input_schema, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(t->input_schema, "required");
    const cJSON *p;
    int k = 0;
    cJSON_ArrayForEach(p, props)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        static const char *const map[][2] = {{"string", "str"},   {"integer", "int"},
                                             {"number", "float"}, {"boolean", "bool"},
                                             {"array", "list"},   {"object", "dict"}};
        const char *py = "Any";
        for (size_t i = 0; cJSON_IsString(type) && i < sizeof map / sizeof map[0]; i++)
            if (strcmp(type->valuestring, map[i][0]) == 0) py = map[i][1];
        bool required = false;
        const cJSON *r;
        cJSON_ArrayForEach(r, req)
        {
            if (cJSON_IsString(r) && strcmp(r->valuestring, p->string) == 0) required = true;
        }
        sb_fmt(s, "%s%.100s: %s%s", k++ ? ", " : "", p->string, py, required ? "" : " = None");
    }
    sb_str(s, ")");
    if (t->description != NULL && t->description[0] != '\0') {
        size_t dl = strcspn(t->description, "\n");
        sb_fmt(s, "  # %.*s", (int)(dl > 160 ? 160 : dl), t->description);
    }
    sb_str(s, "\n");
}

/* True if `word` stands in code as a whole Python identifier. */
static bool has_identifier(const char *code, const char *word)
{
    size_t wl = strlen(word);
    if (wl == 0) return false;
    for (const char *p = strstr(code, word); p != NULL; p = strstr(p + 1, word)) {
        bool before = p == code || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        bool after = !(isalnum((unsigned char)p[wl]) || p[wl] == '_');
        if (before && after) return true;
    }
    return false;
}

#define SIG_MODULES_MAX 16 /* `tools.<module>` names read from one program */

typedef struct sig_set {
    const reg_tool_t *t[PTC_REPAIR_SIGS_MAX];
    size_t n;
} sig_set_t;

static void sig_add(sig_set_t *set, const reg_tool_t *t)
{
    if (set->n >= PTC_REPAIR_SIGS_MAX) return;
    for (size_t i = 0; i < set->n; i++)
        if (set->t[i] == t) return;
    set->t[set->n++] = t;
}

/*
 * The tools of the failed attempt as Python signatures, one a line (caller frees): first those
 * it called, then those the code names (`tools.<module>` and the function's name), and for a
 * module whose named functions match no tool (a wrong import is the usual mistake) that
 * module's functions, so the repairer sees what exists.
 */
static char *signatures(job_t *j)
{
    const reg_catalog_t *cat =
        j->ex->search ? reg_registry_catalog(ptc_search_registry(j->ex->search)) : NULL;
    if (cat == NULL) return NULL;
    sig_set_t set = {.n = 0};
    const cJSON *used = j->journal ? ptc_journal_used(j->journal) : NULL;
    const cJSON *u;
    cJSON_ArrayForEach(u, used)
    {
        for (size_t i = 0; i < reg_catalog_count(cat); i++)
            if (strcmp(reg_catalog_at(cat, i)->id, u->valuestring) == 0) {
                sig_add(&set, reg_catalog_at(cat, i));
                break;
            }
    }
    /* The modules the code names, read once from the code. */
    const char *code = job_code(j);
    char mods[SIG_MODULES_MAX][PTC_PYBUNDLE_IDENT_MAX + 1];
    bool named[SIG_MODULES_MAX] = {false};
    size_t n_mods = 0;
    for (const char *p = strstr(code, "tools."); p != NULL && n_mods < SIG_MODULES_MAX;
         p = strstr(p + 1, "tools.")) {
        if (p > code && (isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.')) continue;
        const char *q = p + 6;
        size_t len = 0;
        while (len < PTC_PYBUNDLE_IDENT_MAX && (isalnum((unsigned char)q[len]) || q[len] == '_'))
            len++;
        if (len == 0) continue;
        bool seen = false;
        for (size_t m = 0; m < n_mods && !seen; m++)
            seen = strlen(mods[m]) == len && memcmp(mods[m], q, len) == 0;
        if (seen) continue;
        memcpy(mods[n_mods], q, len);
        mods[n_mods++][len] = '\0';
    }
    for (int pass = 0; pass < 2 && n_mods > 0; pass++) {
        for (size_t i = 0; i < reg_catalog_count(cat) && set.n < PTC_REPAIR_SIGS_MAX; i++) {
            const reg_tool_t *t = reg_catalog_at(cat, i);
            char mod[PTC_PYBUNDLE_IDENT_MAX + 1], fn[PTC_PYBUNDLE_IDENT_MAX + 1];
            ptc_pybundle_identifier(t->server, mod, sizeof mod);
            size_t m = 0;
            while (m < n_mods && strcmp(mods[m], mod) != 0)
                m++;
            if (m == n_mods) continue;
            if (pass == 0) {
                ptc_pybundle_identifier(t->name, fn, sizeof fn);
                if (has_identifier(code, fn)) {
                    sig_add(&set, t);
                    named[m] = true;
                }
            } else if (!named[m]) {
                sig_add(&set, t);
            }
        }
    }
    sbuf_t s = {0};
    for (size_t i = 0; i < set.n; i++)
        signature_line(&s, set.t[i]);
    if (s.failed) {
        free(s.s);
        return NULL;
    }
    return s.s;
}

/* The failed run's error as sent to a repairer and shown in the packet: its last lines. */
static void error_tail(const outcome_t *o, sbuf_t *b)
{
    if (o->status == EXEC_STATUS_TIMEOUT)
        sb_fmt(b, "(the run was killed at its %.1f s timeout)\n", (double)o->timeout_ms / 1000.0);
    else if (o->status == EXEC_STATUS_OOM)
        sb_str(b, "(the run was killed at its memory limit)\n");
    else if (o->status == EXEC_STATUS_KILLED)
        sb_fmt(b, "(the run was killed by %s)\n", o->signal_name ? o->signal_name : "a signal");
    sb_str(b, ptc_repair_last_lines(o->err, PTC_REPAIR_ERROR_LINES));
}

/* --- the final answer ---------------------------------------------------------------------- */

static void finish_job(job_t *j)
{
    ptc_execute_t *ex = j->ex;
    mcp_call_t *call = j->call;
    outcome_t *o = &j->last;
    bool failed = o->status != EXEC_STATUS_OK;
    cJSON *sc = base_fields(exec_status_name(o->status), o->exit_code, o->signal_name, o->out_total,
                            o->err_total, o->truncated, o->duration_ms,
                            exec_sandbox_level_name(o->sandbox));
    sbuf_t note = {0};
    if (o->status == EXEC_STATUS_TIMEOUT)
        sb_fmt(&note, "The run hit its %.1f s timeout%s and was killed.",
               (double)o->timeout_ms / 1000.0,
               o->deadline_cut ? " (cut to the request's overall deadline)" : "");
    else if (o->status == EXEC_STATUS_OOM)
        sb_str(&note, "The run hit its memory limit and was killed.");
    const cJSON *w;
    cJSON_ArrayForEach(w, o->warnings)
    {
        if (!cJSON_IsString(w)) continue;
        if (note.len) sb_str(&note, "\n");
        sb_str(&note, "Warning: ");
        sb_str(&note, w->valuestring);
    }
    int n_attempts = cJSON_GetArraySize(j->attempts);
    sbuf_t heal = {0};
    if (n_attempts > 1) {
        if (heal.len) sb_str(&heal, "\n");
        sb_fmt(&heal, "Self-healing: %d attempts, %d repair%s by %s; the last one %s.", n_attempts,
               n_attempts - 1, n_attempts == 2 ? "" : "s",
               strcmp(j->repairer, "sampling") == 0 ? "the client's model (sampling)"
                                                    : "the fallback repairer",
               failed ? "failed too" : "succeeded");
        const cJSON *a;
        cJSON_ArrayForEach(a, j->attempts)
        {
            const cJSON *err = cJSON_GetObjectItemCaseSensitive(a, "error");
            const cJSON *ch = cJSON_GetObjectItemCaseSensitive(a, "changes");
            const cJSON *rp = cJSON_GetObjectItemCaseSensitive(a, "replayed");
            sb_fmt(&heal, "\n  attempt %d: %s",
                   cJSON_GetObjectItemCaseSensitive(a, "attempt")->valueint,
                   cJSON_GetObjectItemCaseSensitive(a, "status")->valuestring);
            if (cJSON_IsString(ch)) sb_fmt(&heal, " (code changed %s)", ch->valuestring);
            if (cJSON_IsString(err)) sb_fmt(&heal, ": %.300s", err->valuestring);
            if (cJSON_GetArraySize(rp) > 0) {
                sb_fmt(&heal, "; %d call%s replayed, not run again:", cJSON_GetArraySize(rp),
                       cJSON_GetArraySize(rp) == 1 ? "" : "s");
                const cJSON *x;
                cJSON_ArrayForEach(x, rp)
                {
                    sb_fmt(&heal, " %s #%d",
                           cJSON_GetObjectItemCaseSensitive(x, "tool")->valuestring,
                           cJSON_GetObjectItemCaseSensitive(x, "occurrence")->valueint);
                }
            }
        }
    }
    if (j->stop_reason[0] != '\0') {
        if (heal.len) sb_str(&heal, "\n");
        sb_fmt(&heal, "Repairs stopped: %s.", j->stop_reason);
    }
    if (n_attempts > 1) {
        sb_fmt(&heal, "\n%s:\n```python\n", failed ? "Last code tried" : "Final code that worked");
        sb_str(&heal, job_code(j));
        sb_str(&heal, "```");
    }
    cJSON *packet = NULL;
    if (failed && healing(j)) {
        char fp[PTC_REPAIR_FP_MAX];
        ptc_repair_fingerprint(exec_status_name(o->status), o->exit_code, o->signal_name, o->err,
                               fp, sizeof fp);
        unsigned line = ptc_repair_failing_line(o->err);
        char text[PTC_REPAIR_LINE_MAX];
        ptc_repair_code_line(job_code(j), line, text, sizeof text);
        sbuf_t tail = {0};
        error_tail(o, &tail);
        packet = ptc_repair_packet(fp, tail.s ? tail.s : "", line, text);
        free(tail.s);
        if (packet != NULL && j->stop_reason[0] != '\0')
            cJSON_AddStringToObject(packet, "stopped", j->stop_reason);
        if (heal.len) sb_str(&heal, "\n");
        sb_fmt(&heal, "Repair packet: error %s", fp);
        if (line > 0) sb_fmt(&heal, "; failing line %u: %s", line, text);
        sb_str(&heal, ". Fix the code and call execute_code again.");
    }
    bool ok = sc != NULL;
    if (ok) {
        cJSON_ReplaceItemInObjectCaseSensitive(sc, "tool_calls",
                                               cJSON_CreateNumber((double)o->tool_calls));
        cJSON_ReplaceItemInObjectCaseSensitive(sc, "outputs", o->outputs);
        o->outputs = NULL;
        cJSON_ReplaceItemInObjectCaseSensitive(sc, "attempts", j->attempts);
        j->attempts = NULL;
        if (n_attempts > 1) ok = cJSON_AddStringToObject(sc, "final_code", job_code(j)) != NULL;
        if (ok && packet != NULL) {
            ok = cJSON_AddItemToObject(sc, "repair", packet);
            if (ok) packet = NULL;
        }
    }
    cJSON_Delete(packet);
    cJSON *meta = ok ? meta_of(sc) : NULL;
    char *meta_text = meta ? cJSON_PrintUnformatted(meta) : NULL;
    cJSON_Delete(meta);
    exec_page_t page;
    int rc = meta_text ? exec_pages_first(ex->pages, meta_text, o->out, o->out_len, o->err,
                                          o->err_len, ex->page_chars, uv_now(ex->loop), &page)
                       : EXEC_PAGES_ENOMEM;
    cJSON_free(meta_text);
    char *err = o->err;
    o->err = NULL;
    job_free(j);
    if (rc < 0 || !ok || note.failed || heal.failed) {
        free(err);
        free(note.s);
        free(heal.s);
        cJSON_Delete(sc);
        if (rc == 0) exec_page_clear(&page);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR,
                                  "out of memory building the result");
        return;
    }
    finish_page(call, sc, &page, true, note.s, err, heal.s);
    free(note.s);
    free(heal.s);
    free(err);
    exec_page_clear(&page);
}

/* Ends the loop with the last failure and says why no (further) repair was made. */
static void stop_repairs(job_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void stop_repairs(job_t *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->stop_reason, sizeof j->stop_reason, fmt, ap);
    va_end(ap);
    finish_job(j);
}

/* --- the loop ------------------------------------------------------------------------------ */

static void job_done(exec_run_t *run, const exec_result_t *r, void *user);
static void ask_repair(job_t *j);

/* Starts the current attempt's run; on failure answers (refused, or the last failure). */
static void start_run(job_t *j)
{
    ptc_execute_t *ex = j->ex;
    uint64_t now = uv_now(ex->loop);
    j->run_timeout_ms = j->timeout_ms;
    if (healing(j)) {
        uint64_t left = j->deadline > now ? j->deadline - now : 0;
        if (left < j->run_timeout_ms) j->run_timeout_ms = left;
    }
    if (j->run_timeout_ms == 0) j->run_timeout_ms = 1;
    if (j->journal != NULL) ptc_journal_begin_attempt(j->journal);
    exec_callbacks_t cb = {.on_done = job_done, .on_progress = job_progress, .user = j};
    exec_run_opts_t ro;
    exec_run_opts_init(&ro);
    ro.bridge_fd = open_bridge(ex, j);
    if (ro.bridge_fd >= 0) ro.ro_dir = ptc_bundle_root(ex->bundle);
    int rc = exec_run_start_ex(ex->pool, job_code(j), j->run_timeout_ms, &ro, &cb, &j->run);
    if (rc >= 0) return;
    j->run = NULL;
    close_bridge(j, NULL); /* the executor closed the sandbox's end */
    char msg[400];
    snprintf(msg, sizeof msg, "The run was not started: %s. %s", exec_strerror(rc),
             exec_error_hint(rc));
    if (j->have_last) {
        stop_repairs(j, "the repaired code could not be started: %s", msg);
        return;
    }
    mcp_call_t *call = j->call;
    job_free(j);
    finish_refused(ex, call, msg);
}

static void job_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    job_t *j = user;
    ptc_execute_t *ex = j->ex;
    (void)run;
    j->run = NULL;
    if (r->status == EXEC_STATUS_REFUSED) {
        close_bridge(j, NULL);
        if (j->have_last) {
            stop_repairs(j, "the repaired code could not be run: %s",
                         r->message ? r->message : "the sandbox could not be set up");
            return;
        }
        mcp_call_t *call = j->call;
        job_free(j);
        finish_refused(ex, call, r->message ? r->message : "the sandbox could not be set up");
        return;
    }
    outcome_t o;
    if (capture(j, r, &o) < 0) {
        outcome_clear(&o);
        mcp_call_t *call = j->call;
        job_free(j);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR,
                                  "out of memory building the result");
        return;
    }
    cJSON *replayed = j->journal ? ptc_journal_take_replayed(j->journal) : NULL;
    char fp[PTC_REPAIR_FP_MAX] = "";
    bool failed = o.status != EXEC_STATUS_OK;
    if (failed)
        ptc_repair_fingerprint(exec_status_name(o.status), o.exit_code, o.signal_name, o.err, fp,
                               sizeof fp);
    record_attempt(j, &o, failed ? fp : NULL, replayed);
    outcome_clear(&j->last);
    j->last = o;
    bool had_last = j->have_last;
    j->have_last = true;
    if (!failed || !healing(j)) {
        finish_job(j);
        return;
    }
    /* The loop stops at a repeated error: a repair that did not change it will not. */
    if (had_last && strcmp(fp, j->last_fp) == 0) {
        stop_repairs(j, "the same error came back after the repair (%s)", fp);
        return;
    }
    snprintf(j->last_fp, sizeof j->last_fp, "%s", fp);
    if (j->repairs_used >= j->max_repairs) {
        stop_repairs(j, "the repair budget is spent (max_repairs %ld)", j->max_repairs);
        return;
    }
    if (j->journal != NULL && ptc_journal_lost(j->journal)) {
        stop_repairs(j, "not every tool call could be journaled, so a rerun could repeat a side "
                        "effect");
        return;
    }
    uint64_t now = uv_now(ex->loop);
    if (j->deadline <= now || j->deadline - now < EXECUTE_REPAIR_MIN_LEFT_MS) {
        stop_repairs(j, "the request's overall deadline (%.0f s) leaves no time for a repair",
                     (double)(j->deadline - j->t0) / 1000.0);
        return;
    }
    ask_repair(j);
}

static void on_deadline(uv_timer_t *t)
{
    job_t *j = t->data;
    ptc_repair_ask_cancel(j->ask);
    j->ask = NULL;
    stop_repairs(j, "the request's overall deadline (%.0f s) passed while waiting for the repair",
                 (double)(j->deadline - j->t0) / 1000.0);
}

static void on_repaired(void *data, int err, const char *reply, const char *message)
{
    job_t *j = data;
    j->ask = NULL;
    if (j->timer != NULL) uv_timer_stop(j->timer);
    if (err < 0) {
        stop_repairs(j, "the %s did not give a fix: %s",
                     strcmp(j->repairer, "sampling") == 0 ? "client (sampling)"
                                                          : "fallback repairer",
                     message ? message : mcp_strerror(err));
        return;
    }
    char *code = ptc_repair_extract_code(reply);
    if (code == NULL) {
        stop_repairs(j, "out of memory reading the repair");
        return;
    }
    if (code[0] == '\0' || strlen(code) > EXEC_MAX_CODE_BYTES) {
        free(code);
        stop_repairs(j, "the repair holds no usable code");
        return;
    }
    for (unsigned i = 0; i < j->attempt; i++) {
        if (ptc_repair_same_code(j->codes[i], code)) {
            free(code);
            stop_repairs(j,
                         "the repair changed nothing (the same code as attempt %u), which "
                         "counts as the same error",
                         i + 1);
            return;
        }
    }
    j->repairs_used++;
    j->codes[j->attempt++] = code;
    char msg[96];
    snprintf(msg, sizeof msg, "attempt %u of %ld: running the repaired code", j->attempt,
             j->max_repairs + 1);
    mcp_call_progress(j->call, (double)(uv_now(j->ex->loop) - j->t0), (double)(j->deadline - j->t0),
                      msg);
    start_run(j);
}

/* Asks the client's model (sampling) or the fallback repairer for a fix of the last failure;
 * without either, answers with the repair packet. */
static void ask_repair(job_t *j)
{
    ptc_execute_t *ex = j->ex;
    mcp_session_t *s = mcp_call_session(j->call);
    bool sampling = s != NULL && mcp_session_client_has(s, "sampling");
    if (!sampling && ex->repairer == NULL) {
        stop_repairs(j, "this client cannot sample (no sampling capability) and no fallback "
                        "repairer is configured (--repair-url)");
        return;
    }
    sbuf_t tail = {0};
    error_tail(&j->last, &tail);
    char *sigs = signatures(j);
    char *prompt =
        tail.failed ? NULL : ptc_repair_prompt(job_code(j), j->attempt, tail.s ? tail.s : "", sigs);
    free(tail.s);
    free(sigs);
    if (prompt == NULL) {
        stop_repairs(j, "out of memory building the repair request");
        return;
    }
    j->repairer = sampling ? "sampling" : "http";
    int rc = sampling ? ptc_repair_ask_sampling(j->call, prompt, on_repaired, j, &j->ask)
                      : ptc_repair_ask_http(ex->repairer, prompt, on_repaired, j, &j->ask);
    free(prompt);
    if (rc < 0) {
        j->ask = NULL;
        stop_repairs(j, "the repair request could not be sent: %s", mcp_strerror(rc));
        return;
    }
    if (j->timer == NULL) {
        j->timer = malloc(sizeof *j->timer);
        if (j->timer != NULL && uv_timer_init(ex->loop, j->timer) < 0) {
            free(j->timer);
            j->timer = NULL;
        }
    }
    if (j->timer == NULL) {
        stop_repairs(j, "out of memory waiting for the repair");
        return;
    }
    j->timer->data = j;
    uv_timer_start(j->timer, on_deadline, j->deadline - uv_now(ex->loop), 0);
    char msg[PTC_REPAIR_FP_MAX + 96];
    snprintf(msg, sizeof msg, "attempt %u of %ld failed (%.200s); asking %s for a fix", j->attempt,
             j->max_repairs + 1, j->last_fp,
             sampling ? "the client's model" : ptc_repairer_http_name(ex->repairer));
    mcp_call_progress(j->call, (double)(uv_now(ex->loop) - j->t0), (double)(j->deadline - j->t0),
                      msg);
}

static void fetch_page(ptc_execute_t *ex, mcp_call_t *call, const char *cursor)
{
    exec_page_t page;
    int rc = exec_pages_next(ex->pages, cursor, uv_now(ex->loop), &page);
    if (rc == EXEC_PAGES_EXPIRED) {
        mcp_call_finish_text(call, true,
                             "Unknown or expired cursor: output is kept for 30 minutes after its "
                             "last page was read. Run the code again.");
        return;
    }
    cJSON *sc = rc == 0 && page.meta ? cJSON_Parse(page.meta) : NULL;
    if (sc == NULL) {
        exec_page_clear(&page);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    finish_page(call, sc, &page, false, NULL, NULL, NULL);
    exec_page_clear(&page);
}

static void handle(mcp_call_t *call, const cJSON *args, void *data)
{
    ptc_execute_t *ex = data;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(args, "code");
    const cJSON *cursor = cJSON_GetObjectItemCaseSensitive(args, "cursor");
    const cJSON *timeout = cJSON_GetObjectItemCaseSensitive(args, "timeout_seconds");
    const cJSON *repairs = cJSON_GetObjectItemCaseSensitive(args, "max_repairs");
    if (cursor != NULL) {
        if (code != NULL || timeout != NULL || repairs != NULL) {
            mcp_call_finish_text(call, true,
                                 "Invalid arguments: pass cursor alone (it fetches the next page "
                                 "of an earlier run), or code without a cursor.");
            return;
        }
        fetch_page(ex, call, cursor->valuestring);
        return;
    }
    if (code == NULL) {
        mcp_call_finish_text(call, true, "Invalid arguments: code is required (or a cursor).");
        return;
    }
    double secs = timeout ? timeout->valuedouble : EXECUTE_DEFAULT_TIMEOUT_S;
    if (secs > ex->max_timeout_s) {
        mcp_call_finish_text(call, true,
                             "Invalid arguments: timeout_seconds: at most %g (the server's "
                             "--max-timeout)",
                             ex->max_timeout_s);
        return;
    }
    if (memchr(code->valuestring, '\0', strlen(code->valuestring) + 1) !=
        code->valuestring + strlen(code->valuestring)) {
        mcp_call_finish_text(call, true, "Invalid arguments: code contains a NUL character.");
        return;
    }
    job_t *j = calloc(1, sizeof *j);
    if (j != NULL) {
        j->codes[0] = strdup(code->valuestring);
        j->attempts = cJSON_CreateArray();
    }
    if (j == NULL || j->codes[0] == NULL || j->attempts == NULL) {
        if (j != NULL) job_free(j);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    j->ex = ex;
    j->call = call;
    j->attempt = 1;
    j->timeout_ms = (uint64_t)(secs * 1000.0 + 0.5);
    if (j->timeout_ms == 0) j->timeout_ms = 1;
    j->max_repairs = repairs != NULL ? (long)repairs->valuedouble : ex->max_repairs;
    j->t0 = uv_now(ex->loop);
    /* A run asked to last longer than the deadline gets its time; repairs then get none. */
    j->deadline = j->t0 + (j->timeout_ms > ex->deadline_ms ? j->timeout_ms : ex->deadline_ms);
    if (healing(j) && ptc_journal_new(&j->journal) < 0) {
        job_free(j);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    /* Before the start, which may already answer (and free) the call. */
    mcp_call_on_cancel(call, job_cancelled, j);
    start_run(j);
}

/* --- set-up -------------------------------------------------------------------------------- */

int ptc_execute_new(uv_loop_t *loop, const ptc_options_t *o, const mcp_logger_t *lg,
                    ptc_execute_t **out)
{
    *out = NULL;
    ptc_execute_t *ex = calloc(1, sizeof *ex);
    if (ex == NULL) return MCP_ENOMEM;
    ex->loop = loop;
    ex->lg = lg;
    ex->page_chars = o->output_page_chars;
    ex->max_timeout_s = o->max_timeout;
    ex->unsafe = o->unsafe_no_sandbox;
    ex->lim.tool_timeout_ms = (unsigned)(o->tool_timeout * 1000.0);
    ex->confirm_writes = o->confirm_writes;
    ex->lim.allow_tools = o->allow_tools;
    ex->lim.deny_tools = o->deny_tools;
    if (o->audit_log != NULL) {
        ex->audit = fopen(o->audit_log, "ae");
        if (ex->audit == NULL) {
            mcp_log(lg, MCP_LOG_ERROR, "--audit-log %s: %s", o->audit_log, strerror(errno));
            free(ex);
            return MCP_EINVAL;
        }
    }
    ex->lim.audit = ex->audit;
    ex->max_repairs = o->max_repairs;
    if (ex->max_repairs > PTC_REPAIR_MAX) {
        mcp_log(lg, MCP_LOG_ERROR, "--max-repairs: at most %d", PTC_REPAIR_MAX);
        if (ex->audit != NULL) fclose(ex->audit);
        free(ex);
        return MCP_EINVAL;
    }
    if (o->request_deadline > EXECUTE_REQUEST_DEADLINE_MAX_S) {
        mcp_log(lg, MCP_LOG_ERROR, "--request-deadline: at most %d seconds",
                EXECUTE_REQUEST_DEADLINE_MAX_S);
        if (ex->audit != NULL) fclose(ex->audit);
        free(ex);
        return MCP_EINVAL;
    }
    ex->deadline_ms = (uint64_t)(o->request_deadline * 1000.0);
    if (ex->deadline_ms == 0) ex->deadline_ms = 1;
    if (o->repair_url != NULL || o->repair_model != NULL || o->repair_key_env != NULL) {
        char msg[600];
        int rrc =
            o->repair_url == NULL
                ? (snprintf(msg, sizeof msg,
                            "--repair-model and --repair-key-env need --repair-url (the "
                            "chat-completions endpoint)"),
                   MCP_EINVAL)
                : ptc_repairer_http_new(loop, o->repair_url, o->repair_model, o->repair_key_env,
                                        o->ca_file, lg, &ex->repairer, msg, sizeof msg);
        if (rrc < 0) {
            mcp_log(lg, MCP_LOG_ERROR, "%s", msg);
            if (ex->audit != NULL) fclose(ex->audit);
            free(ex);
            return MCP_EINVAL;
        }
        mcp_log(lg, MCP_LOG_INFO, "fallback repairer: %s", ptc_repairer_http_name(ex->repairer));
    }
    exec_options_t eo;
    exec_options_init(&eo);
    if (o->python) eo.python = o->python;
    if (o->max_concurrent) eo.max_concurrent = (unsigned)o->max_concurrent;
    eo.max_queue = (unsigned)o->max_queue;
    eo.mounts = o->mounts;
    eo.n_mounts = o->n_mounts;
    eo.pass_env = o->pass_env;
    eo.n_pass_env = o->n_pass_env;
    eo.unsafe_no_sandbox = o->unsafe_no_sandbox;
    eo.test_disable_layer = getenv("PTC_TEST_DISABLE_LAYER");
    int rc = exec_pages_new(EXECUTE_PAGES_MAX_BYTES, EXECUTE_PAGES_MAX_RUNS, EXECUTE_PAGES_TTL_MS,
                            &ex->pages);
    if (rc < 0) {
        ptc_repairer_http_free(ex->repairer);
        if (ex->audit != NULL) fclose(ex->audit);
        free(ex);
        return MCP_ENOMEM;
    }
    rc = exec_pool_new(loop, &eo, &ex->pool);
    if (rc < 0) {
        mcp_log(lg, MCP_LOG_ERROR, "executor: %s. %s", exec_strerror(rc), exec_error_hint(rc));
        exec_pages_free(ex->pages);
        ptc_repairer_http_free(ex->repairer);
        if (ex->audit != NULL) fclose(ex->audit);
        free(ex);
        return MCP_EINVAL;
    }
    const exec_probe_t *probe = exec_pool_probe(ex->pool);
    if (o->unsafe_no_sandbox) {
        mcp_log(lg, MCP_LOG_WARNING,
                "--unsafe-no-sandbox: execute_code runs code WITHOUT isolation, with this "
                "server's rights");
    } else if (exec_pool_refusing(ex->pool)) {
        mcp_log(lg, MCP_LOG_ERROR, "execute_code will refuse to run: %s", probe->message);
    } else {
        mcp_log(lg, MCP_LOG_INFO, "sandbox: %s", exec_sandbox_level_name(probe->level));
    }
    *out = ex;
    return MCP_OK;
}

static int register_with(ptc_execute_t *ex, mcp_server_t *srv, const char *desc)
{
    mcp_tool_def_t def = {
        .name = "execute_code",
        .title = "Run Python in a sandbox",
        .description = desc,
        .input_schema = input_schema,
        .output_schema = output_schema,
        .annotations = "{\"readOnlyHint\":false,\"destructiveHint\":false,\"idempotentHint\":false,"
                       "\"openWorldHint\":false}",
        .handler = handle,
        .data = ex,
    };
    return mcp_server_add_tool(srv, &def);
}

int ptc_execute_register(ptc_execute_t *ex, mcp_server_t *srv)
{
    return register_with(ex, srv, description);
}

void ptc_execute_describe(ptc_execute_t *ex, mcp_server_t *srv, const cJSON *modules)
{
    /* runs will bind this package folder: have the warm sandboxes made with it */
    const char *root = ex->bundle ? ptc_bundle_root(ex->bundle) : NULL;
    if (root != NULL && !ex->unsafe) exec_pool_warm_for(ex->pool, root);
    sbuf_t d = {0};
    sb_str(&d, description);
    if (cJSON_GetArraySize(modules) > 0) {
        sb_str(&d, " Tools of the connected MCP servers are Python functions here: "
                   "`from tools.MODULE import FUNCTION` (modules: ");
        const cJSON *m;
        int i = 0;
        cJSON_ArrayForEach(m, modules)
        {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "module");
            if (!cJSON_IsString(name)) continue;
            if (i++ > 0) sb_str(&d, ", ");
            sb_str(&d, name->valuestring);
        }
        sb_str(&d, "); search_tools gives their signatures. `tools.emit(obj)` returns a JSON "
                   "record in structuredContent.outputs; failed calls raise tools.ToolError.");
    }
    if (d.failed) {
        free(d.s);
        return;
    }
    /* Unchanged (e.g. no servers yet): no re-registration, so no list_changed for nothing. */
    const char *current = ex->described ? ex->described : description;
    if (strcmp(current, d.s) == 0) {
        free(d.s);
        return;
    }
    mcp_server_hold_notifications(srv, true);
    mcp_server_remove_tool(srv, "execute_code");
    if (register_with(ex, srv, d.s) < 0)
        mcp_log(ex->lg, MCP_LOG_ERROR, "execute_code could not be registered again");
    mcp_server_hold_notifications(srv, false);
    free(ex->described);
    ex->described = d.s;
}

void ptc_execute_attach(ptc_execute_t *ex, ptc_search_t *search, ptc_downstream_t *downstream,
                        ptc_bundle_t *bundle)
{
    ex->search = search;
    ex->downstream = downstream;
    ex->bundle = bundle;
}

void ptc_execute_free(ptc_execute_t *ex)
{
    if (ex == NULL) return;
    if (ex->audit != NULL) fclose(ex->audit);
    ptc_repairer_http_free(ex->repairer);
    free(ex->described);
    exec_pool_free(ex->pool);
    exec_pages_free(ex->pages);
    free(ex);
}

exec_pages_t *ptc_execute_pages(const ptc_execute_t *ex)
{
    return ex->pages;
}

uv_loop_t *ptc_execute_loop(const ptc_execute_t *ex)
{
    return ex->loop;
}
