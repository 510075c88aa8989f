/* service.c - the registry behind an event loop: indexing batches and query embeddings run on
 * libuv's thread pool, the registry itself is only touched on the loop (its owner thread). */
#include "registry.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

struct reg_service {
    uv_loop_t *loop;
    reg_registry_t *reg;
    reg_cache_t *cache;
    size_t dim;
    size_t query_jobs;
    bool stopping;
    bool batch_failed; /* the last batch failed: no new one until the registry changes */
    size_t indexed_logged;
    uint64_t progress_logged_ms;
    size_t queries_in_flight;
    reg_log_fn log;
    void *log_data;
    void (*on_change)(void *data);
    void *on_change_data;
    void (*on_indexed)(void *data);
    void *on_indexed_data;
};

/* One query being embedded on a worker. */
struct reg_query {
    uv_work_t work;
    reg_service_t *svc;
    reg_query_done_fn done; /* NULL once cancelled: the worker's vector is dropped */
    void *done_data;
    char *query;
    char *server;
    char *category;
    size_t top_k;
    float *vec;
    int rc;
    char msg[256];
};

/* One batch being embedded on a worker. */
typedef struct index_job {
    uv_work_t work;
    reg_service_t *svc;
    reg_batch_t *batch;
    int rc;
    char msg[256];
} index_job_t;

static void say(const reg_service_t *svc, reg_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(const reg_service_t *svc, reg_log_level_t level, const char *fmt, ...)
{
    if (svc->log == NULL) return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    svc->log(svc->log_data, level, line);
}

void reg_service_opts_default(reg_service_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->cache = true;
    reg_registry_opts_default(&o->registry);
}

/* --- indexing ------------------------------------------------------------------------------ */

static void kick_indexing(reg_service_t *svc);

static void index_work(uv_work_t *w)
{
    index_job_t *j = w->data;
    j->rc = reg_batch_embed(j->batch, j->msg, sizeof j->msg);
}

static void index_done(uv_work_t *w, int status)
{
    index_job_t *j = w->data;
    reg_service_t *svc = j->svc;
    /* A batch stopped by reg_registry_cancel at shutdown is no failure: it is dropped. */
    bool failed = (status != 0 || j->rc < 0) && j->rc != REG_ECANCELED && !svc->stopping;
    if (failed)
        say(svc, REG_LOG_WARNING, "search index: a batch failed (%s); retrying later",
            status != 0 ? uv_strerror(status) : j->msg);
    reg_registry_apply_batch(svc->reg, j->batch);
    free(j);
    if (failed) svc->batch_failed = true;
    reg_registry_stats_t st;
    reg_registry_stats(svc->reg, &st);
    /* A large catalog takes a while: say how far it got, every few seconds. */
    if (st.pending > 0 && uv_now(svc->loop) - svc->progress_logged_ms >= REG_SERVICE_PROGRESS_MS) {
        svc->progress_logged_ms = uv_now(svc->loop);
        say(svc, REG_LOG_INFO, "search index: %zu of %zu tools indexed with %s", st.indexed,
            st.tools, st.embedder);
    }
    if (st.pending == 0 && st.indexed != svc->indexed_logged) {
        svc->indexed_logged = st.indexed;
        say(svc, REG_LOG_INFO, "search index: %zu tools indexed with %s", st.indexed, st.embedder);
    }
    /* A failed batch is not retried at once, so a broken provider cannot spin: the next
     * change of the registry (reg_service_changed) tries again. */
    if (!svc->batch_failed) kick_indexing(svc);
    if (svc->on_indexed != NULL) svc->on_indexed(svc->on_indexed_data);
}

/* Hands out batches until the registry has enough in flight (one per core) or none is pending
 * (REG_EBUSY and REG_ECANCELED end the loop too). */
static void kick_indexing(reg_service_t *svc)
{
    while (!svc->stopping && !svc->batch_failed) {
        reg_batch_t *b = NULL;
        if (reg_registry_next_batch(svc->reg, 0, &b) < 0 || b == NULL) return;
        index_job_t *j = calloc(1, sizeof *j);
        if (j == NULL) {
            reg_registry_apply_batch(svc->reg, b);
            say(svc, REG_LOG_ERROR, "search index: out of memory");
            return;
        }
        j->svc = svc;
        j->batch = b;
        j->work.data = j;
        int rc = uv_queue_work(svc->loop, &j->work, index_work, index_done);
        if (rc < 0) {
            reg_registry_apply_batch(svc->reg, b);
            free(j);
            say(svc, REG_LOG_ERROR, "search index: cannot queue work: %s", uv_strerror(rc));
            return;
        }
    }
}

void reg_service_changed(reg_service_t *svc)
{
    svc->batch_failed = false;
    kick_indexing(svc);
    if (svc->on_change != NULL) svc->on_change(svc->on_change_data);
}

void reg_service_on_change(reg_service_t *svc, void (*cb)(void *data), void *data)
{
    svc->on_change = cb;
    svc->on_change_data = data;
}

void reg_service_on_indexed(reg_service_t *svc, void (*cb)(void *data), void *data)
{
    svc->on_indexed = cb;
    svc->on_indexed_data = data;
}

void reg_service_stop(reg_service_t *svc)
{
    if (svc == NULL) return;
    svc->stopping = true;
    /* Batches being embedded return within one encoder layer, so shutdown never waits for a
     * whole batch (seconds under load). */
    reg_registry_cancel(svc->reg);
}

/* --- queries ------------------------------------------------------------------------------- */

static void query_free(reg_query_t *q)
{
    free(q->query);
    free(q->server);
    free(q->category);
    free(q->vec);
    free(q);
}

/* Ranks on the loop with the query's vector (NULL: the registry embeds it inline when that
 * cannot block, else BM25 answers) and hands the hits to done. */
static void rank(reg_service_t *svc, const char *query, const float *vec, size_t top_k,
                 const char *server, const char *category, reg_query_done_fn done, void *data)
{
    reg_result_t res[REG_SERVICE_TOPK_MAX];
    reg_filter_t f;
    reg_filter_default(&f);
    f.server = server;
    f.category = category;
    char msg[256] = "";
    reg_search_info_t info;
    int n = reg_registry_search_info(svc->reg, query, vec, top_k, &f, res, &info, msg, sizeof msg);
    if (n < 0)
        done(data, n, NULL, 0, &info, &f, msg[0] ? msg : reg_strerror(n));
    else
        done(data, 0, res, (size_t)n, &info, &f, NULL);
}

static void query_work(uv_work_t *w)
{
    reg_query_t *q = w->data;
    q->rc = reg_registry_embed_query(q->svc->reg, q->query, q->vec, q->msg, sizeof q->msg);
}

static void query_done(uv_work_t *w, int status)
{
    reg_query_t *q = w->data;
    reg_service_t *svc = q->svc;
    svc->queries_in_flight--;
    if (q->done != NULL) {
        bool ok = status == 0 && q->rc == 0;
        if (!ok)
            say(svc, REG_LOG_WARNING,
                "search: embedding the query failed (%s); ranking by keywords only",
                status != 0 ? uv_strerror(status) : q->msg);
        rank(svc, q->query, ok ? q->vec : NULL, q->top_k, q->server, q->category, q->done,
             q->done_data);
    }
    query_free(q);
}

/* A query holding copies of its text and filters and room for its vector; NULL on ENOMEM. */
static reg_query_t *query_new(reg_service_t *svc, const char *query, size_t top_k,
                              const char *server, const char *category)
{
    reg_query_t *q = calloc(1, sizeof *q);
    if (q == NULL || (q->query = strdup(query)) == NULL ||
        (server && (q->server = strdup(server)) == NULL) ||
        (category && (q->category = strdup(category)) == NULL) ||
        (q->vec = malloc((svc->dim > 0 ? svc->dim : 1) * sizeof *q->vec)) == NULL) {
        if (q) query_free(q);
        return NULL;
    }
    q->svc = svc;
    q->top_k = top_k;
    q->work.data = q;
    return q;
}

int reg_service_query(reg_service_t *svc, const char *query, size_t top_k, const char *server,
                      const char *category, reg_query_done_fn done, void *data,
                      reg_query_t **handle)
{
    *handle = NULL;
    if (query == NULL || done == NULL || top_k < 1 || top_k > REG_SERVICE_TOPK_MAX)
        return REG_EINVAL;
    if (!reg_registry_query_blocking(svc->reg) || svc->queries_in_flight >= svc->query_jobs) {
        rank(svc, query, NULL, top_k, server, category, done, data);
        return REG_OK;
    }
    reg_query_t *q = query_new(svc, query, top_k, server, category);
    if (q == NULL) return REG_ENOMEM;
    q->done = done;
    q->done_data = data;
    if (uv_queue_work(svc->loop, &q->work, query_work, query_done) < 0) {
        query_free(q);
        rank(svc, query, NULL, top_k, server, category, done, data);
        return REG_OK;
    }
    svc->queries_in_flight++;
    *handle = q;
    return REG_OK;
}

void reg_service_query_cancel(reg_query_t *q)
{
    if (q == NULL) return;
    q->done = NULL; /* the worker finishes; its vector is dropped in query_done */
    uv_cancel((uv_req_t *)&q->work);
}

/* --- set-up -------------------------------------------------------------------------------- */

/* The cache is an optimisation: without one (no writable home), everything still works. */
static int open_cache(reg_service_t *svc, const reg_service_opts_t *o, reg_embedder_t **emb)
{
    char msg[512] = "";
    if (reg_cache_open(o->cache_dir, 0, &svc->cache, msg, sizeof msg) < 0) {
        say(svc, REG_LOG_WARNING, "embedding cache unavailable: %s", msg);
        svc->cache = NULL;
        return REG_OK;
    }
    if (reg_cached_embedder_new(*emb, svc->cache, emb) < 0)
        return REG_ENOMEM; /* *emb is NULL: the wrapper freed it */
    /* At start-up, before the loop serves anyone: one more walk of the folder that
     * reg_cache_open has just walked. */
    long pruned = reg_cache_prune(svc->cache, (int64_t)time(NULL), REG_CACHE_PRUNE_AGE_S);
    if (pruned > 0)
        say(svc, REG_LOG_INFO, "removed %ld embedding cache entries unused for %ld days", pruned,
            REG_CACHE_PRUNE_AGE_S / (24L * 60 * 60));
    return REG_OK;
}

/* The embedder spec asks for; a remote provider configured but unreachable falls back to the
 * lexical embedder (search still works, and says so). */
static int open_embedder(reg_service_t *svc, const reg_embedder_spec_t *spec, reg_embedder_t **emb,
                         char *msg, size_t msg_size)
{
    char note[512] = "";
    int rc = reg_embedder_open(spec, emb, note, sizeof note, msg, msg_size);
    if (rc == REG_EEMBED && spec->kind != NULL && strcmp(spec->kind, "remote") == 0) {
        say(svc, REG_LOG_WARNING,
            "--embedder remote: %s; falling back to the built-in lexical embedder", msg);
        reg_embedder_spec_t lexical = *spec;
        lexical.kind = "lexical";
        rc = reg_embedder_open(&lexical, emb, note, sizeof note, msg, msg_size);
    }
    if (rc == REG_OK && note[0]) say(svc, REG_LOG_WARNING, "%s", note);
    return rc;
}

int reg_service_new(struct uv_loop_s *loop, const reg_embedder_spec_t *spec,
                    const reg_service_opts_t *opts, reg_service_t **out, char *msg, size_t msg_size)
{
    *out = NULL;
    if (msg_size > 0) msg[0] = '\0';
    reg_service_opts_t o;
    if (opts != NULL)
        o = *opts;
    else
        reg_service_opts_default(&o);
    reg_service_t *svc = calloc(1, sizeof *svc);
    if (svc == NULL) {
        snprintf(msg, msg_size, "out of memory");
        return REG_ENOMEM;
    }
    svc->loop = loop;
    svc->log = o.log;
    svc->log_data = o.log_data;
    svc->query_jobs = o.query_jobs > 0 ? o.query_jobs : REG_SERVICE_QUERY_JOBS;
    reg_embedder_t *emb = NULL;
    char why[512] = "";
    int rc = spec != NULL ? open_embedder(svc, spec, &emb, why, sizeof why) : REG_OK;
    if (rc < 0)
        snprintf(msg, msg_size, "--embedder %s: %s", spec->kind ? spec->kind : "auto", why);
    else if (emb != NULL && o.cache && (rc = open_cache(svc, &o, &emb)) < 0)
        snprintf(msg, msg_size, "out of memory wrapping the embedder");
    if (rc < 0) {
        reg_service_free(svc);
        return rc;
    }
    /* A blocking embedder (the model) indexes on every core: one batch per core, each with one
     * OpenBLAS thread (more BLAS threads per batch only spin against each other). Two workers
     * of libuv's pool stay free for queries and file work. */
    size_t jobs = o.index_jobs;
    if (jobs == 0) {
        unsigned cores = uv_available_parallelism();
        jobs = cores > 1 ? (cores < REG_SERVICE_INDEX_JOBS ? cores : REG_SERVICE_INDEX_JOBS) : 1;
    }
    o.registry.batches_in_flight = jobs;
    if (jobs > 1) reg_model_set_blas_threads(1);
    if ((rc = reg_registry_new(emb, &o.registry, &svc->reg)) < 0) {
        snprintf(msg, msg_size, "%s", reg_strerror(rc));
        reg_service_free(svc);
        return rc;
    }
    if (o.tools_file != NULL &&
        (rc = reg_registry_load_file(svc->reg, o.tools_file, why, sizeof why)) < 0) {
        snprintf(msg, msg_size, "--tools-file %s: %s", o.tools_file, why);
        reg_service_free(svc);
        return rc;
    }
    reg_registry_stats_t st;
    reg_registry_stats(svc->reg, &st);
    svc->dim = st.dim;
    say(svc, REG_LOG_INFO, "search_tools: embedder %s, %zu tools from --tools-file", st.embedder,
        st.tools);
    kick_indexing(svc);
    *out = svc;
    return REG_OK;
}

reg_registry_t *reg_service_registry(reg_service_t *svc)
{
    return svc->reg;
}

void reg_service_free(reg_service_t *svc)
{
    if (svc == NULL) return;
    reg_registry_free(svc->reg);
    reg_cache_close(svc->cache);
    free(svc);
}
