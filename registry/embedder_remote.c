/* embedder_remote.c - the remote embedding provider (--embedder remote): OpenAI-compatible
 * /v1/embeddings or Ollama /api/embed over HTTP(S), plugged into the registry's embedder
 * interface.
 *
 * The registry calls embed() on a worker thread and lets it block. The HTTP client belongs to
 * one loop thread, so each call runs its requests on a private loop of its own, on the calling
 * thread: no state is shared with the server's loop, and calls on several workers at once are
 * independent. */
#include "registry.h"

#include "httpc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REMOTE_BATCH      64   /* texts per request */
#define REMOTE_RETRIES    2    /* after the first try, for network errors and 5xx/429 */
#define REMOTE_BACKOFF_MS 250u /* doubled per retry */
#define REMOTE_TIMEOUT_MS 30000u

typedef enum api { API_OPENAI, API_OLLAMA } api_t;

typedef struct remote {
    char *url, *model, *key, *ca_file;
    api_t api;
    char name[160];
} remote_t;

/* One request on a private loop, run to completion on this thread. */
typedef struct sync_req {
    int err;
    int status;
    char *body;
    char message[256];
} sync_req_t;

static void on_http(void *data, int err, const ptc_http_response_t *resp, const char *message)
{
    sync_req_t *r = data;
    r->err = err;
    if (err < 0) {
        snprintf(r->message, sizeof r->message, "%s", message ? message : ptc_http_strerror(err));
        return;
    }
    r->status = resp->status;
    r->body = malloc(resp->body_len + 1);
    if (r->body == NULL) {
        r->err = PTC_HTTP_ENOMEM;
        return;
    }
    memcpy(r->body, resp->body, resp->body_len);
    r->body[resp->body_len] = '\0';
}

static int post_json(const remote_t *rm, const char *payload, sync_req_t *out)
{
    memset(out, 0, sizeof *out);
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) return PTC_HTTP_ENOMEM;
    ptc_http_client_opts_t o;
    ptc_http_client_opts_default(&o);
    o.ca_file = rm->ca_file;
    o.total_timeout_ms = REMOTE_TIMEOUT_MS;
    o.max_response_bytes = PTC_CAP_REMOTE_EMBED_RESPONSE;
    ptc_http_client_t *http = NULL;
    int rc = ptc_http_client_new(&loop, &o, NULL, NULL, &http);
    if (rc == 0) {
        char auth[600];
        ptc_http_header_t h[2] = {{"Content-Type", "application/json"}, {NULL, NULL}};
        size_t nh = 1;
        if (rm->key != NULL) {
            snprintf(auth, sizeof auth, "Bearer %s", rm->key);
            h[nh++] = (ptc_http_header_t){"Authorization", auth};
        }
        out->err = 1; /* set by the callback */
        rc = ptc_http_request(http, "POST", rm->url, h, nh, payload, strlen(payload), on_http, out,
                              NULL);
        if (rc == 0) {
            uv_run(&loop, UV_RUN_DEFAULT);
            rc = out->err;
        }
        ptc_http_client_free(http);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    if (rc != 0 && out->message[0] == '\0')
        snprintf(out->message, sizeof out->message, "%s", ptc_http_strerror(rc));
    return rc;
}

static cJSON *request_body(const remote_t *rm, const char *const *texts, size_t n)
{
    cJSON *b = cJSON_CreateObject();
    cJSON *in = cJSON_AddArrayToObject(b, "input");
    if (in == NULL || cJSON_AddStringToObject(b, "model", rm->model) == NULL) {
        cJSON_Delete(b);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *s = cJSON_CreateString(texts[i]);
        if (s == NULL || !cJSON_AddItemToArray(in, s)) {
            cJSON_Delete(s);
            cJSON_Delete(b);
            return NULL;
        }
    }
    return b;
}

/* Reads n vectors of dim floats (dim 0: learn it and set *dim) from either API's answer. */
static int parse_vectors(const remote_t *rm, const char *body, size_t n, size_t *dim, float *out,
                         char *msg, size_t msg_size)
{
    cJSON *root = cJSON_Parse(body);
    if (root == NULL) {
        snprintf(msg, msg_size, "remote embeddings: the answer is not JSON");
        return REG_EINVAL;
    }
    const cJSON *list = rm->api == API_OLLAMA ? cJSON_GetObjectItemCaseSensitive(root, "embeddings")
                                              : cJSON_GetObjectItemCaseSensitive(root, "data");
    int rc = REG_EINVAL;
    if (!cJSON_IsArray(list) || (size_t)cJSON_GetArraySize(list) != n) {
        snprintf(msg, msg_size, "remote embeddings: expected %zu vectors in \"%s\"", n,
                 rm->api == API_OLLAMA ? "embeddings" : "data");
        goto out;
    }
    size_t i = 0;
    const cJSON *item;
    /* Each of the n vectors exactly once, whatever order the answer lists them in. */
    unsigned char *seen = calloc(n, 1);
    if (seen == NULL) {
        rc = REG_ENOMEM;
        goto out;
    }
    cJSON_ArrayForEach(item, list)
    {
        const cJSON *vec = item;
        size_t at = i;
        if (rm->api == API_OPENAI) {
            vec = cJSON_GetObjectItemCaseSensitive(item, "embedding");
            const cJSON *idx = cJSON_GetObjectItemCaseSensitive(item, "index");
            if (cJSON_IsNumber(idx)) {
                double d = idx->valuedouble;
                at = (d >= 0 && d < (double)n && d == (double)(size_t)d) ? (size_t)d : n;
            }
        }
        if (at >= n || seen[at]) {
            snprintf(msg, msg_size, "remote embeddings: vector %zu has a bad or repeated index", i);
            free(seen);
            goto out;
        }
        seen[at] = 1;
        size_t len = cJSON_IsArray(vec) ? (size_t)cJSON_GetArraySize(vec) : 0;
        if (len == 0 || len > REG_DIM_MAX || (*dim != 0 && len != *dim)) {
            snprintf(msg, msg_size, "remote embeddings: vector %zu is missing or has %zu numbers",
                     i, len);
            free(seen);
            goto out;
        }
        if (*dim == 0) {
            *dim = len;
            if (out == NULL) { /* a probe: only the size was wanted */
                free(seen);
                rc = REG_OK;
                goto out;
            }
        }
        float *v = out + at * len;
        double norm = 0;
        size_t k = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, vec)
        {
            v[k] = cJSON_IsNumber(x) ? (float)x->valuedouble : 0.0f;
            norm += (double)v[k] * (double)v[k];
            k++;
        }
        /* The registry ranks by dot product: every vector must be unit length. */
        if (norm > 0)
            for (k = 0; k < len; k++)
                v[k] = (float)((double)v[k] / sqrt(norm));
        i++;
    }
    free(seen);
    rc = REG_OK;
out:
    cJSON_Delete(root);
    return rc;
}

static int embed_batch(const remote_t *rm, const char *const *texts, size_t n, size_t *dim,
                       float *out, char *msg, size_t msg_size)
{
    cJSON *b = request_body(rm, texts, n);
    char *payload = b ? cJSON_PrintUnformatted(b) : NULL;
    cJSON_Delete(b);
    if (payload == NULL) return REG_ENOMEM;
    int rc = REG_EEMBED;
    unsigned backoff = REMOTE_BACKOFF_MS;
    for (int attempt = 0; attempt <= REMOTE_RETRIES; attempt++) {
        sync_req_t r;
        int err = post_json(rm, payload, &r);
        bool retry = false;
        if (err < 0) {
            snprintf(msg, msg_size, "remote embeddings at %s: %s", rm->url, r.message);
            retry = err != PTC_HTTP_EINVAL && err != PTC_HTTP_ETLS && err != PTC_HTTP_EREDIRECT;
        } else if (r.status != 200) {
            snprintf(msg, msg_size, "remote embeddings at %s: HTTP %d: %.160s", rm->url, r.status,
                     r.body ? r.body : "");
            retry = r.status == 429 || r.status >= 500;
        } else {
            rc = parse_vectors(rm, r.body, n, dim, out, msg, msg_size);
        }
        free(r.body);
        if (err == 0 && r.status == 200) break;
        if (!retry) break;
        uv_sleep(backoff); /* a worker thread (or start-up): never the event loop */
        backoff *= 2;
    }
    free(payload);
    return rc;
}

static int remote_embed(reg_embedder_t *self, const char *const *texts, size_t n,
                        reg_embed_kind_t kind, float *out, char *msg, size_t msg_size)
{
    remote_t *rm = self->impl;
    (void)kind;
    for (size_t i = 0; i < n; i += REMOTE_BATCH) {
        size_t m = n - i < REMOTE_BATCH ? n - i : REMOTE_BATCH;
        size_t dim = self->dim;
        int rc = embed_batch(rm, texts + i, m, &dim, out + i * self->dim, msg, msg_size);
        if (rc < 0) return rc;
    }
    return REG_OK;
}

static void remote_destroy(reg_embedder_t *self)
{
    remote_t *rm = self->impl;
    if (rm == NULL) return;
    free(rm->url);
    free(rm->model);
    if (rm->key) memset(rm->key, 0, strlen(rm->key));
    free(rm->key);
    free(rm->ca_file);
    free(rm);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

int reg_embedder_remote_open(const reg_embedder_spec_t *spec, void *data, reg_embedder_t **out,
                             char *msg, size_t msg_size)
{
    const char *ca_file = data;
    *out = NULL;
    if (spec->url == NULL || spec->remote_model == NULL) {
        snprintf(msg, msg_size,
                 "--embedder remote needs --embed-url (an OpenAI-compatible .../v1/embeddings or "
                 "Ollama .../api/embed URL) and --embed-remote-model");
        return REG_EINVAL;
    }
    remote_t *rm = calloc(1, sizeof *rm);
    reg_embedder_t *e = calloc(1, sizeof *e);
    if (rm == NULL || e == NULL) {
        free(rm);
        free(e);
        return REG_ENOMEM;
    }
    e->impl = rm;
    e->destroy = remote_destroy;
    rm->url = strdup(spec->url);
    rm->model = strdup(spec->remote_model);
    rm->ca_file = dup_or_null(ca_file);
    rm->api = strstr(spec->url, "/api/embed") != NULL ? API_OLLAMA : API_OPENAI;
    if (spec->key_env != NULL) {
        const char *key = getenv(spec->key_env);
        if (key == NULL || key[0] == '\0') {
            snprintf(msg, msg_size, "--embed-key-env %s: the variable is not set", spec->key_env);
            reg_embedder_free(e);
            return REG_EINVAL;
        }
        rm->key = strdup(key);
    }
    if (rm->url == NULL || rm->model == NULL || (ca_file && !rm->ca_file) ||
        (spec->key_env && !rm->key)) {
        reg_embedder_free(e);
        return REG_ENOMEM;
    }
    snprintf(rm->name, sizeof rm->name, "remote:%s", spec->remote_model);
    e->name = rm->name;
    e->cache_provider = "remote";
    e->cache_model = rm->name;
    e->concurrent = true;
    e->embed = remote_embed;
    /* Learn the dimension (and that the endpoint answers) once, now. */
    const char *probe[1] = {"dimension probe"};
    size_t dim = 0;
    int rc = embed_batch(rm, probe, 1, &dim, NULL, msg, msg_size);
    if (rc < 0 || dim == 0) {
        reg_embedder_free(e);
        return rc < 0 ? rc : REG_EEMBED;
    }
    e->dim = dim;
    *out = e;
    return REG_OK;
}
