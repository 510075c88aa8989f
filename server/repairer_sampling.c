/* repairer_sampling.c - repairs through the client's own model: sampling/createMessage. */
#include "repairer_internal.h"

#include <stdlib.h>
#include <string.h>

char *ptc__repair_content_text(const cJSON *content)
{
    if (cJSON_IsString(content)) return strdup(content->valuestring);
    if (cJSON_IsObject(content)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(content, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(content, "text");
        if (cJSON_IsString(type) && strcmp(type->valuestring, "text") == 0 && cJSON_IsString(text))
            return strdup(text->valuestring);
        return NULL;
    }
    if (!cJSON_IsArray(content)) return NULL;
    size_t len = 0;
    char *out = NULL;
    const cJSON *block;
    cJSON_ArrayForEach(block, content)
    {
        char *t = ptc__repair_content_text(block);
        if (t == NULL) continue;
        size_t n = strlen(t);
        char *grown = realloc(out, len + n + 2);
        if (grown == NULL) {
            free(t);
            free(out);
            return NULL;
        }
        out = grown;
        if (len > 0) out[len++] = '\n';
        memcpy(out + len, t, n + 1);
        len += n;
        free(t);
    }
    return out;
}

static void on_sampled(void *data, int err, const cJSON *result, const cJSON *error,
                       const char *message)
{
    ptc_repair_ask_t *a = data;
    (void)error;
    a->outreq = NULL;
    if (a->cancelled) {
        free(a);
        return;
    }
    if (err < 0) {
        a->cb(a->data, err, NULL, message ? message : mcp_strerror(err));
        free(a);
        return;
    }
    char *text = ptc__repair_content_text(cJSON_GetObjectItemCaseSensitive(result, "content"));
    if (text == NULL)
        a->cb(a->data, MCP_EPROTO, NULL, "the client's sampling answer holds no text");
    else if (strlen(text) > PTC_REPAIR_REPLY_MAX)
        a->cb(a->data, MCP_ETOOBIG, NULL, "the client's sampling answer is too long");
    else
        a->cb(a->data, 0, text, NULL);
    free(text);
    free(a);
}

int ptc_repair_ask_sampling(mcp_call_t *call, const char *prompt, ptc_repair_cb cb, void *data,
                            ptc_repair_ask_t **out)
{
    *out = NULL;
    mcp_session_t *s = mcp_call_session(call);
    if (s == NULL || !mcp_session_client_has(s, "sampling")) return MCP_ENOTSUP;
    cJSON *params = cJSON_CreateObject();
    cJSON *msgs = cJSON_AddArrayToObject(params, "messages");
    cJSON *msg = cJSON_CreateObject();
    cJSON *content = msg ? cJSON_AddObjectToObject(msg, "content") : NULL;
    cJSON *prefs = cJSON_AddObjectToObject(params, "modelPreferences");
    bool ok = msgs != NULL && content != NULL && prefs != NULL &&
              cJSON_AddStringToObject(msg, "role", "user") != NULL &&
              cJSON_AddStringToObject(content, "type", "text") != NULL &&
              cJSON_AddStringToObject(content, "text", prompt) != NULL &&
              cJSON_AddItemToArray(msgs, msg);
    if (!ok) cJSON_Delete(msg);
    /* A fix needs a capable model more than a fast or cheap one. */
    ok = ok && cJSON_AddStringToObject(params, "systemPrompt", ptc_repair_system_prompt) != NULL &&
         cJSON_AddStringToObject(params, "includeContext", "none") != NULL &&
         cJSON_AddNumberToObject(params, "maxTokens", PTC_REPAIR_MAX_TOKENS) != NULL &&
         cJSON_AddNumberToObject(params, "temperature", 0) != NULL &&
         cJSON_AddNumberToObject(prefs, "intelligencePriority", 0.8) != NULL &&
         cJSON_AddNumberToObject(prefs, "speedPriority", 0.4) != NULL &&
         cJSON_AddNumberToObject(prefs, "costPriority", 0.3) != NULL;
    ptc_repair_ask_t *a = ok ? calloc(1, sizeof *a) : NULL;
    if (a == NULL) {
        cJSON_Delete(params);
        return MCP_ENOMEM;
    }
    a->kind = REPAIR_SAMPLING;
    a->cb = cb;
    a->data = data;
    /* On the call's own stream (Streamable HTTP sends it there); no timeout of its own: the
     * request's deadline cancels it. */
    int rc = mcp_call_request(call, "sampling/createMessage", params, on_sampled, a, &a->outreq);
    if (rc < 0) {
        free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void ptc_repair_ask_cancel(ptc_repair_ask_t *a)
{
    if (a == NULL || a->cancelled) return;
    a->cancelled = true;
    if (a->kind == REPAIR_HTTP) {
        ptc__repair_http_cancel(a);
        return;
    }
    /* Its callback (now or later) sees the flag and frees a. */
    if (a->outreq != NULL) mcp_outreq_cancel(a->outreq, "the execute_code request ended");
}
