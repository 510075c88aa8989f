/* listen.c - subscriptions/listen (2026-07-28): the long-lived request on which a stateless
 * client receives the list changes (tools, prompts, resources) and resource updates it opted
 * in to. The request is answered only when the server ends the subscription (shutdown); until
 * then every notification it carries names it in _meta (io.modelcontextprotocol/
 * subscriptionId), the acknowledgement first. Legacy sessions keep their list_changed
 * notifications.
 *
 * The tasks extension (SEP-2663) adds notifications.taskIds: a request that declared the
 * extension is granted the ids of its own live tasks (bound to its identity, as tasks/get is;
 * another's or an unknown id is left out of the acknowledgement, never told apart) and gets
 * notifications/tasks, the task's DetailedTask, each time one of them changes status. */
#include "internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define META_SUBSCRIPTION_ID "io.modelcontextprotocol/subscriptionId"
#define MAX_TASK_IDS         256 /* taskIds one subscription may name */

static void sub_free(mcp_session_t *s, mcp__sub_t *sub)
{
    /* The head first: what unlinks it does not depend on its prev being NULL (clang-tidy's
     * analyzer, which does not keep that invariant, then saw the head read after its free). */
    if (s->subs == sub)
        s->subs = sub->next;
    else if (sub->prev)
        sub->prev->next = sub->next;
    if (sub->next) sub->next->prev = sub->prev;
    cJSON_Delete(sub->id);
    cJSON_Delete(sub->uris);
    cJSON_Delete(sub->task_ids);
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

/* Grants sub the ids in asked that name live tasks of its identity, and lists them in the
 * acknowledgement's notifications (honored). False on ENOMEM. */
static bool grant_tasks(mcp_server_t *srv, mcp__sub_t *sub, const cJSON *asked, cJSON *honored)
{
    cJSON *granted = cJSON_CreateArray(), *shown = cJSON_AddArrayToObject(honored, "taskIds");
    if (granted == NULL || shown == NULL) {
        cJSON_Delete(granted);
        return false;
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, asked)
    {
        if (!mcp__task_owned(srv, t->valuestring, &sub->who)) continue;
        cJSON *a = cJSON_CreateString(t->valuestring), *b = cJSON_CreateString(t->valuestring);
        if (a == NULL || b == NULL || !cJSON_AddItemToArray(granted, a)) {
            cJSON_Delete(a);
            cJSON_Delete(b);
            cJSON_Delete(granted);
            return false;
        }
        if (!cJSON_AddItemToArray(shown, b)) {
            cJSON_Delete(b);
            cJSON_Delete(granted);
            return false;
        }
    }
    sub->task_ids = granted;
    return true;
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
    const cJSON *task_ids = cJSON_GetObjectItemCaseSensitive(filter, "taskIds");
    if (bad == NULL && task_ids != NULL &&
        (!cJSON_IsArray(task_ids) || cJSON_GetArraySize(task_ids) > MAX_TASK_IDS))
        bad = "subscriptions/listen: notifications.taskIds must be an array of at most 256 ids";
    const cJSON *u;
    const cJSON *check = bad == NULL ? uris : NULL;
    cJSON_ArrayForEach(u, check)
    {
        if (!cJSON_IsString(u))
            bad = "subscriptions/listen: resourceSubscriptions holds URI strings";
    }
    check = bad == NULL ? task_ids : NULL;
    cJSON_ArrayForEach(u, check)
    {
        if (!cJSON_IsString(u)) bad = "subscriptions/listen: taskIds holds task id strings";
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
    mcp__request_identity(s, &sub->who);
    if (ok && task_ids != NULL && s->cur != NULL &&
        mcp__caps_have_extension(s->cur->caps, MCP_EXT_TASKS))
        ok = grant_tasks(s->srv, sub, task_ids, honored);
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

static bool wants_task(const mcp__sub_t *sub, const char *task_id, const mcp_identity_t *owner)
{
    if (sub->task_ids == NULL || !mcp_identity_equal(&sub->who, owner)) return false;
    const cJSON *t;
    cJSON_ArrayForEach(t, sub->task_ids) if (strcmp(t->valuestring, task_id) == 0) return true;
    return false;
}

bool mcp__listen_wants_task(const mcp_server_t *srv, const char *task_id,
                            const mcp_identity_t *owner)
{
    for (const mcp_session_t *s = srv->sessions; s != NULL; s = s->next)
        for (const mcp__sub_t *sub = s->subs; sub != NULL && !s->shutting_down; sub = sub->next)
            if (wants_task(sub, task_id, owner)) return true;
    return false;
}

void mcp__listen_task_changed(mcp_server_t *srv, const char *task_id, const mcp_identity_t *owner,
                              const cJSON *task)
{
    for (mcp_session_t *s = srv->sessions; s != NULL; s = s->next) {
        if (s->shutting_down) continue;
        for (mcp__sub_t *sub = s->subs; sub != NULL; sub = sub->next) {
            cJSON *p = wants_task(sub, task_id, owner) ? cJSON_Duplicate(task, true) : NULL;
            if (p != NULL) send_on(s, sub, "notifications/tasks", p);
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
