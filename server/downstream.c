/* downstream.c - the downstream MCP servers of --config: one client each, their tools fed to
 * the registry (search_tools) and, with --expose-tools, listed as our own tools and proxied. */
#include "downstream_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ptc_downstream_owner_t *ptc_downstream_own(ptc_downstream_t *d, const mcp_client_t *c,
                                           const mcp_client_call_t *dc,
                                           const ptc_downstream_asker_t *asker)
{
    if (d == NULL || c == NULL || asker == NULL || asker->call == NULL) return NULL;
    ptc_downstream_owner_t *o = calloc(1, sizeof *o);
    if (o == NULL) return NULL;
    o->d = d;
    o->client = c;
    o->call = dc;
    o->asker = *asker;
    o->next = d->owners;
    if (d->owners) d->owners->prev = o;
    d->owners = o;
    return o;
}

void ptc_downstream_disown(ptc_downstream_owner_t *o)
{
    if (o == NULL) return;
    if (o->prev)
        o->prev->next = o->next;
    else
        o->d->owners = o->next;
    if (o->next) o->next->prev = o->prev;
    free(o);
}

mcp_client_t *ptc__downstream_find_client(const ptc_downstream_t *d, const char *server)
{
    return mcp_clients_find(d->clients, d->n_clients, server);
}

/* --- requests downstream servers send us ---------------------------------------------------- */

/* A sampling or elicitation request of a downstream server, forwarded to our own client (out
 * set), or held for a stateless client's next round (out NULL). */
struct ptc_downstream_held {
    struct ptc_downstream *d;
    mcp_client_peer_req_t *req;
    mcp_outreq_t *out;
    ptc_downstream_withdrawn_cb withdrawn; /* held: its holder, told if the server withdraws it */
    void *withdrawn_data;
    struct ptc_downstream_held *prev, *next;
};
typedef struct ptc_downstream_held forwarded_t;

#define FORWARD_TIMEOUT_MS (10u * 60 * 1000) /* a person may be answering */

static void forward_unlink(forwarded_t *f)
{
    if (f->prev)
        f->prev->next = f->next;
    else
        f->d->forwarded = f->next;
    if (f->next) f->next->prev = f->prev;
}

static forwarded_t *forward_link(ptc_downstream_t *d, mcp_client_peer_req_t *req)
{
    forwarded_t *f = calloc(1, sizeof *f);
    if (f == NULL) return NULL;
    f->d = d;
    f->req = req;
    f->next = d->forwarded;
    if (d->forwarded) d->forwarded->prev = f;
    d->forwarded = f;
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
    if (err == 0) {
        cJSON *copy = cJSON_Duplicate(result, true);
        if (copy != NULL) {
            forward_settle(f, copy, 0, NULL);
            return;
        }
        err = MCP_ENOMEM;
    }
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "code");
    forward_settle(f, NULL, cJSON_IsNumber(code) ? code->valueint : MCP_JSONRPC_INTERNAL_ERROR,
                   message ? message : mcp_strerror(err));
}

const char *ptc_downstream_held_method(const ptc_downstream_held_t *h)
{
    return mcp_client_peer_method(h->req);
}

const cJSON *ptc_downstream_held_params(const ptc_downstream_held_t *h)
{
    return mcp_client_peer_params(h->req);
}

void ptc_downstream_held_watch(ptc_downstream_held_t *h, ptc_downstream_withdrawn_cb cb, void *data)
{
    h->withdrawn = cb;
    h->withdrawn_data = data;
}

void ptc_downstream_held_answer(ptc_downstream_held_t *h, const cJSON *result, const char *why)
{
    cJSON *copy = result != NULL ? cJSON_Duplicate(result, true) : NULL;
    char m[300];
    snprintf(m, sizeof m, "%s was not answered: %s", ptc_downstream_held_method(h),
             result != NULL ? "out of memory" : why);
    forward_settle(h, copy, MCP_JSONRPC_INTERNAL_ERROR, m);
}

/* The request goes to the call it belongs to: its client's session (a legacy client), or its
 * next round (a stateless client: hold). */
static void on_peer_request(mcp_client_t *c, mcp_client_peer_req_t *req, void *data)
{
    ptc_downstream_t *d = data;
    const char *method = mcp_client_peer_method(req);
    const char *cap = strcmp(method, "sampling/createMessage") == 0 ? "sampling" : "elicitation";
    /* The request belongs to the client whose call is waiting on this server: never ask
     * another client's user (over HTTP many sessions share the downstream servers, and each
     * stateless request is a client of its own). */
    mcp_call_t *owner = NULL;
    ptc_downstream_owner_t *asker = NULL;
    const char *busy = NULL;
    bool ambiguous = false;
    /* A stateless server's input request names its call: only that call's owner is asked. */
    const mcp_client_call_t *asked_by = mcp_client_peer_call(req);
    for (ptc_downstream_owner_t *o = d->owners; o != NULL; o = o->next) {
        if (o->client != c || (asked_by != NULL && o->call != asked_by)) continue;
        const char *b = NULL;
        mcp_call_t *call = o->asker.call(o->asker.data, &b);
        if (call == NULL && b == NULL) continue; /* no request of its waits now */
        if (call == NULL) {
            ambiguous = ambiguous || owner != NULL;
            busy = b;
        } else if (owner == NULL) {
            ambiguous = busy != NULL;
            owner = call;
            asker = o;
        } else if (call != owner && (mcp_call_is_modern(call) || mcp_call_is_modern(owner) ||
                                     mcp_call_session(call) != mcp_call_session(owner))) {
            ambiguous = true;
        }
    }
    char m[400];
    bool modern = !ambiguous && owner != NULL && mcp_call_is_modern(owner);
    if (modern && mcp_call_client_has(owner, cap) && asker->asker.hold != NULL) {
        forwarded_t *f = forward_link(d, req);
        if (f == NULL) {
            mcp_client_peer_fail(req, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
            return;
        }
        char why[200];
        int rc = asker->asker.hold(asker->asker.data, f, why, sizeof why);
        if (rc < 0) {
            snprintf(m, sizeof m, "%s from server %s could not be passed to the client: %s", method,
                     mcp_client_name(c), why);
            forward_settle(f, NULL, MCP_JSONRPC_INTERNAL_ERROR, m);
        }
        return;
    }
    mcp_session_t *s = modern || busy != NULL ? NULL
                       : owner != NULL        ? mcp_call_session(owner)
                       : d->srv               ? mcp_server_pick_session(d->srv, cap)
                                              : NULL;
    bool capable = s != NULL && mcp_session_client_has(s, cap);
    forwarded_t *f = capable && !ambiguous ? forward_link(d, req) : NULL;
    cJSON *params = f ? cJSON_Duplicate(mcp_client_peer_params(req), true) : NULL;
    if (params == NULL) {
        if (f != NULL) forward_unlink(f);
        free(f);
        if (ambiguous)
            snprintf(m, sizeof m,
                     "%s from server %s: calls of several clients are waiting on this server, so "
                     "which client to ask cannot be told; refused",
                     method, mcp_client_name(c));
        else if (busy != NULL)
            snprintf(m, sizeof m, "%s from server %s: %s; refused", method, mcp_client_name(c),
                     busy);
        else if (modern)
            snprintf(m, sizeof m,
                     "%s from server %s: the client that made the call does not support %s (its "
                     "request's _meta clientCapabilities do not name it)",
                     method, mcp_client_name(c), cap);
        else if (owner != NULL)
            snprintf(m, sizeof m,
                     "%s from server %s: the client that made the call does not "
                     "support %s",
                     method, mcp_client_name(c), cap);
        else
            snprintf(m, sizeof m, "%s from server %s: no single connected client supports %s",
                     method, mcp_client_name(c), cap);
        mcp_client_peer_fail(req, MCP_JSONRPC_METHOD_NOT_FOUND, m);
        return;
    }
    int rc = owner != NULL ? mcp_call_request_ex(owner, method, params, cap, FORWARD_TIMEOUT_MS,
                                                 forward_done, f, &f->out)
                           : mcp_session_request(s, method, params, cap, FORWARD_TIMEOUT_MS,
                                                 forward_done, f, &f->out);
    if (rc < 0) forward_settle(f, NULL, MCP_JSONRPC_INTERNAL_ERROR, mcp_strerror(rc));
}

/* Ends f: a forwarded request is cancelled on our client's side (forward_done answers it), a
 * held one is failed and its holder told. */
static void forward_withdraw(forwarded_t *f, const char *why)
{
    if (f->out != NULL) {
        mcp_outreq_cancel(f->out, why); /* forward_done answered f's request, which freed it */
        return;
    }
    ptc_downstream_withdrawn_cb cb = f->withdrawn;
    void *cb_data = f->withdrawn_data;
    forward_settle(f, NULL, MCP_JSONRPC_INTERNAL_ERROR, why);
    if (cb != NULL) cb(cb_data);
}

static void on_peer_cancelled(mcp_client_t *c, mcp_client_peer_req_t *req, void *data)
{
    ptc_downstream_t *d = data;
    (void)c;
    for (forwarded_t *f = d->forwarded; f != NULL; f = f->next) {
        if (f->req != req) continue;
        forward_withdraw(f, "the downstream server cancelled its request");
        return;
    }
}

/* --- clients ------------------------------------------------------------------------------- */

/* The --config entry's "category" of server `name`, or NULL. */
static const char *config_category(const ptc_downstream_t *d, const char *name)
{
    for (size_t i = 0; i < d->cfg.n_servers; i++)
        if (strcmp(d->cfg.servers[i].name, name) == 0) return d->cfg.servers[i].category;
    return NULL;
}

/* A copy of tools where each tool without a category of its own ("category" or
 * _meta.category, as the registry reads it) gets the server's; NULL when out of memory. */
static cJSON *with_category(const cJSON *tools, const char *category)
{
    cJSON *copy = cJSON_Duplicate(tools, true);
    cJSON *t;
    cJSON_ArrayForEach(t, copy)
    {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(t, "_meta");
        if (!cJSON_IsObject(t) || cJSON_IsString(cJSON_GetObjectItemCaseSensitive(t, "category")) ||
            cJSON_IsString(cJSON_GetObjectItemCaseSensitive(meta, "category")))
            continue;
        cJSON_DeleteItemFromObjectCaseSensitive(t, "category"); /* not a string: replaced */
        if (cJSON_AddStringToObject(t, "category", category) == NULL) {
            cJSON_Delete(copy);
            return NULL;
        }
    }
    return copy;
}

static void on_tools(mcp_client_t *c, const cJSON *tools, void *data)
{
    ptc_downstream_t *d = data;
    char msg[256];
    const char *name = mcp_client_name(c);
    const char *category = config_category(d, name);
    cJSON *categorised = category != NULL ? with_category(tools, category) : NULL;
    if (category != NULL && categorised == NULL) {
        mcp_log(d->lg, MCP_LOG_ERROR, "server %s: its tools were not indexed: out of memory", name);
        return;
    }
    int rc =
        reg_registry_set_server_tools(ptc_search_registry(d->search), name,
                                      categorised != NULL ? categorised : tools, msg, sizeof msg);
    cJSON_Delete(categorised);
    if (rc < 0) {
        mcp_log(d->lg, MCP_LOG_ERROR, "server %s: its tools were not indexed: %s", name, msg);
        return;
    }
    mcp_log(d->lg, MCP_LOG_INFO, "server %s: %d tools", name, cJSON_GetArraySize(tools));
    ptc_search_changed(d->search);
    ptc__downstream_expose_server(d, name);
}

static void on_state(mcp_client_t *c, mcp_client_state_t state, const char *reason, void *data)
{
    ptc_downstream_t *d = data;
    mcp_level_t level = state == MCP_CLIENT_FAILED ? MCP_LOG_ERROR : MCP_LOG_INFO;
    mcp_log(d->lg, level, "server %s: %s%s%s", mcp_client_name(c), mcp_client_state_name(state),
            reason ? ": " : "", reason ? reason : "");
    ptc_startup_poke(d->startup);
}

int ptc_downstream_new(uv_loop_t *loop, const ptc_options_t *o, const mcp_logger_t *lg,
                       ptc_search_t *search, ptc_downstream_t **out)
{
    *out = NULL;
    ptc_downstream_t *d = calloc(1, sizeof *d);
    if (d == NULL) return MCP_ENOMEM;
    d->loop = loop;
    d->lg = lg;
    d->search = search;
    d->tool_timeout_ms = (unsigned)(o->tool_timeout * 1000.0);
    d->hooks = (mcp_client_hooks_t){.state_changed = on_state,
                                    .tools_changed = on_tools,
                                    .peer_request = on_peer_request,
                                    .peer_cancelled = on_peer_cancelled,
                                    .data = d};
    *out = d;
    if (o->config_json == NULL) return MCP_OK;
    char msg[512];
    if (mcp_downstream_config_from_json(o->config_json, &d->cfg, msg, sizeof msg) < 0) {
        mcp_log(lg, MCP_LOG_ERROR, "--config %s: %s", o->config_file, msg);
        ptc_downstream_free(d);
        *out = NULL;
        return MCP_EINVAL;
    }
    char source[600];
    snprintf(source, sizeof source, "--config %s", o->config_file);
    mcp_downstream_config_log(&d->cfg, lg, source);
    if (d->cfg.n_servers == 0) return MCP_OK;
    mcp_http_client_opts_t ho;
    mcp_http_client_opts_default(&ho);
    ho.ca_file = o->ca_file;
    if (mcp_http_client_new(loop, &ho, lg, &d->http) < 0) {
        mcp_log(lg, MCP_LOG_WARNING, "no HTTP client: http servers in --config will fail");
        d->http = NULL;
    }
    mcp_client_opts_t co;
    mcp_client_opts_default(&co);
    co.http = d->http;
    /* Declared to every server: whether a connected client can take the request is decided
     * when one comes (ours start before any client connects). */
    co.can_sample = true;
    co.can_elicit = true;
    /* The variables that hold ptc-mcp's own secrets never reach a downstream server (whose
     * tools sandboxed code can call), even when named in the inherited default set. */
    const char *withheld[] = {o->auth_token_env, o->repair_key_env, o->embed_key_env, NULL};
    const char *kept[4] = {NULL, NULL, NULL, NULL};
    for (size_t i = 0, k = 0; i < 3; i++)
        if (withheld[i] != NULL && withheld[i][0] != '\0') kept[k++] = withheld[i];
    co.withheld_env = kept;
    if (mcp_clients_start_all(loop, &d->cfg, &co, &d->hooks, lg, &d->clients, &d->n_clients) < 0) {
        ptc_downstream_free(d);
        *out = NULL;
        return MCP_ENOMEM;
    }
    return MCP_OK;
}

void ptc_downstream_set_server(ptc_downstream_t *d, mcp_server_t *srv)
{
    d->srv = srv;
}

void ptc_downstream_set_startup(ptc_downstream_t *d, ptc_startup_t *st)
{
    if (d != NULL) d->startup = st;
}

void ptc_downstream_expose(ptc_downstream_t *d, mcp_server_t *srv)
{
    d->srv = srv;
    d->expose = true;
    for (size_t i = 0; i < d->n_clients; i++)
        ptc__downstream_expose_server(d, mcp_client_name(d->clients[i]));
}

size_t ptc_downstream_status(const ptc_downstream_t *d, char *buf, size_t size)
{
    if (d == NULL) {
        if (size > 0) buf[0] = '\0';
        return 0;
    }
    return mcp_clients_status(d->clients, d->n_clients, buf, size);
}

cJSON *ptc_downstream_status_json(const ptc_downstream_t *d)
{
    return d ? mcp_clients_status_json(d->clients, d->n_clients) : cJSON_CreateArray();
}

void ptc_downstream_refusal(mcp_client_t *c, int rc, char *buf, size_t size)
{
    mcp_client_refusal(c, rc, buf, size);
}

mcp_client_t *ptc_downstream_client(const ptc_downstream_t *d, const char *server)
{
    return d ? ptc__downstream_find_client(d, server) : NULL;
}

size_t ptc_downstream_failed(const ptc_downstream_t *d)
{
    return d ? mcp_clients_count_in(d->clients, d->n_clients, MCP_CLIENT_FAILED) : 0;
}

size_t ptc_downstream_count(const ptc_downstream_t *d)
{
    return d ? d->n_clients : 0;
}

bool ptc_downstream_settled(const ptc_downstream_t *d)
{
    return d ? mcp_clients_settled(d->clients, d->n_clients) : true;
}

void ptc_downstream_stop(ptc_downstream_t *d)
{
    if (d != NULL) ptc__downstream_drop_parked(d);
    for (size_t i = 0; d != NULL && i < d->n_clients; i++)
        mcp_client_stop(d->clients[i], NULL, NULL);
}

void ptc_downstream_free(ptc_downstream_t *d)
{
    if (d == NULL) return;
    ptc__downstream_drop_parked(d);
    /* forward_withdraw unlinks the head it frees (through forward_done for a forwarded one):
     * the analyzer loses the unlink. */
    while (d->forwarded != NULL)
        // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
        forward_withdraw(d->forwarded, "ptc-mcp is stopping");
    /* Every call has finished by now, and with it its notes; this frees what a leak left. */
    while (d->owners != NULL)
        ptc_downstream_disown(d->owners);
    mcp_clients_free(d->clients, d->n_clients);
    for (size_t i = 0; i < d->n_exposed; i++)
        ptc__downstream_exposed_free(d->exposed[i]);
    free(d->exposed);
    mcp_http_client_free(d->http);
    mcp_downstream_config_close(&d->cfg);
    free(d);
}

size_t ptc_downstream_starting(const ptc_downstream_t *d, char *buf, size_t size)
{
    if (d == NULL) {
        if (size > 0) buf[0] = '\0';
        return 0;
    }
    return mcp_clients_starting(d->clients, d->n_clients, buf, size);
}

bool ptc_downstream_packaged(const ptc_downstream_t *d, const cJSON *modules)
{
    for (size_t i = 0; d != NULL && i < d->n_clients; i++) {
        if (mcp_client_state(d->clients[i], NULL) != MCP_CLIENT_READY ||
            cJSON_GetArraySize(mcp_client_tools(d->clients[i])) == 0)
            continue;
        bool found = false;
        const cJSON *m;
        cJSON_ArrayForEach(m, modules)
        {
            const cJSON *server = cJSON_GetObjectItemCaseSensitive(m, "server");
            if (cJSON_IsString(server) &&
                strcmp(server->valuestring, mcp_client_name(d->clients[i])) == 0)
                found = true;
        }
        if (!found) return false;
    }
    return true;
}
