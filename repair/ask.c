/* ask.c - one handle over the ways the repair loop asks a model for a fix (ptc_repair_ask_*):
 * the fallback endpoint (repairer_http.c), the client's own model through a sampling request
 * the host sends (an injected sampler: MCP stays with the wiring), and a sampling request whose
 * answer the host brings later (a 2026-07-28 client's next round). A sampling answer's text
 * is read and bounded here, the same for both. */
#include "repair.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum ask_kind { ASK_HTTP, ASK_SAMPLER, ASK_LATER } ask_kind_t;

struct ptc_repair_ask {
    ask_kind_t kind;
    ptc_repair_cb cb;
    void *data;
    bool cancelled; /* the callback is not called any more */
    ptc_repair_http_ask_t *http;
    ptc_repair_sampler_t sampler;
    void *sent; /* the sampler's request in flight */
};

const ptc_repairer_desc_t ptc_repair_sampling_desc = {
    .id = "sampling",
    .who = "client (sampling)",
    .by = "the client's model (sampling)",
    .asking = "the client's model",
};

const ptc_repairer_desc_t *ptc_repair_pick(bool can_sample, const ptc_repairer_desc_t *fallback,
                                           char *why, size_t why_size)
{
    const ptc_repairer_desc_t *d = can_sample ? &ptc_repair_sampling_desc : fallback;
    if (d == NULL)
        snprintf(why, why_size,
                 "this client cannot sample (no sampling capability) and no fallback "
                 "repairer is configured (--repair-url)");
    return d;
}

static ptc_repair_ask_t *ask_new(ask_kind_t kind, ptc_repair_cb cb, void *data)
{
    ptc_repair_ask_t *a = calloc(1, sizeof *a);
    if (a != NULL) *a = (ptc_repair_ask_t){.kind = kind, .cb = cb, .data = data};
    return a;
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
        params = NULL;
    }
    return params;
}

static void on_http_answer(void *data, int err, const char *reply, const char *message)
{
    ptc_repair_ask_t *a = data;
    a->http = NULL;
    a->cb(a->data, err, reply, message);
    free(a);
}

int ptc_repair_ask_http(ptc_repair_http_t *r, const char *prompt, ptc_repair_cb cb, void *data,
                        ptc_repair_ask_t **out)
{
    *out = NULL;
    ptc_repair_ask_t *a = ask_new(ASK_HTTP, cb, data);
    int rc =
        a != NULL ? ptc_repair_http_ask(r, prompt, on_http_answer, a, &a->http) : PTC_REPAIR_ENOMEM;
    if (rc < 0)
        free(a);
    else
        *out = a;
    return rc;
}

int ptc_repair_ask_sampling(const ptc_repair_sampler_t *s, const char *prompt, ptc_repair_cb cb,
                            void *data, ptc_repair_ask_t **out)
{
    int rc = PTC_REPAIR_ENOMEM;
    cJSON *params = ptc_repair_sampling_params(prompt);
    ptc_repair_ask_t *a = params != NULL ? ask_new(ASK_SAMPLER, cb, data) : NULL;
    *out = NULL;
    if (a == NULL) {
        cJSON_Delete(params);
    } else {
        a->sampler = *s;
        rc = s->send(s->data, params, a, &a->sent); /* takes params */
    }
    if (rc < 0)
        free(a);
    else
        *out = a;
    return rc;
}

int ptc_repair_ask_later(const char *prompt, ptc_repair_cb cb, void *data, cJSON **params,
                         ptc_repair_ask_t **out)
{
    *params = ptc_repair_sampling_params(prompt);
    *out = *params != NULL ? ask_new(ASK_LATER, cb, data) : NULL;
    if (*out == NULL) {
        cJSON_Delete(*params);
        *params = NULL;
    }
    return *out != NULL ? 0 : PTC_REPAIR_ENOMEM;
}

/* Gives the loop the text of a sampling result (a CreateMessageResult) and frees a. */
static void deliver_sampled(ptc_repair_ask_t *a, const cJSON *result)
{
    char *text = ptc_repair_content_text(cJSON_GetObjectItemCaseSensitive(result, "content"));
    if (text == NULL)
        a->cb(a->data, PTC_REPAIR_EPROTO, NULL, "the client's sampling answer holds no text");
    else if (strlen(text) > PTC_REPAIR_REPLY_MAX)
        a->cb(a->data, PTC_REPAIR_ETOOBIG, NULL, "the client's sampling answer is too long");
    else
        a->cb(a->data, 0, text, NULL);
    free(text);
    free(a);
}

void ptc_repair_ask_sampled(ptc_repair_ask_t *a, int err, const cJSON *result, const char *message)
{
    a->sent = NULL;
    if (!a->cancelled && err == 0) {
        deliver_sampled(a, result); /* frees a */
    } else {
        if (!a->cancelled) a->cb(a->data, err, NULL, message);
        free(a);
    }
}

void ptc_repair_ask_answer(ptc_repair_ask_t *a, const cJSON *result)
{
    if (result != NULL) {
        deliver_sampled(a, result);
    } else {
        a->cb(a->data, PTC_REPAIR_EPROTO, NULL,
              "the client's next round carried no answer to the sampling request");
        free(a);
    }
}

void ptc_repair_ask_cancel(ptc_repair_ask_t *a)
{
    if (a == NULL || a->cancelled) return;
    a->cancelled = true;
    switch (a->kind) {
    case ASK_HTTP: /* on_http_answer is not called: a is ours to free */
        ptc_repair_http_cancel(a->http);
        free(a);
        break;
    case ASK_LATER: /* nothing in flight: the client's next round never comes */
        free(a);
        break;
    case ASK_SAMPLER: /* its end (now or later) sees the flag and frees a */
        a->sampler.cancel(a->sampler.data, a->sent);
        break;
    }
}
