/* The registry facade: loading, incremental server updates, batches, hybrid search. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "registry.h"

static const char tools_gh[] =
    "[{\"name\": \"list_issues\", \"description\": \"List the issues of a repository.\","
    "  \"inputSchema\": {\"type\": \"object\", \"properties\": {\"repo\": {\"type\": \"string\","
    "  \"description\": \"Owner and repository name\"}}}},"
    " {\"name\": \"create_issue\", \"description\": \"Open a new issue in a repository.\"},"
    " {\"name\": \"merge_pull_request\", \"description\": \"Merge a pull request.\"}]";
static const char tools_chat[] =
    "[{\"name\": \"send_message\", \"description\": \"Send a chat message to a channel.\"},"
    " {\"name\": \"list_channels\", \"description\": \"List the channels of a workspace.\"}]";
static const char tools_wx[] =
    "[{\"name\": \"get_forecast\", \"description\": \"Daily weather forecast for a place.\"}]";

static void set_tools(reg_registry_t *r, const char *server, const char *json)
{
    cJSON *arr = cJSON_Parse(json);
    assert_non_null(arr);
    char msg[512] = "";
    int rc = reg_registry_set_server_tools(r, server, arr, msg, sizeof msg);
    if (rc != REG_OK) fail_msg("set_server_tools: %s", msg);
    cJSON_Delete(arr);
}

static reg_registry_t *lexical_registry(bool hybrid)
{
    reg_embedder_t *e;
    assert_int_equal(reg_lexical_new(NULL, &e), REG_OK);
    reg_registry_opts_t o;
    reg_registry_opts_default(&o);
    o.hybrid = hybrid;
    reg_registry_t *r;
    assert_int_equal(reg_registry_new(e, &o, &r), REG_OK);
    set_tools(r, "github", tools_gh);
    set_tools(r, "chat", tools_chat);
    set_tools(r, "weather", tools_wx);
    return r;
}

static const char *top(reg_registry_t *r, const char *query, const reg_filter_t *f)
{
    reg_result_t res[5];
    char msg[256];
    int n = reg_registry_search(r, query, NULL, 5, f, res, msg, sizeof msg);
    assert_true(n >= 0);
    for (int i = 1; i < n; i++)
        assert_true(res[i - 1].score >= res[i].score);
    return n > 0 ? res[0].tool->id : NULL;
}

static void test_search_before_and_after_indexing(void **state)
{
    (void)state;
    reg_registry_t *r = lexical_registry(true);
    assert_string_equal(reg_registry_embedder_name(r), "lexical");
    assert_int_equal(reg_catalog_count(reg_registry_catalog(r)), 6);
    assert_int_equal(reg_registry_pending(r), 6);
    /* Nothing embedded yet: BM25 alone already answers. */
    assert_string_equal(top(r, "weather forecast", NULL), "weather__get_forecast");
    char msg[256];
    reg_registry_stats_t st;
    reg_registry_stats(r, &st);
    assert_int_equal(st.tools, 6);
    assert_int_equal(st.indexed, 0);
    assert_int_equal(st.pending, 6);
    assert_int_equal(reg_registry_index_all(r, msg, sizeof msg), REG_OK);
    assert_int_equal(reg_registry_pending(r), 0);
    reg_registry_stats(r, &st);
    assert_string_equal(st.embedder, "lexical");
    assert_int_equal(st.dim, 1024);
    assert_int_equal(st.indexed, 6);
    assert_int_equal(st.pending, 0);
    assert_true(st.hybrid);
    assert_true(st.memory_bytes > 6 * 1024);
    assert_string_equal(top(r, "weather forecast", NULL), "weather__get_forecast");
    assert_string_equal(top(r, "post a message in a channel", NULL), "chat__send_message");
    assert_string_equal(top(r, "open an issue", NULL), "github__create_issue");

    reg_result_t res[10];
    int n = reg_registry_search(r, "list", NULL, 10, NULL, res, msg, sizeof msg);
    assert_true(n >= 2);
    for (int i = 0; i < n; i++)
        assert_true(res[i].score >= 0 && res[i].score <= 1.0f + 1e-6f);
    reg_filter_t f;
    reg_filter_default(&f);
    f.server = "chat";
    n = reg_registry_search(r, "list", NULL, 10, &f, res, msg, sizeof msg);
    assert_true(n >= 1);
    for (int i = 0; i < n; i++)
        assert_string_equal(res[i].tool->server, "chat");
    f.server = NULL;
    f.min_score = 0.99f;
    n = reg_registry_search(r, "list the issues of a repository", NULL, 10, &f, res, msg,
                            sizeof msg);
    assert_int_equal(n, 1);
    assert_string_equal(res[0].tool->id, "github__list_issues");
    assert_int_equal(
        reg_registry_search(r, "x", NULL, REG_TOPK_MAX + 1, NULL, res, msg, sizeof msg),
        REG_ETOOBIG);
    reg_registry_free(r);
}

static void test_dense_only_mode(void **state)
{
    (void)state;
    reg_registry_t *r = lexical_registry(false);
    char msg[256];
    assert_int_equal(reg_registry_index_all(r, msg, sizeof msg), REG_OK);
    assert_string_equal(top(r, "sendMessage", NULL), "chat__send_message");
    reg_registry_free(r);
}

static void test_server_update_replaces_its_tools(void **state)
{
    (void)state;
    reg_registry_t *r = lexical_registry(true);
    char msg[256];
    assert_int_equal(reg_registry_index_all(r, msg, sizeof msg), REG_OK);
    set_tools(r, "weather",
              "[{\"name\": \"get_air_quality\", \"description\": \"Air pollution index.\"}]");
    assert_null(reg_catalog_find(reg_registry_catalog(r), "weather__get_forecast"));
    assert_int_equal(reg_registry_pending(r), 1);
    assert_int_equal(reg_registry_index_all(r, msg, sizeof msg), REG_OK);
    assert_string_equal(top(r, "air pollution", NULL), "weather__get_air_quality");
    const char *t = top(r, "weather forecast", NULL);
    assert_true(t == NULL || strcmp(t, "weather__get_forecast") != 0);

    /* A bad list leaves the server's tools alone and says which tool is wrong. */
    cJSON *bad = cJSON_Parse("[{\"name\": \"ok\"}, {\"description\": \"no name\"}]");
    assert_int_equal(reg_registry_set_server_tools(r, "weather", bad, msg, sizeof msg), REG_EINVAL);
    assert_non_null(strstr(msg, "tool #1"));
    cJSON_Delete(bad);
    assert_non_null(reg_catalog_find(reg_registry_catalog(r), "weather__get_air_quality"));

    /* The name may come from one of the tools being removed. */
    const reg_tool_t *gh = reg_catalog_find(reg_registry_catalog(r), "github__list_issues");
    assert_int_equal(reg_registry_remove_server(r, gh->server), 3);
    t = top(r, "issues of a repository", NULL);
    assert_true(t == NULL || strncmp(t, "github__", 8) != 0);
    reg_registry_free(r);
}

static void test_batches_survive_concurrent_changes(void **state)
{
    (void)state;
    reg_registry_t *r = lexical_registry(true);
    char msg[256];
    reg_batch_t *b, *b2;
    /* The first batch learns the corpus statistics, so it holds every tool. */
    assert_int_equal(reg_registry_next_batch(r, 2, &b), REG_OK);
    assert_non_null(b);
    assert_int_equal(reg_batch_count(b), 6);
    assert_int_equal(reg_registry_next_batch(r, 2, &b2), REG_EBUSY);
    /* While it is in flight, search still works (BM25) without using the embedder. */
    assert_string_equal(top(r, "weather forecast", NULL), "weather__get_forecast");
    assert_int_equal(reg_batch_embed(b, msg, sizeof msg), REG_OK);
    /* Meanwhile chat goes away and weather's tool changes. */
    reg_registry_remove_server(r, "chat");
    set_tools(r, "weather",
              "[{\"name\": \"get_forecast\", \"description\": \"Hourly tide tables.\"}]");
    assert_int_equal(reg_registry_apply_batch(r, b), REG_OK);
    /* github indexed; chat dropped; weather's stale vector refused, its new text pending. */
    assert_int_equal(reg_registry_pending(r), 1);
    /* The catalog shrank from 6 to 4 tools (more than REG_REFIT_RATIO): the next batch
     * refits the statistics and so holds all 4 tools. */
    assert_int_equal(reg_registry_next_batch(r, 8, &b), REG_OK);
    assert_non_null(b);
    assert_int_equal(reg_batch_count(b), 4);
    assert_int_equal(reg_batch_embed(b, msg, sizeof msg), REG_OK);
    assert_int_equal(reg_registry_apply_batch(r, b), REG_OK);
    assert_int_equal(reg_registry_pending(r), 0);
    assert_int_equal(reg_registry_next_batch(r, 8, &b), REG_OK);
    assert_null(b);
    assert_string_equal(top(r, "tide tables", NULL), "weather__get_forecast");
    /* A small change is embedded incrementally with the current statistics. */
    set_tools(r, "weather",
              "[{\"name\": \"get_forecast\", \"description\": \"Hourly tide tables.\"}]");
    assert_int_equal(reg_registry_next_batch(r, 8, &b), REG_OK);
    assert_int_equal(reg_batch_count(b), 1);
    assert_int_equal(reg_batch_embed(b, msg, sizeof msg), REG_OK);
    assert_int_equal(reg_registry_apply_batch(r, b), REG_OK);
    assert_int_equal(reg_registry_pending(r), 0);
    reg_registry_free(r);
}

static void test_unembedded_batch_goes_back_to_pending(void **state)
{
    (void)state;
    reg_registry_t *r = lexical_registry(true);
    char msg[256];
    assert_int_equal(reg_registry_index_all(r, msg, sizeof msg), REG_OK);
    set_tools(r, "weather", tools_wx); /* same tools, re-added: one pending */
    reg_batch_t *b;
    assert_int_equal(reg_registry_next_batch(r, 8, &b), REG_OK);
    assert_int_equal(reg_batch_count(b), 1);
    assert_int_equal(reg_registry_apply_batch(r, b), REG_EEMBED); /* never embedded */
    assert_int_equal(reg_registry_pending(r), 1);
    assert_int_equal(reg_registry_index_all(r, msg, sizeof msg), REG_OK);
    assert_int_equal(reg_registry_pending(r), 0);
    reg_registry_free(r);
}

static void test_bm25_only_registry(void **state)
{
    (void)state;
    reg_registry_t *r;
    assert_int_equal(reg_registry_new(NULL, NULL, &r), REG_OK);
    assert_string_equal(reg_registry_embedder_name(r), "bm25");
    set_tools(r, "github", tools_gh);
    assert_int_equal(reg_registry_pending(r), 0);
    reg_batch_t *b;
    assert_int_equal(reg_registry_next_batch(r, 0, &b), REG_OK);
    assert_null(b);
    assert_string_equal(top(r, "merge pull request", NULL), "github__merge_pull_request");
    reg_registry_free(r);
}

/* A provider that is not safe to use from two threads and counts its embed() calls. */
typedef struct guarded {
    int calls;
} guarded_t;

static int guarded_embed(reg_embedder_t *self, const char *const *texts, size_t n,
                         reg_embed_kind_t kind, float *out, char *msg, size_t msg_size)
{
    (void)kind;
    (void)msg;
    (void)msg_size;
    guarded_t *g = self->impl;
    g->calls++;
    for (size_t i = 0; i < n; i++)
        for (size_t d = 0; d < 8; d++)
            out[i * 8 + d] = (float)((strlen(texts[i]) + d) % 3);
    return REG_OK;
}

static void guarded_destroy(reg_embedder_t *self)
{
    free(self->impl);
}

static void test_non_concurrent_embedder_is_not_raced(void **state)
{
    (void)state;
    reg_embedder_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    guarded_t *g = calloc(1, sizeof *g);
    assert_non_null(g);
    *e = (reg_embedder_t){.name = "model:guarded",
                          .cache_provider = "model",
                          .cache_model = "guarded",
                          .dim = 8,
                          .concurrent = false,
                          .embed = guarded_embed,
                          .destroy = guarded_destroy,
                          .impl = g};
    reg_registry_t *r;
    assert_int_equal(reg_registry_new(e, NULL, &r), REG_OK);
    set_tools(r, "github", tools_gh);
    char msg[256];
    assert_int_equal(reg_registry_index_all(r, msg, sizeof msg), REG_OK);
    int before = g->calls;
    assert_non_null(top(r, "merge a pull request", NULL));
    assert_int_equal(g->calls, before + 1); /* idle: the query is embedded inline */

    set_tools(r, "weather", tools_wx);
    reg_batch_t *b;
    assert_int_equal(reg_registry_next_batch(r, 8, &b), REG_OK);
    assert_non_null(b);
    before = g->calls;
    /* A batch is in flight (a worker could be inside embed()): search answers from BM25. */
    assert_string_equal(top(r, "merge a pull request", NULL), "github__merge_pull_request");
    assert_int_equal(g->calls, before);
    /* A query vector computed elsewhere is still used. */
    float qv[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    reg_result_t res[3];
    assert_true(reg_registry_search(r, "merge", qv, 3, NULL, res, msg, sizeof msg) > 0);
    assert_int_equal(g->calls, before);
    assert_int_equal(reg_batch_embed(b, msg, sizeof msg), REG_OK);
    assert_int_equal(reg_registry_apply_batch(r, b), REG_OK);
    reg_registry_free(r);
}

/* A sentence model played by word counts: one dimension per topic word, so that a text's
 * vector is the blend of the topics it names, as mean pooling blends them. */
static int topics_embed(reg_embedder_t *self, const char *const *texts, size_t n,
                        reg_embed_kind_t kind, float *out, char *msg, size_t msg_size)
{
    static const char *const words[] = {"weather", "invoice", "music"};
    (void)self;
    (void)kind;
    (void)msg;
    (void)msg_size;
    for (size_t i = 0; i < n; i++) {
        for (size_t d = 0; d < 3; d++) {
            int c = 0;
            for (const char *p = texts[i]; (p = strstr(p, words[d])) != NULL; p++)
                c++;
            out[i * 4 + d] = (float)c;
        }
        out[i * 4 + 3] = 0.01f;
    }
    return REG_OK;
}

static reg_registry_t *topics_registry(bool parts)
{
    reg_embedder_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    *e = (reg_embedder_t){.name = "model:topics",
                          .cache_provider = "model",
                          .cache_model = "topics",
                          .dim = 4,
                          .concurrent = true,
                          .sentence_model = true,
                          .embed = topics_embed};
    reg_registry_opts_t o;
    reg_registry_opts_default(&o);
    o.hybrid = false; /* the dense signal alone */
    o.parts = parts;
    reg_registry_t *r;
    assert_int_equal(reg_registry_new(e, &o, &r), REG_OK);
    /* billing's whole text blends two topics; its second sentence is about the weather only.
     * radio's one sentence leans to the weather (twice) over music. */
    set_tools(r, "billing",
              "[{\"name\": \"create_bill\", \"description\": \"Creates an invoice for a "
              "customer. Gives the weather forecast for a city.\"}]");
    set_tools(r, "radio",
              "[{\"name\": \"play\", \"description\": \"Plays music, the weather "
              "and the weather news.\"}]");
    char msg[256];
    assert_int_equal(reg_registry_index_all(r, msg, sizeof msg), REG_OK);
    return r;
}

static void test_parts_score_a_tool_by_its_best_sentence(void **state)
{
    (void)state;
    reg_result_t res[5];
    char msg[256];
    reg_registry_t *whole = topics_registry(false), *r = topics_registry(true);
    /* Whole texts only: radio's leans more to the weather than billing's blend. */
    int n = reg_registry_search(whole, "weather", NULL, 5, NULL, res, msg, sizeof msg);
    assert_int_equal(n, 2);
    assert_string_equal(res[0].tool->id, "radio__play");
    assert_true(res[1].score < 0.75f);
    /* With parts, billing's second sentence is the weather alone. */
    n = reg_registry_search(r, "weather", NULL, 5, NULL, res, msg, sizeof msg);
    assert_int_equal(n, 2);
    assert_string_equal(res[0].tool->id, "billing__create_bill");
    assert_true(res[0].score > 0.98f);
    assert_string_equal(res[1].tool->id, "radio__play");
    reg_registry_stats_t st, st_whole;
    reg_registry_stats(r, &st);
    reg_registry_stats(whole, &st_whole);
    assert_int_equal(st.indexed, 2); /* tools, not vectors */
    assert_true(st.memory_bytes > st_whole.memory_bytes);
    /* A filter applies to the parts too. */
    reg_filter_t f;
    reg_filter_default(&f);
    f.server = "radio";
    n = reg_registry_search(r, "weather", NULL, 5, &f, res, msg, sizeof msg);
    assert_int_equal(n, 1);
    assert_string_equal(res[0].tool->id, "radio__play");
    /* A server's removal takes its parts along: no hit through a stale part. */
    reg_registry_remove_server(r, "billing");
    n = reg_registry_search(r, "weather", NULL, 5, NULL, res, msg, sizeof msg);
    assert_int_equal(n, 1);
    assert_string_equal(res[0].tool->id, "radio__play");
    /* Listed again, it is embedded again, parts included. */
    set_tools(r, "billing",
              "[{\"name\": \"create_bill\", \"description\": \"Creates an invoice. Gives "
              "the weather forecast for a city.\"}]");
    assert_int_equal(reg_registry_index_all(r, msg, sizeof msg), REG_OK);
    assert_string_equal(top(r, "weather", NULL), "billing__create_bill");
    reg_registry_free(whole);
    reg_registry_free(r);
}

/* Two batches out at once (one per worker) once the first, refitting batch has landed. */
static void test_several_batches_in_flight(void **state)
{
    (void)state;
    reg_embedder_t *e;
    assert_int_equal(reg_lexical_new(NULL, &e), REG_OK);
    reg_registry_opts_t o;
    reg_registry_opts_default(&o);
    assert_int_equal(o.batches_in_flight, 1);
    o.batches_in_flight = 2;
    reg_registry_t *r;
    assert_int_equal(reg_registry_new(e, &o, &r), REG_OK);
    set_tools(r, "github", tools_gh);
    set_tools(r, "chat", tools_chat);
    set_tools(r, "weather", tools_wx);
    set_tools(r, "files",
              "[{\"name\": \"read_file\"}, {\"name\": \"write_file\"}, {\"name\": \"move_file\"},"
              " {\"name\": \"list_dir\"}, {\"name\": \"stat_file\"}, {\"name\": \"delete_file\"}]");
    char msg[256];
    reg_batch_t *b1, *b2, *b3;
    /* The refitting batch holds all 12 tools and is alone: nothing else is handed out. */
    assert_int_equal(reg_registry_next_batch(r, 1, &b1), REG_OK);
    assert_int_equal(reg_batch_count(b1), 12);
    assert_int_equal(reg_registry_next_batch(r, 1, &b2), REG_EBUSY);
    assert_int_equal(reg_batch_embed(b1, msg, sizeof msg), REG_OK);
    assert_int_equal(reg_registry_apply_batch(r, b1), REG_OK);
    assert_int_equal(reg_registry_pending(r), 0);
    /* Below the refit ratio, new tools come in batches that may overlap. */
    set_tools(r, "notes",
              "[{\"name\": \"add_note\", \"description\": \"Write a note.\"},"
              " {\"name\": \"find_note\", \"description\": \"Find a note by words.\"}]");
    assert_int_equal(reg_registry_pending(r), 2); /* 14 against 12 fitted: no refit */
    assert_int_equal(reg_registry_next_batch(r, 1, &b1), REG_OK);
    assert_int_equal(reg_registry_next_batch(r, 1, &b2), REG_OK);
    assert_non_null(b1);
    assert_non_null(b2);
    assert_int_equal(reg_batch_count(b1) + reg_batch_count(b2), 2);
    assert_int_equal(reg_registry_batches_in_flight(r), 2);
    assert_int_equal(reg_registry_next_batch(r, 1, &b3), REG_EBUSY);
    /* Searches while both are out say what they covered. */
    reg_result_t res[3];
    reg_search_info_t info;
    assert_true(reg_registry_search_info(r, "write a note", NULL, 3, NULL, res, &info, msg,
                                         sizeof msg) > 0);
    assert_int_equal(info.tools, 14);
    assert_int_equal(info.indexed, 12);
    assert_int_equal(info.pending, 2);
    assert_true(info.bm25);
    /* Applied in the other order than taken. */
    assert_int_equal(reg_batch_embed(b2, msg, sizeof msg), REG_OK);
    assert_int_equal(reg_batch_embed(b1, msg, sizeof msg), REG_OK);
    assert_int_equal(reg_registry_apply_batch(r, b2), REG_OK);
    assert_int_equal(reg_registry_apply_batch(r, b1), REG_OK);
    assert_int_equal(reg_registry_batches_in_flight(r), 0);
    assert_int_equal(reg_registry_pending(r), 0);
    assert_int_equal(reg_registry_next_batch(r, 1, &b3), REG_OK);
    assert_null(b3);
    assert_true(reg_registry_search_info(r, "write a note", NULL, 3, NULL, res, &info, msg,
                                         sizeof msg) > 0);
    assert_string_equal(res[0].tool->id, "notes__add_note");
    assert_int_equal(info.indexed, 14);
    assert_int_equal(info.pending, 0);
    assert_true(info.dense);
    reg_registry_free(r);
}

/* A provider without embed_stop: calls of REG_STOP_SLICE texts, the flag read between them. */
typedef struct slow {
    atomic_bool *stop;
    size_t calls, texts;
} slow_t;

static int slice_embed(reg_embedder_t *self, const char *const *texts, size_t n,
                       reg_embed_kind_t kind, float *out, char *msg, size_t msg_size)
{
    (void)texts;
    (void)kind;
    (void)msg;
    (void)msg_size;
    slow_t *s = self->impl;
    s->calls++;
    s->texts += n;
    for (size_t i = 0; i < n * self->dim; i++)
        out[i] = (i % self->dim) == 0 ? 1.0f : 0.0f;
    /* Someone asks to stop while the first call runs. */
    atomic_store(s->stop, true);
    return REG_OK;
}

static void test_stop_between_slices_of_a_plain_provider(void **state)
{
    (void)state;
    atomic_bool stop;
    atomic_init(&stop, false);
    slow_t s = {.stop = &stop};
    reg_embedder_t e = {.name = "slices", .dim = 4, .embed = slice_embed, .impl = &s};
    enum { N = 3 * REG_STOP_SLICE };
    const char *texts[N];
    for (size_t i = 0; i < N; i++)
        texts[i] = "text";
    float out[N * 4];
    char msg[128];
    assert_int_equal(
        reg_embedder_embed_stop(&e, texts, N, REG_EMBED_DOCUMENT, &stop, out, msg, sizeof msg),
        REG_ECANCELED);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.texts, REG_STOP_SLICE);
    /* Without a flag the provider gets the whole batch in one call. */
    s.calls = s.texts = 0;
    assert_int_equal(
        reg_embedder_embed_stop(&e, texts, N, REG_EMBED_DOCUMENT, NULL, out, msg, sizeof msg),
        REG_OK);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.texts, N);
}

/* After a cancel, a batch taken before it comes back cancelled and its tools stay pending. */
static void test_cancel_drops_batches_and_stops_handing_out(void **state)
{
    (void)state;
    reg_registry_t *r = lexical_registry(true);
    char msg[256];
    reg_batch_t *b;
    assert_false(reg_registry_cancelled(r));
    assert_int_equal(reg_registry_next_batch(r, 2, &b), REG_OK);
    reg_registry_cancel(r);
    reg_registry_cancel(r); /* idempotent */
    assert_true(reg_registry_cancelled(r));
    assert_int_equal(reg_batch_embed(b, msg, sizeof msg), REG_ECANCELED);
    assert_int_equal(reg_registry_apply_batch(r, b), REG_ECANCELED);
    assert_int_equal(reg_registry_pending(r), 6);
    assert_int_equal(reg_registry_batches_in_flight(r), 0);
    assert_int_equal(reg_registry_next_batch(r, 2, &b), REG_ECANCELED);
    assert_null(b);
    assert_true(reg_registry_index_all(r, msg, sizeof msg) == REG_ECANCELED);
    /* Searching still works, by words, and says so. */
    reg_result_t res[3];
    reg_search_info_t info;
    assert_true(reg_registry_search_info(r, "weather forecast", NULL, 3, NULL, res, &info, msg,
                                         sizeof msg) > 0);
    assert_string_equal(res[0].tool->id, "weather__get_forecast");
    assert_int_equal(info.tools, 6);
    assert_int_equal(info.indexed, 0);
    assert_int_equal(info.pending, 6);
    assert_false(info.dense);
    assert_true(info.bm25);
    reg_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_before_and_after_indexing),
        cmocka_unit_test(test_dense_only_mode),
        cmocka_unit_test(test_server_update_replaces_its_tools),
        cmocka_unit_test(test_batches_survive_concurrent_changes),
        cmocka_unit_test(test_unembedded_batch_goes_back_to_pending),
        cmocka_unit_test(test_bm25_only_registry),
        cmocka_unit_test(test_non_concurrent_embedder_is_not_raced),
        cmocka_unit_test(test_parts_score_a_tool_by_its_best_sentence),
        cmocka_unit_test(test_several_batches_in_flight),
        cmocka_unit_test(test_stop_between_slices_of_a_plain_provider),
        cmocka_unit_test(test_cancel_drops_batches_and_stops_handing_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
