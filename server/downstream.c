/* downstream.c - the downstream MCP servers of --config: one client each, their tools fed to
 * the registry (search_tools) and, with --expose-tools, listed as our own tools and proxied. */
#include "tools.h"

#include <stdio.h>
#include <sys/random.h>
#include <stdlib.h>
#include <string.h>

/* One tool listed under its registry id and proxied to its server (--expose-tools). */
typedef struct exposed {
    struct ptc_downstream *d;
    char *id, *server, *tool;
} exposed_t;

#define PROXY_HANDLE_MAX 40 /* "proxy-", 32 hex digits (128 random bits), NUL */

/* One --expose-tools call in flight. A stateless client's call to a legacy server that asks
 * for sampling or elicitation is parked: its call is answered with an InputRequiredResult that
 * names the handle, and the downstream call (and the server's request) wait for the round that
 * brings the answer. */
typedef struct proxy_call {
    struct ptc_downstream *d;
    mcp_call_t *call; /* NULL while parked */
    mcp_client_call_t *downstream;
    ptc_downstream_owner_t *owner;
    bool rounds; /* a stateless client's call: the downstream's input requests go to it */
    /* Parked (a stateless client's round pending): */
    cJSON *args;        /* the call's, which its next round repeats */
    mcp_identity_t who; /* only its client may continue it */
    char handle[PROXY_HANDLE_MAX];
    ptc_downstream_held_t *held; /* the server's request the round answers, or NULL */
    uv_timer_t *timer;           /* drops it when no round comes in time */
    bool linked, dropping;
    /* The downstream call ended while parked: what the round is answered with. */
    bool ended;
    int err;
    cJSON *result;
    char *message;
    struct proxy_call *prev, *next;
} proxy_call_t;

struct ptc_downstream_owner {
    struct ptc_downstream *d;
    const mcp_client_t *client;
    const mcp_client_call_t *call; /* the downstream call it waits on */
    ptc_downstream_asker_t asker;
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
    struct ptc_downstream_held
        *forwarded;                 /* requests of downstream servers waiting on our client */
    ptc_downstream_owner_t *owners; /* our calls waiting on a downstream call, newest first */
    proxy_call_t *parked;           /* proxied calls waiting for a client's next round */
    size_t n_parked;
};

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

static mcp_client_t *find_client(const ptc_downstream_t *d, const char *server)
{
    for (size_t i = 0; i < d->n_clients; i++)
        if (strcmp(mcp_client_name(d->clients[i]), server) == 0) return d->clients[i];
    return NULL;
}

/* --- --expose-tools ------------------------------------------------------------------------ */

/* A proxied call's own requestState says what the round continues: "s:" and the stateless
 * downstream server's state (its rounds pass through), or "h:" and the handle of a call parked
 * here (a legacy server's request held). The library signs it and binds it to the tool. */
#define PROXY_STATE_SERVER "s:"
#define PROXY_STATE_HANDLE "h:"
#define PROXY_INPUT_KEY    "downstream" /* the input request of a held server request */
#define MAX_PARKED_PROXIES 64u          /* proxied calls waiting for a round at once */

/* A stateless downstream server asks for input inside a proxied call whose own client is
 * stateless too: the same input requests go to that client in our InputRequiredResult, with
 * the server's requestState inside ours (which protects it), and its answers go back to the
 * server on the next round (proxy_handle). */
static void proxy_input_required(mcp_call_t *call, const cJSON *result)
{
    const cJSON *reqs = cJSON_GetObjectItemCaseSensitive(result, "inputRequests");
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(result, "requestState");
    size_t room = MCP_MRTR_MAX_STATE - sizeof PROXY_STATE_SERVER;
    if (state != NULL && (!cJSON_IsString(state) || strlen(state->valuestring) > room)) {
        mcp_call_finish_text(call, true,
                             "the downstream server's requestState is not a string of at most %zu "
                             "bytes, so it cannot be carried through this call",
                             room);
        return;
    }
    cJSON *copy = cJSON_IsObject(reqs) ? cJSON_Duplicate(reqs, true) : cJSON_CreateObject();
    char *ours = NULL;
    if (state != NULL && (ours = malloc(strlen(state->valuestring) + 3)) != NULL)
        snprintf(ours, strlen(state->valuestring) + 3, PROXY_STATE_SERVER "%s", state->valuestring);
    if (copy == NULL || (state != NULL && ours == NULL)) {
        cJSON_Delete(copy);
        free(ours);
        mcp_call_finish_text(call, true, "out of memory");
        return;
    }
    mcp_call_finish_input_required(call, copy, ours);
    free(ours);
}

/* Answers call with what the downstream call ended with. */
static void proxy_answer(mcp_call_t *call, bool rounds, int err, const cJSON *result,
                         const char *message)
{
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

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

static void proxy_unpark(proxy_call_t *p)
{
    if (!p->linked) return;
    if (p->prev)
        p->prev->next = p->next;
    else
        p->d->parked = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = NULL;
    p->linked = false;
    p->d->n_parked--;
    if (p->timer != NULL) uv_timer_stop(p->timer);
}

static void proxy_free(proxy_call_t *p)
{
    proxy_unpark(p);
    ptc_downstream_disown(p->owner);
    if (p->held != NULL) ptc_downstream_held_answer(p->held, NULL, "the call it came in ended");
    if (p->timer != NULL) uv_close((uv_handle_t *)p->timer, timer_closed);
    cJSON_Delete(p->args);
    cJSON_Delete(p->result);
    free(p->message);
    free(p);
}

/* Ends a parked call for good: its downstream call is cancelled, the server's request failed. */
static void proxy_drop(proxy_call_t *p, const char *why)
{
    p->dropping = true;
    proxy_unpark(p);
    if (p->downstream != NULL) mcp_client_call_cancel(p->downstream, why); /* proxy_done */
    proxy_free(p);
}

static void proxy_done(void *data, int err, const cJSON *result, const cJSON *error,
                       const char *message)
{
    proxy_call_t *p = data;
    (void)error;
    p->downstream = NULL;
    ptc_downstream_disown(p->owner); /* the server asks nothing more for this call */
    p->owner = NULL;
    if (p->dropping) return;
    if (p->call == NULL) { /* parked: its next round gets this */
        if (p->held != NULL) ptc_downstream_held_answer(p->held, NULL, "the call ended");
        p->held = NULL;
        p->ended = true;
        p->err = err;
        p->result = result != NULL ? cJSON_Duplicate(result, true) : NULL;
        p->message = message != NULL ? strdup(message) : NULL;
        if ((result != NULL && p->result == NULL) || (message != NULL && p->message == NULL))
            p->err = MCP_ENOMEM;
        return;
    }
    proxy_answer(p->call, p->rounds, err, result, message);
    proxy_free(p);
}

static void proxy_progress(void *data, double progress, double total, const char *message)
{
    proxy_call_t *p = data;
    if (p->call != NULL) mcp_call_progress(p->call, progress, total, message);
}

static void proxy_cancel(mcp_call_t *call, void *data)
{
    proxy_call_t *p = data;
    (void)call;
    /* Tells the downstream server and runs proxy_done with ECANCELED, which answers. */
    mcp_client_call_cancel(p->downstream, "the client cancelled the call");
}

static mcp_call_t *proxy_asker_call(void *data, const char **busy)
{
    proxy_call_t *p = data;
    *busy = p->call == NULL ? "another request of this call is waiting for the client's answer "
                              "(one at a time)"
                            : NULL;
    return p->call;
}

static void proxy_withdrawn(void *data)
{
    proxy_call_t *p = data;
    p->held = NULL; /* the round's answer has nowhere to go: the call's own answer still comes */
}

static void proxy_expired(uv_timer_t *t)
{
    proxy_call_t *p = t->data;
    mcp_log(p->d->lg, MCP_LOG_INFO,
            "proxied call: no next round came for %.14s... in time: its downstream call was "
            "cancelled",
            p->handle);
    proxy_drop(p, "the client never came back with the answer it was asked for");
}

/* A 128-bit random handle, "proxy-" and 32 hex digits; false without random bytes. */
static bool proxy_random_handle(char out[PROXY_HANDLE_MAX])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) return false;
    char *w = out + snprintf(out, PROXY_HANDLE_MAX, "proxy-");
    for (size_t i = 0; i < sizeof r; i++) {
        *w++ = hex[r[i] >> 4];
        *w++ = hex[r[i] & 15];
    }
    *w = '\0';
    return true;
}

/* A legacy server asks a stateless client's proxied call for sampling or elicitation: the call
 * is answered with the request as its input request, and parks until the round. */
static int proxy_hold(void *data, ptc_downstream_held_t *h, char *msg, size_t n)
{
    proxy_call_t *p = data;
    ptc_downstream_t *d = p->d;
    if (d->n_parked >= MAX_PARKED_PROXIES || p->args == NULL) {
        snprintf(msg, n, "too many proxied calls are waiting for their clients' answers");
        return MCP_EBUSY;
    }
    if (p->timer == NULL) {
        uv_timer_t *t = calloc(1, sizeof *t);
        if (t == NULL || uv_timer_init(d->loop, t) != 0) {
            free(t);
            snprintf(msg, n, "out of memory");
            return MCP_ENOMEM;
        }
        t->data = p;
        p->timer = t;
    }
    const cJSON *params = ptc_downstream_held_params(h);
    cJSON *requests = cJSON_CreateObject();
    cJSON *req = cJSON_AddObjectToObject(requests, PROXY_INPUT_KEY);
    char state[PROXY_HANDLE_MAX + 2];
    bool ok =
        req != NULL && proxy_random_handle(p->handle) &&
        cJSON_AddStringToObject(req, "method", ptc_downstream_held_method(h)) != NULL &&
        cJSON_AddItemToObject(
            req, "params", params != NULL ? cJSON_Duplicate(params, true) : cJSON_CreateObject());
    if (!ok) {
        cJSON_Delete(requests);
        snprintf(msg, n, "out of memory");
        return MCP_ENOMEM;
    }
    snprintf(state, sizeof state, PROXY_STATE_HANDLE "%s", p->handle);
    mcp_call_t *call = p->call;
    mcp_call_identity(call, &p->who);
    p->call = NULL; /* the call is answered now: nothing may touch it again */
    p->held = h;
    ptc_downstream_held_watch(h, proxy_withdrawn, p);
    p->next = d->parked;
    if (d->parked) d->parked->prev = p;
    d->parked = p;
    p->linked = true;
    d->n_parked++;
    /* The downstream call's own timeout bounds it too; this frees what is left after it. */
    uv_timer_start(p->timer, proxy_expired, d->tool_timeout_ms, 0);
    mcp_call_finish_input_required(call, requests, state);
    return MCP_OK;
}

/* The next round of a parked call (state: its handle): the client's answer goes to the server,
 * and the call waits for the downstream call's answer again. */
static void proxy_resume(ptc_downstream_t *d, mcp_call_t *call, const cJSON *args,
                         const char *handle)
{
    mcp_identity_t who;
    mcp_call_identity(call, &who);
    proxy_call_t *p = d->parked;
    while (p != NULL && (strcmp(p->handle, handle) != 0 || !mcp_identity_equal(&p->who, &who)))
        p = p->next;
    if (p == NULL) {
        mcp_call_finish_text(call, true,
                             "This call continues a proxied call that is no longer waiting (its "
                             "answer came already, or it waited too long and was cancelled): call "
                             "the tool again without requestState.");
        return;
    }
    if (!cJSON_Compare(p->args, args != NULL ? args : p->args, true)) {
        mcp_call_finish_text(call, true,
                             "Invalid arguments: a call with requestState repeats the arguments "
                             "of the call it continues (these differ).");
        return;
    }
    proxy_unpark(p);
    if (p->held != NULL) {
        const cJSON *answer =
            cJSON_GetObjectItemCaseSensitive(mcp_call_input_responses(call), PROXY_INPUT_KEY);
        ptc_downstream_held_answer(p->held, answer,
                                   "the client's next round carried no answer to it");
        p->held = NULL;
    }
    if (p->ended) {
        proxy_answer(call, p->rounds, p->err, p->result, p->message);
        proxy_free(p);
        return;
    }
    p->call = call;
    mcp_call_on_cancel(call, proxy_cancel, p);
}

static void proxy_handle(mcp_call_t *call, const cJSON *args, void *data)
{
    exposed_t *e = data;
    mcp_client_t *c = find_client(e->d, e->server);
    const char *state = mcp_call_request_state(call);
    size_t hl = strlen(PROXY_STATE_HANDLE), sl = strlen(PROXY_STATE_SERVER);
    if (state != NULL && strncmp(state, PROXY_STATE_HANDLE, hl) == 0) {
        proxy_resume(e->d, call, args, state + hl);
        return;
    }
    proxy_call_t *p = calloc(1, sizeof *p);
    if (c == NULL || p == NULL) {
        free(p);
        mcp_call_finish_text(call, true, "server %s is not configured", e->server);
        return;
    }
    p->d = e->d;
    p->call = call;
    /* A stateless client cannot be sent requests in the middle of its call, but it can be
     * handed a stateless downstream server's input requests as its own (proxy_done), and a
     * legacy server's requests as input requests too (proxy_hold, which needs the args). */
    p->rounds = mcp_call_is_modern(call);
    if (p->rounds) p->args = args != NULL ? cJSON_Duplicate(args, true) : cJSON_CreateObject();
    const char *server_state =
        state != NULL && strncmp(state, PROXY_STATE_SERVER, sl) == 0 ? state + sl : NULL;
    mcp_client_progress_cb progress = mcp_call_wants_progress(call) ? proxy_progress : NULL;
    int rc = p->rounds
                 ? mcp_client_call_tool_round(c, e->tool, args, mcp_call_input_responses(call),
                                              server_state, e->d->tool_timeout_ms, progress,
                                              proxy_done, p, &p->downstream)
                 : mcp_client_call_tool(c, e->tool, args, e->d->tool_timeout_ms, progress,
                                        proxy_done, p, &p->downstream);
    if (rc < 0) {
        proxy_free(p);
        char m[400];
        ptc_downstream_refusal(c, rc, m, sizeof m);
        mcp_call_finish_text(call, true, "%s", m);
        return;
    }
    /* No request of the server can come before the loop runs again. */
    ptc_downstream_asker_t asker = {.call = proxy_asker_call, .hold = proxy_hold, .data = p};
    p->owner = ptc_downstream_own(e->d, c, p->downstream, &asker);
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

/* Proxied calls parked for a round end with the server (no round could reach them). */
static void drop_parked(ptc_downstream_t *d)
{
    /* proxy_drop unlinks the head it frees, so each pass reads a live one: the analyzer loses
     * the unlink. */
    while (d->parked != NULL)
        // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
        proxy_drop(d->parked, "ptc-mcp is stopping");
}

void ptc_downstream_stop(ptc_downstream_t *d)
{
    if (d != NULL) drop_parked(d);
    for (size_t i = 0; d != NULL && i < d->n_clients; i++)
        mcp_client_stop(d->clients[i], NULL, NULL);
}

void ptc_downstream_free(ptc_downstream_t *d)
{
    if (d == NULL) return;
    drop_parked(d);
    /* forward_withdraw unlinks the head it frees (through forward_done for a forwarded one):
     * the analyzer loses the unlink. */
    while (d->forwarded != NULL)
        // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
        forward_withdraw(d->forwarded, "ptc-mcp is stopping");
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
