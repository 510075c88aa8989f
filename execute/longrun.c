/* longrun.c - execute_code's long runs (issue 12): a request whose run (or cell) has not
 * ended after wait_seconds is answered `status: "running"` with the output so far and a run
 * cursor, and the run goes on without a request. A client that declared the tasks extension
 * (2026-07-28) gets a task instead: see on_wait. `{cursor, wait_seconds}` waits on it again
 * (more output, or the final result), `{cursor, cancel: true}` stops it. A run that ends while
 * no request waits keeps its outcome (the repair loop is told only once a request is there to
 * carry a repair's sampling and to take the answer), for EXECUTE_LONGRUN_KEEP_MS at most.
 *
 * Why a run is not told to the repair loop while detached: a repair asks the client's model
 * through the request (MCP sampling rides its stream), and the result goes to a request; with
 * none waiting, neither can happen. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* While a repair is asked for or the packages are awaited the request keeps waiting: it is
 * looked at again this often. */
#define EXECUTE_LONGRUN_RECHECK_MS 500u

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

void ptc__longrun_release(job_t *j)
{
    exec_ws_run_remove(j->lr);
    j->lr = NULL;
    if (j->wait_timer != NULL) uv_close((uv_handle_t *)j->wait_timer, timer_closed);
    j->wait_timer = NULL;
    free(j->refused_msg);
    free(j->refused_final);
    j->refused_msg = j->refused_final = NULL;
}

/* The bytes of a stream not answered yet, at most max, not splitting a UTF-8 character. */
static size_t fresh_part(const exec_output_t *o, uint64_t sent, size_t max)
{
    return sent < o->len ? ptc_utf8_cut((const char *)o->data + sent, o->len - sent, max) : 0;
}

/* Answers the waiting request with status "running": the output new since the last answer
 * (at most a page), the run cursor; the run goes on. */
static void hand_back(job_t *j)
{
    ptc_execute_t *ex = j->ex;
    mcp_call_t *call = j->call;
    /* Kept in the workspace behind a fresh cursor; without one (out of memory) it waits on. */
    bool added = j->lr == NULL;
    if (added) {
        if (exec_ws_run_add(ex->ws, j->owner.b, j, &j->lr) < 0) return;
        snprintf(j->cursor, sizeof j->cursor, "%s", exec_ws_run_cursor(j->lr));
    }
    exec_output_t out = {.data = (const unsigned char *)""}, err = out;
    if (j->run != NULL) (void)exec_run_output(j->run, &out, &err);
    if (j->sess != NULL) (void)ptc__session_output(j->sess, &out, &err);
    size_t page = ex->page_chars;
    size_t on = fresh_part(&out, j->out_sent, page);
    size_t en = fresh_part(&err, j->err_sent, page > on ? page - on : 0);
    char *o = exec_pages_utf8_sanitize((const char *)out.data + j->out_sent, on, NULL);
    char *e = exec_pages_utf8_sanitize((const char *)err.data + j->err_sent, en, NULL);
    uint64_t now = uv_now(ex->loop);
    ptc_bridge_counters_t c = {0};
    ptc_bridge_host_t *host = j->sess != NULL ? ptc__session_host(j->sess) : j->host;
    if (host != NULL) ptc_bridge_host_counters(host, &c);
    cJSON *sc = ptc__execute_base_fields("running", -1, NULL, out.total, err.total, false,
                                         now - j->started_ms, ex->unsafe ? "none" : "full");
    bool ok = sc != NULL && o != NULL && e != NULL &&
              cJSON_AddStringToObject(sc, "stdout", o) != NULL &&
              cJSON_AddStringToObject(sc, "stderr", e) != NULL &&
              cJSON_AddStringToObject(sc, "next_cursor", j->cursor) != NULL &&
              (j->sess != NULL
                   ? cJSON_AddStringToObject(sc, "session", ptc__session_handle(j->sess)) != NULL
                   : cJSON_AddNullToObject(sc, "session") != NULL);
    if (ok)
        cJSON_ReplaceItemInObjectCaseSensitive(
            sc, "tool_calls", cJSON_CreateNumber((double)(c.tool_calls + c.replayed)));
    const exec_running_info_t ri = {.elapsed_ms = now - j->started_ms,
                                    .timeout_ms = j->timeout_ms,
                                    .out = o,
                                    .err = e,
                                    .cursor = j->cursor};
    char *text = NULL;
    if (ok) ok = exec_running_text(&ri, &text) == 0;
    free(o);
    free(e);
    cJSON *content = ok ? mcp_text_content(text) : NULL;
    free(text);
    if (content == NULL) {
        cJSON_Delete(sc);
        if (added) { /* nobody got the cursor */
            exec_ws_run_remove(j->lr);
            j->lr = NULL;
        }
        return; /* out of memory: keep waiting, the final answer may still fit */
    }
    j->out_sent += on;
    j->err_sent += en;
    j->call = NULL;
    mcp_call_finish(call, content, sc, false);
}

static void on_wait(uv_timer_t *t)
{
    job_t *j = t->data;
    if (j->call == NULL) return;
    /* A client of the tasks extension gets a task instead (io.modelcontextprotocol/tasks):
     * the request is answered with it, and the run goes on with its call, which the task
     * now holds; tasks/get shows its result, tasks/cancel is the call's cancel (job_cancelled
     * kills the run). Nothing is handed back, so no cursor or long-run slot is used. */
    if (mcp_call_is_task(j->call)) return; /* a task's later round (MRTR): the task waits */
    if (mcp_call_can_become_task(j->call) && mcp_call_become_task(j->call) == MCP_OK) {
        mcp_log(j->ex->lg, MCP_LOG_DEBUG, "execute_code: the run goes on as a task");
        return;
    }
    /* A repair being asked for rides this request; the packages' wait is short: keep it. A
     * full table of long runs: this request just waits, as before long runs existed. */
    bool hold = (j->loop != NULL && ptc_repair_loop_asking(j->loop)) || j->env_wait != NULL ||
                (j->lr == NULL && exec_ws_runs_full(j->ex->ws));
    if (!hold) hand_back(j);
    if (j->call != NULL) uv_timer_start(t, on_wait, EXECUTE_LONGRUN_RECHECK_MS, 0);
}

int ptc__longrun_arm(job_t *j, uint64_t wait_ms)
{
    if (j->wait_timer == NULL) {
        uv_timer_t *t = calloc(1, sizeof *t);
        if (t == NULL || uv_timer_init(j->ex->loop, t) != 0) {
            free(t);
            return MCP_ENOMEM;
        }
        t->data = j;
        j->wait_timer = t;
    }
    if (j->started_ms == 0) j->started_ms = uv_now(j->ex->loop);
    uv_timer_start(j->wait_timer, on_wait, wait_ms, 0);
    return MCP_OK;
}

/* The run ended while no request waited: keep it for its cursor, bounded in time (a job not
 * handed back waits for an MRTR round, which bounds it itself). */
void ptc__longrun_park(job_t *j)
{
    j->ran_pending = true;
    if (j->lr != NULL) exec_ws_run_keep(j->lr);
}

void ptc__longrun_attach(job_t *j, mcp_call_t *call, uint64_t wait_ms)
{
    j->call = call;
    if (j->lr != NULL) exec_ws_run_hold(j->lr);
    /* Without a timer (out of memory) the request waits for the end. */
    (void)ptc__longrun_arm(j, wait_ms);
    if (!j->ran_pending) return;
    j->ran_pending = false;
    if (j->refused_final != NULL) {
        ptc_execute_t *ex = j->ex;
        char *m = j->refused_final;
        j->refused_final = NULL;
        ptc__execute_job_free(j);
        ptc__execute_finish_refused(ex, call, m);
        free(m);
        return;
    }
    if (j->finish_pending) {
        ptc__execute_finish_job(j);
        return;
    }
    if (j->refused_msg != NULL) {
        char *m = j->refused_msg;
        j->refused_msg = NULL;
        ptc_repair_loop_refused(j->loop, m); /* may answer and free j */
        free(m);
        return;
    }
    if (j->cancel_asked) {
        ptc__execute_finish_job(j);
        return;
    }
    ptc__execute_job_deliver(j); /* the loop finishes, or repairs with this request */
}

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
        /* Killed now: the output so far is its output, and it ends as a run does (with
         * cancel_asked: its result, no repair), while the output is still the run's. The run
         * is cancelled only then: no on_done follows, and j may be gone. */
        exec_run_t *run = j->run;
        exec_result_t r = {.status = EXEC_STATUS_KILLED,
                           .exit_code = -1,
                           .out = {.data = (const unsigned char *)""},
                           .err = {.data = (const unsigned char *)""},
                           .duration_ms = uv_now(ex->loop) - j->started_ms,
                           .sandbox =
                               ex->unsafe ? EXEC_SANDBOX_NONE : exec_pool_probe(ex->pool)->level,
                           .cancelled = true};
        (void)exec_run_output(run, &r.out, &r.err);
        ptc__execute_job_ran(j, &r);
        exec_run_cancel(run);
        return;
    }
    /* Between runs (a repair being asked for, the packages awaited). */
    ptc__execute_job_free(j);
    ptc__execute_finish_message(ex, call, "killed",
                                "The request was cancelled (cancel: true) between its runs.");
}

/* A request naming the cursor of a run handed back as running: wait again, or cancel it. */
bool ptc__longrun_call(ptc_execute_t *ex, mcp_call_t *call, const char *cursor, uint64_t wait_ms,
                       bool cancel)
{
    mcp_identity_t who;
    mcp_call_identity(call, &who);
    job_t *j = exec_ws_run_find(ex->ws, cursor, who.b);
    if (j == NULL) return false;
    if (cancel) {
        cancel_longrun(j, call);
        return true;
    }
    if (j->call != NULL) {
        mcp_call_finish_text(call, true,
                             "Another request is waiting on this run already: wait for its "
                             "answer, then call again with the cursor it returns.");
        return true;
    }
    if (j->mrtr_linked) { /* its answer comes with the round that carries the requestState */
        mcp_call_finish_text(call, true,
                             "This run is waiting for the answer to a question its last call "
                             "returned (an InputRequiredResult): send that call again with the "
                             "answer (inputResponses) and its requestState.");
        return true;
    }
    mcp_call_on_cancel(call, ptc__execute_job_cancelled, j);
    ptc__longrun_attach(j, call, wait_ms); /* may answer and free j */
    return true;
}

void ptc__longrun_ended(void *user, exec_ws_end_t why, void *data)
{
    ptc_execute_t *ex = data;
    job_t *j = user;
    j->lr = NULL;                 /* the workspace forgot it already */
    if (why == EXEC_WS_EXPIRED) { /* kept after its end for a cursor that never came */
        if (j->call == NULL && j->ran_pending) ptc__execute_job_free(j);
        return;
    }
    if (why == EXEC_WS_OWNER_ENDED)
        mcp_log(ex->lg, MCP_LOG_INFO,
                "execute_code: run %.12s... stopped: its client's MCP session ended", j->cursor);
    exec_run_cancel(j->run); /* no on_done follows */
    j->run = NULL;
    mcp_call_t *call = j->call;
    ptc__execute_job_free(j); /* a session's cell dies with the session, closed next */
    if (call != NULL)
        mcp_call_finish_text(call, true,
                             why == EXEC_WS_STOPPED
                                 ? "The server is shutting down."
                                 : "The run was stopped: the MCP session that started it ended.");
}
