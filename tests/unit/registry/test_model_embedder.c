/*
 * The sentence-embedding model behind the registry: the provider through reg_embedder_open,
 * the texts a sentence model sees, hybrid ranking where a paraphrase needs the model, indexing
 * and query embedding on libuv worker threads, the disk cache in front of the model, and the
 * lock that keeps a non-concurrent embedder to one thread.
 *
 * The model tests read the model folder from $PTC_TEST_MODEL_DIR (ctest sets it to the model
 * the build found); without it they fail, unless PTC_TEST_ALLOW_NO_MODEL=1 says to skip them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../test_util.h"
#include <uv.h>

#include "registry.h"

/* A small catalog of three servers; the paraphrase queries below share no word with the
 * tool they want, so BM25 cannot find it and the model must. */
static const char *const catalog_json =
    "["
    "{\"server\": \"files\", \"name\": \"read_file\", \"description\": \"Read the contents of a "
    "file.\", \"inputSchema\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": "
    "\"string\", \"description\": \"Absolute path of the file.\"}}}},"
    "{\"server\": \"files\", \"name\": \"delete_file\", \"description\": \"Delete a file.\"},"
    "{\"server\": \"files\", \"name\": \"list_directory\", \"description\": \"List the entries "
    "of a directory.\"},"
    "{\"server\": \"weather\", \"name\": \"get_forecast\", \"description\": \"Weather forecast "
    "for a city: temperature and precipitation for the next days.\"},"
    "{\"server\": \"weather\", \"name\": \"get_air_quality\", \"description\": \"Air pollution "
    "index of a city.\"},"
    "{\"server\": \"mail\", \"name\": \"send_email\", \"description\": \"Send an email message "
    "to recipients.\", \"inputSchema\": {\"type\": \"object\", \"properties\": {\"to\": "
    "{\"type\": \"string\"}, \"subject\": {\"type\": \"string\"}}, \"required\": [\"to\"]}},"
    "{\"server\": \"mail\", \"name\": \"search_inbox\", \"description\": \"Search received "
    "email messages.\"}"
    "]";
#define CATALOG_TOOLS 7

#define PARAPHRASE_QUERY "will it rain in Lisbon tomorrow?"
#define PARAPHRASE_WANT  "weather__get_forecast"

/* ---------------------------------------------------------------------------------------- */
/* Helpers                                                                                  */

static const char *model_dir(void **state)
{
    if (*state == NULL) skip();
    return *state;
}

static int model_setup(void **state)
{
    const char *dir = getenv("PTC_TEST_MODEL_DIR");
    if (dir == NULL || dir[0] == 0) {
        const char *allow = getenv("PTC_TEST_ALLOW_NO_MODEL");
        if (allow != NULL && strcmp(allow, "1") == 0) {
            *state = NULL;
            return 0;
        }
        fprintf(stderr, "PTC_TEST_MODEL_DIR is not set: point it at the all-MiniLM-L6-v2 folder "
                        "(or set PTC_TEST_ALLOW_NO_MODEL=1 to skip the model tests)\n");
        return -1;
    }
    *state = strdup(dir);
    return *state != NULL ? 0 : -1;
}

static int model_teardown(void **state)
{
    free(*state);
    return 0;
}

static reg_embedder_t *open_model(const char *dir)
{
    reg_embedder_spec_t spec = {.kind = "model", .model_dir = dir};
    reg_embedder_t *e = NULL;
    char note[512], msg[1024];
    int rc = reg_embedder_open(&spec, &e, note, sizeof note, msg, sizeof msg);
    if (rc != REG_OK) fprintf(stderr, "%s\n", msg);
    assert_int_equal(rc, REG_OK);
    assert_string_equal(note, "");
    return e;
}

static void load_catalog(reg_registry_t *r)
{
    cJSON *root = cJSON_Parse(catalog_json);
    assert_non_null(root);
    const char *servers[] = {"files", "weather", "mail"};
    char msg[512];
    for (size_t s = 0; s < 3; s++) {
        cJSON *arr = cJSON_CreateArray();
        const cJSON *t;
        cJSON_ArrayForEach(t, root)
        {
            if (strcmp(cJSON_GetObjectItem(t, "server")->valuestring, servers[s]) == 0)
                cJSON_AddItemToArray(arr, cJSON_Duplicate(t, 1));
        }
        assert_int_equal(reg_registry_set_server_tools(r, servers[s], arr, msg, sizeof msg),
                         REG_OK);
        cJSON_Delete(arr);
    }
    cJSON_Delete(root);
}

static const char *top(reg_registry_t *r, const char *query, const float *qvec)
{
    reg_result_t res[1];
    char msg[512];
    int n = reg_registry_search(r, query, qvec, 1, NULL, res, msg, sizeof msg);
    assert_true(n >= 0);
    return n > 0 ? res[0].tool->id : NULL;
}

/* The top hit as search_tools finds it: the query vector first (on this thread here, on a
 * worker in the server), then the search. */
static const char *search_top(reg_registry_t *r, const char *query)
{
    float qv[384];
    char msg[256];
    assert_true(reg_registry_query_blocking(r));
    assert_int_equal(reg_registry_embed_query(r, query, qv, msg, sizeof msg), REG_OK);
    return top(r, query, qv);
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * (double)b[i];
    return s;
}

/* ---------------------------------------------------------------------------------------- */
/* Texts a sentence model sees (no model needed)                                            */

static void test_query_text_drops_quoted_values(void **state)
{
    (void)state;
    char *q = reg_query_embed_text("add 'prepare Q3 deck' to the \"Marketing\" board, due Friday");
    assert_non_null(q);
    assert_null(strstr(q, "deck"));
    assert_null(strstr(q, "Marketing"));
    assert_non_null(strstr(q, "add "));
    assert_non_null(strstr(q, " to the "));
    assert_non_null(strstr(q, "board, due Friday"));
    free(q);
    /* Apostrophes, unclosed quotes and all-quoted queries stay. */
    const char *kept[] = {"analyze a Reddit user's posting history", "it is 'open ended",
                          "'create_task'", "\"\""};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        q = reg_query_embed_text(kept[i]);
        assert_non_null(q);
        assert_string_equal(q, kept[i]);
        free(q);
    }
    /* Bounded like every query. */
    char *big = malloc(REG_QUERY_MAX * 2);
    assert_non_null(big);
    memset(big, 'a', REG_QUERY_MAX * 2 - 1);
    big[REG_QUERY_MAX * 2 - 1] = 0;
    q = reg_query_embed_text(big);
    assert_non_null(q);
    assert_int_equal(strlen(q), REG_QUERY_MAX);
    free(q);
    free(big);
    assert_null(reg_query_embed_text(NULL));
}

static void test_embed_text_is_topic_first_and_brief(void **state)
{
    (void)state;
    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), REG_OK);
    char *desc = malloc(REG_TEXT_MAX);
    assert_non_null(desc);
    memset(desc, 'x', REG_TEXT_MAX - 1);
    desc[REG_TEXT_MAX - 1] = 0;
    cJSON *t = cJSON_Parse("{\"name\": \"getChannelMessages\", \"title\": \"Channel history\", "
                           "\"description\": \"Read recent messages of a channel.\", "
                           "\"inputSchema\": {\"type\": \"object\", \"properties\": {"
                           "\"channel_id\": {\"type\": \"string\", \"description\": \"Snowflake "
                           "id, 17 to 20 digits.\"}, \"limit\": {\"type\": \"integer\"}}}}");
    assert_non_null(t);
    const reg_tool_t *tool;
    char msg[256];
    assert_int_equal(reg_catalog_add(cat, "discord", t, msg, sizeof msg, &tool), REG_OK);
    char *s = reg_tool_embed_text(tool);
    assert_string_equal(s, "discord. get channel messages. Channel history. Read recent messages "
                           "of a channel. Parameters: channel id, limit.");
    free(s);
    /* The full index text keeps the parameter descriptions (BM25, lexical embedder). */
    s = reg_tool_index_text(tool);
    assert_non_null(strstr(s, "Snowflake"));
    free(s);

    cJSON_ReplaceItemInObject(t, "description", cJSON_CreateString(desc));
    assert_int_equal(reg_catalog_add(cat, "discord", t, msg, sizeof msg, &tool), REG_OK);
    s = reg_tool_embed_text(tool);
    assert_non_null(s);
    assert_true(strlen(s) < REG_EMBED_TEXT_MAX);
    assert_int_equal(strncmp(s, "discord. get channel messages. Channel history. xxx", 50), 0);
    free(s);

    cJSON *bare = cJSON_Parse("{\"name\": \"ping\"}");
    assert_int_equal(reg_catalog_add(cat, "s", bare, msg, sizeof msg, &tool), REG_OK);
    s = reg_tool_embed_text(tool);
    assert_string_equal(s, "s. ping.");
    free(s);
    cJSON_Delete(bare);
    cJSON_Delete(t);
    free(desc);
    reg_catalog_free(cat);
}

static void test_auto_falls_back_to_lexical_and_says_so(void **state)
{
    (void)state;
    reg_embedder_spec_t spec = {.kind = "auto", .model_dir = "/nonexistent/ptc-model"};
    reg_embedder_t *e = NULL;
    char note[1024], msg[1024];
    assert_int_equal(reg_embedder_open(&spec, &e, note, sizeof note, msg, sizeof msg), REG_OK);
    assert_string_equal(reg_embedder_name(e), "lexical");
    assert_non_null(strstr(note, "lexical"));
    assert_non_null(strstr(note, "/nonexistent/ptc-model"));
    reg_embedder_free(e);
    /* Asked for by name, a missing model is an error that names the folder. */
    spec.kind = "model";
    assert_int_equal(reg_embedder_open(&spec, &e, note, sizeof note, msg, sizeof msg), REG_EEMBED);
    assert_null(e);
    assert_non_null(strstr(msg, "/nonexistent/ptc-model"));
}

/* ---------------------------------------------------------------------------------------- */
/* A non-concurrent provider: the registry's lock keeps it to one thread (no model needed)  */

typedef struct solo {
    atomic_int inflight, max_inflight, calls;
} solo_t;

static int solo_embed(reg_embedder_t *self, const char *const *texts, size_t n,
                      reg_embed_kind_t kind, float *out, char *msg, size_t msg_size)
{
    (void)kind;
    (void)msg;
    (void)msg_size;
    solo_t *s = self->impl;
    int now = atomic_fetch_add(&s->inflight, 1) + 1;
    int seen = atomic_load(&s->max_inflight);
    while (now > seen && !atomic_compare_exchange_weak(&s->max_inflight, &seen, now)) {
    }
    atomic_fetch_add(&s->calls, 1);
    /* Stay inside long enough for an unserialised caller to overlap. */
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    for (size_t i = 0; i < n; i++)
        for (size_t d = 0; d < 8; d++)
            out[i * 8 + d] = (float)((strlen(texts[i]) + d) % 5) + 0.5f;
    atomic_fetch_sub(&s->inflight, 1);
    return REG_OK;
}

typedef struct query_thread {
    reg_registry_t *r;
    int rc;
} query_thread_t;

static void *query_worker(void *arg)
{
    query_thread_t *q = arg;
    float v[8];
    char msg[256];
    for (int i = 0; i < 10 && q->rc == 0; i++)
        q->rc = reg_registry_embed_query(q->r, "find the weather", v, msg, sizeof msg);
    return NULL;
}

static void *batch_worker(void *arg)
{
    reg_batch_t *b = arg;
    char msg[256];
    return (void *)(intptr_t)reg_batch_embed(b, msg, sizeof msg);
}

static void test_non_concurrent_embedder_runs_on_one_thread_at_a_time(void **state)
{
    (void)state;
    solo_t *s = calloc(1, sizeof *s);
    reg_embedder_t *e = calloc(1, sizeof *e);
    assert_non_null(s);
    assert_non_null(e);
    *e = (reg_embedder_t){.name = "remote:solo",
                          .cache_provider = "test",
                          .dim = 8,
                          .concurrent = false,
                          .blocking = true,
                          .sentence_model = true,
                          .embed = solo_embed,
                          .impl = s};
    reg_registry_t *r;
    assert_int_equal(reg_registry_new(e, NULL, &r), REG_OK);
    assert_true(reg_registry_query_blocking(r));
    load_catalog(r);
    for (;;) {
        reg_batch_t *b;
        assert_int_equal(reg_registry_next_batch(r, 2, &b), REG_OK);
        if (b == NULL) break;
        pthread_t bt, qt[2];
        query_thread_t qa[2] = {{r, 0}, {r, 0}};
        assert_int_equal(pthread_create(&bt, NULL, batch_worker, b), 0);
        for (int i = 0; i < 2; i++)
            assert_int_equal(pthread_create(&qt[i], NULL, query_worker, &qa[i]), 0);
        void *brc;
        assert_int_equal(pthread_join(bt, &brc), 0);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(pthread_join(qt[i], NULL), 0);
            assert_int_equal(qa[i].rc, REG_OK);
        }
        assert_int_equal((int)(intptr_t)brc, REG_OK);
        assert_int_equal(reg_registry_apply_batch(r, b), REG_OK);
    }
    assert_int_equal(reg_registry_pending(r), 0);
    /* 4 batches and 2 x 10 queries per batch, never two at once. */
    assert_int_equal(atomic_load(&s->calls), 4 + 4 * 20);
    assert_int_equal(atomic_load(&s->max_inflight), 1);
    reg_registry_free(r);
    free(s);
}

static void test_blocking_embedder_gets_small_default_batches(void **state)
{
    (void)state;
    solo_t *s = calloc(1, sizeof *s);
    reg_embedder_t *e = calloc(1, sizeof *e);
    assert_non_null(s);
    assert_non_null(e);
    *e = (reg_embedder_t){
        .name = "remote:solo", .dim = 8, .blocking = true, .embed = solo_embed, .impl = s};
    reg_registry_t *r;
    assert_int_equal(reg_registry_new(e, NULL, &r), REG_OK);
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < REG_BATCH_BLOCKING + 8; i++) {
        char name[32];
        snprintf(name, sizeof name, "tool_%d", i);
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", name);
        cJSON_AddItemToArray(arr, t);
    }
    char msg[256];
    assert_int_equal(reg_registry_set_server_tools(r, "many", arr, msg, sizeof msg), REG_OK);
    cJSON_Delete(arr);
    reg_batch_t *b;
    assert_int_equal(reg_registry_next_batch(r, 0, &b), REG_OK);
    assert_int_equal(reg_batch_count(b), REG_BATCH_BLOCKING);
    assert_int_equal(reg_batch_embed(b, msg, sizeof msg), REG_OK);
    assert_int_equal(reg_registry_apply_batch(r, b), REG_OK);
    assert_int_equal(reg_registry_pending(r), 8);
    reg_registry_free(r);
    free(s);
}

/* ---------------------------------------------------------------------------------------- */
/* The real model                                                                           */

static void test_model_through_the_embedder_interface(void **state)
{
    reg_embedder_t *e = open_model(model_dir(state));
    assert_string_equal(reg_embedder_name(e), "model:all-MiniLM-L6-v2");
    assert_int_equal(reg_embedder_dim(e), 384);
    assert_true(e->concurrent);
    assert_true(e->blocking);
    assert_true(e->sentence_model);
    assert_string_equal(e->cache_provider, "model");
    assert_non_null(e->cache_model);
    assert_int_equal(strncmp(e->cache_model, "all-MiniLM-L6-v2@", 17), 0);

    const char *docs[] = {"delete file. Remove a file from the disk.",
                          "get forecast. Weather forecast for a city.",
                          "send email. Send an email message to recipients."};
    float d[3 * 384], q[2 * 384];
    char msg[256];
    assert_int_equal(reg_embedder_embed(e, docs, 3, REG_EMBED_DOCUMENT, d, msg, sizeof msg),
                     REG_OK);
    const char *queries[] = {"get rid of an old document on my drive",
                             "is it going to be sunny this weekend"};
    assert_int_equal(reg_embedder_embed(e, queries, 2, REG_EMBED_QUERY, q, msg, sizeof msg),
                     REG_OK);
    for (int i = 0; i < 3; i++)
        assert_true(fabs(dot(d + i * 384, d + i * 384, 384) - 1.0) < 1e-4);
    /* Meaning, not words: each query is closest to its tool. */
    assert_true(dot(q, d, 384) > dot(q, d + 384, 384));
    assert_true(dot(q, d, 384) > dot(q, d + 768, 384));
    assert_true(dot(q + 384, d + 384, 384) > dot(q + 384, d, 384));
    assert_true(dot(q + 384, d + 384, 384) > dot(q + 384, d + 768, 384));
    /* One text at a time gives the same vector as a batch. */
    float one[384];
    assert_int_equal(reg_embedder_embed(e, docs + 1, 1, REG_EMBED_DOCUMENT, one, msg, sizeof msg),
                     REG_OK);
    assert_true(dot(one, d + 384, 384) > 0.9999);
    reg_embedder_free(e);

    /* "auto" picks the model when it loads, and says nothing. */
    reg_embedder_spec_t spec = {.kind = "auto", .model_dir = model_dir(state)};
    char note[256];
    assert_int_equal(reg_embedder_open(&spec, &e, note, sizeof note, msg, sizeof msg), REG_OK);
    assert_string_equal(reg_embedder_name(e), "model:all-MiniLM-L6-v2");
    assert_string_equal(note, "");
    reg_embedder_free(e);
}

static void test_hybrid_finds_a_paraphrase_only_the_model_understands(void **state)
{
    const char *dir = model_dir(state);
    /* BM25 alone: no word in common, so the wanted tool is not first. */
    reg_registry_t *bm;
    assert_int_equal(reg_registry_new(NULL, NULL, &bm), REG_OK);
    load_catalog(bm);
    const char *t = top(bm, PARAPHRASE_QUERY, NULL);
    assert_true(t == NULL || strcmp(t, PARAPHRASE_WANT) != 0);
    reg_registry_free(bm);

    reg_registry_t *r;
    assert_int_equal(reg_registry_new(open_model(dir), NULL, &r), REG_OK);
    assert_string_equal(reg_registry_embedder_name(r), "model:all-MiniLM-L6-v2");
    load_catalog(r);
    char msg[256];
    assert_int_equal(reg_registry_index_all(r, msg, sizeof msg), REG_OK);
    reg_registry_stats_t st;
    reg_registry_stats(r, &st);
    assert_true(st.hybrid);
    assert_int_equal(st.dim, 384);
    assert_int_equal(st.indexed, CATALOG_TOOLS);
    assert_string_equal(search_top(r, PARAPHRASE_QUERY), PARAPHRASE_WANT);
    assert_string_equal(search_top(r, "get rid of an old document"), "files__delete_file");
    /* Exact names still win (BM25's share of the fusion). */
    assert_string_equal(search_top(r, "get_air_quality"), "weather__get_air_quality");
    assert_string_equal(search_top(r, "list_directory"), "files__list_directory");

    /* The query vector computed elsewhere (a worker) gives the same ranking. */
    float qv[384];
    assert_int_equal(reg_registry_embed_query(r, PARAPHRASE_QUERY, qv, msg, sizeof msg), REG_OK);
    assert_string_equal(top(r, PARAPHRASE_QUERY, qv), PARAPHRASE_WANT);

    /* Filters and scores. */
    reg_result_t res[CATALOG_TOOLS];
    reg_filter_t f;
    reg_filter_default(&f);
    f.server = "mail";
    int n = reg_registry_search(r, PARAPHRASE_QUERY, qv, CATALOG_TOOLS, &f, res, msg, sizeof msg);
    assert_int_equal(n, 2);
    for (int i = 0; i < n; i++)
        assert_string_equal(res[i].tool->server, "mail");
    f.server = NULL;
    n = reg_registry_search(r, PARAPHRASE_QUERY, qv, CATALOG_TOOLS, &f, res, msg, sizeof msg);
    assert_int_equal(n, CATALOG_TOOLS);
    for (int i = 0; i < n; i++) {
        assert_true(res[i].score >= 0 && res[i].score <= 1.0f + 1e-6f);
        if (i > 0) assert_true(res[i].score <= res[i - 1].score);
    }
    f.min_score = (res[0].score + res[1].score) / 2;
    n = reg_registry_search(r, PARAPHRASE_QUERY, qv, CATALOG_TOOLS, &f, res, msg, sizeof msg);
    assert_int_equal(n, 1);
    assert_string_equal(res[0].tool->id, PARAPHRASE_WANT);

    /* Results name the model (search_tools' structuredContent reports this name). */
    assert_string_equal(reg_registry_embedder_name(r), "model:all-MiniLM-L6-v2");

    /* Model only (no fusion) ranks the paraphrase too. */
    reg_registry_opts_t o;
    reg_registry_opts_default(&o);
    o.hybrid = false;
    reg_registry_t *dense;
    assert_int_equal(reg_registry_new(open_model(dir), &o, &dense), REG_OK);
    load_catalog(dense);
    assert_int_equal(reg_registry_index_all(dense, msg, sizeof msg), REG_OK);
    assert_string_equal(search_top(dense, PARAPHRASE_QUERY), PARAPHRASE_WANT);
    reg_registry_free(dense);
    reg_registry_free(r);
}

/* -- indexing and queries on the libuv thread pool, as the server runs them -- */

typedef struct pool_run {
    uv_loop_t *loop;
    reg_registry_t *r;
    reg_batch_t *batch;
    int batch_rc, batches, batch_errors;
    bool pending_seen_while_indexing;
    /* queries in flight */
    int queries_done, query_errors;
    int right; /* queries whose top hit is the tool they want */
} pool_run_t;

typedef struct query_job {
    uv_work_t req;
    pool_run_t *run;
    const char *query, *want;
    float vec[384];
    int rc;
} query_job_t;

static void start_batch(pool_run_t *p);

static void batch_work(uv_work_t *req)
{
    pool_run_t *p = req->data;
    char msg[256];
    p->batch_rc = reg_batch_embed(p->batch, msg, sizeof msg);
}

static void batch_done(uv_work_t *req, int status)
{
    pool_run_t *p = req->data;
    if (status != 0 || p->batch_rc != REG_OK) p->batch_errors++;
    if (reg_registry_apply_batch(p->r, p->batch) != REG_OK) p->batch_errors++;
    p->batch = NULL;
    p->batches++;
    free(req);
    if (reg_registry_pending(p->r) > 0) p->pending_seen_while_indexing = true;
    start_batch(p);
}

static void start_batch(pool_run_t *p)
{
    reg_batch_t *b;
    if (reg_registry_next_batch(p->r, 2, &b) != REG_OK) {
        p->batch_errors++;
        return;
    }
    if (b == NULL) return;
    p->batch = b;
    uv_work_t *req = calloc(1, sizeof *req);
    assert_non_null(req);
    req->data = p;
    assert_int_equal(uv_queue_work(p->loop, req, batch_work, batch_done), 0);
}

static void query_work(uv_work_t *req)
{
    query_job_t *j = req->data;
    char msg[256];
    j->rc = reg_registry_embed_query(j->run->r, j->query, j->vec, msg, sizeof msg);
}

static void query_done(uv_work_t *req, int status)
{
    query_job_t *j = req->data;
    pool_run_t *p = j->run;
    p->queries_done++;
    if (status != 0 || j->rc != REG_OK) {
        p->query_errors++;
        return;
    }
    /* Back on the loop thread: search with the vector (BM25 covers tools not yet indexed). */
    reg_result_t res[3];
    char msg[256];
    int n = reg_registry_search(p->r, j->query, j->vec, 3, NULL, res, msg, sizeof msg);
    if (n < 0) p->query_errors++;
    if (n > 0 && strcmp(res[0].tool->id, j->want) == 0) p->right++;
}

static void queue_queries(uv_loop_t *loop, pool_run_t *p, query_job_t *jobs, int n)
{
    for (int i = 0; i < n; i++) {
        jobs[i] = (query_job_t){.run = p,
                                .query = i % 2 ? PARAPHRASE_QUERY : "send_email",
                                .want = i % 2 ? PARAPHRASE_WANT : "mail__send_email"};
        jobs[i].req.data = &jobs[i];
        assert_int_equal(uv_queue_work(loop, &jobs[i].req, query_work, query_done), 0);
    }
}

static void test_indexing_and_queries_on_libuv_workers(void **state)
{
    const char *dir = model_dir(state);
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    pool_run_t p = {.loop = &loop};
    assert_int_equal(reg_registry_new(open_model(dir), NULL, &p.r), REG_OK);
    assert_true(reg_registry_query_blocking(p.r));
    load_catalog(p.r);
    assert_int_equal(reg_registry_pending(p.r), CATALOG_TOOLS);
    enum { NQ = 6 };
    query_job_t jobs[NQ];

    /* Nothing indexed: query vectors come from workers, BM25 answers exact names. */
    queue_queries(&loop, &p, jobs, 2);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(p.queries_done, 2);
    assert_int_equal(p.query_errors, 0);
    assert_int_equal(p.right, 1); /* send_email, not the paraphrase */

    /* Batches on workers, with queries racing them on other workers. */
    p.queries_done = p.right = 0;
    start_batch(&p);
    queue_queries(&loop, &p, jobs, NQ);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(p.batch_errors, 0);
    assert_int_equal(p.batches, 4); /* 7 tools, 2 a batch */
    assert_true(p.pending_seen_while_indexing);
    assert_int_equal(reg_registry_pending(p.r), 0);
    assert_int_equal(p.queries_done, NQ);
    assert_int_equal(p.query_errors, 0);

    /* Everything indexed: both are found. */
    p.queries_done = p.right = 0;
    queue_queries(&loop, &p, jobs, NQ);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(p.query_errors, 0);
    assert_int_equal(p.right, NQ);
    reg_registry_free(p.r);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* -- stopping: reg_registry_cancel while the model embeds a large batch -- */

typedef struct stop_run {
    reg_batch_t *b;
    int rc;
    char msg[256];
} stop_run_t;

static void *stop_worker(void *arg)
{
    stop_run_t *s = arg;
    s->rc = reg_batch_embed(s->b, s->msg, sizeof s->msg);
    return NULL;
}

static double mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void test_cancel_stops_a_model_batch_within_a_bound(void **state)
{
    const char *dir = model_dir(state);
    reg_registry_t *r;
    assert_int_equal(reg_registry_new(open_model(dir), NULL, &r), REG_OK);
    /* 2000 tools of ~40 tokens: a minute or more of one core, far past the bound below. */
    enum { N = 2000 };
    cJSON *arr = cJSON_CreateArray();
    assert_non_null(arr);
    for (int i = 0; i < N; i++) {
        char name[32], desc[200];
        snprintf(name, sizeof name, "tool_%d", i);
        snprintf(desc, sizeof desc,
                 "Looks up record number %d in the archive and returns its owner, its size and "
                 "the date it was last changed.",
                 i);
        cJSON *t = cJSON_CreateObject();
        assert_non_null(t);
        cJSON_AddItemToArray(arr, t);
        assert_non_null(cJSON_AddStringToObject(t, "name", name));
        assert_non_null(cJSON_AddStringToObject(t, "description", desc));
    }
    char msg[256];
    assert_int_equal(reg_registry_set_server_tools(r, "archive", arr, msg, sizeof msg), REG_OK);
    cJSON_Delete(arr);
    stop_run_t s = {0};
    assert_int_equal(reg_registry_next_batch(r, N, &s.b), REG_OK);
    assert_int_equal(reg_batch_count(s.b), N);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stop_worker, &s), 0);
    usleep(200 * 1000); /* well inside the first chunk's layers */
    double t0 = mono_ms();
    reg_registry_cancel(r);
    assert_int_equal(pthread_join(th, NULL), 0);
    double waited = mono_ms() - t0;
    printf("[ stop ] the batch returned %.1f ms after reg_registry_cancel\n", waited);
    assert_int_equal(s.rc, REG_ECANCELED);
    /* One encoder layer of one chunk is ~30 ms of an idle core; the bound leaves room for a
     * loaded machine and the sanitizers, and is still far below the 2 s a client waits. */
    assert_true(waited < 1000.0);
    assert_int_equal(reg_registry_apply_batch(r, s.b), REG_ECANCELED);
    assert_int_equal(reg_registry_pending(r), N);
    reg_registry_free(r);
}

/* -- the disk cache in front of the model -- */

typedef struct counted {
    reg_embedder_t *inner;
    atomic_size_t docs, queries;
} counted_t;

static int counted_embed(reg_embedder_t *self, const char *const *texts, size_t n,
                         reg_embed_kind_t kind, float *out, char *msg, size_t msg_size)
{
    counted_t *c = self->impl;
    atomic_fetch_add(kind == REG_EMBED_QUERY ? &c->queries : &c->docs, n);
    return reg_embedder_embed(c->inner, texts, n, kind, out, msg, msg_size);
}

static void counted_destroy(reg_embedder_t *self)
{
    counted_t *c = self->impl;
    reg_embedder_free(c->inner);
    c->inner = NULL;
}

/* Wraps the model in a provider that counts the texts it embeds; c outlives the wrapper. */
static reg_embedder_t *counted_model(const char *dir, counted_t *c)
{
    memset(c, 0, sizeof *c);
    c->inner = open_model(dir);
    reg_embedder_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    *e = *c->inner;
    e->embed = counted_embed;
    e->embed_stop = NULL; /* the copied one would take impl for the model's */
    e->fit = NULL;
    e->destroy = counted_destroy;
    e->impl = c;
    return e;
}

/* Texts a registry with parts embeds for tools: each one's whole text and its parts. */
static int texts_of(const reg_registry_t *r, const char *only_id)
{
    const reg_catalog_t *cat = reg_registry_catalog(r);
    int n = 0;
    for (size_t i = 0; i < reg_catalog_count(cat); i++) {
        const reg_tool_t *t = reg_catalog_at(cat, i);
        if (only_id != NULL && strcmp(t->id, only_id) != 0) continue;
        char *p[REG_PARTS_MAX];
        int k = reg_tool_part_texts(t, p, REG_PARTS_MAX);
        assert_true(k >= 1);
        for (int j = 0; j < k; j++)
            free(p[j]);
        n += 1 + k;
    }
    return n;
}

static void test_cache_hit_avoids_re_embedding(void **state)
{
    const char *dir = model_dir(state);
    char *cdir = tu_temp_dir("ptc-reg-model");
    char msg[512];
    reg_cache_t *cache;
    assert_int_equal(reg_cache_open(cdir, 0, &cache, msg, sizeof msg), REG_OK);

    counted_t c1;
    reg_embedder_t *e;
    assert_int_equal(reg_cached_embedder_new(counted_model(dir, &c1), cache, &e), REG_OK);
    assert_string_equal(reg_embedder_name(e), "model:all-MiniLM-L6-v2");
    assert_true(e->blocking && e->concurrent && e->sentence_model);
    /* With parts: they are cached like the whole texts. */
    reg_registry_opts_t ro;
    reg_registry_opts_default(&ro);
    ro.parts = true;
    reg_registry_t *r1;
    assert_int_equal(reg_registry_new(e, &ro, &r1), REG_OK);
    load_catalog(r1);
    assert_int_equal(reg_registry_index_all(r1, msg, sizeof msg), REG_OK);
    assert_int_equal(atomic_load(&c1.docs), texts_of(r1, NULL));
    float q1[384], q2[384];
    assert_int_equal(reg_registry_embed_query(r1, PARAPHRASE_QUERY, q1, msg, sizeof msg), REG_OK);
    assert_int_equal(reg_registry_embed_query(r1, PARAPHRASE_QUERY, q2, msg, sizeof msg), REG_OK);
    assert_int_equal(atomic_load(&c1.queries), 1); /* the second came from the cache */
    assert_memory_equal(q1, q2, sizeof q1);
    reg_result_t a[CATALOG_TOOLS], b[CATALOG_TOOLS];
    int na = reg_registry_search(r1, PARAPHRASE_QUERY, q1, CATALOG_TOOLS, NULL, a, msg, sizeof msg);
    assert_int_equal(na, CATALOG_TOOLS);

    /* A restart with the same catalog: nothing is embedded again, the ranking is the same. */
    counted_t c2;
    assert_int_equal(reg_cached_embedder_new(counted_model(dir, &c2), cache, &e), REG_OK);
    reg_registry_t *r2;
    assert_int_equal(reg_registry_new(e, &ro, &r2), REG_OK);
    load_catalog(r2);
    assert_int_equal(reg_registry_index_all(r2, msg, sizeof msg), REG_OK);
    assert_int_equal(reg_registry_pending(r2), 0);
    assert_int_equal(atomic_load(&c2.docs), 0);
    assert_int_equal(reg_registry_embed_query(r2, PARAPHRASE_QUERY, q2, msg, sizeof msg), REG_OK);
    assert_int_equal(atomic_load(&c2.queries), 0); /* a cache hit */
    int nb = reg_registry_search(r2, PARAPHRASE_QUERY, q2, CATALOG_TOOLS, NULL, b, msg, sizeof msg);
    assert_int_equal(nb, na);
    for (int i = 0; i < na; i++) {
        assert_string_equal(a[i].tool->id, b[i].tool->id);
        assert_true(fabsf(a[i].score - b[i].score) < 1e-6f);
    }
    /* Without a query vector the model is never run on the calling thread (the event loop in
     * the server): BM25 answers alone, exact names first. */
    assert_string_equal(top(r2, "search_inbox for invoices", NULL), "mail__search_inbox");
    assert_int_equal(atomic_load(&c2.queries), 0);
    const char *t = top(r2, PARAPHRASE_QUERY, NULL);
    assert_true(t == NULL || strcmp(t, PARAPHRASE_WANT) != 0);
    assert_int_equal(atomic_load(&c2.queries), 0);

    /* A changed tool is a new text: only it is embedded. */
    char one[] = "[{\"name\": \"get_forecast\", \"description\": \"Hourly forecast.\"}, "
                 "{\"name\": \"get_air_quality\", \"description\": \"Air pollution index of a "
                 "city.\"}]";
    cJSON *arr = cJSON_Parse(one);
    assert_int_equal(reg_registry_set_server_tools(r2, "weather", arr, msg, sizeof msg), REG_OK);
    cJSON_Delete(arr);
    assert_int_equal(reg_registry_index_all(r2, msg, sizeof msg), REG_OK);
    assert_int_equal(atomic_load(&c2.docs), texts_of(r2, "weather__get_forecast"));

    reg_registry_free(r1);
    reg_registry_free(r2);
    reg_cache_close(cache);
    tu_remove_tree(cdir);
    free(cdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query_text_drops_quoted_values),
        cmocka_unit_test(test_embed_text_is_topic_first_and_brief),
        cmocka_unit_test(test_auto_falls_back_to_lexical_and_says_so),
        cmocka_unit_test(test_non_concurrent_embedder_runs_on_one_thread_at_a_time),
        cmocka_unit_test(test_blocking_embedder_gets_small_default_batches),
        cmocka_unit_test(test_model_through_the_embedder_interface),
        cmocka_unit_test(test_hybrid_finds_a_paraphrase_only_the_model_understands),
        cmocka_unit_test(test_indexing_and_queries_on_libuv_workers),
        cmocka_unit_test(test_cancel_stops_a_model_batch_within_a_bound),
        cmocka_unit_test(test_cache_hit_avoids_re_embedding),
    };
    return cmocka_run_group_tests(tests, model_setup, model_teardown);
}
