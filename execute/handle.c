/* handle.c - the execute_code tool: its arguments, an MCP call becoming executor runs inside
 * the repair loop (repair/). Its set-up and schemas are in setup.c, the result is rendered by
 * result.c, tool calls from the sandbox reach MCP through routes.c (bridge/ routes them),
 * sessions and long runs are wired to the executor's workspace by sessions.c and longrun.c. */
#include "internal.h"

#include "pybundle.h"

#include <stdlib.h>
#include <string.h>

#define EXECUTE_DEFAULT_TIMEOUT_S 30.0
/* A run waits at most this long (and never past its own timeout) for the packages' build. */
#define EXECUTE_ENV_WAIT_MS 10000u

/* --- runs --------------------------------------------------------------------------------- */

void ptc__execute_job_free(job_t *j)
{
    env_wait_cancel(j->env_wait);
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
    if (j->lr != NULL) {
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
    ptc_bridge_counters_t c = {0};
    ptc_bridge_host_t *host = j->sess != NULL ? ptc__session_host(j->sess) : j->host;
    if (host != NULL) ptc_bridge_host_counters(host, &c);
    ptc_repair_loop_run_progress(j->loop, elapsed_ms, output_bytes, c.tool_calls + c.replayed);
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
    ro.n_path_dirs = env_host_path_dirs(ex->env, dirs, EXEC_MAX_PATH_DIRS);
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

/* A code of either repairer: the fallback's (repair/) or the client's sampling (mcp/). */
static const char *repairer_strerror(int err)
{
    return PTC_ERR_IN_BLOCK(err, PTC_ERR_REPAIR) ? ptc_repair_strerror(err) : mcp_strerror(err);
}

/* The client's model when it can sample, else the fallback repairer (--repair-url). */
static const ptc_repairer_desc_t *op_repairer(void *data, char *why, size_t why_size)
{
    job_t *j = data;
    /* A 2026-07-28 client declares sampling in each request (and is asked through MRTR). */
    j->sampling = j->call != NULL && mcp_call_client_has(j->call, "sampling");
    return ptc_repair_pick(j->sampling, j->ex->repairer != NULL ? &j->ex->http_desc : NULL, why,
                           why_size);
}

/* Past the loop's deadline a parked repair's job is kept this much longer, so that a round that
 * comes late still gets the request's result (the deadline's stop reason) before it goes. */
#define EXECUTE_MRTR_GRACE_MS 30000u

/* A repair of a 2026-07-28 client's run: the call is answered with an InputRequiredResult
 * asking for the sampling; the job waits for the round that brings the model's answer. */
static int ask_mrtr(job_t *j, const char *prompt, ptc_repair_cb cb, void *cb_data,
                    ptc_repair_ask_t **a)
{
    cJSON *params = NULL;
    int rc = ptc_repair_ask_later(prompt, cb, cb_data, &params, a);
    if (rc < 0) return rc;
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

static void sampled(void *data, int err, const cJSON *result, const cJSON *error,
                    const char *message)
{
    (void)error;
    ptc_repair_ask_sampled(data, err, result,
                           message != NULL || err == 0 ? message : mcp_strerror(err));
}

/* The repair's sampling/createMessage on the call's own stream (Streamable HTTP sends it
 * there), with no timeout of its own: the request's deadline cancels it. */
static int sampling_send(void *data, cJSON *params, ptc_repair_ask_t *a, void **sent)
{
    mcp_call_t *call = data;
    mcp_session_t *s = mcp_call_session(call);
    if (s == NULL || !mcp_session_client_has(s, "sampling")) {
        cJSON_Delete(params);
        return MCP_ENOTSUP;
    }
    mcp_outreq_t *o = NULL;
    int rc = mcp_call_request(call, "sampling/createMessage", params, sampled, a, &o);
    *sent = o;
    return rc;
}

static void sampling_cancel(void *data, void *sent)
{
    (void)data;
    mcp_outreq_cancel(sent, "the execute_code request ended");
}

static int op_ask(void *data, const char *prompt, ptc_repair_cb cb, void *cb_data, void **handle)
{
    job_t *j = data;
    ptc_repair_ask_t *a = NULL;
    ptc_repair_sampler_t sampler = {
        .send = sampling_send, .cancel = sampling_cancel, .data = j->call};
    int rc = !j->sampling ? ptc_repair_ask_http(j->ex->repairer, prompt, cb, cb_data, &a)
             : mcp_call_is_modern(j->call)
                 ? ask_mrtr(j, prompt, cb, cb_data, &a)
                 : ptc_repair_ask_sampling(&sampler, prompt, cb, cb_data, &a);
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
    const ptc_execute_t *ex = j->ex;
    return ex->attached ? ex->peers.signatures(ex->peers.data, code, used) : NULL;
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
    .strerror = repairer_strerror,
    .signatures = op_signatures,
    .progress = op_progress,
};

/* --- the tool ------------------------------------------------------------------------------ */

static void start_job(job_t *j);

void ptc__execute_handle(mcp_call_t *call, const cJSON *args, void *data)
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
        if (ptc__longrun_call(ex, call, cursor->valuestring, wait_ms, cJSON_IsTrue(cancel))) return;
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
        ptc__session_close_call(ex, call, session,
                                code != NULL || timeout != NULL || repairs != NULL);
        return;
    }
    if (code == NULL) {
        mcp_call_finish_text(call, true, "Invalid arguments: code is required (or a cursor).");
        return;
    }
    if (ex->attached &&
        ex->peers.hold(ex->peers.data, call, args, ptc_pybundle_code_uses(code->valuestring),
                       ptc__execute_handle, ex))
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
    if (session != NULL && !ptc__session_take(j, session->valuestring)) return;
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
    env_run_t what = env_host_for_run(ex->env, NULL);
    if (what == ENV_RUN_WAIT && j->env_wait_from == 0) {
        uint64_t max = j->timeout_ms < EXECUTE_ENV_WAIT_MS ? j->timeout_ms : EXECUTE_ENV_WAIT_MS;
        j->env_wait_from = uv_now(ex->loop);
        j->env_wait = env_host_wait(ex->env, max, env_waited, j);
        if (j->env_wait != NULL) return;
    }
    /* Still building after the wait (or out of memory), or failed and not optional. */
    if (what != ENV_RUN_NOW) {
        char *note = env_host_result_note(ex->env);
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
