/* modern.c - MCP 2026-07-28 stateless requests: the _meta every request carries (its protocol
 * version and client capabilities), server/discover, the methods the revision removed, and
 * the fields its results carry (resultType, the cache hints). The methods both eras share are
 * answered by session.c's dispatch with the request's own context (mcp__req_t). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Cache hints of list results and resources/read: the lists change whenever a downstream
 * server comes or goes, and what a client is shown may depend on its credentials, so a
 * client should ask again rather than cache or share an answer. */
#define CACHE_TTL_MS 0
#define CACHE_SCOPE  "private"

/* Methods of the stateful protocol that 2026-07-28 removed: unknown to a stateless client. */
static const char *const removed[] = {"initialize", "ping", "logging/setLevel",
                                      "resources/subscribe", "resources/unsubscribe"};

static bool cacheable(const char *method)
{
    static const char *const m[] = {
        "server/discover",          "tools/list",    "prompts/list", "resources/list",
        "resources/templates/list", "resources/read"};
    for (size_t i = 0; method != NULL && i < sizeof m / sizeof m[0]; i++)
        if (strcmp(method, m[i]) == 0) return true;
    return false;
}

void mcp__modern_decorate(cJSON *msg, const char *method)
{
    cJSON *res = cJSON_GetObjectItemCaseSensitive(msg, "result");
    if (!cJSON_IsObject(res)) return;
    /* Allocation failures leave a field out; the answer is still sent. */
    if (!cJSON_HasObjectItem(res, "resultType"))
        cJSON_AddStringToObject(res, "resultType", "complete");
    if (!cacheable(method)) return;
    if (!cJSON_HasObjectItem(res, "ttlMs")) cJSON_AddNumberToObject(res, "ttlMs", CACHE_TTL_MS);
    if (!cJSON_HasObjectItem(res, "cacheScope"))
        cJSON_AddStringToObject(res, "cacheScope", CACHE_SCOPE);
}

cJSON *mcp__missing_capability(const cJSON *id, const char *capability, const char *what)
{
    cJSON *data = cJSON_CreateObject();
    cJSON *req = cJSON_AddObjectToObject(data, "requiredCapabilities");
    if (req == NULL || cJSON_AddObjectToObject(req, capability) == NULL) {
        cJSON_Delete(data);
        return NULL;
    }
    char m[300];
    snprintf(m, sizeof m,
             "Missing required client capability: %.80s (%.80s needs it; declare it in the "
             "request's clientCapabilities)",
             capability, what);
    return mcp_jsonrpc_error(id, MCP_ERR_MISSING_CLIENT_CAPABILITY, m, data);
}

static void answer(mcp_session_t *s, mcp__batch_t *b, cJSON *msg)
{
    mcp__session_answer(s, b, msg);
}

static void answer_error(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, int code,
                         const char *msg, cJSON *data)
{
    answer(s, b, mcp_jsonrpc_error(id, code, msg, data));
}

static void handle_discover(mcp_session_t *s, mcp__batch_t *b, const cJSON *id)
{
    const mcp_server_t *srv = s->srv;
    cJSON *res = cJSON_CreateObject();
    cJSON *versions = mcp_protocol_modern_list();
    /* The same as initialize shows: list changes and resource updates reach a stateless
     * client on its subscriptions/listen stream. */
    cJSON *caps = mcp__server_capabilities(srv);
    cJSON *meta = cJSON_CreateObject();
    cJSON *info = cJSON_AddObjectToObject(meta, MCP_META_SERVER_INFO);
    bool ok = res != NULL && versions != NULL && caps != NULL && info != NULL &&
              cJSON_AddStringToObject(info, "name", srv->name) != NULL &&
              cJSON_AddStringToObject(info, "version", srv->version) != NULL &&
              (srv->title == NULL || cJSON_AddStringToObject(info, "title", srv->title) != NULL);
    if (ok && (ok = cJSON_AddItemToObject(res, "supportedVersions", versions))) versions = NULL;
    /* The tasks extension, when a tool can run as a task (SEP-2663: under extensions). */
    bool tasks = false;
    for (size_t i = 0; i < srv->tools.n && !tasks; i++)
        tasks = srv->tools.v[i]->task_support != MCP_TASK_FORBIDDEN;
    cJSON *ext = ok && tasks ? cJSON_AddObjectToObject(caps, "extensions") : NULL;
    if (ok && tasks) ok = ext != NULL && cJSON_AddObjectToObject(ext, MCP_EXT_TASKS) != NULL;
    if (ok && (ok = cJSON_AddItemToObject(res, "capabilities", caps))) caps = NULL;
    if (ok && srv->instructions != NULL)
        ok = cJSON_AddStringToObject(res, "instructions", srv->instructions) != NULL;
    if (ok && (ok = cJSON_AddItemToObject(res, "_meta", meta))) meta = NULL;
    cJSON_Delete(versions);
    cJSON_Delete(caps);
    cJSON_Delete(meta);
    if (!ok) {
        cJSON_Delete(res);
        answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    answer(s, b, mcp_jsonrpc_result(id, res));
}

/* Checks the request's _meta and fills ctx; answers the error itself and returns false. */
static bool read_meta(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const cJSON *params,
                      mcp__req_t *ctx)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(meta, MCP_META_PROTOCOL_VERSION);
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(meta, MCP_META_CLIENT_CAPABILITIES);
    if (!cJSON_IsObject(meta) || ver == NULL || caps == NULL) {
        char m[300];
        snprintf(m, sizeof m,
                 "Invalid params: missing _meta keys:%s%s (every 2026-07-28 request "
                 "carries both; a legacy client sends initialize first)",
                 ver == NULL ? " " MCP_META_PROTOCOL_VERSION : "",
                 caps == NULL ? " " MCP_META_CLIENT_CAPABILITIES : "");
        answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS, m, NULL);
        return false;
    }
    if (!cJSON_IsString(ver) || !cJSON_IsObject(caps)) {
        answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                     "Invalid params: _meta." MCP_META_PROTOCOL_VERSION
                     " must be a string and _meta." MCP_META_CLIENT_CAPABILITIES " an object",
                     NULL);
        return false;
    }
    if (!mcp_protocol_modern_supported(ver->valuestring)) {
        cJSON *data = cJSON_CreateObject();
        cJSON *list = mcp_protocol_modern_list();
        bool ok = data != NULL && list != NULL && cJSON_AddItemToObject(data, "supported", list);
        if (!ok) cJSON_Delete(list);
        if (ok) ok = cJSON_AddStringToObject(data, "requested", ver->valuestring) != NULL;
        if (!ok) {
            cJSON_Delete(data);
            answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory", NULL);
            return false;
        }
        char m[200];
        snprintf(m, sizeof m, "Unsupported protocol version: %.40s (supported: %s)",
                 ver->valuestring, MCP_PROTOCOL_MODERN);
        answer_error(s, b, id, MCP_ERR_UNSUPPORTED_PROTOCOL_VERSION, m, data);
        return false;
    }
    snprintf(ctx->protocol, sizeof ctx->protocol, "%s", ver->valuestring);
    ctx->caps = caps;
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(meta, MCP_META_LOG_LEVEL);
    if (lv != NULL) {
        if (!cJSON_IsString(lv) || mcp_level_parse(lv->valuestring, &ctx->log_level) < 0) {
            answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                         "Invalid params: _meta." MCP_META_LOG_LEVEL
                         " must be one of debug, info, notice, warning, error, critical, "
                         "alert, emergency",
                         NULL);
            return false;
        }
        ctx->log_on = true;
    }
    return true;
}

void mcp__modern_request(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                         const cJSON *params)
{
    mcp__req_t ctx = {.modern = true, .method = method};
    if (!read_meta(s, b, id, params, &ctx)) return;
    for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
        if (strcmp(method, removed[i]) == 0) {
            char m[200];
            snprintf(m, sizeof m, "Method not found: %s (not part of protocol %s)", method,
                     ctx.protocol);
            answer_error(s, b, id, MCP_JSONRPC_METHOD_NOT_FOUND, m, NULL);
            return;
        }
    }
    if (s->shutting_down) {
        answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "the server is shutting down", NULL);
        return;
    }
    mcp__req_t *outer = s->cur;
    s->cur = &ctx;
    if (strcmp(method, "server/discover") == 0)
        handle_discover(s, b, id);
    else if (strcmp(method, "subscriptions/listen") == 0)
        mcp__listen_start(s, b, id, params);
    else if (!mcp__tasks_handle(s, b, id, method, params))
        mcp__session_dispatch(s, b, id, method, params);
    s->cur = outer;
}

const char *mcp__modern_name_of(const char *method, const cJSON *params)
{
    const char *field = NULL;
    if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0)
        field = "name";
    else if (strcmp(method, "resources/read") == 0)
        field = "uri";
    else if (strcmp(method, "tasks/get") == 0 || strcmp(method, "tasks/update") == 0 ||
             strcmp(method, "tasks/cancel") == 0)
        field = "taskId"; /* SEP-2663's routing header */
    const cJSON *v = field != NULL ? cJSON_GetObjectItemCaseSensitive(params, field) : NULL;
    return v != NULL && cJSON_IsString(v) ? v->valuestring : NULL;
}
