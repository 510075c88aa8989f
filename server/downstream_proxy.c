/* downstream_proxy.c - --expose-tools: a downstream server's tools listed as our own and each
 * call proxied to its server; a stateless client's call whose legacy server asks for sampling
 * or elicitation parks under an unguessable handle until the client's next round. */
#include "downstream_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        req != NULL && exec_random_handle("proxy-", p->handle, PROXY_HANDLE_MAX) &&
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
    mcp_client_t *c = ptc__downstream_find_client(e->d, e->server);
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

void ptc__downstream_exposed_free(exposed_t *e)
{
    free(e->id);
    free(e->server);
    free(e->tool);
    free(e);
}

/* Replaces the exposed tools of `server` with what the registry now holds for it. */
void ptc__downstream_expose_server(ptc_downstream_t *d, const char *server)
{
    if (d->srv == NULL || !d->expose) return;
    mcp_server_hold_notifications(d->srv, true);
    size_t kept = 0;
    for (size_t i = 0; i < d->n_exposed; i++) {
        exposed_t *e = d->exposed[i];
        if (strcmp(e->server, server) == 0) {
            mcp_server_remove_tool(d->srv, e->id);
            ptc__downstream_exposed_free(e);
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
            if (e) ptc__downstream_exposed_free(e);
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
            ptc__downstream_exposed_free(e);
        cJSON_free(schema);
        cJSON_free(annotations);
    }
    mcp_server_hold_notifications(d->srv, false);
}

/* Proxied calls parked for a round end with the server (no round could reach them). */
void ptc__downstream_drop_parked(ptc_downstream_t *d)
{
    /* proxy_drop unlinks the head it frees, so each pass reads a live one: the analyzer loses
     * the unlink. */
    while (d->parked != NULL)
        // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
        proxy_drop(d->parked, "ptc-mcp is stopping");
}
