/* client_peers.c - the requests a downstream server sends us: ping and roots/list answered here,
 * sampling and elicitation handed to the owner (bounded, dropped when the server goes away). */
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

static void answer_peer(mcp_client_peer_req_t *r, cJSON *msg)
{
    mcp_client_t *c = r->c;
    bool same = c != NULL && ((c->proc != NULL && c->proc->gen == r->gen) ||
                              (c->http != NULL && mcp__http_gen(c->http) == r->gen));
    if (same && !r->cancelled)
        mcp__client_send(c, msg);
    else
        cJSON_Delete(msg);
    unlink_peer(r);
    cJSON_Delete(r->id);
    cJSON_Delete(r->params);
    free(r->method);
    free(r);
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

void mcp_client_peer_reply(mcp_client_peer_req_t *req, cJSON *result)
{
    if (result == NULL) {
        mcp_client_peer_fail(req, MCP_JSONRPC_INTERNAL_ERROR, "ptc-mcp could not build the answer");
        return;
    }
    answer_peer(req, mcp_jsonrpc_result(req->id, result));
}

void mcp_client_peer_fail(mcp_client_peer_req_t *req, int code, const char *message)
{
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
