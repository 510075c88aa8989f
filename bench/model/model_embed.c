/*
 * model_embed - speed of the in-process sentence encoder.
 *
 *   model_embed MODEL_DIR [CATALOG.json] [QUERY]
 *
 * Prints the query-embedding latency (p50, p90, p99 over repeated single-text calls, one
 * OpenBLAS thread, as on one libuv worker) and, given a catalog (a JSON array of MCP Tool
 * objects, or {"tools": [...]}) the time to embed every tool's "name: description" in one batch
 * call and one call per tool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "registry.h"

enum { WARMUP = 10, ROUNDS = 200, MAX_TOOLS = 100000, MAX_TOOL_TEXT = 4096 };

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf != NULL) {
        rewind(f);
        size_t got = fread(buf, 1, (size_t)n, f);
        buf[got] = '\0';
    }
    fclose(f);
    return buf;
}

/* Returns malloc'd "name: description" strings of the catalog's tools; *n their count. */
static char **catalog_texts(const char *path, size_t *n)
{
    char *text = slurp(path);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *tools = cJSON_IsArray(root) ? root : cJSON_GetObjectItem(root, "tools");
    int count = cJSON_GetArraySize(tools);
    *n = 0;
    if (!cJSON_IsArray(tools) || count <= 0 || count > MAX_TOOLS) {
        cJSON_Delete(root);
        return NULL;
    }
    char **out = calloc((size_t)count, sizeof *out);
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *name = cJSON_GetObjectItem(t, "name");
        const cJSON *desc = cJSON_GetObjectItem(t, "description");
        char *s = out ? malloc(MAX_TOOL_TEXT) : NULL;
        if (s == NULL) break;
        snprintf(s, MAX_TOOL_TEXT, "%s: %s", cJSON_IsString(name) ? name->valuestring : "",
                 cJSON_IsString(desc) ? desc->valuestring : "");
        out[(*n)++] = s;
    }
    cJSON_Delete(root);
    return out;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR [CATALOG.json] [QUERY]\n", argv[0]);
        return 2;
    }
    const char *query = argc > 3 ? argv[3] : "find open pull requests that need my review";
    reg_model_set_blas_threads(1);

    char err[512];
    reg_model_t *m = NULL;
    double t0 = now_ms();
    int rc = reg_model_load(argv[1], &m, err, sizeof err);
    if (rc != REG_MODEL_OK) {
        fprintf(stderr, "model_embed: %s\n", err);
        return 1;
    }
    double load_ms = now_ms() - t0;
    size_t dim = reg_model_dim(m);
    float *v = malloc(dim * sizeof *v);
    int32_t ids[1024];
    size_t nids = 0;
    if (v == NULL || reg_model_tokenize(m, query, ids, 1024, &nids) != REG_MODEL_OK) return 1;
    printf("model %s: dim %zu, window %zu tokens, load %.1f ms, one OpenBLAS thread\n",
           reg_model_name(m), dim, reg_model_max_tokens(m), load_ms);

    double lat[ROUNDS];
    for (int i = 0; i < WARMUP + ROUNDS; i++) {
        double s = now_ms();
        if (reg_model_embed(m, &query, 1, v) != REG_MODEL_OK) return 1;
        if (i >= WARMUP) lat[i - WARMUP] = now_ms() - s;
    }
    qsort(lat, ROUNDS, sizeof lat[0], cmp_double);
    printf("query \"%s\" (%zu tokens): p50 %.2f ms, p90 %.2f ms, p99 %.2f ms over %d calls\n",
           query, nids, lat[ROUNDS / 2], lat[ROUNDS * 9 / 10], lat[ROUNDS * 99 / 100], ROUNDS);

    if (argc > 2) {
        size_t n = 0;
        char **texts = catalog_texts(argv[2], &n);
        if (texts == NULL) {
            fprintf(stderr, "model_embed: cannot read tools from %s\n", argv[2]);
            return 1;
        }
        float *all = malloc(n * dim * sizeof *all);
        size_t tokens = 0;
        for (size_t i = 0; i < n; i++)
            if (reg_model_tokenize(m, texts[i], ids, 1024, &nids) == REG_MODEL_OK) tokens += nids;
        double s = now_ms();
        rc = all ? reg_model_embed(m, (const char *const *)texts, n, all) : REG_MODEL_ENOMEM;
        double batch_ms = now_ms() - s;
        s = now_ms();
        for (size_t i = 0; rc == REG_MODEL_OK && i < n; i++)
            rc = reg_model_embed(m, (const char *const *)&texts[i], 1, all + i * dim);
        double single_ms = now_ms() - s;
        if (rc != REG_MODEL_OK) return 1;
        printf("catalog %s: %zu tools, %zu tokens; one batch call %.1f ms (%.1f texts/s), "
               "one call per tool %.1f ms (%.1f texts/s)\n",
               argv[2], n, tokens, batch_ms, (double)n * 1e3 / batch_ms, single_ms,
               (double)n * 1e3 / single_ms);
        for (size_t i = 0; i < n; i++)
            free(texts[i]);
        free(texts);
        free(all);
    }
    free(v);
    reg_model_free(m);
    return 0;
}
