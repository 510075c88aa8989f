/* execute_bridge.c - tool calls and searches from sandboxed code (the bridge's operations):
 * routed to the downstream server that serves the tool, through a confirmation when
 * --confirm-writes asks for one, or to the registry's search; and opening and closing the
 * bridge of a run. */
#include "execute_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The request a call from code belongs to (for sampling and elicitation), or NULL: between a
 * session's cells, or after the request was answered while its run goes on. */
static mcp_call_t *peer_call(const bridge_peer_t *p)
{
    return p->job != NULL ? p->job->call : NULL;
}

static const reg_tool_t *op_find_tool(void *data, const char *server, const char *tool)
{
    bridge_peer_t *p = data;
    return reg_catalog_find_tool(reg_registry_catalog(ptc_search_registry(p->ex->search)), server,
                                 tool);
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

/* The request a downstream server's sampling or elicitation belongs to: the job's call now
 * (it changes between rounds and long-run waits), none while the job waits for another answer
 * (one at a time), or none at all. */
static mcp_call_t *op_asker_call(void *data, const char **busy)
{
    bridge_op_t *op = data;
    const job_t *j = op->peer->job;
    *busy = j != NULL && j->call == NULL && j->mrtr_linked
                ? "another request of this run is waiting for the client's answer (one at a time)"
                : NULL;
    return peer_call(op->peer);
}

/* A downstream server asks a stateless client's run for sampling or elicitation: the job
 * holds the request (execute_mrtr.c). */
static int op_hold(void *data, ptc_downstream_held_t *h, char *msg, size_t n)
{
    bridge_op_t *op = data;
    return ptc__mrtr_hold(op->peer->job, h, op->timeout_ms, msg, n);
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
    /* No request of the server can come before the loop runs again. */
    ptc_downstream_asker_t asker = {.call = op_asker_call, .hold = op_hold, .data = op};
    op->owner = ptc_downstream_own(op->peer->ex->downstream, c, op->call, &asker);
    return true;
}

/* The user's answer (an elicitation result; err < 0: none came): the call goes on or is
 * denied. */
static void confirm_decided(bridge_op_t *op, int err, const cJSON *result, const char *message)
{
    const cJSON *action = cJSON_GetObjectItemCaseSensitive(result, "action");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
    bool yes = err == 0 && cJSON_IsString(action) && strcmp(action->valuestring, "accept") == 0 &&
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(content, "approve"));
    mcp_client_t *c = yes ? ptc_downstream_client(op->peer->ex->downstream, op->server) : NULL;
    if (c == NULL) {
        char m[300];
        snprintf(m, sizeof m, "%s__%s was not confirmed by the user (--confirm-writes)%s%s",
                 op->server, op->tool, err < 0 ? ": " : "", err < 0 && message ? message : "");
        op->done(op->done_data, err < 0 ? err : MCP_EDENIED, NULL, m);
        op_free(op);
        return;
    }
    (void)op_forward(op, c, op->tool, op->args);
}

static void op_confirmed(void *data, int err, const cJSON *result, const cJSON *error,
                         const char *message)
{
    bridge_op_t *op = data;
    (void)error;
    op->confirm = NULL;
    confirm_decided(op, err, result, message);
}

void ptc__execute_confirm_answer(bridge_op_t *op, const cJSON *result)
{
    op->mrtr_wait = false;
    if (result == NULL) {
        confirm_decided(op, MCP_EPROTO, NULL,
                        "the client's next round carried no answer to the confirmation");
        return;
    }
    confirm_decided(op, 0, result, NULL);
}

/* --confirm-writes: asks the user (elicitation) before a call to a tool not marked read-only.
 * Returns 1 when waiting for the answer, 0 when it answered (refused) already, < 0 on error. */
static int op_ask_confirmation(bridge_peer_t *p, bridge_op_t *op, const reg_tool_t *tool,
                               const cJSON *args)
{
    mcp_call_t *call = peer_call(p);
    /* A 2026-07-28 client declares elicitation in each request (and is asked through MRTR). */
    if (call == NULL || !mcp_call_client_has(call, "elicitation")) {
        char m[300];
        if (call == NULL && p->job != NULL && p->job->mrtr_linked)
            snprintf(m, sizeof m,
                     "%s is not marked read-only and --confirm-writes is on, but another call of "
                     "this run is waiting for the user's answer (one at a time): refused",
                     tool->id);
        else
            snprintf(m, sizeof m,
                     "%s is not marked read-only and --confirm-writes is on, but this client "
                     "cannot ask the user (no elicitation): refused",
                     tool->id);
        op->done(op->done_data, MCP_EDENIED, NULL, m);
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
    if (mcp_call_is_modern(call)) {
        /* The call is answered with the question; the run (and this bridge call) wait for the
         * round that brings the answer, at most as long as the call may take. */
        job_t *j = p->job;
        j->mrtr_op = op;
        op->mrtr_wait = true;
        int rc = ptc__mrtr_park(j, EXECUTE_MRTR_KEY_CONFIRM, "elicitation/create", params,
                                op->timeout_ms);
        if (rc < 0) {
            j->mrtr_op = NULL;
            op_free(op);
            return rc;
        }
        return 1;
    }
    /* Made with the call, so that over Streamable HTTP it rides the call's own stream. */
    int rc = mcp_call_request_ex(call, "elicitation/create", params, "elicitation", op->timeout_ms,
                                 op_confirmed, op, &op->confirm);
    if (rc < 0) {
        op_free(op);
        return rc;
    }
    return 1;
}

static int op_call(void *data, const reg_tool_t *tool, const cJSON *args, unsigned timeout_ms,
                   ptc_bridge_done_cb done, void *done_data, void **cancel_handle)
{
    bridge_peer_t *p = data;
    *cancel_handle = NULL;
    mcp_client_t *c = ptc_downstream_client(p->ex->downstream, tool->server);
    if (c == NULL && ptc_env_is_custom(tool->server)) {
        /* The user's helpers run in the sandbox itself: the bridge has nothing to call. */
        char m[600];
        const char *dot = strrchr(tool->name, '.');
        int mod_len = dot ? (int)(dot - tool->name) : (int)strlen(tool->name);
        snprintf(m, sizeof m,
                 "%s is one of your own helpers (--custom-tools): it runs inside the sandbox, not "
                 "through the bridge; call it as plain Python: import %.*s; %s(...)",
                 tool->id, mod_len, tool->name, tool->name);
        done(done_data, MCP_ENOTSUP, NULL, m);
        return 0;
    }
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
    op->peer = p;
    op->timeout_ms = timeout_ms;
    /* The handle is given only while op lives (done never runs after a cancel returns); an op
     * answered at once is already freed. */
    bool read_only =
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tool->annotations, "readOnlyHint"));
    if (p->ex->confirm_writes && !read_only) {
        int rc = op_ask_confirmation(p, op, tool, args);
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

static int op_search(void *data, const char *query, int top_k, const char *server,
                     const char *category, ptc_bridge_done_cb done, void *done_data,
                     void **cancel_handle)
{
    bridge_peer_t *p = data;
    *cancel_handle = NULL;
    bridge_op_t *op = calloc(1, sizeof *op);
    if (op == NULL) return MCP_ENOMEM;
    op->is_search = true;
    op->done = done;
    op->done_data = done_data;
    void *q = NULL;
    int rc = ptc_search_query(p->ex->search, query, top_k > 0 ? (size_t)top_k : 5, server, category,
                              op_search_done, op, &q);
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
    } else if (op->mrtr_wait) { /* the answer would come in the client's next round */
        bridge_peer_t *p = op->peer;
        if (p->job != NULL && p->job->mrtr_op == op) p->job->mrtr_op = NULL;
        op_free(op);
    } else if (op->confirm != NULL) {
        mcp_outreq_cancel(op->confirm, "the run ended"); /* runs op_confirmed, which frees */
    } else {
        mcp_client_call_cancel(op->call, "the run ended"); /* runs op_call_done, which frees */
    }
}

static void op_audit(void *data, const cJSON *record)
{
    mcp_call_t *call = peer_call(data);
    if (call != NULL && mcp_call_session(call) != NULL)
        mcp_call_log(call, MCP_LOG_INFO, "ptc-audit", cJSON_Duplicate(record, true));
}

static const ptc_bridge_ops_t bridge_ops = {
    .find_tool = op_find_tool,
    .call = op_call,
    .search = op_search,
    .cancel = op_cancel,
    .audit = op_audit,
};

int ptc__execute_bridge_new(ptc_execute_t *ex, bridge_peer_t *peer, ptc_journal_t *journal,
                            const char *run_id, ptc_bridge_host_t **host)
{
    *host = NULL;
    if (ex->bundle == NULL || ptc_pybundle_cache_root(ex->bundle) == NULL) return -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        mcp_log(ex->lg, MCP_LOG_ERROR, "bridge: socketpair: %s", strerror(errno));
        return -1;
    }
    ptc_bridge_limits_t lim = ex->lim;
    lim.run_id = run_id;
    lim.journal = journal;
    char msg[256];
    if (ptc_bridge_host_new(ex->loop, sv[0], &lim, &bridge_ops, peer, ex->lg, host, msg,
                            sizeof msg) < 0) {
        mcp_log(ex->lg, MCP_LOG_ERROR, "bridge: %s", msg);
        close(sv[1]);
        *host = NULL;
        return -1;
    }
    return sv[1];
}

int ptc__execute_open_bridge(ptc_execute_t *ex, job_t *j)
{
    snprintf(j->run_id, sizeof j->run_id, "run-%lu", ++ex->runs);
    j->peer.ex = ex;
    j->peer.job = j;
    return ptc__execute_bridge_new(ex, &j->peer, ptc_repair_loop_journal(j->loop), j->run_id,
                                   &j->host);
}

void ptc__execute_bridge_collect(ptc_bridge_host_t *h, outcome_t *o)
{
    cJSON *outputs = ptc_bridge_host_take_outputs(h);
    cJSON *warn = ptc_bridge_host_take_warnings(h);
    ptc_bridge_counters_t c;
    ptc_bridge_host_counters(h, &c);
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

void ptc__execute_close_bridge(job_t *j, outcome_t *o)
{
    if (j->sess != NULL) {
        ptc__session_bridge_end(j, o); /* the session keeps its bridge */
        return;
    }
    if (j->host == NULL) return;
    ptc__execute_bridge_collect(j->host, o);
    ptc_bridge_host_close(j->host, NULL);
    j->host = NULL;
}
