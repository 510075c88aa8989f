/* tool_execute.c - the execute_code tool: an MCP call becomes an executor run, and the run's
 * output becomes a result shaped for a model, paged behind cursors. */
#include "tools.h"

#include "bridge_host.h"
#include "executor.h"
#include "pages.h"

#include <errno.h>
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

struct ptc_execute {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    exec_pool_t *pool;
    ptc_pages_t *pages;
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
};

typedef struct job {
    ptc_execute_t *ex;
    mcp_call_t *call;
    exec_run_t *run;
    uint64_t timeout_ms;
    ptc_bridge_host_t *host; /* NULL when the run has no bridge */
    char run_id[32];
} job_t;

/* A downstream call or registry search made for sandboxed code. */
typedef struct bridge_op {
    bool is_search;
    ptc_bridge_done_cb done;
    void *done_data;
    mcp_client_call_t *call;
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
    "it alone to get the next page of that run's output.\"}},"
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
    "\"attempts\":{\"type\":\"array\"},"
    "\"sandbox\":{\"type\":\"string\",\"enum\":[\"full\",\"degraded\",\"none\"]}},"
    "\"required\":[\"status\",\"exit_code\",\"signal\",\"stdout\",\"stderr\",\"stdout_bytes\","
    "\"stderr_bytes\",\"truncated\",\"duration_ms\",\"next_cursor\",\"tool_calls\",\"outputs\","
    "\"attempts\",\"sandbox\"]}";

static const char description[] =
    "Run Python 3 code in a sandbox and return its output. Each call starts fresh (no state is "
    "kept between calls); there is no network; /tmp is a small private scratch space; the "
    "standard library is available. Print results to stdout. Long output comes in pages: call "
    "again with only the returned cursor for the next page. A failed run returns isError with "
    "the end of the traceback first.";

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

/* Start of the last `lines` lines of s (ignoring a trailing newline). */
static const char *last_lines(const char *s, int lines)
{
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '\n')
        n--;
    const char *p = s + n;
    while (p > s) {
        if (p[-1] == '\n' && --lines == 0) break;
        p--;
    }
    return p;
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
static void finish_page(mcp_call_t *call, cJSON *sc, const ptc_page_t *page, bool first,
                        const char *note, const char *err_tail)
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
            sb_str(&t, last_lines(err_tail, EXECUTE_TRACEBACK_LINES));
            sb_str(&t, "\n");
        }
    }
    if (page->out[0] != '\0') {
        if (failed || page->err[0] != '\0') sb_str(&t, "--- stdout ---\n");
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
    ptc_page_t page = {.out = empty_out, .err = empty_err, .cursor = NULL};
    if (sc == NULL) {
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    finish_page(call, sc, &page, true, message, NULL);
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

/* Ends a run's bridge; adds its calls count, records and warnings to sc (may be NULL). */
static void close_bridge(job_t *j, cJSON *sc, cJSON **warnings)
{
    if (j->host == NULL) return;
    cJSON *outputs = ptc_bridge_host_take_outputs(j->host);
    cJSON *warn = ptc_bridge_host_take_warnings(j->host);
    ptc_bridge_counters_t c;
    ptc_bridge_host_close(j->host, &c);
    j->host = NULL;
    if (sc != NULL) {
        cJSON_ReplaceItemInObjectCaseSensitive(sc, "tool_calls",
                                               cJSON_CreateNumber((double)c.tool_calls));
        if (outputs != NULL) {
            cJSON_ReplaceItemInObjectCaseSensitive(sc, "outputs", outputs);
            outputs = NULL;
        }
    }
    cJSON_Delete(outputs);
    if (warnings != NULL && cJSON_GetArraySize(warn) > 0) {
        *warnings = warn;
        warn = NULL;
    }
    cJSON_Delete(warn);
}

/* --- runs ---------------------------------------------------------------------------------- */

static void job_cancelled(mcp_call_t *call, void *data)
{
    job_t *j = data;
    exec_run_cancel(j->run);     /* kills the whole tree now; no on_done follows */
    close_bridge(j, NULL, NULL); /* and cancels its downstream calls */
    mcp_log(j->ex->lg, MCP_LOG_INFO, "execute_code: run cancelled");
    free(j);
    mcp_call_finish_text(call, true, "cancelled: the run was killed");
}

static void job_progress(exec_run_t *run, uint64_t elapsed_ms, uint64_t output_bytes, void *user)
{
    job_t *j = user;
    (void)run;
    char msg[128];
    ptc_bridge_counters_t c = {0};
    if (j->host != NULL) ptc_bridge_host_counters(j->host, &c);
    snprintf(msg, sizeof msg, "running %.1f s, %llu bytes of output, %llu tool calls",
             (double)elapsed_ms / 1000.0, (unsigned long long)output_bytes,
             (unsigned long long)c.tool_calls);
    mcp_call_progress(j->call, (double)elapsed_ms, (double)j->timeout_ms, msg);
}

static void job_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    job_t *j = user;
    ptc_execute_t *ex = j->ex;
    mcp_call_t *call = j->call;
    (void)run;
    if (r->status == EXEC_STATUS_REFUSED) {
        close_bridge(j, NULL, NULL);
        free(j);
        finish_refused(ex, call, r->message ? r->message : "the sandbox could not be set up");
        return;
    }
    size_t out_len = 0, err_len = 0;
    char *out = ptc_utf8_sanitize((const char *)r->out.data, r->out.len, &out_len);
    char *err = ptc_utf8_sanitize((const char *)r->err.data, r->err.len, &err_len);
    cJSON *sc = base_fields(exec_status_name(r->status), r->exit_code, r->signal_name, r->out.total,
                            r->err.total, r->out.truncated || r->err.truncated, r->duration_ms,
                            exec_sandbox_level_name(r->sandbox));
    /* Every answer the sandbox waited for was read before it exited: the records are whole. */
    cJSON *warnings = NULL;
    close_bridge(j, sc, &warnings);
    free(j);
    cJSON *meta = sc ? meta_of(sc) : NULL;
    char *meta_text = meta ? cJSON_PrintUnformatted(meta) : NULL;
    cJSON_Delete(meta);
    ptc_page_t page;
    int rc = (out && err && meta_text)
                 ? ptc_pages_first(ex->pages, meta_text, out, out_len, err, err_len, ex->page_chars,
                                   uv_now(ex->loop), &page)
                 : PTC_PAGES_ENOMEM;
    cJSON_free(meta_text);
    free(out);
    if (rc < 0 || sc == NULL) {
        free(err);
        cJSON_Delete(sc);
        cJSON_Delete(warnings);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR,
                                  "out of memory building the result");
        return;
    }
    sbuf_t note = {0};
    if (r->status == EXEC_STATUS_TIMEOUT)
        sb_fmt(&note, "The run hit its %.1f s timeout and was killed.",
               (double)r->duration_ms / 1000.0);
    else if (r->status == EXEC_STATUS_OOM)
        sb_str(&note, "The run hit its memory limit and was killed.");
    const cJSON *w;
    cJSON_ArrayForEach(w, warnings)
    {
        if (!cJSON_IsString(w)) continue;
        if (note.len) sb_str(&note, "\n");
        sb_str(&note, "Warning: ");
        sb_str(&note, w->valuestring);
    }
    cJSON_Delete(warnings);
    finish_page(call, sc, &page, true, note.failed ? NULL : note.s, err);
    free(note.s);
    free(err);
    ptc_page_clear(&page);
}

static void fetch_page(ptc_execute_t *ex, mcp_call_t *call, const char *cursor)
{
    ptc_page_t page;
    int rc = ptc_pages_next(ex->pages, cursor, uv_now(ex->loop), &page);
    if (rc == PTC_PAGES_EXPIRED) {
        mcp_call_finish_text(call, true,
                             "Unknown or expired cursor: output is kept for 30 minutes after its "
                             "last page was read. Run the code again.");
        return;
    }
    cJSON *sc = rc == 0 && page.meta ? cJSON_Parse(page.meta) : NULL;
    if (sc == NULL) {
        ptc_page_clear(&page);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    finish_page(call, sc, &page, false, NULL, NULL);
    ptc_page_clear(&page);
}

static void handle(mcp_call_t *call, const cJSON *args, void *data)
{
    ptc_execute_t *ex = data;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(args, "code");
    const cJSON *cursor = cJSON_GetObjectItemCaseSensitive(args, "cursor");
    const cJSON *timeout = cJSON_GetObjectItemCaseSensitive(args, "timeout_seconds");
    if (cursor != NULL) {
        if (code != NULL || timeout != NULL) {
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
    if (j == NULL) {
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    j->ex = ex;
    j->call = call;
    j->timeout_ms = (uint64_t)(secs * 1000.0 + 0.5);
    if (j->timeout_ms == 0) j->timeout_ms = 1;
    exec_callbacks_t cb = {.on_done = job_done, .on_progress = job_progress, .user = j};
    exec_run_opts_t ro;
    exec_run_opts_init(&ro);
    ro.bridge_fd = open_bridge(ex, j);
    if (ro.bridge_fd >= 0) ro.ro_dir = ptc_bundle_root(ex->bundle);
    int rc = exec_run_start_ex(ex->pool, code->valuestring, j->timeout_ms, &ro, &cb, &j->run);
    if (rc < 0) {
        close_bridge(j, NULL, NULL); /* the executor closed the sandbox's end */
        free(j);
        char msg[400];
        snprintf(msg, sizeof msg, "The run was not started: %s. %s", exec_strerror(rc),
                 exec_error_hint(rc));
        finish_refused(ex, call, msg);
        return;
    }
    mcp_call_on_cancel(call, job_cancelled, j);
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
    int rc = ptc_pages_new(EXECUTE_PAGES_MAX_BYTES, EXECUTE_PAGES_MAX_RUNS, EXECUTE_PAGES_TTL_MS,
                           &ex->pages);
    if (rc < 0) {
        free(ex);
        return MCP_ENOMEM;
    }
    rc = exec_pool_new(loop, &eo, &ex->pool);
    if (rc < 0) {
        mcp_log(lg, MCP_LOG_ERROR, "executor: %s. %s", exec_strerror(rc), exec_error_hint(rc));
        ptc_pages_free(ex->pages);
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
    free(ex->described);
    exec_pool_free(ex->pool);
    ptc_pages_free(ex->pages);
    free(ex);
}
