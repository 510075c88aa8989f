/* listen.c - subscriptions/listen (2026-07-28): the long-lived request on which a stateless
 * client receives the list changes (tools, prompts, resources) and resource updates it opted
 * in to. The request is answered only when the server ends the subscription (shutdown); until
 * then every notification it carries names it in _meta (io.modelcontextprotocol/
 * subscriptionId), the acknowledgement first. Legacy sessions keep their list_changed
 * notifications. */
#include "internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define META_SUBSCRIPTION_ID "io.modelcontextprotocol/subscriptionId"

static void sub_free(mcp_session_t *s, mcp__sub_t *sub)
{
    if (sub->prev)
        sub->prev->next = sub->next;
    else if (s->subs == sub)
        s->subs = sub->next;
    if (sub->next) sub->next->prev = sub->prev;
    cJSON_Delete(sub->id);
    cJSON_Delete(sub->uris);
    free(sub);
}

/* params with _meta naming the subscription (params taken; NULL on ENOMEM). */
static cJSON *tagged(const mcp__sub_t *sub, cJSON *params)
{
    if (params == NULL) params = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(params, "_meta");
    if (meta == NULL || cJSON_AddStringToObject(meta, META_SUBSCRIPTION_ID, sub->sub_id) == NULL) {
        cJSON_Delete(params);
        return NULL;
    }
    return params;
}

static void send_on(mcp_session_t *s, const mcp__sub_t *sub, const char *method, cJSON *params)
{
    cJSON *p = tagged(sub, params);
    if (p == NULL) return;
    mcp__session_send_related(s, mcp_jsonrpc_request(NULL, method, p), sub->id);
}

static bool flag(const cJSON *filter, const char *name)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(filter, name));
}

void mcp__listen_start(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const cJSON *params)
{
    const cJSON *filter = cJSON_GetObjectItemCaseSensitive(params, "notifications");
    const cJSON *uris = cJSON_GetObjectItemCaseSensitive(filter, "resourceSubscriptions");
    const char *bad = NULL;
    if (b != NULL)
        bad = "subscriptions/listen must not be part of a JSON-RPC batch";
    else if (!cJSON_IsObject(filter))
        bad = "subscriptions/listen needs params.notifications (an object)";
    else if (uris != NULL && !cJSON_IsArray(uris))
        bad = "subscriptions/listen: notifications.resourceSubscriptions must be an array";
    const cJSON *u;
    const cJSON *check = bad == NULL ? uris : NULL;
    cJSON_ArrayForEach(u, check)
    {
        if (!cJSON_IsString(u))
            bad = "subscriptions/listen: resourceSubscriptions holds URI strings";
    }
    if (bad != NULL) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS, "%s", bad);
        return;
    }
    mcp__sub_t *sub = calloc(1, sizeof *sub);
    cJSON *ack = cJSON_CreateObject();
    cJSON *honored = cJSON_AddObjectToObject(ack, "notifications");
    if (sub == NULL || honored == NULL || (sub->id = cJSON_Duplicate(id, true)) == NULL ||
        (uris != NULL && mcp__resources_active(s->srv) &&
         (sub->uris = cJSON_Duplicate(uris, true)) == NULL)) {
        if (sub != NULL) cJSON_Delete(sub->id);
        free(sub);
        cJSON_Delete(ack);
        mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    /* Only what this server can deliver is honoured, and said so in the acknowledgement. */
    sub->tools = flag(filter, "toolsListChanged");
    sub->prompts = flag(filter, "promptsListChanged") && mcp__prompts_active(s->srv);
    sub->resources = flag(filter, "resourcesListChanged") && mcp__resources_active(s->srv);
    bool ok = (!sub->tools || cJSON_AddTrueToObject(honored, "toolsListChanged") != NULL) &&
              (!sub->prompts || cJSON_AddTrueToObject(honored, "promptsListChanged") != NULL) &&
              (!sub->resources || cJSON_AddTrueToObject(honored, "resourcesListChanged") != NULL);
    cJSON *copy = sub->uris != NULL ? cJSON_Duplicate(sub->uris, true) : NULL;
    if (ok && sub->uris != NULL)
        ok = copy != NULL && cJSON_AddItemToObject(honored, "resourceSubscriptions", copy);
    else
        cJSON_Delete(copy);
    snprintf(sub->sub_id, sizeof sub->sub_id, "sub-%" PRIu64, ++s->srv->next_sub);
    sub->next = s->subs;
    if (s->subs) s->subs->prev = sub;
    s->subs = sub;
    if (!ok) {
        cJSON_Delete(ack);
        sub_free(s, sub);
        mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    send_on(s, sub, "notifications/subscriptions/acknowledged", ack);
}

static bool wants_uri(const mcp__sub_t *sub, const char *uri)
{
    const cJSON *u;
    cJSON_ArrayForEach(u, sub->uris) if (strcmp(u->valuestring, uri) == 0) return true;
    return false;
}

void mcp__listen_notify(mcp_server_t *srv, mcp__changed_t kind, const char *uri)
{
    static const char *const methods[] = {
        [MCP__CHANGED_TOOLS] = "notifications/tools/list_changed",
        [MCP__CHANGED_PROMPTS] = "notifications/prompts/list_changed",
        [MCP__CHANGED_RESOURCES] = "notifications/resources/list_changed",
        [MCP__CHANGED_RESOURCE] = "notifications/resources/updated",
    };
    for (mcp_session_t *s = srv->sessions; s != NULL; s = s->next) {
        if (s->shutting_down) continue;
        for (mcp__sub_t *sub = s->subs; sub != NULL; sub = sub->next) {
            bool want = (kind == MCP__CHANGED_TOOLS && sub->tools) ||
                        (kind == MCP__CHANGED_PROMPTS && sub->prompts) ||
                        (kind == MCP__CHANGED_RESOURCES && sub->resources) ||
                        (kind == MCP__CHANGED_RESOURCE && wants_uri(sub, uri));
            if (!want) continue;
            cJSON *p = NULL;
            if (kind == MCP__CHANGED_RESOURCE && ((p = cJSON_CreateObject()) == NULL ||
                                                  cJSON_AddStringToObject(p, "uri", uri) == NULL)) {
                cJSON_Delete(p);
                continue;
            }
            send_on(s, sub, methods[kind], p);
        }
    }
}

void mcp__listen_end_all(mcp_session_t *s, bool answer)
{
    while (s->subs != NULL) {
        mcp__sub_t *sub = s->subs;
        if (answer) {
            /* The graceful end: the listen request's one result. */
            cJSON *res = tagged(sub, NULL);
            if (res != NULL && cJSON_AddStringToObject(res, "resultType", "complete") == NULL) {
                cJSON_Delete(res);
                res = NULL;
            }
            if (res != NULL) mcp__session_send(s, mcp_jsonrpc_result(sub->id, res));
        }
        sub_free(s, sub);
    }
}

bool mcp__listen_cancel(mcp_session_t *s, const cJSON *id)
{
    for (mcp__sub_t *sub = s->subs; sub != NULL; sub = sub->next) {
        if (cJSON_Compare(sub->id, id, true)) {
            /* Cancelled by the client: it waits for no answer. */
            mcp__session_end_silent(s, id);
            sub_free(s, sub);
            return true;
        }
    }
    return false;
}
