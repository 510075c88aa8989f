/* client_peers.c - the requests a downstream server sends us: ping and roots/list answered here,
 * sampling and elicitation handed to the owner (bounded, dropped when the server goes away).
 * A stateless (2026-07-28) server asks inside a result instead (InputRequiredResult): its
 * input requests reach the owner through the same hook, and their answers go into the call's
 * next round rather than on the wire. */
#include "client_internal.h"

#include <stdlib.h>
#include <string.h>

/* --- peer requests --------------------------------------------------------------------- */

static void unlink_peer(mcp_client_peer_req_t *r)
{
    mcp_client_t *c = r->c;
    if (c == NULL) return;
    if (r->prev)
        r->prev->next = r->next;
    else
        c->peers = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
    c->n_peers--;
}

/* The server died or the client stops: the owner hears it, and its answer is dropped. The
 * hook may answer (and so unlink) any request, hence the fresh walk each time. */
void mcp__client_cancel_peers(mcp_client_t *c)
{
    while (!mcp__client_gone(c)) {
        mcp_client_peer_req_t *r = c->peers;
        while (r != NULL && r->cancelled)
            r = r->next;
        if (r == NULL) return;
        r->cancelled = true;
        if (c->hooks.peer_cancelled != NULL) c->hooks.peer_cancelled(c, r, c->hooks.data);
    }
}

static void free_peer(mcp_client_peer_req_t *r)
{
    unlink_peer(r);
    cJSON_Delete(r->id);
    cJSON_Delete(r->params);
    free(r->method);
    free(r->key);
    free(r);
}

/* The owner answered one input request (result taken; NULL: it failed with message). */
static void answer_input(mcp_client_peer_req_t *r, cJSON *result, const char *message)
{
    mcp_client_t *c = r->c;
    mcp_client_call_t *call = r->cancelled ? NULL : r->call;
    char *key = r->key;
    r->key = NULL;
    char *method = r->method;
    r->method = NULL;
    free_peer(r);
    if (call == NULL) {
        cJSON_Delete(result);
        free(key);
        free(method);
        return;
    }
    mcp__client_enter(c);
    char m[MCP__CLIENT_REASON_MAX];
    if (result == NULL) {
        snprintf(m, sizeof m,
                 "tools/call on downstream server %s: its %s request could not be "
                 "answered: %s",
                 c->name, method, message != NULL ? message : "no answer");
        mcp__client_fail_call(call, MCP_EREMOTE, m);
    } else if (!cJSON_AddItemToObject(call->responses, key, result)) {
        cJSON_Delete(result);
        mcp__client_fail_call(call, MCP_ENOMEM, "out of memory");
    } else if (--call->awaiting == 0) {
        int rc = mcp__client_next_round(call);
        if (rc < 0) {
            snprintf(m, sizeof m, "could not send tools/call to downstream server %s: %s", c->name,
                     mcp_strerror(rc));
            mcp__client_fail_call(call, rc, m);
        }
    }
    free(key);
    free(method);
    mcp__client_leave(c);
}

static void answer_peer(mcp_client_peer_req_t *r, cJSON *msg)
{
    mcp_client_t *c = r->c;
    bool same = c != NULL && ((c->proc != NULL && c->proc->gen == r->gen) ||
                              (c->http != NULL && mcp__http_gen(c->http) == r->gen));
    if (same && !r->cancelled)
        mcp__client_send(c, msg);
    else
        cJSON_Delete(msg);
    free_peer(r);
}

const char *mcp_client_peer_method(const mcp_client_peer_req_t *req)
{
    return req->method;
}

const cJSON *mcp_client_peer_params(const mcp_client_peer_req_t *req)
{
    return req->params;
}

bool mcp_client_peer_cancelled(const mcp_client_peer_req_t *req)
{
    return req->cancelled;
}

const mcp_client_call_t *mcp_client_peer_call(const mcp_client_peer_req_t *req)
{
    return req->call;
}

void mcp_client_peer_reply(mcp_client_peer_req_t *req, cJSON *result)
{
    if (result == NULL) {
        mcp_client_peer_fail(req, MCP_JSONRPC_INTERNAL_ERROR, "ptc-mcp could not build the answer");
        return;
    }
    if (req->key != NULL) {
        answer_input(req, result, NULL);
        return;
    }
    answer_peer(req, mcp_jsonrpc_result(req->id, result));
}

void mcp_client_peer_fail(mcp_client_peer_req_t *req, int code, const char *message)
{
    if (req->key != NULL) {
        answer_input(req, NULL, message);
        return;
    }
    answer_peer(req, mcp_jsonrpc_error(req->id, code, message, NULL));
}

static void reply_error(mcp_client_t *c, const cJSON *id, int code, const char *message)
{
    mcp__client_send(c, mcp_jsonrpc_error(id, code, message, NULL));
}

void mcp__client_handle_request(mcp_client_t *c, const cJSON *msg)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const char *method = cJSON_GetObjectItemCaseSensitive(msg, "method")->valuestring;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    if (strcmp(method, "ping") == 0) {
        mcp__client_send(c, mcp_jsonrpc_result(id, cJSON_CreateObject()));
        return;
    }
    if (strcmp(method, "roots/list") == 0) {
        cJSON *res = cJSON_CreateObject();
        cJSON *roots = c->roots != NULL ? cJSON_Duplicate(c->roots, true) : cJSON_CreateArray();
        if (res == NULL || roots == NULL || !cJSON_AddItemToObject(res, "roots", roots)) {
            cJSON_Delete(res);
            cJSON_Delete(roots);
            reply_error(c, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
            return;
        }
        mcp__client_send(c, mcp_jsonrpc_result(id, res));
        return;
    }
    bool sampling = strcmp(method, "sampling/createMessage") == 0;
    bool elicit = strcmp(method, "elicitation/create") == 0;
    if (!sampling && !elicit) {
        char m[300];
        snprintf(m, sizeof m, "Method not found: %.200s", method);
        reply_error(c, id, MCP_JSONRPC_METHOD_NOT_FOUND, m);
        return;
    }
    if ((sampling && !c->opts.can_sample) || (elicit && !c->opts.can_elicit) ||
        c->hooks.peer_request == NULL) {
        char m[300];
        snprintf(m, sizeof m,
                 "ptc-mcp cannot forward %s: it did not declare the capability (no connected "
                 "client offers it)",
                 method);
        reply_error(c, id, MCP_JSONRPC_METHOD_NOT_FOUND, m);
        return;
    }
    if (c->n_peers >= MCP__CLIENT_MAX_PEER_REQS) {
        reply_error(c, id, MCP_JSONRPC_INTERNAL_ERROR,
                    "too many requests from this server are waiting for an answer");
        return;
    }
    mcp_client_peer_req_t *r = calloc(1, sizeof *r);
    if (r == NULL || (r->id = cJSON_Duplicate(id, true)) == NULL ||
        (r->method = mcp__strdup(method)) == NULL ||
        (params != NULL && (r->params = cJSON_Duplicate(params, true)) == NULL)) {
        if (r != NULL) {
            cJSON_Delete(r->id);
            free(r->method);
            free(r);
        }
        reply_error(c, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    r->c = c;
    r->gen = c->gen;
    r->next = c->peers;
    if (c->peers) c->peers->prev = r;
    c->peers = r;
    c->n_peers++;
    c->hooks.peer_request(c, r, c->hooks.data);
}

void mcp__client_on_peer_cancelled(mcp_client_t *c, const cJSON *rid)
{
    for (mcp_client_peer_req_t *r = c->peers; r != NULL; r = r->next) {
        if (!r->cancelled && r->gen == c->gen && cJSON_Compare(r->id, rid, true)) {
            r->cancelled = true;
            if (c->hooks.peer_cancelled != NULL) c->hooks.peer_cancelled(c, r, c->hooks.data);
            break;
        }
    }
}

/* --- input requests of a stateless server (InputRequiredResult) ------------------------ */

static cJSON *roots_result(const mcp_client_t *c)
{
    cJSON *res = cJSON_CreateObject();
    cJSON *roots = c->roots != NULL ? cJSON_Duplicate(c->roots, true) : cJSON_CreateArray();
    if (res == NULL || roots == NULL || !cJSON_AddItemToObject(res, "roots", roots)) {
        cJSON_Delete(res);
        cJSON_Delete(roots);
        return NULL;
    }
    return res;
}

/* Why input request `ir` cannot go to the owner, or NULL when it can. */
static const char *input_refusal(const mcp_client_t *c, const char *method)
{
    bool sampling = strcmp(method, "sampling/createMessage") == 0;
    bool elicit = strcmp(method, "elicitation/create") == 0;
    if (!sampling && !elicit) return "an input request of a kind ptc-mcp does not know";
    if ((sampling && !c->opts.can_sample) || (elicit && !c->opts.can_elicit) ||
        c->hooks.peer_request == NULL)
        return "an input request ptc-mcp did not declare it can answer (no connected client "
               "offers it)";
    if (c->n_peers >= MCP__CLIENT_MAX_PEER_REQS)
        return "more input requests than ptc-mcp keeps waiting";
    return NULL;
}

static mcp_client_peer_req_t *new_input(mcp_client_t *c, mcp_client_call_t *call, const char *key,
                                        const char *method, const cJSON *params)
{
    mcp_client_peer_req_t *r = calloc(1, sizeof *r);
    if (r == NULL || (r->key = mcp__strdup(key)) == NULL ||
        (r->method = mcp__strdup(method)) == NULL ||
        (params != NULL && (r->params = cJSON_Duplicate(params, true)) == NULL)) {
        if (r != NULL) {
            free(r->key);
            free(r->method);
            free(r);
        }
        return NULL;
    }
    r->c = c;
    r->gen = c->gen;
    r->call = call;
    r->round = call->round;
    r->next = c->peers;
    if (c->peers) c->peers->prev = r;
    c->peers = r;
    c->n_peers++;
    return r;
}

static bool call_alive(const mcp_client_t *c, const mcp_client_call_t *call, unsigned round)
{
    for (const mcp_client_call_t *x = c->calls; x != NULL; x = x->next)
        if (x == call && x->round == round) return true;
    return false;
}

void mcp__client_start_inputs(mcp_client_t *c, mcp_client_call_t *call, const cJSON *result)
{
    const cJSON *reqs = cJSON_GetObjectItemCaseSensitive(result, "inputRequests");
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(result, "requestState");
    char m[MCP__CLIENT_REASON_MAX];
    if ((reqs != NULL && !cJSON_IsObject(reqs)) || (state != NULL && !cJSON_IsString(state))) {
        snprintf(m, sizeof m,
                 "downstream server %s answered tools/call with a malformed InputRequiredResult "
                 "(inputRequests must be an object, requestState a string)",
                 c->name);
        mcp__client_fail_call(call, MCP_EPROTO, m);
        return;
    }
    cJSON_Delete(call->responses);
    free(call->request_state);
    call->request_state = NULL;
    call->responses = cJSON_CreateObject();
    if (call->responses == NULL ||
        (state != NULL && (call->request_state = mcp__strdup(state->valuestring)) == NULL)) {
        mcp__client_fail_call(call, MCP_ENOMEM, "out of memory");
        return;
    }
    call->round = ++c->input_rounds;
    unsigned round = call->round;
    /* Every request is checked and linked before any goes to the owner, who may answer at
     * once; the extra count keeps the round from going out before the walk ends. */
    call->awaiting = 1;
    const cJSON *ir;
    cJSON_ArrayForEach(ir, reqs)
    {
        const cJSON *method = cJSON_GetObjectItemCaseSensitive(ir, "method");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(ir, "params");
        const char *why = NULL;
        if (!cJSON_IsObject(ir) || !cJSON_IsString(method)) {
            why = "an input request without a method";
        } else if (strcmp(method->valuestring, "roots/list") == 0) {
            cJSON *res = roots_result(c);
            if (res != NULL && cJSON_AddItemToObject(call->responses, ir->string, res))
                continue; /* answered here: nothing for the owner to do */
            cJSON_Delete(res);
            why = "out of memory";
        } else if ((why = input_refusal(c, method->valuestring)) == NULL &&
                   new_input(c, call, ir->string, method->valuestring, params) == NULL) {
            why = "out of memory";
        }
        if (why != NULL) {
            snprintf(m, sizeof m, "downstream server %s asked for %.80s (%s): %s", c->name,
                     cJSON_IsString(method) ? method->valuestring : "input", ir->string, why);
            mcp__client_fail_call(call, MCP_EREMOTE, m); /* withdraws the ones linked */
            return;
        }
        call->awaiting++;
    }
    mcp__client_enter(c);
    /* A fresh walk each time: the hook may answer or cancel (and so unlink) any request. */
    while (!mcp__client_gone(c)) {
        mcp_client_peer_req_t *r = c->peers;
        while (r != NULL && (r->call == NULL || r->round != round || r->dispatched))
            r = r->next;
        if (r == NULL) break;
        r->dispatched = true;
        c->hooks.peer_request(c, r, c->hooks.data);
    }
    if (!mcp__client_gone(c) && call_alive(c, call, round) && --call->awaiting == 0) {
        int rc = mcp__client_next_round(call);
        if (rc < 0) {
            snprintf(m, sizeof m, "could not send tools/call to downstream server %s: %s", c->name,
                     mcp_strerror(rc));
            mcp__client_fail_call(call, rc, m);
        }
    }
    mcp__client_leave(c);
}

void mcp__client_drop_inputs(mcp_client_t *c, mcp_client_call_t *call)
{
    call->awaiting = 0;
    for (;;) {
        mcp_client_peer_req_t *r = c->peers;
        /* free_peer unlinked the one it freed and every pass starts again at the head: the
         * analyzer loses the unlink. */
        // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
        while (r != NULL && r->call != call)
            r = r->next;
        if (r == NULL) return;
        r->call = NULL;
        r->cancelled = true;
        /* Only a request the owner was handed is withdrawn from it; the others just go. */
        if (!r->dispatched)
            free_peer(r);
        else if (c->hooks.peer_cancelled != NULL)
            c->hooks.peer_cancelled(c, r, c->hooks.data);
    }
}
