/* routes.c - the MCP side of a run's bridge (bridge/'s router decides where a call
 * goes): the downstream server's call, the user's confirmation for --confirm-writes (an
 * elicitation, or an input request of a 2026-07-28 client), the registry's search, the audit
 * log message; and opening and closing the bridge of a run. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* The request a call from code belongs to (for sampling and elicitation), or NULL: between a
 * session's cells, or after the request was answered while its run goes on. */
static mcp_call_t *peer_call(const bridge_peer_t *p)
{
    return p->job != NULL ? p->job->call : NULL;
}

/* A downstream call in flight for a route op; the server's sampling or elicitation meanwhile
 * goes to the job's client (owner). */
typedef struct fwd {
    ptc_bridge_route_op_t *op;
    bridge_peer_t *peer;
    unsigned timeout_ms;
    mcp_client_call_t *call;
    mcp_relay_owner_t *owner;
} fwd_t;

static const reg_tool_t *route_find_tool(void *data, const char *server, const char *tool)
{
    const ptc_execute_peers_t *w = &((bridge_peer_t *)data)->ex->peers;
    return w->find_tool(w->data, server, tool);
}

static bool route_served(void *data, const char *server)
{
    const ptc_execute_peers_t *w = &((bridge_peer_t *)data)->ex->peers;
    return w->client(w->data, server) != NULL;
}

static bool route_is_custom(void *data, const char *server)
{
    (void)data;
    return env_is_custom_server(server);
}

static void fwd_done(void *data, int err, const cJSON *result, const cJSON *error,
                     const char *message)
{
    fwd_t *f = data;
    (void)error;
    ptc_bridge_route_done(f->op, err, result, message);
    mcp_relay_disown(f->owner);
    free(f);
}

/* The request a downstream server's sampling or elicitation belongs to: the job's call now
 * (it changes between rounds and long-run waits), none while the job waits for another answer
 * (one at a time), or none at all. */
static mcp_call_t *fwd_asker_call(void *data, const char **busy)
{
    fwd_t *f = data;
    const job_t *j = f->peer->job;
    *busy = j != NULL && j->call == NULL && j->mrtr_linked
                ? "another request of this run is waiting for the client's answer (one at a time)"
                : NULL;
    return peer_call(f->peer);
}

/* A downstream server asks a stateless client's run for sampling or elicitation: the job
 * holds the request (mrtr.c). */
static int fwd_hold(void *data, mcp_relay_held_t *h, char *msg, size_t n)
{
    fwd_t *f = data;
    return ptc__mrtr_hold(f->peer->job, h, f->timeout_ms, msg, n);
}

static int route_call(void *data, ptc_bridge_route_op_t *op, const char *server, const char *tool,
                      const cJSON *args, unsigned timeout_ms, void **handle, char *msg, size_t n)
{
    bridge_peer_t *p = data;
    const ptc_execute_peers_t *w = &p->ex->peers;
    mcp_client_t *c = w->client(w->data, server); /* served: not NULL */
    fwd_t *f = c != NULL ? calloc(1, sizeof *f) : NULL;
    if (f == NULL) return c == NULL ? MCP_ESTATE : MCP_ENOMEM;
    *f = (fwd_t){.op = op, .peer = p, .timeout_ms = timeout_ms};
    int rc = mcp_client_call_tool(c, tool, args, timeout_ms, NULL, fwd_done, f, &f->call);
    if (rc < 0) {
        mcp_client_refusal(c, rc, msg, n);
        free(f);
        return rc;
    }
    /* No request of the server can come before the loop runs again. */
    mcp_relay_asker_t asker = {.call = fwd_asker_call, .hold = fwd_hold, .data = f};
    f->owner = mcp_relay_own(w->relay(w->data), c, f->call, &asker);
    *handle = f;
    return 0;
}

static void confirm_answered(void *data, int err, const cJSON *result, const cJSON *error,
                             const char *message)
{
    (void)error;
    ptc_bridge_route_confirmed(data, err, result, message);
}

void ptc__execute_confirm_answer(bridge_op_t *op, const cJSON *result)
{
    if (result == NULL)
        ptc_bridge_route_confirmed(op, MCP_EPROTO, NULL,
                                   "the client's next round carried no answer to the confirmation");
    else
        ptc_bridge_route_confirmed(op, 0, result, NULL);
}

/* --confirm-writes: asks the user (elicitation) before a call to a tool not marked read-only. */
static int route_confirm(void *data, ptc_bridge_route_op_t *op, const reg_tool_t *tool,
                         cJSON *params, unsigned timeout_ms, void **handle, char *msg, size_t n)
{
    bridge_peer_t *p = data;
    mcp_call_t *call = peer_call(p);
    /* A 2026-07-28 client declares elicitation in each request (and is asked through MRTR). */
    if (call == NULL || !mcp_call_client_has(call, "elicitation")) {
        cJSON_Delete(params);
        snprintf(msg, n, "%s is not marked read-only and --confirm-writes is on, but %s: refused",
                 tool->id,
                 call == NULL && p->job != NULL && p->job->mrtr_linked
                     ? "another call of this run is waiting for the user's answer (one at a time)"
                     : "this client cannot ask the user (no elicitation)");
        return MCP_EDENIED;
    }
    if (!mcp_call_is_modern(call)) {
        /* Made with the call, so that over Streamable HTTP it rides the call's own stream. */
        mcp_outreq_t *o = NULL;
        int rc = mcp_call_request_ex(call, "elicitation/create", params, "elicitation", timeout_ms,
                                     confirm_answered, op, &o);
        *handle = o;
        return rc;
    }
    /* The call is answered with the question; the run (and this bridge call) wait for the round
     * that brings the answer, at most as long as the call may take. */
    job_t *j = p->job;
    j->mrtr_op = op;
    int rc = ptc__mrtr_park(j, EXECUTE_MRTR_KEY_CONFIRM, "elicitation/create", params, timeout_ms);
    if (rc < 0) j->mrtr_op = NULL;
    return rc;
}

static void search_done(void *data, int err, const cJSON *sc, const char *message)
{
    ptc_bridge_route_done(data, err, sc, message);
}

static int route_search(void *data, ptc_bridge_route_op_t *op, const char *query, int top_k,
                        const char *server, const char *category, void **handle)
{
    const ptc_execute_peers_t *w = &((bridge_peer_t *)data)->ex->peers;
    return w->search(w->data, query, top_k > 0 ? (size_t)top_k : 5, server, category, search_done,
                     op, handle);
}

static void route_cancel(void *data, ptc_bridge_route_op_t *op, void *handle)
{
    bridge_peer_t *p = data;
    switch (ptc_bridge_route_kind(op)) {
    case PTC_BRIDGE_ROUTE_SEARCH:
        p->ex->peers.search_cancel(p->ex->peers.data, handle); /* its done never runs now */
        break;
    case PTC_BRIDGE_ROUTE_CONFIRM:
        if (handle != NULL) /* its answer comes now and is dropped */
            mcp_outreq_cancel(handle, "the run ended");
        else if (p->job != NULL && p->job->mrtr_op == op) /* the answer would come in a round */
            p->job->mrtr_op = NULL;
        break;
    case PTC_BRIDGE_ROUTE_CALL: /* fwd_done runs now, its end dropped, and frees f */
        mcp_client_call_cancel(((fwd_t *)handle)->call, "the run ended");
        break;
    }
}

static void route_audit(void *data, const cJSON *record)
{
    mcp_call_t *call = peer_call(data);
    if (call != NULL && mcp_call_session(call) != NULL)
        mcp_call_log(call, MCP_LOG_INFO, "ptc-audit", cJSON_Duplicate(record, true));
}

static const ptc_bridge_routes_t bridge_routes = {
    .find_tool = route_find_tool,
    .served = route_served,
    .is_custom = route_is_custom,
    .call = route_call,
    .confirm = route_confirm,
    .search = route_search,
    .cancel = route_cancel,
    .audit = route_audit,
};

int ptc__execute_bridge_new(ptc_execute_t *ex, bridge_peer_t *peer, ptc_journal_t *journal,
                            const char *run_id, ptc_bridge_host_t **host)
{
    *host = NULL;
    if (!ex->attached || ex->bundle == NULL || ptc_pybundle_cache_root(ex->bundle) == NULL)
        return -1;
    ptc_bridge_limits_t lim = ex->lim;
    lim.run_id = run_id;
    lim.journal = journal;
    lim.confirm_writes = ex->confirm_writes;
    char msg[256];
    int fd =
        ptc_bridge_host_open(ex->loop, &lim, &bridge_routes, peer, ex->lg, host, msg, sizeof msg);
    if (fd < 0) mcp_log(ex->lg, MCP_LOG_ERROR, "bridge: %s", msg);
    return fd < 0 ? -1 : fd;
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
    uint64_t calls = ptc_bridge_host_harvest(h, o ? &o->outputs : NULL, o ? &o->warnings : NULL);
    if (o != NULL) o->tool_calls = calls;
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
