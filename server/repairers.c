/* repairers.c - one ask handle over the two repairers: the client's own model through
 * sampling/createMessage (here, as it needs MCP) and the fallback endpoint of repair/
 * (ptc_repair_http_*), whose codes pass through (one error space: ptc_repairer_strerror names
 * them all). */
#include "repairers.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef enum repair_kind { REPAIR_SAMPLING, REPAIR_HTTP, REPAIR_MRTR } repair_kind_t;

struct ptc_repair_ask {
    repair_kind_t kind;
    ptc_repair_cb cb;
    void *data;
    bool cancelled; /* the callback is not called any more */
    mcp_outreq_t *outreq;
    ptc_repair_http_ask_t *http;
};

int ptc_repairer_http_new(uv_loop_t *loop, const char *url, const char *model, const char *key_env,
                          const char *ca_file, const mcp_logger_t *lg, ptc_repairer_http_t **out,
                          char *msg, size_t msg_size)
{
    /* The hook only reads the logger: dropping const is what its void * costs. */
    int rc = ptc_repair_http_new(loop, url, model, key_env, ca_file, mcp_log_hook,
                                 (void *)(uintptr_t)lg, out, msg, msg_size);
    return rc;
}

void ptc_repairer_http_free(ptc_repairer_http_t *r)
{
    ptc_repair_http_free(r);
}

const char *ptc_repairer_http_name(const ptc_repairer_http_t *r)
{
    return ptc_repair_http_name(r);
}

const char *ptc_repairer_strerror(int err)
{
    return PTC_ERR_IN_BLOCK(err, PTC_ERR_REPAIR) ? ptc_repair_strerror(err) : mcp_strerror(err);
}

static void on_http_answer(void *data, int err, const char *reply, const char *message)
{
    ptc_repair_ask_t *a = data;
    a->http = NULL;
    a->cb(a->data, err, reply, message);
    free(a);
}

int ptc_repair_ask_http(ptc_repairer_http_t *r, const char *prompt, ptc_repair_cb cb, void *data,
                        ptc_repair_ask_t **out)
{
    *out = NULL;
    ptc_repair_ask_t *a = calloc(1, sizeof *a);
    if (a == NULL) return MCP_ENOMEM;
    a->kind = REPAIR_HTTP;
    a->cb = cb;
    a->data = data;
    int rc = ptc_repair_http_ask(r, prompt, on_http_answer, a, &a->http);
    if (rc < 0) {
        free(a);
        return rc;
    }
    *out = a;
    return 0;
}

/* Gives the loop the text of a sampling result (a CreateMessageResult). */
static void deliver_sampled(ptc_repair_ask_t *a, const cJSON *result)
{
    char *text = ptc_repair_content_text(cJSON_GetObjectItemCaseSensitive(result, "content"));
    if (text == NULL)
        a->cb(a->data, MCP_EPROTO, NULL, "the client's sampling answer holds no text");
    else if (strlen(text) > PTC_REPAIR_REPLY_MAX)
        a->cb(a->data, MCP_ETOOBIG, NULL, "the client's sampling answer is too long");
    else
        a->cb(a->data, 0, text, NULL);
    free(text);
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
    if (err < 0)
        a->cb(a->data, err, NULL, message ? message : mcp_strerror(err));
    else
        deliver_sampled(a, result);
    free(a);
}

cJSON *ptc_repair_sampling_params(const char *prompt)
{
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
    if (!ok) {
        cJSON_Delete(params);
        return NULL;
    }
    return params;
}

int ptc_repair_ask_sampling(mcp_call_t *call, const char *prompt, ptc_repair_cb cb, void *data,
                            ptc_repair_ask_t **out)
{
    *out = NULL;
    mcp_session_t *s = mcp_call_session(call);
    if (s == NULL || !mcp_session_client_has(s, "sampling")) return MCP_ENOTSUP;
    cJSON *params = ptc_repair_sampling_params(prompt);
    ptc_repair_ask_t *a = params != NULL ? calloc(1, sizeof *a) : NULL;
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

int ptc_repair_ask_mrtr(ptc_repair_cb cb, void *data, ptc_repair_ask_t **out)
{
    ptc_repair_ask_t *a = calloc(1, sizeof *a);
    *out = a;
    if (a == NULL) return MCP_ENOMEM;
    a->kind = REPAIR_MRTR;
    a->cb = cb;
    a->data = data;
    return 0;
}

void ptc_repair_ask_answer(ptc_repair_ask_t *a, const cJSON *result)
{
    if (result == NULL)
        a->cb(a->data, MCP_EPROTO, NULL,
              "the client's next round carried no answer to the sampling request");
    else
        deliver_sampled(a, result);
    free(a);
}

void ptc_repair_ask_cancel(ptc_repair_ask_t *a)
{
    if (a == NULL || a->cancelled) return;
    a->cancelled = true;
    if (a->kind == REPAIR_HTTP) {
        ptc_repair_http_cancel(a->http); /* on_http_answer is not called: a is ours to free */
        free(a);
        return;
    }
    if (a->kind == REPAIR_MRTR) { /* nothing in flight: the client's next round never comes */
        free(a);
        return;
    }
    /* Its callback (now or later) sees the flag and frees a. */
    if (a->outreq != NULL) mcp_outreq_cancel(a->outreq, "the execute_code request ended");
}
