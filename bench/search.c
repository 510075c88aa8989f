/*
 * search.c - search latency and index cost at 1k, 10k and 100k tools.
 *
 * usage: bench_search CATALOG.json [QUERIES.jsonl] [--sizes 1000,10000,100000] [--queries N]
 *                     [--lexical-dim N] [--dense-dim N]
 *                     [--index-tools N,M] [--index-batches W] [--blas-threads T] [--parts]
 *
 * Synthetic catalogs are built from the real one: tool i copies tool (i mod n) under a new
 * server and name, with a deterministic share of its description words swapped for words of
 * other tools, so that rows are distinct but read like real tools. For each size it prints
 * index build time (fit + embedding + adding) and memory, then per-query latency p50/p99 for:
 * the lexical embedder (query embedding + top-5 search), the library's BM25, the hybrid of
 * both, and a dense search alone on synthetic unit vectors of --dense-dim.
 *
 * The model (--embedder auto|model, as the binary's flag; skipped when it is not installed or
 * with --embedder lexical): its query embedding on one thread, as on one libuv worker (the
 * dev queries, or tool descriptions), and per size the registry's search_tools path for a
 * sentence model (hybrid: cosine + BM25 relative to its best hit; the tools carry their real
 * descriptions, perturbed) with the query vector given,
 * over synthetic 384-d document vectors: embedding 10k or 100k tool texts with the model would
 * take minutes here, and the scan costs the same whatever the vectors hold.
 *
 * --index-tools N,M measures that cost instead: the model embeds N (then M) synthetic tools
 * (each a real tool under a new server and name, its description perturbed as above, its
 * input schema kept) through the registry, cold (no cache), as the server does it: batches
 * taken on the loop, embedded on libuv's thread pool with W of them in flight (default: one
 * per core) and T OpenBLAS threads each (default 1). It prints wall time, CPU time and tools/s.
 *
 * --parts: the sentence model's registry indexes each tool's parts too (reg_tool_part_texts,
 * reg_registry_opts_t.parts), in both sections.
 */
#include "registry.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#define MAX_SIZES     8
#define MODEL_QUERIES 200 /* query embeddings timed (about 2 s with MiniLM) */
#define TOPK          5
#define CAND          50

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench_search: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* xorshift64*: a fixed seed makes every run build the same catalogs. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

typedef struct words {
    char **w;
    size_t n, cap;
} words_t;

static void words_push(words_t *ws, const char *s, size_t n)
{
    if (ptc_array_reserve(&ws->w, &ws->cap, ws->n + 1, sizeof *ws->w, SIZE_MAX) < 0)
        die("out of memory");
    char *c = malloc(n + 1);
    if (c == NULL) die("out of memory");
    memcpy(c, s, n);
    c[n] = 0;
    ws->w[ws->n++] = c;
}

static bool ends_sentence(const char *w, size_t n)
{
    return memchr(w, '.', n) || memchr(w, '!', n) || memchr(w, '?', n) || memchr(w, '\n', n);
}

/* Rewrites text with about 1 word in 4 replaced by a random word of the vocabulary. A word
 * that ends a sentence stays, and the vocabulary has no such word, so that the copy has the
 * sentences of the original (the registry embeds a sentence model's tools by sentence too). */
static char *perturb(const char *text, const words_t *vocab, uint64_t *rng)
{
    ptc_buf_t out;
    ptc_buf_init(&out, SIZE_MAX); /* a bench tool: memory is the only limit */
    const char *p = text;
    while (*p) {
        size_t sp = strspn(p, " ");
        p += sp;
        size_t n = strcspn(p, " ");
        if (n == 0) break;
        const char *w = p;
        size_t wn = n;
        if (vocab->n > 0 && rng_next(rng) % 4 == 0 && !ends_sentence(p, n)) {
            w = vocab->w[rng_next(rng) % vocab->n];
            wn = strlen(w);
        }
        if (ptc_buf_len(&out) > 0) ptc_buf_append(&out, " ", 1);
        ptc_buf_append(&out, w, wn);
        p += n;
    }
    char *text_out = ptc_buf_take(&out, NULL);
    if (text_out == NULL) die("out of memory");
    return text_out;
}

typedef struct synth {
    size_t n;
    char **id, **server, **name, **text;
    char **desc; /* the real description, perturbed like text (the sentence model's section) */
} synth_t;

static void synth_build(synth_t *s, const reg_catalog_t *cat, char **base_text,
                        const words_t *vocab, size_t n)
{
    size_t n0 = reg_catalog_count(cat);
    uint64_t rng = 0x9E3779B97F4A7C15ULL ^ n;
    s->n = n;
    s->id = calloc(n, sizeof *s->id);
    s->server = calloc(n, sizeof *s->server);
    s->text = calloc(n, sizeof *s->text);
    s->name = calloc(n, sizeof *s->name);
    s->desc = calloc(n, sizeof *s->desc);
    if (!s->id || !s->server || !s->text || !s->name || !s->desc) die("out of memory");
    uint64_t drng = 0xC2B2AE3D27D4EB4FULL ^ n; /* its own, so that text stays as it was */
    for (size_t i = 0; i < n; i++) {
        const reg_tool_t *t = reg_catalog_at(cat, i % n0);
        size_t copy = i / n0;
        char buf[512];
        /* Each copy of a real server is a server of its own. */
        snprintf(buf, sizeof buf, "%s-%zu", t->server, copy);
        s->server[i] = strdup(buf);
        snprintf(buf, sizeof buf, "%s_%zu", t->name, copy);
        s->name[i] = strdup(buf);
        snprintf(buf, sizeof buf, "%s__%s_%zu", s->server[i], t->name, copy);
        s->id[i] = strdup(buf);
        s->text[i] =
            copy == 0 ? strdup(base_text[i % n0]) : perturb(base_text[i % n0], vocab, &rng);
        s->desc[i] = copy == 0 ? strdup(t->description) : perturb(t->description, vocab, &drng);
        if (!s->id[i] || !s->server[i] || !s->text[i] || !s->name[i] || !s->desc[i])
            die("out of memory");
    }
}

static void synth_free(synth_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->id[i]);
        free(s->server[i]);
        free(s->text[i]);
        free(s->desc[i]);
        free(s->name[i]);
    }
    free(s->name);
    free(s->id);
    free(s->server);
    free(s->text);
    free(s->desc);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Prints p50/p99/max of n latencies (sorting lat) and returns the p50. size 0: no size. */
static double report(const char *what, size_t size, double *lat, size_t n)
{
    qsort(lat, n, sizeof *lat, cmp_double);
    double p50 = lat[n / 2],
           p99 = lat[(size_t)((double)n * 0.99) < n ? (size_t)((double)n * 0.99) : n - 1];
    char sz[32] = "-";
    if (size > 0) snprintf(sz, sizeof sz, "%zu", size);
    printf("%-8s %-34s p50 %8.3f ms   p99 %8.3f ms   max %8.3f ms\n", sz, what, p50, p99,
           lat[n - 1]);
    return p50;
}

static const synth_t *sort_base;

static int cmp_by_server(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = strcmp(sort_base->server[x], sort_base->server[y]);
    return c ? c : (x > y) - (x < y);
}

static void registry_section(const synth_t *s, const reg_lexical_opts_t *lo,
                             reg_index_storage_t storage, char **qsrc, size_t nq_src,
                             size_t nqueries, double *lat)
{
    reg_embedder_t *e;
    reg_registry_t *reg;
    reg_registry_opts_t ro;
    reg_registry_opts_default(&ro);
    ro.storage = storage;
    if (reg_lexical_new(lo, &e) < 0 || reg_registry_new(e, &ro, &reg) < 0) die("setup failed");
    size_t *order = malloc(s->n * sizeof *order);
    if (order == NULL) die("out of memory");
    for (size_t i = 0; i < s->n; i++)
        order[i] = i;
    sort_base = s;
    qsort(order, s->n, sizeof *order, cmp_by_server);
    char msg[512];
    double t0 = now_ms();
    for (size_t i = 0; i < s->n;) {
        size_t j = i;
        cJSON *arr = cJSON_CreateArray();
        if (arr == NULL) die("out of memory");
        for (; j < s->n && strcmp(s->server[order[j]], s->server[order[i]]) == 0; j++) {
            cJSON *t = cJSON_CreateObject();
            if (t == NULL || !cJSON_AddItemToArray(arr, t) ||
                !cJSON_AddStringToObject(t, "name", s->name[order[j]]) ||
                !cJSON_AddStringToObject(t, "description", s->text[order[j]]))
                die("out of memory");
        }
        if (reg_registry_set_server_tools(reg, s->server[order[i]], arr, msg, sizeof msg) < 0)
            die("%s", msg);
        cJSON_Delete(arr);
        i = j;
    }
    double t1 = now_ms();
    if (reg_registry_index_all(reg, msg, sizeof msg) < 0) die("%s", msg);
    double t2 = now_ms();
    reg_registry_stats_t st;
    reg_registry_stats(reg, &st);
    printf("%-8zu registry: add servers %.0f ms, index %.0f ms, memory (vectors + bm25) %.1f "
           "MiB\n",
           s->n, t1 - t0, t2 - t1, (double)st.memory_bytes / 1048576.0);
    reg_result_t res[TOPK];
    for (size_t q = 0; q < nqueries; q++) {
        double q0 = now_ms();
        if (reg_registry_search(reg, qsrc[q % nq_src], NULL, TOPK, NULL, res, msg, sizeof msg) < 0)
            die("%s", msg);
        lat[q] = now_ms() - q0;
    }
    report("registry search (search_tools path)", s->n, lat, nqueries);
    free(order);
    reg_registry_free(reg);
}

/* A stand-in for a sentence model at index time: a deterministic pseudo-random unit vector per
 * text (the model's own vectors cost ~10 ms a text). The registry treats it as a sentence model
 * (brief texts, absolute-score fusion), so searches take the model's path. */
static int synth_embed(reg_embedder_t *self, const char *const *texts, size_t n,
                       reg_embed_kind_t kind, float *out, char *msg, size_t msg_size)
{
    (void)kind;
    (void)msg;
    (void)msg_size;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = 1469598103934665603ULL;
        for (const char *p = texts[i]; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        uint64_t rng = h | 1;
        float *v = out + i * self->dim;
        double norm = 0;
        for (size_t d = 0; d < self->dim; d++) {
            v[d] = (float)((double)(rng_next(&rng) >> 11) / 9007199254740992.0 - 0.5);
            norm += (double)v[d] * (double)v[d];
        }
        for (size_t d = 0; d < self->dim; d++)
            v[d] = (float)((double)v[d] / sqrt(norm));
    }
    return REG_OK;
}

static reg_embedder_t *synth_sentence_embedder(size_t dim)
{
    reg_embedder_t *e = calloc(1, sizeof *e);
    if (e == NULL) die("out of memory");
    *e = (reg_embedder_t){.name = "model:synthetic",
                          .cache_provider = "synthetic",
                          .dim = dim,
                          .concurrent = true,
                          .sentence_model = true,
                          .embed = synth_embed};
    return e;
}

/* Query embedding latency of the model, one text per call on this thread. */
static double model_query_section(reg_embedder_t *model, char **qsrc, size_t nq_src, double *lat)
{
    size_t dim = reg_embedder_dim(model);
    float *v = malloc(dim * sizeof *v);
    char msg[512];
    if (v == NULL) die("out of memory");
    for (size_t q = 0; q < MODEL_QUERIES + 10; q++) {
        double q0 = now_ms();
        /* What reg_registry_embed_query does for a sentence model. */
        char *text = reg_query_embed_text(qsrc[q % nq_src]);
        const char *t[1] = {text};
        if (text == NULL ||
            reg_embedder_embed(model, t, 1, REG_EMBED_QUERY, v, msg, sizeof msg) < 0)
            die("model query embedding failed: %s", msg);
        free(text);
        if (q >= 10) lat[q - 10] = now_ms() - q0; /* the first calls warm caches up */
    }
    char what[128];
    snprintf(what, sizeof what, "%s query embedding (1 thread)", reg_embedder_name(model));
    double p50 = report(what, 0, lat, MODEL_QUERIES);
    free(v);
    return p50;
}

/* The registry's search_tools path for a sentence model at size s->n: tools fed server by
 * server, indexed with synthetic vectors, searched with a given query vector. */
static void model_registry_section(const synth_t *s, size_t dim, double embed_p50, char **qsrc,
                                   size_t nq_src, size_t nqueries, double *lat, bool parts)
{
    reg_registry_t *reg;
    reg_registry_opts_t ro;
    reg_registry_opts_default(&ro);
    ro.parts = parts;
    if (reg_registry_new(synth_sentence_embedder(dim), &ro, &reg) < 0) die("setup failed");
    size_t *order = malloc(s->n * sizeof *order);
    if (order == NULL) die("out of memory");
    for (size_t i = 0; i < s->n; i++)
        order[i] = i;
    sort_base = s;
    qsort(order, s->n, sizeof *order, cmp_by_server);
    char msg[512];
    for (size_t i = 0; i < s->n;) {
        size_t j = i;
        cJSON *arr = cJSON_CreateArray();
        if (arr == NULL) die("out of memory");
        for (; j < s->n && strcmp(s->server[order[j]], s->server[order[i]]) == 0; j++) {
            cJSON *t = cJSON_CreateObject();
            if (t == NULL || !cJSON_AddItemToArray(arr, t) ||
                !cJSON_AddStringToObject(t, "name", s->name[order[j]]) ||
                !cJSON_AddStringToObject(t, "description", s->desc[order[j]]))
                die("out of memory");
        }
        if (reg_registry_set_server_tools(reg, s->server[order[i]], arr, msg, sizeof msg) < 0)
            die("%s", msg);
        cJSON_Delete(arr);
        i = j;
    }
    if (reg_registry_index_all(reg, msg, sizeof msg) < 0) die("%s", msg);
    reg_registry_stats_t st;
    reg_registry_stats(reg, &st);
    printf("%-8zu registry, sentence model (synthetic %zu-d vectors): memory (vectors + bm25) "
           "%.1f MiB\n",
           s->n, dim, (double)st.memory_bytes / 1048576.0);
    float *qv = malloc(dim * sizeof *qv);
    if (qv == NULL) die("out of memory");
    reg_result_t res[TOPK];
    uint64_t rng = 7;
    for (size_t q = 0; q < nqueries; q++) {
        for (size_t d = 0; d < dim; d++)
            qv[d] = (float)((double)(rng_next(&rng) >> 11) / 9007199254740992.0 - 0.5);
        double q0 = now_ms();
        if (reg_registry_search(reg, qsrc[q % nq_src], qv, TOPK, NULL, res, msg, sizeof msg) < 0)
            die("%s", msg);
        lat[q] = now_ms() - q0;
    }
    double p50 = report("registry hybrid search, model qvec", s->n, lat, nqueries);
    printf("%-8zu search_tools with the model: query embedding %.2f + search %.3f = %.2f ms "
           "(p50s; the search is %.1f%% of it)\n",
           s->n, embed_p50, p50, embed_p50 + p50, 100.0 * p50 / (embed_p50 + p50));
    free(qv);
    free(order);
    reg_registry_free(reg);
}

/* ---- indexing with the model ---------------------------------------------------------- */

typedef struct index_run {
    uv_loop_t *loop;
    reg_registry_t *reg;
    size_t batches, failed;
} index_run_t;

typedef struct index_job {
    uv_work_t work;
    index_run_t *run;
    reg_batch_t *b;
    int rc;
    char msg[256];
} index_job_t;

static void index_kick(index_run_t *run);

static void index_work(uv_work_t *w)
{
    index_job_t *j = w->data;
    j->rc = reg_batch_embed(j->b, j->msg, sizeof j->msg);
}

static void index_after(uv_work_t *w, int status)
{
    index_job_t *j = w->data;
    index_run_t *run = j->run;
    if (status != 0 || j->rc < 0) {
        fprintf(stderr, "bench_search: a batch failed: %s\n", j->msg);
        run->failed++;
    }
    (void)reg_registry_apply_batch(run->reg, j->b);
    free(j);
    run->batches++;
    if (run->failed == 0) index_kick(run);
}

/* Hands out batches until the registry says enough are in flight or none is pending: what
 * the server's wiring does with opts.batches_in_flight. */
static void index_kick(index_run_t *run)
{
    for (;;) {
        reg_batch_t *b = NULL;
        if (reg_registry_next_batch(run->reg, 0, &b) < 0 || b == NULL) return;
        index_job_t *j = calloc(1, sizeof *j);
        if (j == NULL) die("out of memory");
        j->run = run;
        j->b = b;
        j->work.data = j;
        if (uv_queue_work(run->loop, &j->work, index_work, index_after) != 0)
            die("uv_queue_work failed");
    }
}

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void model_index_section(const reg_embedder_spec_t *spec, const reg_catalog_t *cat,
                                const words_t *vocab, size_t n, size_t in_flight, int blas,
                                bool parts)
{
    reg_embedder_t *e;
    char note[1024], msg[1024];
    if (reg_embedder_open(spec, &e, note, sizeof note, msg, sizeof msg) < 0) die("%s", msg);
    if (!e->sentence_model) {
        reg_embedder_free(e);
        return;
    }
    reg_model_set_blas_threads(blas);
    reg_registry_opts_t ro;
    reg_registry_opts_default(&ro);
    ro.batches_in_flight = in_flight;
    ro.parts = parts;
    reg_registry_t *reg;
    if (reg_registry_new(e, &ro, &reg) < 0) die("setup failed");
    size_t n0 = reg_catalog_count(cat);
    uint64_t rng = 0x5DEECE66DULL ^ n;
    /* Copy c of every real server is one server: the real tools, renamed and perturbed. */
    for (size_t c = 0; c * n0 < n; c++) {
        cJSON *by_server = cJSON_CreateObject();
        if (by_server == NULL) die("out of memory");
        for (size_t i = 0; i < n0 && c * n0 + i < n; i++) {
            const reg_tool_t *t = reg_catalog_at(cat, i);
            char name[512], server[512];
            snprintf(server, sizeof server, "%s-%zu", t->server, c);
            snprintf(name, sizeof name, "%s_%zu", t->name, c);
            cJSON *arr = cJSON_GetObjectItemCaseSensitive(by_server, server);
            if (arr == NULL) arr = cJSON_AddArrayToObject(by_server, server);
            char *desc = c == 0 ? strdup(t->description) : perturb(t->description, vocab, &rng);
            cJSON *o = cJSON_CreateObject();
            cJSON *schema = cJSON_Duplicate(t->input_schema, 1);
            if (arr == NULL || desc == NULL || o == NULL || schema == NULL ||
                !cJSON_AddItemToArray(arr, o) || !cJSON_AddStringToObject(o, "name", name) ||
                !cJSON_AddStringToObject(o, "description", desc) ||
                !cJSON_AddItemToObject(o, "inputSchema", schema))
                die("out of memory");
            free(desc);
        }
        const cJSON *arr;
        cJSON_ArrayForEach(arr, by_server)
        {
            if (reg_registry_set_server_tools(reg, arr->string, arr, msg, sizeof msg) < 0)
                die("%s", msg);
        }
        cJSON_Delete(by_server);
    }
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) die("uv_loop_init failed");
    index_run_t run = {.loop = &loop, .reg = reg};
    double w0 = now_ms(), c0 = cpu_ms();
    index_kick(&run);
    if (uv_run(&loop, UV_RUN_DEFAULT) != 0) die("uv_run failed");
    double wall = now_ms() - w0, cpu = cpu_ms() - c0;
    reg_registry_stats_t st;
    reg_registry_stats(reg, &st);
    if (run.failed > 0 || st.pending > 0) die("indexing left %zu tools pending", st.pending);
    printf("%-8zu model indexing (%s, cold): %zu batches, %zu in flight x %d BLAS threads: "
           "%.1f s wall, %.1f s CPU, %.1f tools/s (%.1f tools per CPU-s)\n",
           st.indexed, st.embedder, run.batches, in_flight, blas, wall / 1e3, cpu / 1e3,
           (double)st.indexed / (wall / 1e3), (double)st.indexed / (cpu / 1e3));
    (void)uv_loop_close(&loop);
    reg_registry_free(reg);
}

static char **load_queries(const char *path, size_t *n)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) die("cannot open %s", path);
    char line[65536];
    char **q = NULL;
    size_t cap = 0;
    *n = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "query");
        if (cJSON_IsString(t)) {
            if (ptc_array_reserve(&q, &cap, *n + 1, sizeof *q, SIZE_MAX) < 0) die("out of memory");
            q[(*n)++] = strdup(t->valuestring);
        }
        cJSON_Delete(o);
    }
    fclose(f);
    if (*n == 0) die("%s holds no queries", path);
    return q;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows when piped to a log */
    if (argc < 2)
        die("usage: bench_search CATALOG.json [QUERIES.jsonl] [--sizes A,B,C] "
            "[--queries N] [--lexical-dim N] [--dense-dim N]");
    size_t sizes[MAX_SIZES] = {1000, 10000, 100000}, nsizes = 3, nqueries = 2000, dense_dim = 384;
    size_t index_sizes[MAX_SIZES], nindex = 0, index_batches = 0;
    int blas_threads = 1;
    bool parts = false;
    const char *qpath = NULL;
    reg_lexical_opts_t lo;
    reg_lexical_opts_default(&lo);
    reg_index_storage_t lstore = REG_INDEX_Q8;
    reg_embedder_spec_t spec = {.kind = "auto"};
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            nsizes = 0;
            for (char *p = argv[++i]; *p && nsizes < MAX_SIZES;) {
                char *end;
                sizes[nsizes++] = strtoul(p, &end, 10);
                p = *end == ',' ? end + 1 : end;
                if (end == p && *p) die("bad --sizes");
            }
        } else if (strcmp(argv[i], "--index-tools") == 0 && i + 1 < argc) {
            for (char *p = argv[++i]; *p && nindex < MAX_SIZES;) {
                char *end;
                index_sizes[nindex++] = strtoul(p, &end, 10);
                p = *end == ',' ? end + 1 : end;
                if (end == p && *p) die("bad --index-tools");
            }
        } else if (strcmp(argv[i], "--index-batches") == 0 && i + 1 < argc) {
            index_batches = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--parts") == 0) {
            parts = true;
        } else if (strcmp(argv[i], "--blas-threads") == 0 && i + 1 < argc) {
            blas_threads = (int)strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--queries") == 0 && i + 1 < argc) {
            nqueries = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--lexical-dim") == 0 && i + 1 < argc) {
            lo.dim = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--lexical-storage") == 0 && i + 1 < argc) {
            lstore = strcmp(argv[++i], "f32") == 0 ? REG_INDEX_F32 : REG_INDEX_Q8;
        } else if (strcmp(argv[i], "--embedder") == 0 && i + 1 < argc) {
            spec.kind = argv[++i];
        } else if (strcmp(argv[i], "--embed-model-dir") == 0 && i + 1 < argc) {
            spec.model_dir = argv[++i];
        } else if (strcmp(argv[i], "--dense-dim") == 0 && i + 1 < argc) {
            dense_dim = strtoul(argv[++i], NULL, 10);
        } else if (argv[i][0] != '-' && qpath == NULL) {
            qpath = argv[i];
        } else {
            die("unknown argument %s", argv[i]);
        }
    }
    if (nqueries == 0) die("--queries must be positive");

    reg_catalog_t *cat;
    char msg[1024];
    if (reg_catalog_new(&cat) < 0 ||
        reg_catalog_load_file(cat, argv[1], NULL, NULL, msg, sizeof msg) < 0)
        die("%s", msg);
    size_t n0 = reg_catalog_count(cat);
    if (n0 == 0) die("empty catalog");
    char **base = calloc(n0, sizeof *base);
    words_t vocab = {0};
    if (base == NULL) die("out of memory");
    for (size_t i = 0; i < n0; i++) {
        base[i] = reg_tool_index_text(reg_catalog_at(cat, i));
        if (base[i] == NULL) die("out of memory");
        for (const char *p = base[i]; *p;) {
            size_t sp = strspn(p, " ");
            p += sp;
            size_t n = strcspn(p, " ");
            if (n > 2 && n < 20 && !ends_sentence(p, n)) words_push(&vocab, p, n);
            p += n;
        }
    }
    /* Queries: the dev queries if given, else tool descriptions (cycled either way). */
    size_t nq_src;
    char **qsrc;
    if (qpath != NULL) {
        qsrc = load_queries(qpath, &nq_src);
    } else {
        nq_src = n0;
        qsrc = calloc(n0, sizeof *qsrc);
        if (qsrc == NULL) die("out of memory");
        for (size_t i = 0; i < n0; i++)
            qsrc[i] = strdup(reg_catalog_at(cat, i)->description);
    }
    double *lat = malloc((nqueries > MODEL_QUERIES ? nqueries : MODEL_QUERIES) * sizeof *lat);
    if (lat == NULL) die("out of memory");

    /* The model, as the binary's --embedder opens it. */
    reg_embedder_t *model = NULL;
    if (strcmp(spec.kind, "lexical") != 0) {
        char note[1024];
        if (reg_embedder_open(&spec, &model, note, sizeof note, msg, sizeof msg) < 0)
            die("%s", msg);
        if (note[0]) printf("%s\n", note);
        if (!model->sentence_model) {
            reg_embedder_free(model);
            model = NULL;
        }
    }
    printf("embedder: %s\n", model ? reg_embedder_name(model) : "lexical (no model sections)");
    double embed_p50 = 0;
    if (model != NULL) {
        embed_p50 = model_query_section(model, qsrc, nq_src, lat);
        /* The vectors' size for the search sections is the model's. */
        dense_dim = reg_embedder_dim(model);
    }

    if (model != NULL && nindex > 0) {
        if (index_batches == 0) {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            index_batches = cores > 0 ? (size_t)cores : 1;
        }
        for (size_t i = 0; i < nindex; i++)
            model_index_section(&spec, cat, &vocab, index_sizes[i], index_batches, blas_threads,
                                parts);
    }

    printf("lexical dim %zu (%s); dense dim %zu; %zu queries per measurement; top-%d\n", lo.dim,
           lstore == REG_INDEX_Q8 ? "q8" : "f32", dense_dim, nqueries, TOPK);
    for (size_t si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        synth_t s;
        synth_build(&s, cat, base, &vocab, n);

        /* Lexical: fit, embed, index. */
        reg_embedder_t *lex;
        reg_index_t *ix;
        if (reg_lexical_new(&lo, &lex) < 0 || reg_index_new(lo.dim, lstore, &ix) < 0)
            die("setup failed");
        double t0 = now_ms();
        if (reg_embedder_fit(lex, (const char *const *)s.text, n) < 0) die("fit failed");
        double t1 = now_ms();
        float *v = malloc(lo.dim * sizeof *v);
        if (v == NULL) die("out of memory");
        for (size_t i = 0; i < n; i++) {
            const char *t[1] = {s.text[i]};
            if (reg_embedder_embed(lex, t, 1, REG_EMBED_DOCUMENT, v, msg, sizeof msg) < 0)
                die("%s", msg);
            if (reg_index_add(ix, s.id[i], s.server[i], NULL, v) < 0) die("index add failed");
        }
        double t2 = now_ms();
        printf("%-8zu lexical index: fit %.0f ms, embed+add %.0f ms, memory %.1f MiB\n", n, t1 - t0,
               t2 - t1, (double)reg_index_memory(ix) / 1048576.0);

        reg_bm25_t *bm;
        if (reg_bm25_new(1.2f, 0.75f, &bm) < 0) die("out of memory");
        t0 = now_ms();
        for (size_t i = 0; i < n; i++)
            if (reg_bm25_add(bm, s.id[i], s.server[i], NULL, s.text[i]) < 0) die("bm25 add failed");
        t1 = now_ms();
        printf("%-8zu bm25 index: build %.0f ms, memory %.1f MiB\n", n, t1 - t0,
               (double)reg_bm25_memory(bm) / 1048576.0);

        reg_hit_t a[CAND], b[CAND], out[TOPK];
        for (size_t q = 0; q < nqueries; q++) {
            const char *t[1] = {qsrc[q % nq_src]};
            double q0 = now_ms();
            if (reg_embedder_embed(lex, t, 1, REG_EMBED_QUERY, v, msg, sizeof msg) < 0 ||
                reg_index_search(ix, v, TOPK, NULL, out) < 0)
                die("lexical search failed");
            lat[q] = now_ms() - q0;
        }
        report("lexical (embed query + search)", n, lat, nqueries);
        for (size_t q = 0; q < nqueries; q++) {
            double q0 = now_ms();
            if (reg_bm25_search(bm, qsrc[q % nq_src], TOPK, NULL, out) < 0) die("bm25 failed");
            lat[q] = now_ms() - q0;
        }
        report("bm25", n, lat, nqueries);
        for (size_t q = 0; q < nqueries; q++) {
            const char *t[1] = {qsrc[q % nq_src]};
            double q0 = now_ms();
            if (reg_embedder_embed(lex, t, 1, REG_EMBED_QUERY, v, msg, sizeof msg) < 0)
                die("embed failed");
            int na = reg_index_search(ix, v, CAND, NULL, a);
            int nb = reg_bm25_search(bm, t[0], CAND, NULL, b);
            if (na < 0 || nb < 0) die("search failed");
            reg_ranked_t l[2] = {{a, (size_t)na, 1.0f, 0, false}, {b, (size_t)nb, 1.0f, 0, false}};
            if (reg_fuse(l, 2, REG_FUSE_MINMAX, 60.0f, TOPK, out) < 0) die("fuse failed");
            lat[q] = now_ms() - q0;
        }
        report("hybrid lexical+bm25", n, lat, nqueries);
        reg_filter_t f;
        reg_filter_default(&f);
        f.server = s.server[n / 2];
        for (size_t q = 0; q < nqueries; q++) {
            const char *t[1] = {qsrc[q % nq_src]};
            double q0 = now_ms();
            if (reg_embedder_embed(lex, t, 1, REG_EMBED_QUERY, v, msg, sizeof msg) < 0 ||
                reg_index_search(ix, v, TOPK, &f, out) < 0)
                die("lexical search failed");
            lat[q] = now_ms() - q0;
        }
        report("lexical, server filter", n, lat, nqueries);
        free(v);
        reg_index_free(ix);
        reg_bm25_free(bm);
        reg_embedder_free(lex);

        /* The facade, fed server by server as downstream tools/list answers arrive. */
        registry_section(&s, &lo, lstore, qsrc, nq_src, nqueries, lat);

        if (model != NULL)
            model_registry_section(&s, dense_dim, embed_p50, qsrc, nq_src, nqueries, lat, parts);

        /* Dense vectors of the model's size: random unit rows, random queries. */
        for (int st = 0; st < 2; st++) {
            reg_index_storage_t storage = st == 0 ? REG_INDEX_F32 : REG_INDEX_Q8;
            const char *sname = st == 0 ? "f32" : "q8";
            reg_index_t *dx;
            if (reg_index_new(dense_dim, storage, &dx) < 0) die("bad --dense-dim");
            float *dv = malloc(dense_dim * sizeof *dv);
            if (dv == NULL) die("out of memory");
            uint64_t rng = 42;
            t0 = now_ms();
            for (size_t i = 0; i < n; i++) {
                for (size_t d = 0; d < dense_dim; d++)
                    dv[d] = (float)((double)(rng_next(&rng) >> 11) / 9007199254740992.0 - 0.5);
                if (reg_index_add(dx, s.id[i], s.server[i], NULL, dv) < 0) die("index add failed");
            }
            t1 = now_ms();
            printf("%-8zu dense-%zu %s index: add %.0f ms, memory %.1f MiB\n", n, dense_dim, sname,
                   t1 - t0, (double)reg_index_memory(dx) / 1048576.0);
            for (size_t q = 0; q < nqueries; q++) {
                for (size_t d = 0; d < dense_dim; d++)
                    dv[d] = (float)((double)(rng_next(&rng) >> 11) / 9007199254740992.0 - 0.5);
                double q0 = now_ms();
                if (reg_index_search(dx, dv, TOPK, NULL, out) < 0) die("dense search failed");
                lat[q] = now_ms() - q0;
            }
            char what[64];
            snprintf(what, sizeof what, "dense-%zu %s search only", dense_dim, sname);
            report(what, n, lat, nqueries);
            free(dv);
            reg_index_free(dx);
        }
        synth_free(&s);
    }
    for (size_t i = 0; i < n0; i++)
        free(base[i]);
    free(base);
    for (size_t i = 0; i < nq_src; i++)
        free(qsrc[i]);
    free(qsrc);
    for (size_t i = 0; i < vocab.n; i++)
        free(vocab.w[i]);
    free(vocab.w);
    free(lat);
    reg_embedder_free(model);
    reg_catalog_free(cat);
    return 0;
}
