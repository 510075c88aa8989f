/* relay_proxy.c - mcp_relay_expose: the downstream servers' tools listed on our server under the
 * names the owner gives them, each call proxied to its server. A stateless caller's call whose
 * legacy server asks for sampling or elicitation parks under an unguessable handle, bound to
 * the caller's identity and arguments, until the caller's next round brings the answer. */
#include "relay_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* A proxied call's own requestState says what the round continues: "s:" and the stateless
 * downstream server's state (its rounds pass through), or "h:" and the handle of a call parked
 * here (a legacy server's request held). mrtr.c signs it and binds it to the tool. */
#define STATE_SERVER "s:"
#define STATE_HANDLE "h:"

/* One proxied call in flight. Parked (call NULL): a stateless caller's call was answered with
 * an InputRequiredResult naming the handle, and the downstream call (and the server's request)
 * wait for the round that brings the answer. */
struct mcp__proxy {
    mcp_relay_t *r;
    mcp_call_t *call; /* NULL while parked */
    mcp_client_call_t *downstream;
    mcp_relay_owner_t *owner;
    bool rounds; /* a stateless caller's call: the downstream's input requests go to it */
    /* Parked (a stateless caller's round pending): */
    cJSON *args;        /* the call's, which its next round repeats */
    mcp_identity_t who; /* only its caller may continue it */
    char handle[MCP_RELAY_HANDLE_MAX];
    mcp_relay_held_t *held; /* the server's request the round answers, or NULL */
    uv_timer_t *timer;      /* drops it when no round comes in time */
    bool linked, dropping;
    /* The downstream call ended while parked: what the round is answered with. */
    bool ended;
    int err;
    cJSON *result;
    char *message;
    struct mcp__proxy *prev, *next;
};
typedef struct mcp__proxy proxy_t;

/* A fresh handle: the prefix and 128 random bits in hex. */
static bool new_handle(char out[MCP_RELAY_HANDLE_MAX])
{
    unsigned char rnd[16];
    size_t k = sizeof MCP_RELAY_HANDLE_PREFIX - 1;
    bool ok = getrandom(rnd, sizeof rnd, 0) == (ssize_t)sizeof rnd;
    memcpy(out, MCP_RELAY_HANDLE_PREFIX, k + 1);
    for (size_t i = 0; ok && i < sizeof rnd; i++)
        snprintf(out + k + 2 * i, 3, "%02x", rnd[i]);
    return ok;
}

/* A stateless downstream server asks for input inside a proxied call whose own caller is
 * stateless too: the same input requests go to that caller in our InputRequiredResult, with
 * the server's requestState inside ours (which protects it), and its answers go back to the
 * server on the next round (proxy_handle). */
static void proxy_input_required(mcp_call_t *call, const cJSON *result)
{
    const cJSON *reqs = cJSON_GetObjectItemCaseSensitive(result, "inputRequests");
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(result, "requestState");
    size_t room = MCP_MRTR_MAX_STATE - sizeof STATE_SERVER;
    bool carried = state == NULL || (cJSON_IsString(state) && strlen(state->valuestring) <= room);
    cJSON *copy = !carried               ? NULL
                  : cJSON_IsObject(reqs) ? cJSON_Duplicate(reqs, true)
                                         : cJSON_CreateObject();
    size_t n = carried && state != NULL ? strlen(state->valuestring) + sizeof STATE_SERVER : 0;
    char *ours = n > 0 ? malloc(n) : NULL;
    if (ours != NULL) snprintf(ours, n, STATE_SERVER "%s", state->valuestring);
    if (!carried) {
        mcp_call_finish_text(call, true,
                             "the downstream server's requestState is not a string of at most %zu "
                             "bytes, so it cannot be carried through this call",
                             room);
    } else if (copy == NULL || (n > 0 && ours == NULL)) {
        cJSON_Delete(copy);
        mcp_call_finish_text(call, true, "out of memory");
    } else {
        mcp_call_finish_input_required(call, copy, ours);
    }
    free(ours);
}

/* Answers call with what the downstream call ended with. */
static void proxy_answer(mcp_call_t *call, bool rounds, int err, const cJSON *result,
                         const char *message)
{
    const cJSON *rt = cJSON_GetObjectItemCaseSensitive(result, "resultType");
    if (err < 0) {
        mcp_call_finish_text(call, true, "%s", message ? message : mcp_strerror(err));
    } else if (rounds && cJSON_IsString(rt) && strcmp(rt->valuestring, "input_required") == 0) {
        proxy_input_required(call, result);
    } else {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(result, "structuredContent");
        bool is_error = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(result, "isError"));
        cJSON *c = cJSON_IsArray(content) ? cJSON_Duplicate(content, true) : cJSON_CreateArray();
        cJSON *s = cJSON_IsObject(sc) ? cJSON_Duplicate(sc, true) : NULL;
        mcp_call_finish(call, c, s, is_error);
    }
}

static void proxy_unpark(proxy_t *p)
{
    if (!p->linked) return;
    if (p->prev)
        p->prev->next = p->next;
    else
        p->r->parked = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = NULL;
    p->linked = false;
    p->r->n_parked--;
    uv_timer_stop(p->timer);
}

static void proxy_free(proxy_t *p)
{
    proxy_unpark(p);
    mcp_relay_disown(p->owner);
    if (p->held != NULL) mcp_relay_held_answer(p->held, NULL, "the call it came in ended");
    mcp__close_free((uv_handle_t *)p->timer);
    cJSON_Delete(p->args);
    cJSON_Delete(p->result);
    free(p->message);
    free(p);
}

/* Ends a parked call for good: its downstream call is cancelled, the server's request failed. */
static void proxy_drop(proxy_t *p, const char *why)
{
    p->dropping = true;
    proxy_unpark(p);
    if (p->downstream != NULL) mcp_client_call_cancel(p->downstream, why); /* proxy_done */
    proxy_free(p);
}

/* The downstream call ended while its call is parked: its next round gets this. */
static void proxy_keep_end(proxy_t *p, int err, const cJSON *result, const char *message)
{
    if (p->held != NULL) mcp_relay_held_answer(p->held, NULL, "the call ended");
    p->held = NULL;
    p->ended = true;
    p->err = err;
    p->result = result != NULL ? cJSON_Duplicate(result, true) : NULL;
    p->message = mcp__strdup(message);
    if ((result != NULL && p->result == NULL) || (message != NULL && p->message == NULL))
        p->err = MCP_ENOMEM;
}

static void proxy_done(void *data, int err, const cJSON *result, const cJSON *error,
                       const char *message)
{
    proxy_t *p = data;
    (void)error;
    p->downstream = NULL;
    mcp_relay_disown(p->owner); /* the server asks nothing more for this call */
    p->owner = NULL;
    if (p->dropping) return;
    if (p->call == NULL) {
        proxy_keep_end(p, err, result, message);
    } else {
        proxy_answer(p->call, p->rounds, err, result, message);
        proxy_free(p);
    }
}

static void proxy_progress(void *data, double progress, double total, const char *message)
{
    proxy_t *p = data;
    if (p->call != NULL) mcp_call_progress(p->call, progress, total, message);
}

static void proxy_cancel(mcp_call_t *call, void *data)
{
    proxy_t *p = data;
    (void)call;
    /* Tells the downstream server and runs proxy_done with MCP_ECANCELED, which answers. */
    mcp_client_call_cancel(p->downstream, "the client cancelled the call");
}

static mcp_call_t *proxy_asker_call(void *data, const char **busy)
{
    proxy_t *p = data;
    *busy = p->call == NULL ? "another request of this call is waiting for the client's answer "
                              "(one at a time)"
                            : NULL;
    return p->call;
}

static void proxy_withdrawn(void *data)
{
    proxy_t *p = data;
    p->held = NULL; /* the round's answer has nowhere to go: the call's own answer still comes */
}

static void proxy_expired(uv_timer_t *t)
{
    proxy_t *p = t->data;
    mcp_log(p->r->lg, MCP_LOG_INFO,
            "proxied call: no next round came for %.14s... in time: its downstream call was "
            "cancelled",
            p->handle);
    proxy_drop(p, "the client never came back with the answer it was asked for");
}

/* The input requests of a parked call: the held request h under MCP_RELAY_INPUT_KEY (NULL on
 * ENOMEM). */
static cJSON *held_requests(const mcp_relay_held_t *h)
{
    const cJSON *params = mcp_relay_held_params(h);
    cJSON *requests = cJSON_CreateObject();
    cJSON *req = cJSON_AddObjectToObject(requests, MCP_RELAY_INPUT_KEY);
    if (req == NULL || cJSON_AddStringToObject(req, "method", mcp_relay_held_method(h)) == NULL ||
        !cJSON_AddItemToObject(
            req, "params", params != NULL ? cJSON_Duplicate(params, true) : cJSON_CreateObject())) {
        cJSON_Delete(requests);
        requests = NULL;
    }
    return requests;
}

static void park(proxy_t *p, mcp_relay_held_t *h, cJSON *requests);

/* A legacy server asks a stateless caller's proxied call for sampling or elicitation: the call
 * is answered with the request as its input request, and parks until the round. */
static int proxy_hold(void *data, mcp_relay_held_t *h, char *msg, size_t n)
{
    proxy_t *p = data;
    mcp_relay_t *r = p->r;
    cJSON *requests = NULL;
    int rc = MCP_OK;
    if (r->n_parked >= r->o.max_parked || p->args == NULL) {
        rc = MCP_EBUSY;
    } else if (p->timer == NULL && (p->timer = calloc(1, sizeof *p->timer)) != NULL &&
               uv_timer_init(r->loop, p->timer) != 0) {
        free(p->timer); /* never initialised: not a handle to close */
        p->timer = NULL;
    }
    if (rc == MCP_OK &&
        (p->timer == NULL || !new_handle(p->handle) || (requests = held_requests(h)) == NULL))
        rc = MCP_ENOMEM;
    if (rc < 0)
        snprintf(msg, n, "%s",
                 rc == MCP_EBUSY ? "too many proxied calls are waiting for their clients' answers"
                                 : "out of memory");
    else
        park(p, h, requests);
    return rc;
}

/* Answers p's call with requests (taken) and the state naming p's handle, and parks p holding
 * h until the call's next round, or its expiry. */
static void park(proxy_t *p, mcp_relay_held_t *h, cJSON *requests)
{
    mcp_relay_t *r = p->r;
    char state[MCP_RELAY_HANDLE_MAX + sizeof STATE_HANDLE];
    snprintf(state, sizeof state, STATE_HANDLE "%s", p->handle);
    mcp_call_t *call = p->call;
    mcp_call_identity(call, &p->who);
    p->call = NULL; /* the call is answered now: nothing may touch it again */
    p->held = h;
    mcp_relay_held_watch(h, proxy_withdrawn, p);
    p->next = r->parked;
    if (r->parked) r->parked->prev = p;
    r->parked = p;
    p->linked = true;
    r->n_parked++;
    /* The downstream call's own timeout bounds it too; this frees what is left after it. */
    p->timer->data = p;
    uv_timer_start(p->timer, proxy_expired, r->o.tool_timeout_ms, 0);
    mcp_call_finish_input_required(call, requests, state);
}

/* The parked call behind handle for the call's caller, or NULL (unknown, used, expired, or
 * another caller's: all read alike). */
static proxy_t *parked_for(const mcp_relay_t *r, const mcp_call_t *call, const char *handle)
{
    mcp_identity_t who;
    mcp_call_identity(call, &who);
    proxy_t *p = r->parked;
    while (p != NULL && (strcmp(p->handle, handle) != 0 || !mcp_identity_equal(&p->who, &who)))
        p = p->next;
    return p;
}

/* The next round of a parked call (state: its handle): the caller's answer goes to the server,
 * and the call waits for the downstream call's answer again. */
static void proxy_resume(mcp_relay_t *r, mcp_call_t *call, const cJSON *args, const char *handle)
{
    proxy_t *p = parked_for(r, call, handle);
    if (p == NULL) {
        mcp_call_finish_text(call, true,
                             "This call continues a proxied call that is no longer waiting (its "
                             "answer came already, or it waited too long and was cancelled): call "
                             "the tool again without requestState.");
    } else if (!cJSON_Compare(p->args, args != NULL ? args : p->args, true)) {
        mcp_call_finish_text(call, true,
                             "Invalid arguments: a call with requestState repeats the arguments "
                             "of the call it continues (these differ).");
    } else {
        proxy_unpark(p);
        if (p->held != NULL) {
            const cJSON *answer = cJSON_GetObjectItemCaseSensitive(mcp_call_input_responses(call),
                                                                   MCP_RELAY_INPUT_KEY);
            mcp_relay_held_answer(p->held, answer,
                                  "the client's next round carried no answer to it");
            p->held = NULL;
        }
        if (p->ended) {
            proxy_answer(call, p->rounds, p->err, p->result, p->message);
            proxy_free(p);
        } else {
            p->call = call;
            mcp_call_on_cancel(call, proxy_cancel, p);
        }
    }
}

/* A first round (or a stateless server's next one, its state passed through): the call goes
 * to the downstream server, which may ask its caller meanwhile (the note of mcp_relay_own). */
static void proxy_start(mcp__exposed_t *e, mcp_call_t *call, const cJSON *args, const char *state)
{
    mcp_client_t *c = mcp_relay_client(e->r, e->server);
    proxy_t *p = c != NULL ? calloc(1, sizeof *p) : NULL;
    size_t sl = strlen(STATE_SERVER);
    int rc = p != NULL ? MCP_OK : MCP_ENOMEM;
    if (p != NULL) {
        p->r = e->r;
        p->call = call;
        /* A stateless caller cannot be sent requests in the middle of its call, but it can be
         * handed a stateless downstream server's input requests as its own (proxy_done), and a
         * legacy server's requests as input requests too (proxy_hold, which needs the args). */
        p->rounds = mcp_call_is_modern(call);
        if (p->rounds) p->args = args != NULL ? cJSON_Duplicate(args, true) : cJSON_CreateObject();
        const char *server_state =
            state != NULL && strncmp(state, STATE_SERVER, sl) == 0 ? state + sl : NULL;
        mcp_client_progress_cb progress = mcp_call_wants_progress(call) ? proxy_progress : NULL;
        unsigned timeout = e->r->o.tool_timeout_ms;
        rc = p->rounds
                 ? mcp_client_call_tool_round(c, e->tool, args, mcp_call_input_responses(call),
                                              server_state, timeout, progress, proxy_done, p,
                                              &p->downstream)
                 : mcp_client_call_tool(c, e->tool, args, timeout, progress, proxy_done, p,
                                        &p->downstream);
    }
    char m[400];
    if (p == NULL) {
        mcp_call_finish_text(call, true, "server %s is not configured", e->server);
    } else if (rc < 0) {
        proxy_free(p);
        mcp_client_refusal(c, rc, m, sizeof m);
        mcp_call_finish_text(call, true, "%s", m);
    } else {
        /* No request of the server can come before the loop runs again. */
        mcp_relay_asker_t asker = {.call = proxy_asker_call, .hold = proxy_hold, .data = p};
        p->owner = mcp_relay_own(e->r, c, p->downstream, &asker);
        mcp_call_on_cancel(call, proxy_cancel, p);
    }
}

static void proxy_handle(mcp_call_t *call, const cJSON *args, void *data)
{
    mcp__exposed_t *e = data;
    const char *state = mcp_call_request_state(call);
    size_t hl = strlen(STATE_HANDLE);
    if (state != NULL && strncmp(state, STATE_HANDLE, hl) == 0)
        proxy_resume(e->r, call, args, state + hl);
    else
        proxy_start(e, call, args, state);
}

static void exposed_free(mcp__exposed_t *e)
{
    free(e->id);
    free(e->server);
    free(e->tool);
    free(e);
}

/* Lists one tool of server on r->srv; MCP_ENOMEM when it (or its record) could not be made,
 * which ends the listing as a full one would. */
static int expose_one(mcp_relay_t *r, const char *server, const mcp_relay_tool_t *t)
{
    mcp__exposed_t *e = NULL;
    char *schema = t->input_schema != NULL ? cJSON_PrintUnformatted(t->input_schema) : NULL;
    char *annotations = t->annotations ? cJSON_PrintUnformatted(t->annotations) : NULL;
    /* The array holds pointers: its element is the size of one. */
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    int rc = ptc_array_reserve(&r->exposed, &r->cap_exposed, r->n_exposed + 1, sizeof *r->exposed,
                               MCP__RELAY_MAX_EXPOSED);
    if (rc == 0 &&
        (schema == NULL || (e = calloc(1, sizeof *e)) == NULL || !(e->id = strdup(t->id)) ||
         !(e->server = strdup(server)) || !(e->tool = strdup(t->name))))
        rc = MCP_ENOMEM;
    if (rc == 0) {
        e->r = r;
        mcp_tool_def_t def = {
            .name = t->id,
            .title = t->title != NULL && t->title[0] ? t->title : NULL,
            .description = t->description,
            .input_schema = schema,
            .annotations = annotations,
            .handler = proxy_handle,
            .data = e,
        };
        if (mcp_server_add_tool(r->srv, &def) == 0) {
            r->exposed[r->n_exposed++] = e;
            e = NULL;
        }
    }
    if (e != NULL) exposed_free(e);
    cJSON_free(schema);
    cJSON_free(annotations);
    return rc < 0 ? MCP_ENOMEM : MCP_OK;
}

void mcp__relay_expose_server(mcp_relay_t *r, const char *server)
{
    if (r->srv == NULL || !r->expose || r->o.tools == NULL) return;
    mcp_server_hold_notifications(r->srv, true);
    size_t kept = 0;
    for (size_t i = 0; i < r->n_exposed; i++) {
        mcp__exposed_t *e = r->exposed[i];
        if (strcmp(e->server, server) == 0) {
            mcp_server_remove_tool(r->srv, e->id);
            exposed_free(e);
        } else {
            r->exposed[kept++] = e;
        }
    }
    r->n_exposed = kept;
    size_t pos = 0;
    mcp_relay_tool_t t;
    while (r->o.tools(r->o.tools_data, server, &pos, &t) && expose_one(r, server, &t) == MCP_OK)
        ;
    mcp_server_hold_notifications(r->srv, false);
}

void mcp__relay_drop_parked(mcp_relay_t *r)
{
    /* proxy_drop unlinks the head it frees, so each pass reads a live one: the analyzer loses
     * the unlink. */
    while (r->parked != NULL)
        // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
        proxy_drop(r->parked, "ptc-mcp is stopping");
}

void mcp__relay_proxy_free(mcp_relay_t *r)
{
    for (size_t i = 0; i < r->n_exposed; i++)
        exposed_free(r->exposed[i]);
    free(r->exposed);
}
