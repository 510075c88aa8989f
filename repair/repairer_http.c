/* repairer_http.c - the fallback repairer: an OpenAI-compatible chat-completions endpoint over
 * HTTP(S) (httpc/), for clients that cannot sample. */
#include "repair.h"

#include "httpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTTP_REPAIR_TIMEOUT_MS 120000u /* the request's own deadline usually ends it first */
#define HTTP_REPAIR_KEY_MAX    4096
#define HTTP_REPAIR_URL_MAX    2048
#define HTTP_REPAIR_BODY_SHOWN 200 /* bytes of an error answer's body quoted */

struct ptc_repair_http {
    ptc_http_client_t *http;
    char *url, *model, *key;
    char name[HTTP_REPAIR_URL_MAX + 200];
    ptc_repair_http_ask_t *asks;
};

struct ptc_repair_http_ask {
    ptc_repair_http_t *owner;
    ptc_repair_cb cb;
    void *data;
    bool cancelled; /* the callback is not called any more */
    ptc_http_req_t *http;
    ptc_repair_http_ask_t *prev, *next; /* in owner's list */
};

static char *endpoint_of(const char *url)
{
    static const char suffix[] = "/chat/completions";
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        n--;
    size_t k = sizeof suffix - 1;
    bool has = n >= k && memcmp(url + n - k, suffix, k) == 0;
    char *s = malloc(n + (has ? 0 : k) + 1);
    if (s == NULL) return NULL;
    memcpy(s, url, n);
    if (!has) memcpy(s + n, suffix, k);
    s[n + (has ? 0 : k)] = '\0';
    return s;
}

int ptc_repair_http_new(uv_loop_t *loop, const char *url, const char *model, const char *key_env,
                        const char *ca_file, ptc_http_log_fn log, void *log_data,
                        ptc_repair_http_t **out, char *msg, size_t msg_size)
{
    *out = NULL;
    if (url == NULL || model == NULL || model[0] == '\0') {
        snprintf(msg, msg_size,
                 "--repair-url needs --repair-model (the model name the endpoint expects)");
        return PTC_REPAIR_EINVAL;
    }
    if (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0) {
        snprintf(msg, msg_size, "--repair-url %s: expected an http:// or https:// URL", url);
        return PTC_REPAIR_EINVAL;
    }
    if (strlen(url) > HTTP_REPAIR_URL_MAX) {
        snprintf(msg, msg_size, "--repair-url is longer than %d bytes", HTTP_REPAIR_URL_MAX);
        return PTC_REPAIR_EINVAL;
    }
    const char *key = NULL;
    if (key_env != NULL) {
        key = getenv(key_env);
        if (key == NULL || key[0] == '\0') {
            snprintf(msg, msg_size,
                     "--repair-key-env %s: the variable is not set; export the API key in it "
                     "or drop the flag",
                     key_env);
            return PTC_REPAIR_EINVAL;
        }
        if (strlen(key) > HTTP_REPAIR_KEY_MAX || strpbrk(key, "\r\n") != NULL) {
            snprintf(msg, msg_size, "--repair-key-env %s: the key is not a usable header value",
                     key_env);
            return PTC_REPAIR_EINVAL;
        }
    }
    ptc_repair_http_t *r = calloc(1, sizeof *r);
    if (r == NULL || (r->url = endpoint_of(url)) == NULL || (r->model = strdup(model)) == NULL ||
        (key != NULL && (r->key = strdup(key)) == NULL)) {
        ptc_repair_http_free(r);
        snprintf(msg, msg_size, "out of memory");
        return PTC_REPAIR_ENOMEM;
    }
    ptc_http_client_opts_t o;
    ptc_http_client_opts_default(&o);
    o.ca_file = ca_file;
    o.total_timeout_ms = HTTP_REPAIR_TIMEOUT_MS;
    o.max_response_bytes = PTC_CAP_REPAIR_RESPONSE;
    int rc = ptc_http_client_new(loop, &o, log, log_data, &r->http);
    if (rc < 0) {
        snprintf(msg, msg_size, "the repair endpoint's HTTP client cannot be set up: %s%s",
                 ptc_http_strerror(rc), ca_file ? " (check --ca-file)" : "");
        ptc_repair_http_free(r);
        return rc; /* one error space: the HTTP client's code says what failed */
    }
    snprintf(r->name, sizeof r->name, "%s at %s", r->model, r->url);
    *out = r;
    return 0;
}

void ptc_repair_http_free(ptc_repair_http_t *r)
{
    if (r == NULL) return;
    /* Callbacks of requests still in flight must not reach their owners any more. */
    for (ptc_repair_http_ask_t *a = r->asks; a != NULL; a = a->next)
        a->cancelled = true;
    if (r->http != NULL) ptc_http_client_free(r->http); /* runs on_answer for each: frees them */
    free(r->url);
    free(r->model);
    if (r->key != NULL) {
        memset(r->key, 0, strlen(r->key));
        free(r->key);
    }
    free(r);
}

const char *ptc_repair_http_name(const ptc_repair_http_t *r)
{
    return r->name;
}

static void ask_unlink(ptc_repair_http_ask_t *a)
{
    ptc_repair_http_t *r = a->owner;
    if (a->prev != NULL)
        a->prev->next = a->next;
    else if (r->asks == a)
        r->asks = a->next;
    if (a->next != NULL) a->next->prev = a->prev;
    a->prev = a->next = NULL;
}

/* The text of choices[0].message.content, or NULL with why in msg. */
static char *reply_of(const char *body, size_t len, char *msg, size_t msg_size)
{
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    const cJSON *first = cJSON_GetArrayItem(choices, 0);
    const cJSON *message = cJSON_GetObjectItemCaseSensitive(first, "message");
    char *text = ptc_repair_content_text(cJSON_GetObjectItemCaseSensitive(message, "content"));
    if (text == NULL)
        snprintf(msg, msg_size, "%s",
                 root == NULL ? "the repair endpoint's answer is not JSON"
                              : "the repair endpoint's answer has no choices[0].message.content");
    cJSON_Delete(root);
    return text;
}

static void on_answer(void *data, int err, const ptc_http_response_t *resp, const char *message)
{
    ptc_repair_http_ask_t *a = data;
    a->http = NULL;
    ask_unlink(a);
    if (a->cancelled) {
        free(a);
        return;
    }
    char m[400];
    if (err < 0) {
        snprintf(m, sizeof m, "the repair endpoint %s failed: %s", a->owner->url,
                 message ? message : ptc_http_strerror(err));
        a->cb(a->data, err, NULL, m);
    } else if (resp->status < 200 || resp->status > 299) {
        size_t n =
            resp->body_len < HTTP_REPAIR_BODY_SHOWN ? resp->body_len : HTTP_REPAIR_BODY_SHOWN;
        snprintf(m, sizeof m, "the repair endpoint answered HTTP %d: %.*s", resp->status, (int)n,
                 resp->body);
        a->cb(a->data, PTC_REPAIR_EREMOTE, NULL, m);
    } else {
        char *text = reply_of(resp->body, resp->body_len, m, sizeof m);
        if (text == NULL)
            a->cb(a->data, PTC_REPAIR_EPROTO, NULL, m);
        else if (strlen(text) > PTC_REPAIR_REPLY_MAX)
            a->cb(a->data, PTC_REPAIR_ETOOBIG, NULL, "the repair endpoint's answer is too long");
        else
            a->cb(a->data, 0, text, NULL);
        free(text);
    }
    free(a);
}

int ptc_repair_http_ask(ptc_repair_http_t *r, const char *prompt, ptc_repair_cb cb, void *data,
                        ptc_repair_http_ask_t **out)
{
    *out = NULL;
    cJSON *body = cJSON_CreateObject();
    cJSON *msgs = cJSON_AddArrayToObject(body, "messages");
    cJSON *sys = cJSON_CreateObject(), *user = cJSON_CreateObject();
    bool ok = msgs != NULL && sys != NULL && user != NULL &&
              cJSON_AddStringToObject(sys, "role", "system") != NULL &&
              cJSON_AddStringToObject(sys, "content", ptc_repair_system_prompt) != NULL &&
              cJSON_AddStringToObject(user, "role", "user") != NULL &&
              cJSON_AddStringToObject(user, "content", prompt) != NULL;
    if (ok && cJSON_AddItemToArray(msgs, sys))
        sys = NULL;
    else
        ok = false;
    if (ok && cJSON_AddItemToArray(msgs, user))
        user = NULL;
    else
        ok = false;
    cJSON_Delete(sys);
    cJSON_Delete(user);
    ok = ok && cJSON_AddStringToObject(body, "model", r->model) != NULL &&
         cJSON_AddNumberToObject(body, "temperature", 0) != NULL &&
         cJSON_AddNumberToObject(body, "max_tokens", PTC_REPAIR_MAX_TOKENS) != NULL;
    char *text = ok ? cJSON_PrintUnformatted(body) : NULL;
    cJSON_Delete(body);
    ptc_repair_http_ask_t *a = text != NULL ? calloc(1, sizeof *a) : NULL;
    if (a == NULL) {
        free(text);
        return PTC_REPAIR_ENOMEM;
    }
    a->cb = cb;
    a->data = data;
    a->owner = r;
    char auth[HTTP_REPAIR_KEY_MAX + 16];
    ptc_http_header_t h[3] = {{"Content-Type", "application/json"}, {"Accept", "application/json"}};
    size_t nh = 2;
    if (r->key != NULL) {
        snprintf(auth, sizeof auth, "Bearer %s", r->key);
        h[nh++] = (ptc_http_header_t){"Authorization", auth};
    }
    a->next = r->asks;
    if (r->asks != NULL) r->asks->prev = a;
    r->asks = a;
    int rc = ptc_http_request(r->http, "POST", r->url, h, nh, text, strlen(text), on_answer, a,
                              &a->http);
    memset(auth, 0, sizeof auth);
    free(text);
    if (rc < 0) {
        ask_unlink(a);
        free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void ptc_repair_http_cancel(ptc_repair_http_ask_t *a)
{
    if (a == NULL || a->cancelled) return;
    a->cancelled = true;
    /* on_answer runs inside and frees a (cancelled is set). */
    if (a->http != NULL) ptc_http_cancel(a->http);
}
