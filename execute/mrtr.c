/* mrtr.c - execute_code for 2026-07-28 clients (MRTR, issue 17): a repair through the
 * client's sampling and a --confirm-writes confirmation cannot be sent to a stateless client as
 * requests of their own, so the call is answered with an InputRequiredResult carrying the
 * request, and the client comes back with the answer in a new call.
 *
 * What goes on meanwhile stays here: the job (its repair loop with the attempts, the error
 * history, the replay journal; or its run, whose bridge call waits for the confirmation) is
 * parked under an unguessable handle, bound to the caller's identity (mcp/identity.c), and only
 * that handle travels in the requestState (which the library signs, binds to execute_code and
 * expires). The state stays small whatever the run holds, and a forged or replayed state finds
 * nothing: the library refuses a changed one, a handle is used once, and another client's
 * handle reads as unknown. A job no round comes for is freed after its bound (a run still going
 * is killed). The executor's workspace does the keeping (exec_ws_park_*: the handle, the owner,
 * the task, the bound, how many wait); what is MCP here stays here: the InputRequiredResult,
 * the requestState's fields and the round's checks. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static void unlink_job(job_t *j)
{
    exec_ws_park_remove(j->mrtr_park);
    j->mrtr_park = NULL;
    j->mrtr_linked = false;
}

void ptc__mrtr_release(job_t *j)
{
    unlink_job(j);
    if (j->mrtr_held != NULL) {
        mcp_relay_held_t *h = j->mrtr_held;
        j->mrtr_held = NULL;
        mcp_relay_held_answer(h, NULL, "the run it came for ended before the client answered");
    }
}

/* Kills j's run (or its session's cell) and frees j. */
static void kill_job(job_t *j, const char *why)
{
    exec_run_cancel(j->run); /* no on_done follows */
    j->run = NULL;
    exec_output_t out, err;
    if (j->sess != NULL && ptc__session_output(j->sess, &out, &err) == 0) {
        /* A cell still running cannot be killed alone: its session goes, as close_session
         * does it. Between cells (a repair waited for) the session just becomes idle again. */
        ptc__session_close(j->sess, why);
        j->sess = NULL;
    }
    ptc__execute_job_free(j);
}

/* The workspace ended j's parking: its bound passed, or the server stops. */
static void on_park_end(void *user, exec_ws_end_t why, const char *handle)
{
    job_t *j = user;
    j->mrtr_park = NULL; /* the workspace forgot it already */
    j->mrtr_linked = false;
    if (why == EXEC_WS_EXPIRED)
        mcp_log(j->ex->lg, MCP_LOG_INFO,
                "execute_code: no next round came for %.13s... in time: its run was stopped",
                handle);
    kill_job(j, why == EXEC_WS_EXPIRED
                    ? "was stopped: the client never came back with the answer it was asked for"
                    : "was stopped: the server is shutting down");
}

int ptc__mrtr_park(job_t *j, const char *key, const char *method, cJSON *params, uint64_t keep_ms)
{
    ptc_execute_t *ex = j->ex;
    mcp_call_t *call = j->call;
    if (call == NULL || j->mrtr_linked) {
        cJSON_Delete(params);
        return MCP_ESTATE;
    }
    /* Past its requestState's life no round can name the job any more. A task's round:
     * tasks/cancel finds the job by the task (ptc__mrtr_cancel_task). */
    if (keep_ms > MCP_MRTR_STATE_TTL_MS) keep_ms = MCP_MRTR_STATE_TTL_MS;
    int rc = exec_ws_park_add(ex->ws, j->owner.b, "mrtr-", mcp_call_task_id(call), keep_ms,
                              on_park_end, j, &j->mrtr_park);
    if (rc < 0) {
        cJSON_Delete(params);
        return rc; /* EBUSY, ENOMEM: the same codes in mcp's table */
    }
    cJSON *requests = cJSON_CreateObject();
    cJSON *req = cJSON_CreateObject();
    cJSON *state = cJSON_CreateObject();
    bool ok = requests != NULL && req != NULL && state != NULL &&
              cJSON_AddStringToObject(req, "method", method) != NULL &&
              cJSON_AddItemToObject(req, "params", params);
    if (ok) params = NULL;
    ok = ok && cJSON_AddItemToObject(requests, key, req);
    if (ok) req = NULL;
    /* The attempt says which round of the request this is (the handle alone finds the job);
     * nothing else of the job needs to travel. */
    ok = ok &&
         cJSON_AddStringToObject(state, "handle", exec_ws_park_handle(j->mrtr_park)) != NULL &&
         cJSON_AddStringToObject(state, "waits_for", key) != NULL &&
         cJSON_AddNumberToObject(state, "attempt",
                                 j->loop != NULL ? ptc_repair_loop_attempt(j->loop) : 0) != NULL;
    char *text = ok ? cJSON_PrintUnformatted(state) : NULL;
    cJSON_Delete(state);
    cJSON_Delete(req);
    cJSON_Delete(params);
    if (text == NULL) {
        cJSON_Delete(requests);
        unlink_job(j);
        return MCP_ENOMEM;
    }
    /* The job outlives this call now: nothing of it may touch the call again. */
    j->call = NULL;
    j->mrtr_linked = true;
    if (j->wait_timer != NULL) uv_timer_stop(j->wait_timer);
    mcp_call_finish_input_required(call, requests, text);
    cJSON_free(text);
    return MCP_OK;
}

static void held_withdrawn(void *data)
{
    job_t *j = data;
    j->mrtr_held = NULL; /* the round's answer is dropped: the server's call ends as it says */
}

int ptc__mrtr_hold(job_t *j, mcp_relay_held_t *h, uint64_t keep_ms, char *msg, size_t n)
{
    const cJSON *p = mcp_relay_held_params(h);
    cJSON *params = p != NULL ? cJSON_Duplicate(p, true) : cJSON_CreateObject();
    if (params == NULL) {
        snprintf(msg, n, "out of memory");
        return MCP_ENOMEM;
    }
    int rc =
        ptc__mrtr_park(j, EXECUTE_MRTR_KEY_DOWNSTREAM, mcp_relay_held_method(h), params, keep_ms);
    if (rc < 0) {
        snprintf(msg, n, "%s",
                 rc == MCP_EBUSY ? "too many runs are waiting for their clients' answers"
                                 : mcp_strerror(rc));
        return rc;
    }
    j->mrtr_held = h;
    mcp_relay_held_watch(h, held_withdrawn, j);
    return MCP_OK;
}

/* True if args are those of j's request: its code, or the cursor of the long run a call waited
 * on when the question came. */
static bool same_request(const job_t *j, const cJSON *args)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(args, "code");
    const cJSON *cursor = cJSON_GetObjectItemCaseSensitive(args, "cursor");
    if (cJSON_IsString(code)) return strcmp(code->valuestring, j->code) == 0;
    return cJSON_IsString(cursor) && j->cursor[0] != '\0' &&
           strcmp(cursor->valuestring, j->cursor) == 0;
}

/* The job the state names for who, or NULL (unknown, used already, expired, another's). */
static job_t *find(ptc_execute_t *ex, const char *state, const mcp_identity_t *who,
                   const char **waits_for)
{
    cJSON *st = cJSON_Parse(state);
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(st, "handle");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(st, "waits_for");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(st, "attempt");
    job_t *j = NULL;
    *waits_for = NULL;
    if (cJSON_IsString(h) && cJSON_IsString(w) && cJSON_IsNumber(a)) {
        exec_ws_park_t *p = exec_ws_park_find(ex->ws, h->valuestring, who->b);
        j = p != NULL ? exec_ws_park_user(p) : NULL;
        if (j != NULL && a->valuedouble != (j->loop != NULL ? ptc_repair_loop_attempt(j->loop) : 0))
            j = NULL; /* another round of the request: not this one's answer */
        if (j != NULL)
            *waits_for = strcmp(w->valuestring, EXECUTE_MRTR_KEY_REPAIR) == 0
                             ? EXECUTE_MRTR_KEY_REPAIR
                         : strcmp(w->valuestring, EXECUTE_MRTR_KEY_DOWNSTREAM) == 0
                             ? EXECUTE_MRTR_KEY_DOWNSTREAM
                             : EXECUTE_MRTR_KEY_CONFIRM;
    }
    cJSON_Delete(st);
    return j;
}

bool ptc__mrtr_resume(ptc_execute_t *ex, mcp_call_t *call, const cJSON *args, uint64_t wait_ms)
{
    const char *state = mcp_call_request_state(call);
    if (state == NULL) return false;
    mcp_identity_t who;
    mcp_call_identity(call, &who);
    const char *key = NULL;
    job_t *j = find(ex, state, &who, &key);
    if (j != NULL && (j->call != NULL || !same_request(j, args))) {
        /* The round repeats the request it continues (MRTR): other code is another request;
         * a run a cursor call waits on already has its request. */
        mcp_call_finish_text(call, true,
                             j->call != NULL
                                 ? "Another request is waiting on this run already (its cursor): "
                                   "wait for its answer."
                                 : "Invalid arguments: a call with requestState repeats the "
                                   "arguments of the call it continues (these differ).");
        return true;
    }
    if (j == NULL) {
        mcp_call_finish_text(call, true,
                             "This call continues an execute_code request that is no longer "
                             "waiting here: its answer came already, it waited too long and "
                             "was stopped, or it lives on another ptc-mcp instance (a waiting "
                             "run stays in the process that started it, so its rounds must "
                             "reach that instance). Call execute_code again without "
                             "requestState.");
        return true;
    }
    const cJSON *answer = cJSON_GetObjectItemCaseSensitive(mcp_call_input_responses(call), key);
    unlink_job(j);
    ptc_repair_ask_t *ask = j->mrtr_ask;
    bridge_op_t *op = j->mrtr_op;
    mcp_relay_held_t *held = j->mrtr_held;
    j->mrtr_ask = NULL;
    j->mrtr_op = NULL;
    j->mrtr_held = NULL;
    /* The run ended (or the loop gave up at its deadline) while it waited: its bridge and the
     * repair request are gone already (ask and op are NULL), the answer comes too late. */
    bool ended = j->ran_pending;
    /* The server's request is answered even when the run ended meanwhile: it still waits. Its
     * answer reaches the run through the loop, after the call below waits on it. */
    if (held != NULL)
        mcp_relay_held_answer(held, answer, "the client's next round carried no answer to it");
    mcp_call_on_cancel(call, ptc__execute_job_cancelled, j);
    /* The call waits on the job as a long run's next call does (wait_seconds, running). */
    ptc__longrun_attach(j, call, wait_ms); /* with `ended`, answers and may free j */
    if (ended) return true;
    if (ask != NULL)
        ptc_repair_ask_answer(ask, answer); /* the loop goes on: a run, or its answer */
    else if (op != NULL)
        ptc__execute_confirm_answer(op, answer); /* the bridge call goes on, or is denied */
    return true;
}

void ptc__mrtr_cancel_task(const char *task_id, const mcp_identity_t *who, void *data)
{
    ptc_execute_t *ex = data;
    exec_ws_park_t *p = exec_ws_park_find_tag(ex->ws, task_id, who->b);
    if (p == NULL) return;
    mcp_log(ex->lg, MCP_LOG_INFO,
            "execute_code: task %.12s... cancelled while it waited for input: its run was stopped",
            task_id);
    kill_job(exec_ws_park_user(p), "was stopped: its task was cancelled (tasks/cancel)");
}
