/* downstream.c - the downstream MCP servers of --config: one client each, their tools fed to
 * the registry (search_tools) and, with --expose-tools, listed as our own tools and proxied. */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One tool listed under its registry id and proxied to its server (--expose-tools). */
typedef struct exposed {
    struct ptc_downstream *d;
    char *id, *server, *tool;
} exposed_t;

/* One --expose-tools call in flight. */
typedef struct proxy_call {
    mcp_call_t *call;
    mcp_client_call_t *downstream;
    ptc_downstream_owner_t *owner;
    bool rounds; /* a stateless client's call: the downstream's input requests go to it */
} proxy_call_t;

struct ptc_downstream_owner {
    struct ptc_downstream *d;
    const mcp_client_t *client;
    mcp_call_t *call;
    struct ptc_downstream_owner *prev, *next;
};

struct ptc_downstream {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    ptc_search_t *search;
    mcp_server_t *srv;      /* for forwarded requests and --expose-tools */
    ptc_startup_t *startup; /* told when a server is ready or failed */
    mcp_downstream_config_t cfg;
    mcp_http_client_t *http;
    mcp_client_t **clients;
    size_t n_clients;
    mcp_client_hooks_t hooks;
    unsigned tool_timeout_ms;
    bool expose;
    exposed_t **exposed;
    size_t n_exposed, cap_exposed;
    struct forwarded *forwarded;    /* requests of downstream servers waiting on our client */
    ptc_downstream_owner_t *owners; /* our calls waiting on a downstream call, newest first */
};

ptc_downstream_owner_t *ptc_downstream_own(ptc_downstream_t *d, const mcp_client_t *c,
                                           mcp_call_t *call)
{
    if (d == NULL || c == NULL || call == NULL) return NULL;
    ptc_downstream_owner_t *o = calloc(1, sizeof *o);
    if (o == NULL) return NULL;
    o->d = d;
    o->client = c;
    o->call = call;
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

static mcp_client_t *find_client(const ptc_downstream_t *d, const char *server)
{
    for (size_t i = 0; i < d->n_clients; i++)
        if (strcmp(mcp_client_name(d->clients[i]), server) == 0) return d->clients[i];
    return NULL;
}

/* --- --expose-tools ------------------------------------------------------------------------ */

/* A stateless downstream server asks for input inside a proxied call whose own client is
 * stateless too: the same input requests go to that client in our InputRequiredResult, with
 * the server's requestState as ours (which protects it), and its answers go back to the server
 * on the next round (proxy_handle). */
static void proxy_input_required(mcp_call_t *call, const cJSON *result)
{
    const cJSON *reqs = cJSON_GetObjectItemCaseSensitive(result, "inputRequests");
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(result, "requestState");
    if (state != NULL &&
        (!cJSON_IsString(state) || strlen(state->valuestring) > MCP_MRTR_MAX_STATE)) {
        mcp_call_finish_text(call, true,
                             "the downstream server's requestState is not a string of at most %zu "
                             "bytes, so it cannot be carried through this call",
                             MCP_MRTR_MAX_STATE);
        return;
    }
    cJSON *copy = cJSON_IsObject(reqs) ? cJSON_Duplicate(reqs, true) : cJSON_CreateObject();
    if (copy == NULL) {
        mcp_call_finish_text(call, true, "out of memory");
        return;
    }
    mcp_call_finish_input_required(call, copy, state != NULL ? state->valuestring : NULL);
}

static void proxy_done(void *data, int err, const cJSON *result, const cJSON *error,
                       const char *message)
{
    proxy_call_t *p = data;
    mcp_call_t *call = p->call;
    bool rounds = p->rounds;
    ptc_downstream_disown(p->owner);
    free(p);
    (void)error;
    if (err < 0) {
        mcp_call_finish_text(call, true, "%s", message ? message : mcp_strerror(err));
        return;
    }
    const cJSON *rt = cJSON_GetObjectItemCaseSensitive(result, "resultType");
    if (rounds && cJSON_IsString(rt) && strcmp(rt->valuestring, "input_required") == 0) {
        proxy_input_required(call, result);
        return;
    }
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(result, "structuredContent");
    bool is_error = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(result, "isError"));
    cJSON *c = cJSON_IsArray(content) ? cJSON_Duplicate(content, true) : cJSON_CreateArray();
    cJSON *s = cJSON_IsObject(sc) ? cJSON_Duplicate(sc, true) : NULL;
    mcp_call_finish(call, c, s, is_error);
}

static void proxy_progress(void *data, double progress, double total, const char *message)
{
    proxy_call_t *p = data;
    mcp_call_progress(p->call, progress, total, message);
}

static void proxy_cancel(mcp_call_t *call, void *data)
{
    proxy_call_t *p = data;
    (void)call;
    /* Tells the downstream server and runs proxy_done with ECANCELED, which answers. */
    mcp_client_call_cancel(p->downstream, "the client cancelled the call");
}

static void proxy_handle(mcp_call_t *call, const cJSON *args, void *data)
{
    exposed_t *e = data;
    mcp_client_t *c = find_client(e->d, e->server);
    proxy_call_t *p = calloc(1, sizeof *p);
    if (c == NULL || p == NULL) {
        free(p);
        mcp_call_finish_text(call, true, "server %s is not configured", e->server);
        return;
    }
    p->call = call;
    p->owner = ptc_downstream_own(e->d, c, call);
    /* A stateless client cannot be sent requests in the middle of its call, but it can be
     * handed a stateless downstream server's input requests as its own (proxy_done). */
    p->rounds = mcp_call_is_modern(call);
    mcp_client_progress_cb progress = mcp_call_wants_progress(call) ? proxy_progress : NULL;
    int rc = p->rounds
                 ? mcp_client_call_tool_round(c, e->tool, args, mcp_call_input_responses(call),
                                              mcp_call_request_state(call), e->d->tool_timeout_ms,
                                              progress, proxy_done, p, &p->downstream)
                 : mcp_client_call_tool(c, e->tool, args, e->d->tool_timeout_ms, progress,
                                        proxy_done, p, &p->downstream);
    if (rc < 0) {
        ptc_downstream_disown(p->owner);
        free(p);
        char m[400];
        ptc_downstream_refusal(c, rc, m, sizeof m);
        mcp_call_finish_text(call, true, "%s", m);
        return;
    }
    mcp_call_on_cancel(call, proxy_cancel, p);
}

static void exposed_free(exposed_t *e)
{
    free(e->id);
    free(e->server);
    free(e->tool);
    free(e);
}

/* Replaces the exposed tools of `server` with what the registry now holds for it. */
static void expose_server(ptc_downstream_t *d, const char *server)
{
    if (d->srv == NULL || !d->expose) return;
    mcp_server_hold_notifications(d->srv, true);
    size_t kept = 0;
    for (size_t i = 0; i < d->n_exposed; i++) {
        exposed_t *e = d->exposed[i];
        if (strcmp(e->server, server) == 0) {
            mcp_server_remove_tool(d->srv, e->id);
            exposed_free(e);
        } else {
            d->exposed[kept++] = e;
        }
    }
    d->n_exposed = kept;
    const reg_catalog_t *cat = reg_registry_catalog(ptc_search_registry(d->search));
    for (size_t i = 0; i < reg_catalog_count(cat); i++) {
        const reg_tool_t *t = reg_catalog_at(cat, i);
        if (strcmp(t->server, server) != 0) continue;
        if (d->n_exposed == d->cap_exposed) {
            size_t cap = d->cap_exposed ? d->cap_exposed * 2 : 64;
            exposed_t **ne = realloc(d->exposed, cap * sizeof *ne);
            if (ne == NULL) break;
            d->exposed = ne;
            d->cap_exposed = cap;
        }
        exposed_t *e = calloc(1, sizeof *e);
        char *schema = cJSON_PrintUnformatted(t->input_schema);
        char *annotations = t->annotations ? cJSON_PrintUnformatted(t->annotations) : NULL;
        if (e == NULL || schema == NULL || !(e->id = strdup(t->id)) ||
            !(e->server = strdup(t->server)) || !(e->tool = strdup(t->name))) {
            if (e) exposed_free(e);
            cJSON_free(schema);
            cJSON_free(annotations);
            break;
        }
        e->d = d;
        mcp_tool_def_t def = {
            .name = t->id,
            .title = t->title[0] ? t->title : NULL,
            .description = t->description,
            .input_schema = schema,
            .annotations = annotations,
            .handler = proxy_handle,
            .data = e,
        };
        if (mcp_server_add_tool(d->srv, &def) == 0)
            d->exposed[d->n_exposed++] = e;
        else
            exposed_free(e);
        cJSON_free(schema);
        cJSON_free(annotations);
    }
    mcp_server_hold_notifications(d->srv, false);
}

/* --- requests downstream servers send us ---------------------------------------------------- */

/* A sampling or elicitation request of a downstream server, forwarded to our own client. */
typedef struct forwarded {
    struct ptc_downstream *d;
    mcp_client_peer_req_t *req;
    mcp_outreq_t *out;
    struct forwarded *prev, *next;
} forwarded_t;

#define FORWARD_TIMEOUT_MS (10u * 60 * 1000) /* a person may be answering */

static void forward_unlink(forwarded_t *f)
{
    if (f->prev)
        f->prev->next = f->next;
    else
        f->d->forwarded = f->next;
    if (f->next) f->next->prev = f->prev;
}

static void forward_done(void *data, int err, const cJSON *result, const cJSON *error,
                         const char *message)
{
    forwarded_t *f = data;
    mcp_client_peer_req_t *req = f->req;
    forward_unlink(f);
    free(f);
    if (err == 0) {
        cJSON *copy = cJSON_Duplicate(result, true);
        if (copy != NULL) {
            mcp_client_peer_reply(req, copy);
            return;
        }
        err = MCP_ENOMEM;
    }
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "code");
    mcp_client_peer_fail(req, cJSON_IsNumber(code) ? code->valueint : MCP_JSONRPC_INTERNAL_ERROR,
                         message ? message : mcp_strerror(err));
}

static void on_peer_request(mcp_client_t *c, mcp_client_peer_req_t *req, void *data)
{
    ptc_downstream_t *d = data;
    const char *method = mcp_client_peer_method(req);
    const char *cap = strcmp(method, "sampling/createMessage") == 0 ? "sampling" : "elicitation";
    /* The request belongs to the client whose call is waiting on this server: never ask
     * another client's user (over HTTP many sessions share the downstream servers). */
    mcp_call_t *owner = NULL;
    bool ambiguous = false;
    for (ptc_downstream_owner_t *o = d->owners; o != NULL; o = o->next) {
        if (o->client != c) continue;
        if (owner == NULL)
            owner = o->call;
        else if (mcp_call_session(o->call) != mcp_call_session(owner))
            ambiguous = true;
    }
    mcp_session_t *s = owner != NULL ? mcp_call_session(owner)
                       : d->srv      ? mcp_server_pick_session(d->srv, cap)
                                     : NULL;
    bool capable = s != NULL && mcp_session_client_has(s, cap);
    forwarded_t *f = capable && !ambiguous ? calloc(1, sizeof *f) : NULL;
    cJSON *params = f ? cJSON_Duplicate(mcp_client_peer_params(req), true) : NULL;
    if (params == NULL) {
        free(f);
        char m[300];
        if (ambiguous)
            snprintf(m, sizeof m,
                     "%s from server %s: calls of several clients are waiting on this server, so "
                     "which client to ask cannot be told; refused",
                     method, mcp_client_name(c));
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
    f->d = d;
    f->req = req;
    f->next = d->forwarded;
    if (d->forwarded) d->forwarded->prev = f;
    d->forwarded = f;
    int rc = owner != NULL ? mcp_call_request_ex(owner, method, params, cap, FORWARD_TIMEOUT_MS,
                                                 forward_done, f, &f->out)
                           : mcp_session_request(s, method, params, cap, FORWARD_TIMEOUT_MS,
                                                 forward_done, f, &f->out);
    if (rc < 0) {
        forward_unlink(f);
        free(f);
        mcp_client_peer_fail(req, MCP_JSONRPC_INTERNAL_ERROR, mcp_strerror(rc));
    }
}

static void on_peer_cancelled(mcp_client_t *c, mcp_client_peer_req_t *req, void *data)
{
    ptc_downstream_t *d = data;
    (void)c;
    for (forwarded_t *f = d->forwarded; f != NULL; f = f->next)
        if (f->req == req) {
            mcp_outreq_cancel(f->out, "the downstream server cancelled its request");
            return; /* forward_done answered req, which freed it */
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
    expose_server(d, name);
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
    d->clients = calloc(d->cfg.n_servers, sizeof *d->clients);
    if (d->clients == NULL) {
        ptc_downstream_free(d);
        *out = NULL;
        return MCP_ENOMEM;
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
    for (size_t i = 0; i < d->cfg.n_servers; i++) {
        mcp_client_t *c = NULL;
        /* One broken entry never keeps the others from starting. */
        int rc = mcp_client_new(loop, &d->cfg.servers[i], &co, &d->hooks, lg, &c);
        if (rc < 0) {
            mcp_log(lg, MCP_LOG_ERROR, "server %s: %s", d->cfg.servers[i].name, mcp_strerror(rc));
            continue;
        }
        d->clients[d->n_clients++] = c;
        if ((rc = mcp_client_start(c)) < 0)
            mcp_log(lg, MCP_LOG_ERROR, "server %s: cannot start: %s", d->cfg.servers[i].name,
                    mcp_strerror(rc));
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
        expose_server(d, mcp_client_name(d->clients[i]));
}

size_t ptc_downstream_status(const ptc_downstream_t *d, char *buf, size_t size)
{
    size_t used = 0;
    if (size > 0) buf[0] = '\0';
    for (size_t i = 0; d != NULL && i < d->n_clients; i++) {
        const char *reason = NULL;
        mcp_client_state_t st = mcp_client_state(d->clients[i], &reason);
        const cJSON *tools = mcp_client_tools(d->clients[i]);
        int n = snprintf(buf + used, used < size ? size - used : 0, "%s: %s, %d tools%s%s\n",
                         mcp_client_name(d->clients[i]), mcp_client_state_name(st),
                         tools ? cJSON_GetArraySize(tools) : 0, reason ? "; " : "",
                         reason ? reason : "");
        if (n > 0) used += (size_t)n;
    }
    return used;
}

cJSON *ptc_downstream_status_json(const ptc_downstream_t *d)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr != NULL && d != NULL && i < d->n_clients; i++) {
        const char *reason = NULL;
        mcp_client_state_t st = mcp_client_state(d->clients[i], &reason);
        const cJSON *tools = mcp_client_tools(d->clients[i]);
        cJSON *o = cJSON_CreateObject();
        if (o == NULL || !cJSON_AddItemToArray(arr, o) ||
            !cJSON_AddStringToObject(o, "name", mcp_client_name(d->clients[i])) ||
            !cJSON_AddStringToObject(o, "state", mcp_client_state_name(st)) ||
            !cJSON_AddNumberToObject(o, "tools", tools ? cJSON_GetArraySize(tools) : 0) ||
            (reason && !cJSON_AddStringToObject(o, "reason", reason))) {
            if (o != NULL && cJSON_GetArraySize(arr) == 0) cJSON_Delete(o);
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

void ptc_downstream_refusal(mcp_client_t *c, int rc, char *buf, size_t size)
{
    const char *reason = NULL;
    mcp_client_state_t st = mcp_client_state(c, &reason);
    snprintf(buf, size, "server %s cannot take the call (%s%s%s): %s", mcp_client_name(c),
             mcp_client_state_name(st), reason ? ": " : "", reason ? reason : "", mcp_strerror(rc));
}

mcp_client_t *ptc_downstream_client(const ptc_downstream_t *d, const char *server)
{
    return d ? find_client(d, server) : NULL;
}

size_t ptc_downstream_failed(const ptc_downstream_t *d)
{
    size_t n = 0;
    for (size_t i = 0; d != NULL && i < d->n_clients; i++)
        n += mcp_client_state(d->clients[i], NULL) == MCP_CLIENT_FAILED;
    return n;
}

size_t ptc_downstream_count(const ptc_downstream_t *d)
{
    return d ? d->n_clients : 0;
}

bool ptc_downstream_settled(const ptc_downstream_t *d)
{
    for (size_t i = 0; d != NULL && i < d->n_clients; i++) {
        mcp_client_state_t st = mcp_client_state(d->clients[i], NULL);
        if (st != MCP_CLIENT_READY && st != MCP_CLIENT_FAILED) return false;
    }
    return true;
}

void ptc_downstream_stop(ptc_downstream_t *d)
{
    for (size_t i = 0; d != NULL && i < d->n_clients; i++)
        mcp_client_stop(d->clients[i], NULL, NULL);
}

void ptc_downstream_free(ptc_downstream_t *d)
{
    if (d == NULL) return;
    while (d->forwarded != NULL)
        mcp_outreq_cancel(d->forwarded->out, "ptc-mcp is stopping");
    /* Every call has finished by now, and with it its notes; this frees what a leak left. */
    while (d->owners != NULL)
        ptc_downstream_disown(d->owners);
    for (size_t i = 0; i < d->n_clients; i++)
        mcp_client_free(d->clients[i]);
    free(d->clients);
    for (size_t i = 0; i < d->n_exposed; i++)
        exposed_free(d->exposed[i]);
    free(d->exposed);
    mcp_http_client_free(d->http);
    mcp_downstream_config_close(&d->cfg);
    free(d);
}

size_t ptc_downstream_starting(const ptc_downstream_t *d, char *buf, size_t size)
{
    size_t n = 0, used = 0;
    if (size > 0) buf[0] = '\0';
    for (size_t i = 0; d != NULL && i < d->n_clients; i++) {
        if (mcp_client_state(d->clients[i], NULL) != MCP_CLIENT_STARTING) continue;
        int k = snprintf(buf + used, used < size ? size - used : 0, "%s%s", n ? ", " : "",
                         mcp_client_name(d->clients[i]));
        if (k > 0) used += (size_t)k;
        n++;
    }
    return n;
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
