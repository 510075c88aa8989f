/* tool_execute.c - the execute_code tool: its arguments, an MCP call becoming executor runs
 * inside the repair loop (repair/), and its set-up. The result is rendered by
 * execute_result.c; tool calls from the sandbox are routed by execute_bridge.c. */
#include "execute_internal.h"

#include "pybundle.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EXECUTE_DEFAULT_TIMEOUT_S 30.0
/* The page store: at most this much output is kept for cursors, for this long when idle. */
#define EXECUTE_PAGES_MAX_BYTES (64u << 20)
#define EXECUTE_PAGES_MAX_RUNS  256u
#define EXECUTE_PAGES_TTL_MS    (30u * 60 * 1000)
/* Files out: kept like the pages (same TTL), this much at most (--file-store-bytes); images up
 * to EXECUTE_IMAGE_MAX_BYTES each become image content blocks (--max-image-bytes). */
#define EXECUTE_FILES_STORE_BYTES   (128u << 20)
#define EXECUTE_FILES_STORE_ENTRIES 1024u
#define EXECUTE_IMAGE_MAX_BYTES     (5u << 20)
/* One deadline covers a request's runs and repairs (--request-deadline, by default 50 s: under
 * the common 60 s client timeout); a day at most keeps the milliseconds far from overflow. */
#define EXECUTE_REQUEST_DEADLINE_MAX_S 86400
/* A run waits at most this long (and never past its own timeout) for the packages' build. */
#define EXECUTE_ENV_WAIT_MS 10000u

static const char input_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"code\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Python 3 source to run. "
    "Print what you want to see; only stdout and stderr come back.\"},"
    "\"timeout_seconds\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"description\":\"Wall-clock "
    "limit for this run (default 30).\"},"
    "\"cursor\":{\"type\":\"string\",\"description\":\"The next_cursor of an earlier result: pass "
    "it alone to get the next page of that run's output.\"},"
    "\"session\":{\"type\":\"string\",\"minLength\":1,\"description\":\"\\\"new\\\" runs the code "
    "in a "
    "new live interpreter and returns its handle (structuredContent.session); pass that handle "
    "to run more code in the same interpreter: variables, imports, open files, /tmp and the "
    "working directory are kept. Without it every run starts fresh.\"},"
    "\"close_session\":{\"type\":\"boolean\",\"description\":\"With session and no code: ends "
    "that session.\"},"
    "\"wait_seconds\":{\"type\":\"number\",\"minimum\":0,\"maximum\":3600,\"description\":\"How "
    "long this call waits for the run (default: the server's --wait-seconds, 45). A run still "
    "going then comes back as status running with its output so far and a next_cursor: call "
    "again with that cursor (and wait_seconds) to wait for more; timeout_seconds still bounds "
    "the run.\"},"
    "\"cancel\":{\"type\":\"boolean\",\"description\":\"With the cursor of a run that came back "
    "running: stops it and returns its result.\"},"
    "\"max_repairs\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":10,\"description\":\"How "
    "many times a failed run may be repaired and run again (the client's model fixes it through "
    "sampling; tool calls that already succeeded are replayed, not repeated). 0 turns it off; "
    "the default is the server's --max-repairs.\"}},"
    "\"additionalProperties\":false}";

/* Every result, a run's or a page's, success or failure, validates against this. */
static const char output_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"status\":{\"type\":\"string\",\"enum\":[\"ok\",\"error\",\"timeout\",\"killed\",\"oom\","
    "\"refused\",\"running\"]},"
    "\"session\":{\"type\":[\"string\",\"null\"]},"
    "\"interrupted\":{\"type\":\"boolean\"},\"session_ended\":{\"type\":\"boolean\"},"
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
    "\"environment\":{\"type\":\"object\",\"properties\":{"
    "\"state\":{\"type\":\"string\",\"enum\":[\"building\",\"failed\"]},"
    "\"packages\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"failed_package\":{\"type\":[\"string\",\"null\"]},"
    "\"message\":{\"type\":\"string\"},\"pip_tail\":{\"type\":\"string\"},"
    "\"optional\":{\"type\":\"boolean\"}},\"required\":[\"state\",\"packages\"]},"
    "\"sandbox\":{\"type\":\"string\",\"enum\":[\"full\",\"degraded\",\"none\"]},"
    "\"files\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},\"mime_type\":{\"type\":\"string\"},"
    "\"bytes\":{\"type\":\"integer\"},\"uri\":{\"type\":[\"string\",\"null\"]},"
    "\"truncated\":{\"type\":\"boolean\"},\"omitted\":{\"type\":\"boolean\"},"
    "\"reason\":{\"type\":\"string\"}},\"required\":[\"name\",\"mime_type\",\"bytes\","
    "\"uri\"]}}},"
    "\"required\":[\"status\",\"exit_code\",\"signal\",\"stdout\",\"stderr\",\"stdout_bytes\","
    "\"stderr_bytes\",\"truncated\",\"duration_ms\",\"next_cursor\",\"tool_calls\",\"outputs\","
    "\"attempts\",\"sandbox\"]}";

/* The description is description_head, what the code can import (environment.c: the standard
 * library, the declared packages, the user's helpers), then description. */
static const char description_head[] =
    "Run Python 3 code in a sandbox and return its output. Each call starts fresh unless it "
    "passes a session (session: \"new\" keeps a live interpreter whose handle later calls "
    "pass); there is no network; /tmp is a small private scratch space; ";
static const char description[] =
    ". Print results to stdout. Long output comes in pages: call "
    "again with only the returned cursor for the next page. A failed run returns isError with "
    "the end of the traceback first. A failed run is repaired and run again where the client "
    "can sample (max_repairs); calls to tools that already succeeded are not repeated.";

/* --- runs --------------------------------------------------------------------------------- */

void ptc__execute_job_free(job_t *j)
{
    ptc_env_wait_cancel(j->env_wait);
    ptc__mrtr_release(j);
    ptc_repair_loop_free(j->loop); /* cancels a repair request in flight */
    ptc__execute_close_bridge(j, NULL);
    ptc__session_release(j);
    ptc__longrun_release(j);
    ptc__execute_outcome_clear(&j->last);
    free(j->code);
    free(j);
}

void ptc__execute_job_cancelled(mcp_call_t *call, void *data)
{
    job_t *j = data;
    if (j->lr_linked) {
        /* The run was handed back as running earlier: only this wait ends, not the run. */
        j->call = NULL;
        if (j->wait_timer != NULL) uv_timer_stop(j->wait_timer);
        mcp_call_finish_text(call, true,
                             "cancelled: stopped waiting; the run goes on (call execute_code "
                             "with cursor \"%s\" to wait again, or with cancel: true to stop it)",
                             j->cursor);
        return;
    }
    if (j->sess != NULL && ptc__session_cancel(j->sess) == 0) {
        /* The cell is interrupted (killed after the grace if it will not stop) and its on_done
         * still comes: the job lives until then, with no request to answer. */
        mcp_log(j->ex->lg, MCP_LOG_INFO, "execute_code: request cancelled, interrupting the cell");
        j->abandoned = true;
        j->call = NULL;
        mcp_call_finish_text(call, true,
                             "cancelled: the cell was interrupted (the session lives on unless it "
                             "would not stop)");
        return;
    }
    exec_run_cancel(j->run); /* kills the whole tree now; no on_done follows */
    j->run = NULL;
    if (j->loop == NULL)
        mcp_log(j->ex->lg, MCP_LOG_INFO,
                "execute_code: request cancelled while waiting for the packages");
    else
        mcp_log(j->ex->lg, MCP_LOG_INFO, "execute_code: request cancelled (attempt %u%s)",
                ptc_repair_loop_attempt(j->loop),
                ptc_repair_loop_asking(j->loop) ? ", while waiting for a repair" : "");
    ptc__execute_job_free(j); /* cancels the bridge's downstream calls and a repair request */
    /* Only a cancel by the server is answered (a client's notifications/cancelled silences
     * the call): the shutdown's, once its grace period is over. */
    mcp_call_finish_text(call, true,
                         "cancelled: the server shut down (SIGINT, SIGTERM or its client went "
                         "away) while the run was going, after its grace period; the run was "
                         "killed");
}

void ptc__execute_job_progress(job_t *j, uint64_t elapsed_ms, uint64_t output_bytes)
{
    if (j->call == NULL) return; /* nobody is waiting for this run */
    char msg[160];
    ptc_bridge_counters_t c = {0};
    ptc_bridge_host_t *host = j->sess != NULL ? ptc__session_host(j->sess) : j->host;
    if (host != NULL) ptc_bridge_host_counters(host, &c);
    bool healing = ptc_repair_loop_healing(j->loop);
    int k = 0;
    if (healing)
        k = snprintf(msg, sizeof msg, "attempt %u of %ld: ", ptc_repair_loop_attempt(j->loop),
                     ptc_repair_loop_max_repairs(j->loop) + 1);
    snprintf(msg + k, sizeof msg - (size_t)k,
             "running %.1f s, %llu bytes of output, %llu tool calls", (double)elapsed_ms / 1000.0,
             (unsigned long long)output_bytes, (unsigned long long)(c.tool_calls + c.replayed));
    /* Without repairs progress is the run's own clock; with them, the request's (runs and
     * repairs together), so that it keeps increasing from one attempt to the next. */
    if (healing) {
        double elapsed, total;
        ptc_repair_loop_clock(j->loop, &elapsed, &total);
        mcp_call_progress(j->call, elapsed, total, msg);
    } else {
        mcp_call_progress(j->call, (double)elapsed_ms, (double)j->timeout_ms, msg);
    }
}

static void job_progress(exec_run_t *run, uint64_t elapsed_ms, uint64_t output_bytes, void *user)
{
    (void)run;
    ptc__execute_job_progress(user, elapsed_ms, output_bytes);
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
    o->interrupted = r->interrupted;
    o->session_ended = r->session_ended;
    o->cancelled = r->cancelled || j->cancel_asked;
    /* Every answer the sandbox waited for was read before it exited: the records are whole. */
    ptc__execute_close_bridge(j, o);
    if (o->outputs == NULL) o->outputs = cJSON_CreateArray();
    if (ptc__execute_keep_files(j->ex, &j->owner, r, o) < 0) return MCP_ENOMEM;
    if (o->out == NULL || o->err == NULL || o->outputs == NULL ||
        (r->signal_name != NULL && o->signal_name == NULL))
        return MCP_ENOMEM;
    return 0;
}

/* Appends the finished attempt to the history. */

void ptc__execute_job_ran(job_t *j, const exec_result_t *r)
{
    j->run = NULL;
    if (j->abandoned) { /* the request was cancelled while the cell ran */
        ptc__execute_job_free(j);
        return;
    }
    if (r->status == EXEC_STATUS_REFUSED && j->call == NULL) {
        ptc__execute_close_bridge(j, NULL);
        j->refused_msg = strdup(r->message ? r->message : "the sandbox could not be set up");
        ptc__longrun_park(j); /* told to the loop when a request waits again */
        return;
    }
    if (r->status == EXEC_STATUS_REFUSED) {
        ptc__execute_close_bridge(j, NULL);
        ptc_repair_loop_refused(j->loop,
                                r->message ? r->message : "the sandbox could not be set up");
        return;
    }
    outcome_t o;
    if (capture(j, r, &o) < 0) {
        ptc__execute_outcome_clear(&o);
        mcp_call_t *call = j->call;
        ptc__execute_job_free(j);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR,
                                  "out of memory building the result");
        return;
    }
    ptc__execute_outcome_clear(&j->last);
    j->last = o;
    if (j->cancel_asked) { /* {cursor, cancel: true}: its result, no repair */
        ptc__execute_finish_job(j);
        return;
    }
    if (j->call == NULL) { /* handed back as running: kept until a request waits again */
        ptc__longrun_park(j);
        return;
    }
    ptc__execute_job_deliver(j);
}

void ptc__execute_job_deliver(job_t *j)
{
    ptc_repair_run_t ran = ptc__execute_run_of(&j->last);
    ptc_repair_loop_ran(j->loop, &ran); /* may answer and free j */
}

static void job_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    (void)run;
    ptc__execute_job_ran(user, r);
}

/* --- the repair loop's operations ---------------------------------------------------------- */

static int op_run(void *data, const char *code, uint64_t timeout_ms, char *msg, size_t msg_size)
{
    job_t *j = data;
    ptc_execute_t *ex = j->ex;
    j->run_timeout_ms = timeout_ms;
    j->out_sent = j->err_sent = 0; /* a new run's output starts again */
    if (j->sess != NULL) return ptc__session_run(j, code, timeout_ms, msg, msg_size);
    exec_callbacks_t cb = {.on_done = job_done, .on_progress = job_progress, .user = j};
    exec_run_opts_t ro;
    exec_run_opts_init(&ro);
    ro.bridge_fd = ptc__execute_open_bridge(ex, j);
    if (ro.bridge_fd >= 0) ro.ro_dir = ptc_pybundle_cache_root(ex->bundle);
    /* The packages (once ready) and the helpers, with or without a bridge. */
    const char *dirs[EXEC_MAX_PATH_DIRS];
    ro.n_path_dirs = ptc_env_path_dirs(ex->env, dirs, EXEC_MAX_PATH_DIRS);
    ro.path_dirs = dirs;
    int rc = exec_run_start_ex(ex->pool, code, timeout_ms, &ro, &cb, &j->run);
    if (rc >= 0) return 0;
    j->run = NULL;
    ptc__execute_close_bridge(j, NULL); /* the executor closed the sandbox's end */
    snprintf(msg, msg_size, "The run was not started: %s. %s", exec_strerror(rc),
             exec_error_hint(rc));
    return rc;
}

static void op_refused(void *data, const char *message)
{
    job_t *j = data;
    if (j->call == NULL) { /* nobody waits now: answered when a request comes for it */
        free(j->refused_final);
        j->refused_final = strdup(message);
        ptc__longrun_park(j);
        return;
    }
    ptc_execute_t *ex = j->ex;
    mcp_call_t *call = j->call;
    ptc__execute_job_free(j);
    ptc__execute_finish_refused(ex, call, message);
}

static void op_finish(void *data)
{
    job_t *j = data;
    if (j->call == NULL) { /* nobody waits now (a repair's answer came after the wait ended) */
        j->finish_pending = true;
        ptc__longrun_park(j);
        return;
    }
    ptc__execute_finish_job(j);
}

static const ptc_repairer_desc_t sampling_desc = {
    .id = "sampling",
    .who = "client (sampling)",
    .by = "the client's model (sampling)",
    .asking = "the client's model",
};

/* The client's model when it can sample, else the fallback repairer (--repair-url). */
static const ptc_repairer_desc_t *op_repairer(void *data, char *why, size_t why_size)
{
    job_t *j = data;
    /* A 2026-07-28 client declares sampling in each request (and is asked through MRTR). */
    j->sampling = j->call != NULL && mcp_call_client_has(j->call, "sampling");
    if (j->sampling) return &sampling_desc;
    if (j->ex->repairer != NULL) return &j->ex->http_desc;
    snprintf(why, why_size,
             "this client cannot sample (no sampling capability) and no fallback "
             "repairer is configured (--repair-url)");
    return NULL;
}

/* Past the loop's deadline a parked repair's job is kept this much longer, so that a round that
 * comes late still gets the request's result (the deadline's stop reason) before it goes. */
#define EXECUTE_MRTR_GRACE_MS 30000u

/* A repair of a 2026-07-28 client's run: the call is answered with an InputRequiredResult
 * asking for the sampling; the job waits for the round that brings the model's answer. */
static int ask_mrtr(job_t *j, const char *prompt, ptc_repair_cb cb, void *cb_data,
                    ptc_repair_ask_t **a)
{
    cJSON *params = ptc_repair_sampling_params(prompt);
    int rc = params == NULL ? MCP_ENOMEM : ptc_repair_ask_mrtr(cb, cb_data, a);
    if (rc < 0) {
        cJSON_Delete(params);
        return rc;
    }
    double elapsed, total;
    ptc_repair_loop_clock(j->loop, &elapsed, &total);
    uint64_t left = total > elapsed ? (uint64_t)(total - elapsed) : 0;
    j->mrtr_ask = *a;
    rc = ptc__mrtr_park(j, EXECUTE_MRTR_KEY_REPAIR, "sampling/createMessage", params,
                        left + EXECUTE_MRTR_GRACE_MS);
    if (rc < 0) {
        j->mrtr_ask = NULL;
        ptc_repair_ask_cancel(*a);
        *a = NULL;
    }
    return rc;
}

static int op_ask(void *data, const char *prompt, ptc_repair_cb cb, void *cb_data, void **handle)
{
    job_t *j = data;
    ptc_repair_ask_t *a = NULL;
    int rc = !j->sampling ? ptc_repair_ask_http(j->ex->repairer, prompt, cb, cb_data, &a)
             : mcp_call_is_modern(j->call)
                 ? ask_mrtr(j, prompt, cb, cb_data, &a)
                 : ptc_repair_ask_sampling(j->call, prompt, cb, cb_data, &a);
    *handle = a;
    return rc;
}

static void op_cancel_ask(void *data, void *handle)
{
    job_t *j = data;
    if (j->mrtr_ask == handle) j->mrtr_ask = NULL; /* no round will bring its answer now */
    ptc_repair_ask_cancel(handle);
}

static char *op_signatures(void *data, const char *code, const cJSON *used)
{
    job_t *j = data;
    if (j->ex->search == NULL) return NULL;
    return ptc_pybundle_signatures(reg_registry_catalog(ptc_search_registry(j->ex->search)), code,
                                   used);
}

static void op_progress(void *data, double elapsed_ms, double total_ms, const char *msg)
{
    job_t *j = data;
    if (j->call != NULL) mcp_call_progress(j->call, elapsed_ms, total_ms, msg);
}

static const ptc_repair_ops_t repair_ops = {
    .run = op_run,
    .refused = op_refused,
    .finish = op_finish,
    .repairer = op_repairer,
    .ask = op_ask,
    .cancel = op_cancel_ask,
    .strerror = ptc_repairer_strerror,
    .signatures = op_signatures,
    .progress = op_progress,
};

/* --- the tool ------------------------------------------------------------------------------ */

static void start_job(job_t *j);

/* {cursor, cancel: true} on a run handed back as running: its result as it ends now. */
static void cancel_longrun(job_t *j, mcp_call_t *call)
{
    ptc_execute_t *ex = j->ex;
    if (j->call != NULL) { /* another request was waiting on it */
        mcp_call_t *w = j->call;
        j->call = NULL;
        mcp_call_finish_text(w, true, "The run was cancelled by another request (cancel: true).");
    }
    j->call = call;
    j->cancel_asked = true;
    if (j->wait_timer != NULL) uv_timer_stop(j->wait_timer);
    if (j->ran_pending) { /* it had ended already: that result */
        ptc__longrun_attach(j, call, 0);
        return;
    }
    if (j->sess != NULL && ptc__session_cancel(j->sess) == 0) return; /* its on_done answers */
    if (j->run != NULL) {
        /* Killed now: the output so far is its output. */
        exec_output_t out, err;
        outcome_t o;
        memset(&o, 0, sizeof o);
        if (exec_run_output(j->run, &out, &err) == 0) {
            o.out = exec_pages_utf8_sanitize((const char *)out.data, out.len, &o.out_len);
            o.err = exec_pages_utf8_sanitize((const char *)err.data, err.len, &o.err_len);
            o.out_total = out.total;
            o.err_total = err.total;
            o.truncated = out.truncated || err.truncated;
        }
        exec_run_cancel(j->run);
        j->run = NULL;
        if (o.out == NULL) o.out = strdup("");
        if (o.err == NULL) o.err = strdup("");
        o.status = EXEC_STATUS_KILLED;
        o.exit_code = -1;
        o.cancelled = true;
        o.duration_ms = uv_now(ex->loop) - j->started_ms;
        o.sandbox = ex->unsafe ? EXEC_SANDBOX_NONE : exec_pool_probe(ex->pool)->level;
        o.timeout_ms = j->run_timeout_ms;
        ptc__execute_close_bridge(j, &o);
        if (o.outputs == NULL) o.outputs = cJSON_CreateArray();
        ptc__execute_outcome_clear(&j->last);
        j->last = o;
        if (o.out == NULL || o.err == NULL || o.outputs == NULL) {
            ptc__execute_job_free(j);
            mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
            return;
        }
        ptc__execute_finish_job(j);
        return;
    }
    /* Between runs (a repair being asked for, the packages awaited). */
    ptc__execute_job_free(j);
    ptc__execute_finish_message(ex, call, "killed",
                                "The request was cancelled (cancel: true) between its runs.");
}

/* A request naming the cursor of a run handed back as running: wait again, or cancel it. */
static void on_longrun(job_t *j, mcp_call_t *call, uint64_t wait_ms, bool cancel)
{
    if (cancel) {
        cancel_longrun(j, call);
        return;
    }
    if (j->call != NULL) {
        mcp_call_finish_text(call, true,
                             "Another request is waiting on this run already: wait for its "
                             "answer, then call again with the cursor it returns.");
        return;
    }
    if (j->mrtr_linked) { /* its answer comes with the round that carries the requestState */
        mcp_call_finish_text(call, true,
                             "This run is waiting for the answer to a question its last call "
                             "returned (an InputRequiredResult): send that call again with the "
                             "answer (inputResponses) and its requestState.");
        return;
    }
    mcp_call_on_cancel(call, ptc__execute_job_cancelled, j);
    ptc__longrun_attach(j, call, wait_ms); /* may answer and free j */
}

/* The run cursor of the cell running in s when it was handed back as running, else NULL. */
static const char *busy_cursor(const ptc_xsession_t *s)
{
    const job_t *j = ptc__session_job(s);
    return j != NULL && j->cursor[0] != '\0' ? j->cursor : NULL;
}

/* Gives j the session its request names ("new": a new one), or answers the request with why
 * not and frees j. */
static bool take_session(job_t *j, const char *handle)
{
    ptc_execute_t *ex = j->ex;
    mcp_call_t *call = j->call;
    char msg[700];
    bool fresh = strcmp(handle, "new") == 0;
    ptc_xsession_t *s = fresh ? ptc__session_create(ex->sessions, &j->owner, msg, sizeof msg)
                              : ptc__session_find(ex->sessions, handle, &j->owner, msg, sizeof msg);
    if (s != NULL && !fresh && ptc__session_busy(s)) {
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
    ptc__session_claim(s, j);
    return true;
}

/* {session, close_session: true}: ends the session (a cell running in it dies, its request is
 * answered so). */
static void close_session(ptc_execute_t *ex, mcp_call_t *call, const cJSON *session, bool extra)
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
    ptc_xsession_t *s =
        ptc__session_find(ex->sessions, session->valuestring, &who, msg, sizeof msg);
    if (s == NULL) {
        mcp_call_finish_text(call, true, "%s", msg);
        return;
    }
    job_t *running = ptc__session_job(s);
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

static void handle(mcp_call_t *call, const cJSON *args, void *data)
{
    ptc_execute_t *ex = data;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(args, "code");
    const cJSON *cursor = cJSON_GetObjectItemCaseSensitive(args, "cursor");
    const cJSON *timeout = cJSON_GetObjectItemCaseSensitive(args, "timeout_seconds");
    const cJSON *repairs = cJSON_GetObjectItemCaseSensitive(args, "max_repairs");
    const cJSON *session = cJSON_GetObjectItemCaseSensitive(args, "session");
    const cJSON *close = cJSON_GetObjectItemCaseSensitive(args, "close_session");
    const cJSON *wait = cJSON_GetObjectItemCaseSensitive(args, "wait_seconds");
    const cJSON *cancel = cJSON_GetObjectItemCaseSensitive(args, "cancel");
    uint64_t wait_ms = wait != NULL ? (uint64_t)(wait->valuedouble * 1000.0) : ex->wait_ms;
    /* A 2026-07-28 client's next round: the answer a parked request asked for. */
    if (ptc__mrtr_resume(ex, call, args, wait_ms)) return;
    if (cursor != NULL) {
        if (code != NULL || timeout != NULL || repairs != NULL || session != NULL ||
            close != NULL) {
            mcp_call_finish_text(call, true,
                                 "Invalid arguments: pass cursor alone (it fetches the next page "
                                 "of an earlier run, or waits again on a run still going, with "
                                 "wait_seconds or cancel), or code without a cursor.");
            return;
        }
        mcp_identity_t who;
        mcp_call_identity(call, &who);
        job_t *lr = ptc__longrun_find(ex, cursor->valuestring, &who);
        if (lr != NULL) {
            on_longrun(lr, call, wait_ms, cJSON_IsTrue(cancel));
            return;
        }
        if (cJSON_IsTrue(cancel)) {
            mcp_call_finish_text(call, true,
                                 "Unknown cursor for cancel: no run still going has it (it ended "
                                 "and its result was read, or it expired). A page cursor needs no "
                                 "cancel.");
            return;
        }
        ptc__execute_fetch_page(ex, call, cursor->valuestring);
        return;
    }
    if (cancel != NULL) {
        mcp_call_finish_text(call, true,
                             "Invalid arguments: cancel takes the cursor of a run that came back "
                             "running.");
        return;
    }
    if (cJSON_IsTrue(close)) {
        close_session(ex, call, session, code != NULL || timeout != NULL || repairs != NULL);
        return;
    }
    if (code == NULL) {
        mcp_call_finish_text(call, true, "Invalid arguments: code is required (or a cursor).");
        return;
    }
    if (ptc_startup_hold(ex->startup, call, args, ptc_startup_uses_tools(code->valuestring), handle,
                         ex))
        return;
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
    if (strlen(code->valuestring) > ex->max_code_bytes) {
        mcp_call_finish_text(call, true,
                             "Invalid arguments: code is %zu bytes, longer than the %zu the server "
                             "accepts (--max-code-bytes, at most %u). Put data in a file under a "
                             "--mount folder and read it from the code instead.",
                             strlen(code->valuestring), ex->max_code_bytes,
                             (unsigned)EXEC_MAX_CODE_BYTES);
        return;
    }
    job_t *j = calloc(1, sizeof *j);
    if (j == NULL || (j->code = strdup(code->valuestring)) == NULL) {
        free(j);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    j->ex = ex;
    j->call = call;
    j->timeout_ms = (uint64_t)(secs * 1000.0 + 0.5);
    if (j->timeout_ms == 0) j->timeout_ms = 1;
    j->max_repairs = repairs != NULL ? (long)repairs->valuedouble : ex->max_repairs;
    mcp_call_identity(call, &j->owner);
    if (session != NULL && !take_session(j, session->valuestring)) return;
    if (ptc__longrun_arm(j, wait_ms) < 0)
        mcp_log(ex->lg, MCP_LOG_WARNING,
                "execute_code: out of memory for the wait timer: this "
                "request waits for the end of its run");
    mcp_call_on_cancel(call, ptc__execute_job_cancelled, j);
    start_job(j);
}

/* Waited for the packages' build: run now (what is left of the timeout), or say it goes on. */
static void env_waited(void *data)
{
    job_t *j = data;
    j->env_wait = NULL;
    uint64_t waited = uv_now(j->ex->loop) - j->env_wait_from;
    j->timeout_ms = j->timeout_ms > waited + 1000 ? j->timeout_ms - waited : 1000;
    start_job(j);
}

/* Starts the request's repair loop, unless the packages are being built (it waits for them,
 * bounded) or failed and are not optional (refused, saying why). */
static void start_job(job_t *j)
{
    ptc_execute_t *ex = j->ex;
    mcp_call_t *call = j->call;
    ptc_env_run_t what = ptc_env_for_run(ex->env, NULL);
    if (what == PTC_ENV_WAIT && j->env_wait_from == 0) {
        uint64_t max = j->timeout_ms < EXECUTE_ENV_WAIT_MS ? j->timeout_ms : EXECUTE_ENV_WAIT_MS;
        j->env_wait_from = uv_now(ex->loop);
        j->env_wait = ptc_env_wait(ex->env, max, env_waited, j);
        if (j->env_wait != NULL) return;
    }
    /* Still building after the wait (or out of memory), or failed and not optional. */
    if (what != PTC_ENV_RUN) {
        char *note = ptc_env_result_note(ex->env);
        ptc__execute_job_free(j);
        ptc__execute_finish_refused(ex, call, note ? note : "the declared packages are not ready");
        free(note);
        return;
    }
    int rc = ptc_repair_loop_new(ex->loop, j->code, j->timeout_ms, j->max_repairs, ex->deadline_ms,
                                 ex->max_code_bytes, &repair_ops, j, &j->loop);
    if (rc < 0) {
        ptc__execute_job_free(j);
        if (rc == PTC_REPAIR_EINVAL)
            mcp_call_finish_text(call, true, "Invalid arguments: max_repairs: 0 to %d.",
                                 PTC_REPAIR_MAX);
        else
            mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    ptc_repair_loop_start(j->loop);
}

/* --- set-up -------------------------------------------------------------------------------- */

void ptc_execute_sandbox_options(const ptc_options_t *o, exec_options_t *eo)
{
    exec_options_init(eo);
    if (o->python) eo->python = o->python;
    eo->mounts = o->mounts;
    eo->n_mounts = o->n_mounts;
    eo->unsafe_no_sandbox = o->unsafe_no_sandbox;
    if (o->memory_limit) eo->memory_bytes = o->memory_limit;
    if (o->tmp_size) eo->tmp_bytes = o->tmp_size;
    /* in range: ptc_options_parse checked it */
    if (o->cpu_limit > 0) eo->cpu_millis = (unsigned)(o->cpu_limit * 1000.0 + 0.5);
}

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
    ex->wait_ms = (uint64_t)(o->wait_seconds * 1000.0);
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
        ex->http_desc = (ptc_repairer_desc_t){.id = "http",
                                              .who = "fallback repairer",
                                              .by = "the fallback repairer",
                                              .asking = ptc_repairer_http_name(ex->repairer)};
    }
    exec_options_t eo;
    ptc_execute_sandbox_options(o, &eo);
    if (o->max_concurrent) eo.max_concurrent = (unsigned)o->max_concurrent;
    eo.max_queue = (unsigned)o->max_queue;
    eo.pass_env = o->pass_env;
    eo.n_pass_env = o->n_pass_env;
    eo.test_disable_layer = getenv("PTC_TEST_DISABLE_LAYER");
    if (o->max_output_bytes) eo.stdout_keep = eo.stderr_keep = o->max_output_bytes;
    /* The code goes to the launcher as one argv string (MAX_ARG_STRLEN is 128 KiB): the flag
       can lower the bound, not raise it past what the executor passes. */
    ex->max_code_bytes = o->max_code_bytes ? o->max_code_bytes : EXEC_MAX_CODE_BYTES;
    ex->image_max_bytes = o->max_image_bytes ? o->max_image_bytes : EXECUTE_IMAGE_MAX_BYTES;
    if (ex->max_code_bytes > EXEC_MAX_CODE_BYTES || eo.stdout_keep > EXEC_MAX_KEEP_BYTES) {
        mcp_log(lg, MCP_LOG_ERROR,
                ex->max_code_bytes > EXEC_MAX_CODE_BYTES
                    ? "--max-code-bytes: at most %u (the code travels to the sandbox as one "
                      "argument)"
                    : "--max-output-bytes: at most %u",
                ex->max_code_bytes > EXEC_MAX_CODE_BYTES ? (unsigned)EXEC_MAX_CODE_BYTES
                                                         : (unsigned)EXEC_MAX_KEEP_BYTES);
        ptc_repairer_http_free(ex->repairer);
        if (ex->audit != NULL) fclose(ex->audit);
        free(ex);
        return MCP_EINVAL;
    }
    int rc = exec_pages_new(EXECUTE_PAGES_MAX_BYTES, EXECUTE_PAGES_MAX_RUNS, EXECUTE_PAGES_TTL_MS,
                            &ex->pages);
    if (rc == 0)
        rc = exec_filestore_new(o->file_store_bytes ? o->file_store_bytes
                                                    : EXECUTE_FILES_STORE_BYTES,
                                EXECUTE_FILES_STORE_ENTRIES, EXECUTE_PAGES_TTL_MS, &ex->files);
    if (rc < 0) {
        exec_pages_free(ex->pages);
        ptc_repairer_http_free(ex->repairer);
        if (ex->audit != NULL) fclose(ex->audit);
        free(ex);
        return MCP_ENOMEM;
    }
    rc = exec_pool_new(loop, &eo, &ex->pool);
    bool limits_bad = false;
    if (rc == 0) {
        const exec_files_limits_t fl = {.file_bytes = o->max_file_bytes ? o->max_file_bytes
                                                                        : EXECUTE_FILE_MAX_BYTES,
                                        .call_bytes = o->max_call_files_bytes,
                                        .count = (unsigned)o->max_files};
        if (o->max_files > EXEC_FILES_LIMIT_COUNT ||
            exec_pool_set_files_limits(ex->pool, &fl) < 0) {
            mcp_log(lg, MCP_LOG_ERROR,
                    "--max-file-bytes and --max-call-files-bytes: at most %u MiB; --max-files: "
                    "at most %u",
                    (unsigned)(EXEC_FILES_LIMIT_BYTES >> 20), (unsigned)EXEC_FILES_LIMIT_COUNT);
            exec_pool_free(ex->pool);
            ex->pool = NULL;
            rc = EXEC_EINVAL;
            limits_bad = true;
        }
    }
    if (rc == 0) {
        rc = ptc__sessions_new(ex, o->max_sessions, (uint64_t)(o->session_idle_timeout * 1000.0),
                               &ex->sessions);
        if (rc < 0) {
            exec_pool_free(ex->pool);
            ex->pool = NULL;
            rc = EXEC_ENOMEM;
        }
    }
    if (rc < 0) {
        if (!limits_bad)
            mcp_log(lg, MCP_LOG_ERROR, "executor: %s. %s", exec_strerror(rc), exec_error_hint(rc));
        exec_pages_free(ex->pages);
        exec_filestore_free(ex->files);
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
        /* A run that outlives its wait becomes a task for a client of the tasks extension
         * (execute_longrun.c). */
        .task_support = MCP_TASK_OPTIONAL,
    };
    mcp_server_on_task_cancel(srv, ptc__mrtr_cancel_task, ex);
    return mcp_server_add_tool(srv, &def);
}

/* The description: the fixed parts around what the code can import, then the tools package's
 * modules. NULL on ENOMEM. */
static char *compose(const ptc_execute_t *ex, const cJSON *modules)
{
    sbuf_t d = {0};
    char *libs = ptc_env_describe(ex->env);
    ptc__sb_str(&d, description_head);
    if (libs == NULL)
        d.failed = true;
    else
        ptc__sb_str(&d, libs);
    free(libs);
    ptc__sb_str(&d, description);
    /* The user's helpers (server "custom") are imported directly, not through tools. */
    int served = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, modules)
    {
        const cJSON *server = cJSON_GetObjectItemCaseSensitive(m, "server");
        if (!cJSON_IsString(server) || !ptc_env_is_custom(server->valuestring)) served++;
    }
    if (served > 0) {
        ptc__sb_str(&d, " Tools of the connected MCP servers are Python functions here: "
                        "`from tools.MODULE import FUNCTION` (modules: ");
        int i = 0;
        cJSON_ArrayForEach(m, modules)
        {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "module");
            const cJSON *server = cJSON_GetObjectItemCaseSensitive(m, "server");
            if (!cJSON_IsString(name)) continue;
            if (cJSON_IsString(server) && ptc_env_is_custom(server->valuestring)) continue;
            if (i++ > 0) ptc__sb_str(&d, ", ");
            ptc__sb_str(&d, name->valuestring);
        }
        ptc__sb_str(&d, "); search_tools gives their signatures. `tools.emit(obj)` returns a JSON "
                        "record in structuredContent.outputs; failed calls raise tools.ToolError.");
    }
    if (d.failed) {
        free(d.s);
        return NULL;
    }
    return d.s;
}

int ptc_execute_register(ptc_execute_t *ex, mcp_server_t *srv)
{
    char *desc = compose(ex, NULL);
    if (desc == NULL) return MCP_ENOMEM;
    int rc = register_with(ex, srv, desc);
    if (rc < 0) {
        free(desc);
        return rc;
    }
    free(ex->described);
    ex->described = desc;
    return ptc__ends_register(ex, srv);
}

void ptc_execute_describe(ptc_execute_t *ex, mcp_server_t *srv, const cJSON *modules)
{
    /* Runs will bind these folders (the tools package, the packages once ready, the helpers):
     * have the warm sandboxes made with them, else every run starts cold. */
    if (!ex->unsafe) {
        exec_run_opts_t ro;
        exec_run_opts_init(&ro);
        ro.ro_dir = ex->bundle ? ptc_pybundle_cache_root(ex->bundle) : NULL;
        const char *dirs[EXEC_MAX_PATH_DIRS];
        ro.n_path_dirs = ptc_env_path_dirs(ex->env, dirs, EXEC_MAX_PATH_DIRS);
        ro.path_dirs = dirs;
        if (ro.ro_dir != NULL || ro.n_path_dirs > 0) (void)exec_pool_warm_for_ex(ex->pool, &ro);
    }
    sbuf_t d = {.s = compose(ex, modules)};
    if (d.s == NULL) return;
    /* Unchanged (e.g. no servers yet): no re-registration, so no list_changed for nothing. */
    if (ex->described != NULL && strcmp(ex->described, d.s) == 0) {
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

void ptc_execute_set_startup(ptc_execute_t *ex, ptc_startup_t *st)
{
    ex->startup = st;
}

void ptc_execute_attach(ptc_execute_t *ex, ptc_search_t *search, ptc_downstream_t *downstream,
                        ptc_pybundle_cache_t *bundle)
{
    ex->search = search;
    ex->downstream = downstream;
    ex->bundle = bundle;
}

void ptc_execute_set_env(ptc_execute_t *ex, ptc_env_t *e)
{
    ex->env = e;
}

exec_pool_t *ptc__execute_pool(const ptc_execute_t *ex)
{
    return ex->pool;
}

void ptc_execute_free(ptc_execute_t *ex)
{
    if (ex == NULL) return;
    if (ex->audit != NULL) fclose(ex->audit);
    ptc_repairer_http_free(ex->repairer);
    free(ex->described);
    ptc__ends_free(ex);
    ptc__mrtr_close_all(ex);
    ptc__longrun_close_all(ex);
    ptc__sessions_free(ex->sessions); /* before the pool: their sandboxes are its children */
    exec_pool_free(ex->pool);
    exec_pages_free(ex->pages);
    exec_filestore_free(ex->files);
    free(ex);
}

void ptc_execute_stop(ptc_execute_t *ex)
{
    ptc__mrtr_close_all(ex);
    ptc__longrun_close_all(ex);
    ptc__sessions_close_all(ex->sessions);
}

exec_filestore_t *ptc_execute_files(const ptc_execute_t *ex)
{
    return ex->files;
}

exec_pages_t *ptc_execute_pages(const ptc_execute_t *ex)
{
    return ex->pages;
}

uv_loop_t *ptc_execute_loop(const ptc_execute_t *ex)
{
    return ex->loop;
}
