/* tool_search.c - the search_tools tool: the registry ranks tools by meaning; embedding (of the
 * catalog and of each query) runs on the libuv thread pool, never on the loop. */
#include "tools.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SEARCH_DEFAULT_TOP_K   5
#define SEARCH_MAX_TOP_K       50
#define SEARCH_PROGRESS_LOG_MS 3000
/* Queries embedded on the thread pool at once; past this, BM25 alone answers (the pool also
 * serves indexing, file I/O and a remote embedder's DNS lookups). */
#define SEARCH_MAX_QUERY_JOBS 8
/* Indexing batches embedded at once, at most: one per core up to this (libuv's pool has 4
 * workers by default, and queries need some). */
#define SEARCH_MAX_INDEX_JOBS 2

struct ptc_search {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    reg_registry_t *reg;
    reg_cache_t *cache;
    size_t dim;
    /* Indexing: up to the registry's batches_in_flight batches on the thread pool at once. */
    bool stopping;
    bool batch_failed; /* the last batch failed: no new one until the registry changes */
    size_t indexed_logged;
    uint64_t progress_logged_ms;
    unsigned queries_in_flight;
    size_t (*status)(const void *data, char *buf, size_t size);
    cJSON *(*status_json)(const void *data);
    const void *status_data;
    void (*on_change)(void *data);
    void *on_change_data;
    ptc_startup_t *startup; /* the first searches wait for the servers (--startup-wait) */
};

typedef struct query_job {
    uv_work_t work;
    ptc_search_t *s;
    mcp_call_t *call; /* NULL once the call was cancelled and answered */
    /* Or, for a search from code (ptc_search_query): NULL once cancelled. */
    ptc_search_done_cb done;
    void *done_data;
    char *query;
    char *server;
    char *category;
    size_t top_k;
    float *vec;
    int rc;
    char msg[256];
} query_job_t;

static const char input_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"query\":{\"type\":\"string\",\"minLength\":1,\"description\":\"What you want to do, in "
    "plain words (e.g. 'create a ticket in the bug tracker').\"},"
    "\"top_k\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50,\"description\":\"How many "
    "tools to return (default 5).\"},"
    "\"server\":{\"type\":\"string\",\"description\":\"Only tools of this server.\"},"
    "\"category\":{\"type\":\"string\",\"description\":\"Only tools of this category (a "
    "server's tools are in its own name's category unless configured otherwise).\"}},"
    "\"required\":[\"query\"],\"additionalProperties\":false}";

static const char output_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"embedder\":{\"type\":\"string\"},"
    "\"tools\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"string\"},\"server\":{\"type\":\"string\"},\"name\":{\"type\":\"string\"},"
    "\"description\":{\"type\":\"string\"},\"inputSchema\":{\"type\":\"object\"},"
    "\"score\":{\"type\":\"number\"},\"category\":{\"type\":\"string\"}},"
    "\"required\":[\"id\",\"server\",\"name\",\"description\",\"inputSchema\",\"score\","
    "\"category\"]}},"
    "\"servers\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},\"state\":{\"type\":\"string\"},"
    "\"tools\":{\"type\":\"integer\"},\"reason\":{\"type\":\"string\"}},"
    "\"required\":[\"name\",\"state\",\"tools\"]}},"
    "\"index\":{\"type\":\"object\",\"properties\":{"
    "\"tools\":{\"type\":\"integer\"},\"indexed\":{\"type\":\"integer\"},"
    "\"pending\":{\"type\":\"integer\"},\"dense\":{\"type\":\"boolean\"}}}},"
    "\"required\":[\"embedder\",\"tools\"]}";

static const char description[] =
    "Find tools by describing what you want to do. Returns the best matching tools of the "
    "configured MCP servers, ranked by meaning, with their ids, descriptions and input schemas.";

/* --- indexing ------------------------------------------------------------------------------ */

/* One batch being embedded on a worker. */
typedef struct index_job {
    uv_work_t work;
    ptc_search_t *s;
    reg_batch_t *batch;
    int rc;
    char msg[256];
} index_job_t;

static void kick_indexing(ptc_search_t *s);

static void index_work(uv_work_t *w)
{
    index_job_t *j = w->data;
    j->rc = reg_batch_embed(j->batch, j->msg, sizeof j->msg);
}

static void index_done(uv_work_t *w, int status)
{
    index_job_t *j = w->data;
    ptc_search_t *s = j->s;
    /* A batch stopped by reg_registry_cancel at shutdown is no failure: it is dropped. */
    bool failed = (status != 0 || j->rc < 0) && j->rc != REG_ECANCELED && !s->stopping;
    if (failed)
        mcp_log(s->lg, MCP_LOG_WARNING, "search index: a batch failed (%s); retrying later",
                status != 0 ? uv_strerror(status) : j->msg);
    reg_registry_apply_batch(s->reg, j->batch);
    free(j);
    if (failed) s->batch_failed = true;
    reg_registry_stats_t st;
    reg_registry_stats(s->reg, &st);
    /* A large catalog takes a while: say how far it got, every few seconds. */
    if (st.pending > 0 && uv_now(s->loop) - s->progress_logged_ms >= SEARCH_PROGRESS_LOG_MS) {
        s->progress_logged_ms = uv_now(s->loop);
        mcp_log(s->lg, MCP_LOG_INFO, "search index: %zu of %zu tools indexed with %s", st.indexed,
                st.tools, st.embedder);
    }
    if (st.pending == 0 && st.indexed != s->indexed_logged) {
        s->indexed_logged = st.indexed;
        mcp_log(s->lg, MCP_LOG_INFO, "search index: %zu tools indexed with %s", st.indexed,
                st.embedder);
    }
    /* A failed batch is not retried at once, so a broken provider cannot spin: the next
     * change of the registry (ptc_search_changed) tries again. */
    if (!s->batch_failed) kick_indexing(s);
    ptc_startup_poke(s->startup); /* the first searches may wait for this batch */
}

/* Hands out batches until the registry has enough in flight (one per core) or none is pending
 * (REG_EBUSY and REG_ECANCELED end the loop too). */
static void kick_indexing(ptc_search_t *s)
{
    while (!s->stopping && !s->batch_failed) {
        reg_batch_t *b = NULL;
        if (reg_registry_next_batch(s->reg, 0, &b) < 0 || b == NULL) return;
        index_job_t *j = calloc(1, sizeof *j);
        if (j == NULL) {
            reg_registry_apply_batch(s->reg, b);
            mcp_log(s->lg, MCP_LOG_ERROR, "search index: out of memory");
            return;
        }
        j->s = s;
        j->batch = b;
        j->work.data = j;
        int rc = uv_queue_work(s->loop, &j->work, index_work, index_done);
        if (rc < 0) {
            reg_registry_apply_batch(s->reg, b);
            free(j);
            mcp_log(s->lg, MCP_LOG_ERROR, "search index: cannot queue work: %s", uv_strerror(rc));
            return;
        }
    }
}

/* --- queries ------------------------------------------------------------------------------- */

static void job_free(query_job_t *j)
{
    free(j->query);
    free(j->server);
    free(j->category);
    free(j->vec);
    free(j);
}

/* "; 12 of 618 tools indexed so far, the rest found by words only" when the index is partial,
 * "; ranked by words only" when the embedder took no part: a partial answer never looks whole. */
static void index_coverage(const reg_search_info_t *info, char *buf, size_t size)
{
    buf[0] = '\0';
    if (info->pending > 0)
        snprintf(buf, size, "; %zu of %zu tools indexed so far, the rest found by words only",
                 info->indexed, info->tools);
    else if (!info->dense && info->tools > 0)
        snprintf(buf, size, "; ranked by words only");
}

/* structuredContent.index: {"tools", "indexed", "pending", "dense"}. */
static bool add_index_info(cJSON *sc, const reg_search_info_t *info)
{
    cJSON *ix = cJSON_AddObjectToObject(sc, "index");
    return ix != NULL && cJSON_AddNumberToObject(ix, "tools", (double)info->tools) != NULL &&
           cJSON_AddNumberToObject(ix, "indexed", (double)info->indexed) != NULL &&
           cJSON_AddNumberToObject(ix, "pending", (double)info->pending) != NULL &&
           cJSON_AddBoolToObject(ix, "dense", info->dense) != NULL;
}

static void answer(ptc_search_t *s, mcp_call_t *call, const char *query, const float *vec,
                   size_t top_k, const char *server, const char *category)
{
    reg_result_t res[SEARCH_MAX_TOP_K];
    reg_filter_t f;
    reg_filter_default(&f);
    f.server = server;
    f.category = category;
    char msg[256] = "";
    reg_search_info_t info;
    int n = reg_registry_search_info(s->reg, query, vec, top_k, &f, res, &info, msg, sizeof msg);
    if (n < 0) {
        mcp_call_finish_text(call, true, "search failed: %s", msg[0] ? msg : reg_strerror(n));
        return;
    }
    cJSON *sc = ptc_search_results_json(s->reg, res, (size_t)n);
    if (sc != NULL && !add_index_info(sc, &info)) {
        cJSON_Delete(sc);
        sc = NULL;
    }
    if (sc != NULL && s->status_json != NULL) {
        cJSON *servers = s->status_json(s->status_data);
        if (servers != NULL && !cJSON_AddItemToObject(sc, "servers", servers))
            cJSON_Delete(servers);
    }
    char *list = ptc_search_results_text(res, (size_t)n, 0);
    reg_registry_stats_t st;
    reg_registry_stats(s->reg, &st);
    if (sc == NULL || list == NULL) {
        cJSON_Delete(sc);
        free(list);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    char servers[2048] = "";
    if (s->status != NULL) s->status(s->status_data, servers, sizeof servers);
    /* Past the start-up wait, servers still starting are named, not taken for toolless. */
    char starting[800];
    if (ptc_startup_still_starting(s->startup, starting, sizeof starting) > 0) {
        size_t u = strlen(servers);
        snprintf(servers + u, sizeof servers - u, "%s", starting);
    }
    size_t len = strlen(list) + strlen(servers) + 600;
    char *text = malloc(len);
    if (text == NULL) {
        cJSON_Delete(sc);
        free(list);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    char coverage[160];
    index_coverage(&info, coverage, sizeof coverage);
    if (n == 0)
        snprintf(text, len, "No tools match%s%s%s%s (%zu tools known; embedder %s%s).%s%s",
                 server ? " on server " : "", server ? server : "", category ? " in category " : "",
                 category ? category : "", st.tools, st.embedder, coverage,
                 servers[0] ? "\nServers:\n" : "", servers);
    else
        snprintf(text, len, "%s\n[embedder %s; %zu tools known%s]%s%s", list, st.embedder, st.tools,
                 coverage, servers[0] ? "\nServers:\n" : "", servers);
    free(list);
    cJSON *content = mcp_text_content(text);
    free(text);
    mcp_call_finish(call, content, sc, false);
}

static void query_work(uv_work_t *w)
{
    query_job_t *j = w->data;
    j->rc = reg_registry_embed_query(j->s->reg, j->query, j->vec, j->msg, sizeof j->msg);
}

/* Runs a search for code in the sandbox and hands its structuredContent to done. */
static void answer_data(ptc_search_t *s, const char *query, const float *vec, size_t top_k,
                        const char *server, const char *category, ptc_search_done_cb done,
                        void *data)
{
    reg_result_t res[SEARCH_MAX_TOP_K];
    reg_filter_t f;
    reg_filter_default(&f);
    f.server = server;
    f.category = category;
    char msg[256] = "";
    int n = reg_registry_search(s->reg, query, vec, top_k, &f, res, msg, sizeof msg);
    if (n < 0) {
        done(data, MCP_EINVAL, NULL, msg[0] ? msg : reg_strerror(n));
        return;
    }
    cJSON *sc = ptc_search_results_json(s->reg, res, (size_t)n);
    if (sc == NULL) {
        done(data, MCP_ENOMEM, NULL, "out of memory");
        return;
    }
    done(data, 0, sc, NULL);
    cJSON_Delete(sc);
}

static void query_done(uv_work_t *w, int status)
{
    query_job_t *j = w->data;
    ptc_search_t *s = j->s;
    s->queries_in_flight--;
    if (j->done != NULL) {
        bool ok = status == 0 && j->rc == 0;
        answer_data(s, j->query, ok ? j->vec : NULL, j->top_k, j->server, j->category, j->done,
                    j->done_data);
    } else if (j->call != NULL) {
        if (status != 0 || j->rc < 0)
            mcp_log(s->lg, MCP_LOG_WARNING,
                    "search: embedding the query failed (%s); ranking "
                    "by keywords only",
                    status != 0 ? uv_strerror(status) : j->msg);
        bool ok = status == 0 && j->rc == 0;
        answer(s, j->call, j->query, ok ? j->vec : NULL, j->top_k, j->server, j->category);
    }
    job_free(j);
}

static void query_cancelled(mcp_call_t *call, void *data)
{
    query_job_t *j = data;
    j->call = NULL; /* the worker finishes; its answer is dropped */
    uv_cancel((uv_req_t *)&j->work);
    mcp_call_finish_text(call, true, "cancelled");
}

/* A query of blanks only ranks nothing meaningful: both entry points refuse it. */
static bool query_is_blank(const char *query)
{
    for (const char *p = query; *p; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') return false;
    return true;
}

/* A query job holding copies of its text and filters and room for the query's vector; NULL
 * when out of memory. */
static query_job_t *job_new(ptc_search_t *s, const char *query, size_t top_k, const char *server,
                            const char *category)
{
    query_job_t *j = calloc(1, sizeof *j);
    if (j == NULL || (j->query = strdup(query)) == NULL ||
        (server && (j->server = strdup(server)) == NULL) ||
        (category && (j->category = strdup(category)) == NULL) ||
        (j->vec = malloc(s->dim * sizeof *j->vec)) == NULL) {
        if (j) job_free(j);
        return NULL;
    }
    j->s = s;
    j->top_k = top_k;
    j->work.data = j;
    return j;
}

static void handle(mcp_call_t *call, const cJSON *args, void *data)
{
    ptc_search_t *s = data;
    if (ptc_startup_hold(s->startup, call, args, false, handle, s)) return;
    const char *query = cJSON_GetObjectItemCaseSensitive(args, "query")->valuestring;
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(args, "top_k");
    const cJSON *server = cJSON_GetObjectItemCaseSensitive(args, "server");
    const cJSON *category = cJSON_GetObjectItemCaseSensitive(args, "category");
    size_t top_k = k ? (size_t)k->valuedouble : SEARCH_DEFAULT_TOP_K;
    if (query_is_blank(query)) {
        mcp_call_finish_text(call, true,
                             "Invalid arguments: query is empty; describe what you want to do");
        return;
    }
    const char *srv = cJSON_IsString(server) ? server->valuestring : NULL;
    const char *cat = cJSON_IsString(category) ? category->valuestring : NULL;
    if (!reg_registry_query_blocking(s->reg) || s->queries_in_flight >= SEARCH_MAX_QUERY_JOBS) {
        answer(s, call, query, NULL, top_k, srv, cat);
        return;
    }
    query_job_t *j = job_new(s, query, top_k, srv, cat);
    if (j == NULL) {
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    j->call = call;
    if (uv_queue_work(s->loop, &j->work, query_work, query_done) < 0) {
        job_free(j);
        answer(s, call, query, NULL, top_k, srv, cat);
        return;
    }
    s->queries_in_flight++;
    mcp_call_on_cancel(call, query_cancelled, j);
}

int ptc_search_query(ptc_search_t *s, const char *query, size_t top_k, const char *server,
                     const char *category, ptc_search_done_cb done, void *data, void **handle)
{
    *handle = NULL;
    if (top_k < 1 || top_k > SEARCH_MAX_TOP_K || query == NULL) return MCP_EINVAL;
    if (query_is_blank(query)) {
        done(data, MCP_EINVAL, NULL, "the query is empty; describe what you want to do");
        return MCP_OK;
    }
    if (!reg_registry_query_blocking(s->reg) || s->queries_in_flight >= SEARCH_MAX_QUERY_JOBS) {
        answer_data(s, query, NULL, top_k, server, category, done, data);
        return MCP_OK;
    }
    query_job_t *j = job_new(s, query, top_k, server, category);
    if (j == NULL) return MCP_ENOMEM;
    j->done = done;
    j->done_data = data;
    if (uv_queue_work(s->loop, &j->work, query_work, query_done) < 0) {
        job_free(j);
        return MCP_EIO;
    }
    s->queries_in_flight++;
    *handle = j;
    return MCP_OK;
}

void ptc_search_query_cancel(void *handle)
{
    query_job_t *j = handle;
    if (j == NULL) return;
    j->done = NULL; /* the worker finishes; its result is dropped */
    uv_cancel((uv_req_t *)&j->work);
}

/* --- set-up -------------------------------------------------------------------------------- */

int ptc_search_open_embedder(const ptc_options_t *o, reg_embedder_t **out, char *note,
                             size_t note_size, char *msg, size_t msg_size)
{
    reg_embedder_spec_t spec = {
        .kind = o->embedder,
        .model_dir = o->embed_model_dir,
        .url = o->embed_url,
        .remote_model = o->embed_remote_model,
        .key_env = o->embed_key_env,
        .open_remote = reg_embedder_remote_open,
        .open_remote_data = (void *)(uintptr_t)o->ca_file,
    };
    return reg_embedder_open(&spec, out, note, note_size, msg, msg_size);
}

int ptc_search_new(uv_loop_t *loop, const ptc_options_t *o, const mcp_logger_t *lg,
                   ptc_search_t **out)
{
    *out = NULL;
    ptc_search_t *s = calloc(1, sizeof *s);
    if (s == NULL) return MCP_ENOMEM;
    s->loop = loop;
    s->lg = lg;
    char note[512] = "", msg[512] = "";
    reg_embedder_t *emb = NULL;
    int rc = ptc_search_open_embedder(o, &emb, note, sizeof note, msg, sizeof msg);
    if (rc == REG_EEMBED && strcmp(o->embedder, "remote") == 0) {
        /* Configured but unreachable: search still works, lexically, and says so. */
        mcp_log(lg, MCP_LOG_WARNING,
                "--embedder remote: %s; falling back to the built-in lexical embedder", msg);
        ptc_options_t lexical = *o;
        lexical.embedder = "lexical";
        rc = ptc_search_open_embedder(&lexical, &emb, note, sizeof note, msg, sizeof msg);
    }
    if (rc < 0) {
        mcp_log(lg, MCP_LOG_ERROR, "--embedder %s: %s", o->embedder, msg);
        free(s);
        return MCP_EINVAL;
    }
    if (note[0]) mcp_log(lg, MCP_LOG_WARNING, "%s", note);
    /* The cache is an optimisation: without one (no writable home), everything still works. */
    if (reg_cache_open(NULL, 0, &s->cache, msg, sizeof msg) < 0) {
        mcp_log(lg, MCP_LOG_WARNING, "embedding cache unavailable: %s", msg);
        s->cache = NULL;
    } else if (reg_cached_embedder_new(emb, s->cache, &emb) < 0) {
        mcp_log(lg, MCP_LOG_ERROR, "out of memory wrapping the embedder");
        reg_embedder_free(emb);
        reg_cache_close(s->cache);
        free(s);
        return MCP_ENOMEM;
    }
    if (s->cache != NULL) {
        /* At start-up, before the loop serves anyone: one more walk of the folder that
         * reg_cache_open has just walked. */
        long pruned = reg_cache_prune(s->cache, (int64_t)time(NULL), REG_CACHE_PRUNE_AGE_S);
        if (pruned > 0)
            mcp_log(lg, MCP_LOG_INFO, "removed %ld embedding cache entries unused for %ld days",
                    pruned, REG_CACHE_PRUNE_AGE_S / (24 * 60 * 60));
    }
    /* A blocking embedder (the model) indexes on every core: one batch per core, each with one
     * OpenBLAS thread (more BLAS threads per batch only spin against each other). Two workers
     * of libuv's pool stay free for queries and file work. */
    reg_registry_opts_t ropts;
    reg_registry_opts_default(&ropts);
    unsigned cores = uv_available_parallelism();
    ropts.batches_in_flight =
        cores > 1 ? (cores < SEARCH_MAX_INDEX_JOBS ? cores : SEARCH_MAX_INDEX_JOBS) : 1;
    if (ropts.batches_in_flight > 1) reg_model_set_blas_threads(1);
    if ((rc = reg_registry_new(emb, &ropts, &s->reg)) < 0) {
        reg_cache_close(s->cache);
        free(s);
        return MCP_ENOMEM;
    }
    if (o->tools_file != NULL &&
        reg_registry_load_file(s->reg, o->tools_file, msg, sizeof msg) < 0) {
        mcp_log(lg, MCP_LOG_ERROR, "--tools-file %s: %s", o->tools_file, msg);
        ptc_search_free(s);
        return MCP_EINVAL;
    }
    reg_registry_stats_t st;
    reg_registry_stats(s->reg, &st);
    s->dim = st.dim;
    mcp_log(lg, MCP_LOG_INFO, "search_tools: embedder %s, %zu tools from --tools-file", st.embedder,
            st.tools);
    kick_indexing(s);
    *out = s;
    return MCP_OK;
}

int ptc_search_register(ptc_search_t *s, mcp_server_t *srv)
{
    mcp_tool_def_t def = {
        .name = "search_tools",
        .title = "Find tools by meaning",
        .description = description,
        .input_schema = input_schema,
        .output_schema = output_schema,
        .annotations = "{\"readOnlyHint\":true,\"openWorldHint\":false}",
        .handler = handle,
        .data = s,
    };
    return mcp_server_add_tool(srv, &def);
}

reg_registry_t *ptc_search_registry(ptc_search_t *s)
{
    return s->reg;
}

void ptc_search_changed(ptc_search_t *s)
{
    s->batch_failed = false;
    kick_indexing(s);
    if (s->on_change != NULL) s->on_change(s->on_change_data);
    ptc_startup_poke(s->startup); /* a server's listing came in (maybe nothing to index) */
}

void ptc_search_on_change(ptc_search_t *s, void (*cb)(void *data), void *data)
{
    s->on_change = cb;
    s->on_change_data = data;
}

void ptc_search_set_status(ptc_search_t *s, size_t (*status)(const void *, char *, size_t),
                           cJSON *(*status_json)(const void *), const void *data)
{
    s->status = status;
    s->status_json = status_json;
    s->status_data = data;
}

void ptc_search_stop(ptc_search_t *s)
{
    if (s == NULL) return;
    s->stopping = true;
    /* Batches being embedded return within one encoder layer, so shutdown never waits for a
     * whole batch (seconds under load). */
    reg_registry_cancel(s->reg);
}

void ptc_search_free(ptc_search_t *s)
{
    if (s == NULL) return;
    reg_registry_free(s->reg);
    reg_cache_close(s->cache);
    free(s);
}

void ptc_search_set_startup(ptc_search_t *s, ptc_startup_t *st)
{
    if (s != NULL) s->startup = st;
}
