/* relay.c - the downstream clients of a server that calls them for its own callers: their
 * servers' sampling and elicitation requests go to the caller whose call waits on that server
 * (forwarded on its session, or held for a stateless caller's next round), never to another
 * client. The proxied tools of mcp_relay_expose are relay_proxy.c's. */
#include "relay_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A sampling or elicitation request of a downstream server, forwarded to our own client (out
 * set), or held for a stateless client's next round (out NULL). */
struct mcp_relay_held {
    mcp_relay_t *r;
    mcp_client_peer_req_t *req;
    mcp_outreq_t *out;
    mcp_relay_withdrawn_cb withdrawn; /* held: its holder, told if the server withdraws it */
    void *withdrawn_data;
    struct mcp_relay_held *prev, *next;
};
typedef struct mcp_relay_held forwarded_t;

/* --- notes of our calls waiting on a downstream call ------------------------------------- */

mcp_relay_owner_t *mcp_relay_own(mcp_relay_t *r, const mcp_client_t *c, const mcp_client_call_t *dc,
                                 const mcp_relay_asker_t *asker)
{
    mcp_relay_owner_t *o = NULL;
    if (r != NULL && c != NULL && asker != NULL && asker->call != NULL &&
        (o = calloc(1, sizeof *o)) != NULL) {
        o->r = r;
        o->client = c;
        o->call = dc;
        o->asker = *asker;
        o->next = r->owners;
        if (r->owners) r->owners->prev = o;
        r->owners = o;
    }
    return o;
}

void mcp_relay_disown(mcp_relay_owner_t *o)
{
    if (o == NULL) return;
    if (o->prev)
        o->prev->next = o->next;
    else
        o->r->owners = o->next;
    if (o->next) o->next->prev = o->prev;
    free(o);
}

/* --- requests downstream servers send us ------------------------------------------------- */

static void forward_unlink(forwarded_t *f)
{
    if (f->prev)
        f->prev->next = f->next;
    else
        f->r->forwarded = f->next;
    if (f->next) f->next->prev = f->prev;
}

static forwarded_t *forward_link(mcp_relay_t *r, mcp_client_peer_req_t *req)
{
    forwarded_t *f = calloc(1, sizeof *f);
    if (f == NULL) return NULL;
    f->r = r;
    f->req = req;
    f->next = r->forwarded;
    if (r->forwarded) r->forwarded->prev = f;
    r->forwarded = f;
    return f;
}

/* Unlinks and frees f, then answers its request: result (taken; NULL: fails it with code and
 * message). */
static void forward_settle(forwarded_t *f, cJSON *result, int code, const char *message)
{
    mcp_client_peer_req_t *req = f->req;
    forward_unlink(f);
    free(f);
    if (result != NULL)
        mcp_client_peer_reply(req, result);
    else
        mcp_client_peer_fail(req, code, message);
}

static void forward_done(void *data, int err, const cJSON *result, const cJSON *error,
                         const char *message)
{
    forwarded_t *f = data;
    cJSON *copy = err == 0 ? cJSON_Duplicate(result, true) : NULL;
    if (err == 0 && copy == NULL) err = MCP_ENOMEM;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "code");
    forward_settle(f, copy, cJSON_IsNumber(code) ? code->valueint : MCP_JSONRPC_INTERNAL_ERROR,
                   message ? message : mcp_strerror(err));
}

const char *mcp_relay_held_method(const mcp_relay_held_t *h)
{
    return mcp_client_peer_method(h->req);
}

const cJSON *mcp_relay_held_params(const mcp_relay_held_t *h)
{
    return mcp_client_peer_params(h->req);
}

void mcp_relay_held_watch(mcp_relay_held_t *h, mcp_relay_withdrawn_cb cb, void *data)
{
    h->withdrawn = cb;
    h->withdrawn_data = data;
}

void mcp_relay_held_answer(mcp_relay_held_t *h, const cJSON *result, const char *why)
{
    cJSON *copy = result != NULL ? cJSON_Duplicate(result, true) : NULL;
    char m[300];
    snprintf(m, sizeof m, "%s was not answered: %s", mcp_relay_held_method(h),
             result != NULL ? "out of memory" : why);
    forward_settle(h, copy, MCP_JSONRPC_INTERNAL_ERROR, m);
}

/* Who a request of server c belongs to: the call of the one client whose call waits on c (and,
 * for a stateless server's input request, exactly the call that asked it). */
typedef struct route {
    mcp_call_t *call;         /* the call to ask, or NULL */
    mcp_relay_owner_t *owner; /* its note */
    const char *busy;         /* that call cannot be asked now: why */
    bool ambiguous;           /* calls of several clients wait on c */
} route_t;

static route_t route_of(const mcp_relay_t *r, const mcp_client_t *c, mcp_client_peer_req_t *req)
{
    route_t rt = {0};
    const mcp_client_call_t *asked_by = mcp_client_peer_call(req);
    for (mcp_relay_owner_t *o = r->owners; o != NULL; o = o->next) {
        if (o->client != c || (asked_by != NULL && o->call != asked_by)) continue;
        const char *b = NULL;
        mcp_call_t *call = o->asker.call(o->asker.data, &b);
        if (call == NULL && b == NULL) continue; /* no request of its waits now */
        if (call == NULL) {
            rt.ambiguous = rt.ambiguous || rt.call != NULL;
            rt.busy = b;
        } else if (rt.call == NULL) {
            rt.ambiguous = rt.busy != NULL;
            rt.call = call;
            rt.owner = o;
        } else if (call != rt.call && (mcp_call_is_modern(call) || mcp_call_is_modern(rt.call) ||
                                       mcp_call_session(call) != mcp_call_session(rt.call))) {
            rt.ambiguous = true;
        }
    }
    return rt;
}

/* Why a request of server c could not be passed to a client, into m. */
static void refusal(const route_t *rt, bool modern, const char *method, const char *server,
                    const char *cap, char *m, size_t n)
{
    if (rt->ambiguous)
        snprintf(m, n,
                 "%s from server %s: calls of several clients are waiting on this server, so "
                 "which client to ask cannot be told; refused",
                 method, server);
    else if (rt->busy != NULL)
        snprintf(m, n, "%s from server %s: %s; refused", method, server, rt->busy);
    else if (modern)
        snprintf(m, n,
                 "%s from server %s: the client that made the call does not support %s (its "
                 "request's _meta clientCapabilities do not name it)",
                 method, server, cap);
    else if (rt->call != NULL)
        snprintf(m, n, "%s from server %s: the client that made the call does not support %s",
                 method, server, cap);
    else
        snprintf(m, n, "%s from server %s: no single connected client supports %s", method, server,
                 cap);
}

/* A stateless caller that declared the capability takes the request as an input request of
 * its own (asker.hold), answering it after its next round. */
static void hold_for(mcp_relay_t *r, const route_t *rt, mcp_client_t *c, mcp_client_peer_req_t *req)
{
    forwarded_t *f = forward_link(r, req);
    char why[200], m[400];
    if (f == NULL) {
        mcp_client_peer_fail(req, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
    } else if (rt->owner->asker.hold(rt->owner->asker.data, f, why, sizeof why) < 0) {
        snprintf(m, sizeof m, "%s from server %s could not be passed to the client: %s",
                 mcp_client_peer_method(req), mcp_client_name(c), why);
        forward_settle(f, NULL, MCP_JSONRPC_INTERNAL_ERROR, m);
    }
}

/* Forwards the request on the session of the call it belongs to (else on the one capable
 * session), or refuses it saying why. */
static void forward_to(mcp_relay_t *r, const route_t *rt, bool modern, mcp_client_t *c,
                       mcp_client_peer_req_t *req, const char *cap)
{
    const char *method = mcp_client_peer_method(req);
    mcp_session_t *s = modern || rt->busy != NULL ? NULL
                       : rt->call != NULL         ? mcp_call_session(rt->call)
                       : r->srv                   ? mcp_server_pick_session(r->srv, cap)
                                                  : NULL;
    bool capable = s != NULL && mcp_session_client_has(s, cap);
    forwarded_t *f = capable && !rt->ambiguous ? forward_link(r, req) : NULL;
    cJSON *params = f ? cJSON_Duplicate(mcp_client_peer_params(req), true) : NULL;
    int rc = MCP_OK;
    if (params == NULL) {
        if (f != NULL) forward_unlink(f);
        free(f);
        char m[400];
        refusal(rt, modern, method, mcp_client_name(c), cap, m, sizeof m);
        /* Said in the log too: the server may well swallow the error, and whoever wonders why
         * a prompt never reached the user finds it there. */
        mcp_log(r->lg, MCP_LOG_DEBUG, "downstream request not passed on: %s", m);
        mcp_client_peer_fail(req, MCP_JSONRPC_METHOD_NOT_FOUND, m);
    } else if ((rc = rt->call != NULL
                         ? mcp_call_request_ex(rt->call, method, params, cap,
                                               MCP_RELAY_FORWARD_TIMEOUT_MS, forward_done, f,
                                               &f->out)
                         : mcp_session_request(s, method, params, cap, MCP_RELAY_FORWARD_TIMEOUT_MS,
                                               forward_done, f, &f->out)) < 0) {
        forward_settle(f, NULL, MCP_JSONRPC_INTERNAL_ERROR, mcp_strerror(rc));
    }
}

/* The request goes to the call it belongs to: its client's session (a legacy client), or its
 * next round (a stateless client: hold). Over HTTP many sessions share the downstream servers,
 * and each stateless request is a client of its own: another client's user is never asked. */
static void on_peer_request(mcp_client_t *c, mcp_client_peer_req_t *req, void *data)
{
    mcp_relay_t *r = data;
    const char *cap = strcmp(mcp_client_peer_method(req), "sampling/createMessage") == 0
                          ? "sampling"
                          : "elicitation";
    route_t rt = route_of(r, c, req);
    bool modern = !rt.ambiguous && rt.call != NULL && mcp_call_is_modern(rt.call);
    if (modern && mcp_call_client_has(rt.call, cap) && rt.owner->asker.hold != NULL)
        hold_for(r, &rt, c, req);
    else
        forward_to(r, &rt, modern, c, req, cap);
}

/* Ends f: a forwarded request is cancelled on our client's side (forward_done answers it), a
 * held one is failed and its holder told. */
static void forward_withdraw(forwarded_t *f, const char *why)
{
    mcp_relay_withdrawn_cb cb = f->withdrawn;
    void *cb_data = f->withdrawn_data;
    if (f->out != NULL) {
        mcp_outreq_cancel(f->out, why); /* forward_done answered f's request, which freed it */
    } else {
        forward_settle(f, NULL, MCP_JSONRPC_INTERNAL_ERROR, why);
        if (cb != NULL) cb(cb_data);
    }
}

static void on_peer_cancelled(mcp_client_t *c, mcp_client_peer_req_t *req, void *data)
{
    mcp_relay_t *r = data;
    (void)c;
    forwarded_t *f = r->forwarded;
    while (f != NULL && f->req != req)
        f = f->next;
    if (f != NULL) forward_withdraw(f, "the downstream server cancelled its request");
}

/* --- the clients --------------------------------------------------------------------------- */

static void on_state(mcp_client_t *c, mcp_client_state_t state, const char *reason, void *data)
{
    mcp_relay_t *r = data;
    if (r->owner_hooks.state_changed != NULL)
        r->owner_hooks.state_changed(c, state, reason, r->owner_hooks.data);
}

static void on_tools(mcp_client_t *c, const cJSON *tools, void *data)
{
    mcp_relay_t *r = data;
    if (r->owner_hooks.tools_changed != NULL)
        r->owner_hooks.tools_changed(c, tools, r->owner_hooks.data);
}

int mcp_relay_new(uv_loop_t *loop, const mcp_relay_opts_t *opts, const mcp_client_hooks_t *hooks,
                  const mcp_logger_t *lg, mcp_relay_t **out)
{
    mcp_relay_t *r = calloc(1, sizeof *r);
    *out = r;
    if (r == NULL) return MCP_ENOMEM;
    r->loop = loop;
    r->lg = lg;
    if (opts != NULL) r->o = *opts;
    if (r->o.max_parked == 0) r->o.max_parked = MCP_RELAY_MAX_PARKED;
    if (hooks != NULL) r->owner_hooks = *hooks;
    r->hooks = (mcp_client_hooks_t){.state_changed = on_state,
                                    .tools_changed = on_tools,
                                    .peer_request = on_peer_request,
                                    .peer_cancelled = on_peer_cancelled,
                                    .data = r};
    return MCP_OK;
}

int mcp_relay_start(mcp_relay_t *r, const mcp_downstream_config_t *cfg,
                    const mcp_client_opts_t *opts)
{
    if (r->clients != NULL) return MCP_ESTATE;
    return mcp_clients_start_all(r->loop, cfg, opts, &r->hooks, r->lg, &r->clients, &r->n_clients);
}

mcp_client_t *const *mcp_relay_clients(const mcp_relay_t *r, size_t *n)
{
    *n = r != NULL ? r->n_clients : 0;
    return r != NULL ? r->clients : NULL;
}

mcp_client_t *mcp_relay_client(const mcp_relay_t *r, const char *name)
{
    return r != NULL ? mcp_clients_find(r->clients, r->n_clients, name) : NULL;
}

void mcp_relay_set_server(mcp_relay_t *r, mcp_server_t *srv)
{
    r->srv = srv;
}

void mcp_relay_expose(mcp_relay_t *r, mcp_server_t *srv)
{
    r->srv = srv;
    r->expose = true;
    for (size_t i = 0; i < r->n_clients; i++)
        mcp__relay_expose_server(r, mcp_client_name(r->clients[i]));
}

void mcp_relay_relist(mcp_relay_t *r, const char *server)
{
    mcp__relay_expose_server(r, server);
}

size_t mcp_relay_parked(const mcp_relay_t *r)
{
    return r->n_parked;
}

void mcp_relay_stop(mcp_relay_t *r)
{
    if (r != NULL) mcp__relay_drop_parked(r);
    for (size_t i = 0; r != NULL && i < r->n_clients; i++)
        mcp_client_stop(r->clients[i], NULL, NULL);
}

void mcp_relay_free(mcp_relay_t *r)
{
    if (r == NULL) return;
    mcp__relay_drop_parked(r);
    /* forward_withdraw unlinks the head it frees (through forward_done for a forwarded one):
     * the analyzer loses the unlink. */
    while (r->forwarded != NULL)
        // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
        forward_withdraw(r->forwarded, "ptc-mcp is stopping");
    /* Calls still in flight fail now (their callbacks end their own notes), then this frees
     * what a leak left (each pass frees the head it unlinks, as above). */
    mcp_clients_free(r->clients, r->n_clients);
    while (r->owners != NULL)
        // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
        mcp_relay_disown(r->owners);
    mcp__relay_proxy_free(r);
    free(r);
}
