/* The search service (registry/service.c) on a real libuv loop with the real lexical embedder:
 * indexing on the thread pool as tools change, queries embedded on the pool when the embedder
 * blocks and ranked on the loop, cancellation, a change while a batch is embedded, shutdown,
 * the remote fall-back and the start-up file. The "blocking" embedder here is the lexical one
 * marked blocking, with gates that hold a worker inside embed() so that the loop's thread can
 * act while a batch or a query is on the pool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>
#include <uv.h>

#include "registry.h"

static const char tools_gh[] =
    "[{\"name\": \"list_issues\", \"description\": \"List the issues of a repository.\"},"
    " {\"name\": \"create_issue\", \"description\": \"Open a new issue in a repository.\"},"
    " {\"name\": \"merge_pull_request\", \"description\": \"Merge a pull request.\"}]";
static const char tools_chat[] =
    "[{\"name\": \"send_message\", \"description\": \"Send a chat message to a channel.\"},"
    " {\"name\": \"list_channels\", \"description\": \"List the channels of a workspace.\"}]";
static const char tools_wx[] =
    "[{\"name\": \"get_forecast\", \"description\": \"Daily weather forecast for a place.\"}]";
static const char tools_wx2[] =
    "[{\"name\": \"get_tide_table\", \"description\": \"High and low tides of a harbour.\"}]";

/* --- a gate a worker waits at inside embed() ------------------------------------------------ */

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool closed;    /* embed() waits while set */
    int inside;     /* embed() calls waiting at the gate now */
    int calls;      /* embed() calls that passed */
    bool off_loop;  /* every call ran on another thread than the loop's */
    pthread_t loop; /* the loop's thread */
} gate_t;

static void gate_init(gate_t *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->closed = false;
    g->inside = g->calls = 0;
    g->off_loop = true;
    g->loop = pthread_self();
}

static void gate_destroy(gate_t *g)
{
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

static void gate_pass(gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    if (pthread_equal(pthread_self(), g->loop)) g->off_loop = false;
    g->inside++;
    pthread_cond_broadcast(&g->cv);
    while (g->closed)
        pthread_cond_wait(&g->cv, &g->mu);
    g->inside--;
    g->calls++;
    pthread_mutex_unlock(&g->mu);
}

/* Waits (on the loop's thread, the loop not running) until a worker waits at the gate. */
static void gate_wait_inside(gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    while (g->inside == 0)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_set(gate_t *g, bool closed)
{
    pthread_mutex_lock(&g->mu);
    g->closed = closed;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static int gate_calls(gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    int n = g->calls;
    pthread_mutex_unlock(&g->mu);
    return n;
}

/* --- the lexical embedder marked blocking, behind the gates ----------------------------------- */

typedef struct blocking {
    reg_embedder_t *inner;
    gate_t *docs, *queries;
} blocking_t;

static int blocking_embed(reg_embedder_t *self, const char *const *texts, size_t n,
                          reg_embed_kind_t kind, float *out, char *msg, size_t msg_size)
{
    blocking_t *b = self->impl;
    gate_pass(kind == REG_EMBED_QUERY ? b->queries : b->docs);
    return reg_embedder_embed(b->inner, texts, n, kind, out, msg, msg_size);
}

static int blocking_fit(reg_embedder_t *self, const char *const *docs, size_t n)
{
    blocking_t *b = self->impl;
    return reg_embedder_fit(b->inner, docs, n);
}

static void blocking_destroy(reg_embedder_t *self)
{
    blocking_t *b = self->impl;
    reg_embedder_free(b->inner);
    free(b);
}

/* The test's state: the loop, the gates, what the service logged and called back. */
typedef struct fixture {
    uv_loop_t loop;
    gate_t docs, queries;
    char log[8192];
    int warnings;
    int changes, indexed_calls;
    bool remote_fails; /* open_remote answers REG_EEMBED, as an unreachable server does */
} fixture_t;

static int open_blocking(const reg_embedder_spec_t *spec, void *data, reg_embedder_t **out,
                         char *msg, size_t msg_size)
{
    (void)spec;
    fixture_t *fx = data;
    if (fx->remote_fails) {
        snprintf(msg, msg_size, "connection refused");
        return REG_EEMBED;
    }
    reg_embedder_t *inner = NULL;
    assert_int_equal(reg_lexical_new(NULL, &inner), REG_OK);
    reg_embedder_t *e = calloc(1, sizeof *e);
    blocking_t *b = calloc(1, sizeof *b);
    assert_non_null(e);
    assert_non_null(b);
    *b = (blocking_t){.inner = inner, .docs = &fx->docs, .queries = &fx->queries};
    *e = (reg_embedder_t){.name = "lexical-blocking",
                          .cache_provider = "test",
                          .cache_model = NULL,
                          .dim = reg_embedder_dim(inner),
                          .concurrent = true,
                          .blocking = true,
                          .embed = blocking_embed,
                          .fit = blocking_fit,
                          .destroy = blocking_destroy,
                          .impl = b};
    *out = e;
    return REG_OK;
}

static void on_log(void *data, reg_log_level_t level, const char *line)
{
    fixture_t *fx = data;
    if (level == REG_LOG_WARNING) fx->warnings++;
    size_t used = strlen(fx->log);
    snprintf(fx->log + used, sizeof fx->log - used, "%s\n", line);
}

static void on_change(void *data)
{
    ((fixture_t *)data)->changes++;
}

static void on_indexed(void *data)
{
    ((fixture_t *)data)->indexed_calls++;
}

static int setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    assert_int_equal(uv_loop_init(&fx->loop), 0);
    gate_init(&fx->docs);
    gate_init(&fx->queries);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    gate_destroy(&fx->docs);
    gate_destroy(&fx->queries);
    free(fx);
    return 0;
}

/* A service with kind "lexical" or "remote" (the blocking one, through open_remote); the cache
 * stays off, so no test touches the home folder. */
static reg_service_t *service(fixture_t *fx, const char *kind, size_t query_jobs,
                              const char *tools_file, int want_rc, char *msg, size_t msg_size)
{
    reg_embedder_spec_t spec = {.kind = kind, .open_remote = open_blocking, .open_remote_data = fx};
    reg_service_opts_t o;
    reg_service_opts_default(&o);
    o.cache = false;
    o.query_jobs = query_jobs;
    o.tools_file = tools_file;
    o.log = on_log;
    o.log_data = fx;
    reg_service_t *svc = NULL;
    char local[512];
    if (msg == NULL) {
        msg = local;
        msg_size = sizeof local;
    }
    assert_int_equal(reg_service_new(&fx->loop, &spec, &o, &svc, msg, msg_size), want_rc);
    if (svc != NULL) {
        reg_service_on_change(svc, on_change, fx);
        reg_service_on_indexed(svc, on_indexed, fx);
    }
    return svc;
}

static void set_tools(reg_service_t *svc, const char *server, const char *json)
{
    cJSON *arr = cJSON_Parse(json);
    assert_non_null(arr);
    char msg[512] = "";
    int rc = reg_registry_set_server_tools(reg_service_registry(svc), server, arr, msg, sizeof msg);
    if (rc != REG_OK) fail_msg("set_server_tools: %s", msg);
    cJSON_Delete(arr);
    reg_service_changed(svc);
}

static void add_all(reg_service_t *svc)
{
    set_tools(svc, "github", tools_gh);
    set_tools(svc, "chat", tools_chat);
    set_tools(svc, "weather", tools_wx);
}

/* What a query's done saw. */
typedef struct answer {
    int calls;
    int err;
    size_t n;
    char top[REG_ID_MAX + 1];
    reg_search_info_t info;
    char server[64];
    char msg[256];
} answer_t;

static void answered(void *data, int err, const reg_result_t *res, size_t n,
                     const reg_search_info_t *info, const reg_filter_t *f, const char *msg)
{
    answer_t *a = data;
    a->calls++;
    a->err = err;
    a->n = n;
    a->info = *info;
    snprintf(a->top, sizeof a->top, "%s", n > 0 ? res[0].tool->id : "");
    snprintf(a->server, sizeof a->server, "%s", f->server ? f->server : "");
    snprintf(a->msg, sizeof a->msg, "%s", msg ? msg : "");
    for (size_t i = 1; i < n; i++)
        assert_true(res[i - 1].score >= res[i].score);
}

static void test_indexes_on_the_pool_as_tools_change(void **state)
{
    fixture_t *fx = *state;
    reg_service_t *svc = service(fx, "lexical", 0, NULL, REG_OK, NULL, 0);
    add_all(svc);
    assert_int_equal(fx->changes, 3);
    reg_registry_stats_t st;
    reg_registry_stats(reg_service_registry(svc), &st);
    assert_int_equal(st.tools, 6);
    assert_true(st.pending > 0); /* nothing is embedded on the loop's thread */
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    reg_registry_stats(reg_service_registry(svc), &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.indexed, 6);
    assert_true(fx->indexed_calls >= 1);
    assert_non_null(strstr(fx->log, "search index: 6 tools indexed with lexical"));
    assert_int_equal(fx->warnings, 0);

    /* a server added: its tool is indexed, and the log says the new count */
    set_tools(svc, "tides", tools_wx2);
    assert_int_equal(fx->changes, 4);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    reg_registry_stats(reg_service_registry(svc), &st);
    assert_int_equal(st.indexed, 7);
    assert_non_null(strstr(fx->log, "search index: 7 tools indexed with lexical"));
    reg_service_free(svc);
}

static void test_a_non_blocking_embedder_answers_before_the_call_returns(void **state)
{
    fixture_t *fx = *state;
    reg_service_t *svc = service(fx, "lexical", 0, NULL, REG_OK, NULL, 0);
    add_all(svc);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    answer_t a = {0};
    reg_query_t *q = (reg_query_t *)&a; /* overwritten */
    assert_int_equal(reg_service_query(svc, "send a chat message", 3, NULL, NULL, answered, &a, &q),
                     REG_OK);
    assert_null(q);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, 0);
    assert_string_equal(a.top, "chat__send_message");
    assert_true(a.info.dense);
    assert_int_equal(a.info.indexed, 6);

    /* filters are applied and handed back */
    memset(&a, 0, sizeof a);
    assert_int_equal(reg_service_query(svc, "list", 5, "github", NULL, answered, &a, &q), REG_OK);
    assert_int_equal(a.calls, 1);
    assert_string_equal(a.top, "github__list_issues");
    assert_string_equal(a.server, "github");

    /* bad top_k and no query are refused without an answer */
    memset(&a, 0, sizeof a);
    assert_int_equal(reg_service_query(svc, "x", 0, NULL, NULL, answered, &a, &q), REG_EINVAL);
    assert_int_equal(
        reg_service_query(svc, "x", REG_SERVICE_TOPK_MAX + 1, NULL, NULL, answered, &a, &q),
        REG_EINVAL);
    assert_int_equal(reg_service_query(svc, NULL, 5, NULL, NULL, answered, &a, &q), REG_EINVAL);
    assert_int_equal(a.calls, 0);
    reg_service_free(svc);
}

static void test_a_blocking_embedder_embeds_queries_on_the_pool(void **state)
{
    fixture_t *fx = *state;
    reg_service_t *svc = service(fx, "remote", 0, NULL, REG_OK, NULL, 0);
    add_all(svc);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    assert_true(gate_calls(&fx->docs) > 0);
    assert_true(fx->docs.off_loop);

    answer_t a = {0};
    reg_query_t *q = NULL;
    assert_int_equal(reg_service_query(svc, "weather forecast", 3, NULL, NULL, answered, &a, &q),
                     REG_OK);
    assert_non_null(q);
    assert_int_equal(a.calls, 0); /* the answer comes from a later loop turn */
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, 0);
    assert_string_equal(a.top, "weather__get_forecast");
    assert_true(a.info.dense); /* ranked with the pool's vector, not by words alone */
    assert_int_equal(gate_calls(&fx->queries), 1);
    assert_true(fx->queries.off_loop);
    reg_service_free(svc);
}

static void test_a_cancelled_query_is_never_answered(void **state)
{
    fixture_t *fx = *state;
    reg_service_t *svc = service(fx, "remote", 0, NULL, REG_OK, NULL, 0);
    add_all(svc);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);

    gate_set(&fx->queries, true);
    answer_t a = {0};
    reg_query_t *q = NULL;
    assert_int_equal(
        reg_service_query(svc, "merge a pull request", 3, NULL, NULL, answered, &a, &q), REG_OK);
    assert_non_null(q);
    gate_wait_inside(&fx->queries); /* the worker is embedding it */
    reg_service_query_cancel(q);
    gate_set(&fx->queries, false);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(a.calls, 0);
    assert_int_equal(gate_calls(&fx->queries), 1); /* it ran to its end and was dropped */

    /* the service goes on answering */
    assert_int_equal(
        reg_service_query(svc, "merge a pull request", 3, NULL, NULL, answered, &a, &q), REG_OK);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(a.calls, 1);
    assert_string_equal(a.top, "github__merge_pull_request");
    reg_service_query_cancel(NULL); /* nothing */
    reg_service_free(svc);
}

static void test_past_query_jobs_words_answer_at_once(void **state)
{
    fixture_t *fx = *state;
    reg_service_t *svc = service(fx, "remote", 1, NULL, REG_OK, NULL, 0);
    add_all(svc);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);

    gate_set(&fx->queries, true);
    answer_t first = {0}, second = {0};
    reg_query_t *q1 = NULL, *q2 = NULL;
    assert_int_equal(reg_service_query(svc, "open an issue", 3, NULL, NULL, answered, &first, &q1),
                     REG_OK);
    assert_non_null(q1);
    assert_int_equal(
        reg_service_query(svc, "list the channels", 3, NULL, NULL, answered, &second, &q2), REG_OK);
    assert_null(q2); /* the one query job is taken: BM25 answered */
    assert_int_equal(second.calls, 1);
    assert_false(second.info.dense);
    assert_true(second.info.bm25);
    assert_string_equal(second.top, "chat__list_channels");
    gate_set(&fx->queries, false);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(first.calls, 1);
    assert_true(first.info.dense);
    assert_string_equal(first.top, "github__create_issue");
    reg_service_free(svc);
}

static void test_tools_changed_while_a_batch_is_embedded_are_indexed_fresh(void **state)
{
    fixture_t *fx = *state;
    reg_service_t *svc = service(fx, "remote", 0, NULL, REG_OK, NULL, 0);
    gate_set(&fx->docs, true);
    add_all(svc);
    gate_wait_inside(&fx->docs); /* the first batch is on a worker */
    /* weather's tool is replaced and chat goes away while that batch is embedded */
    set_tools(svc, "weather", tools_wx2);
    set_tools(svc, "chat", "[]");
    gate_set(&fx->docs, false);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    reg_registry_stats_t st;
    reg_registry_stats(reg_service_registry(svc), &st);
    assert_int_equal(st.tools, 4);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.indexed, 4); /* no stale vector of a removed or replaced tool */
    assert_int_equal(fx->warnings, 0);

    answer_t a = {0};
    reg_query_t *q = NULL;
    assert_int_equal(
        reg_service_query(svc, "tides in the harbour", 3, NULL, NULL, answered, &a, &q), REG_OK);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    assert_string_equal(a.top, "weather__get_tide_table");
    assert_true(a.info.dense);
    memset(&a, 0, sizeof a);
    assert_int_equal(reg_service_query(svc, "weather forecast", 5, NULL, NULL, answered, &a, &q),
                     REG_OK);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    assert_string_not_equal(a.top, "weather__get_forecast");
    reg_service_free(svc);
}

static void test_stop_ends_indexing_and_queries_still_answer(void **state)
{
    fixture_t *fx = *state;
    reg_service_t *svc = service(fx, "remote", 0, NULL, REG_OK, NULL, 0);
    gate_set(&fx->docs, true);
    add_all(svc);
    gate_wait_inside(&fx->docs);
    reg_service_stop(svc);
    reg_service_stop(svc); /* idempotent */
    gate_set(&fx->docs, false);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    /* the batch on the worker (github's 3 tools, handed out before chat and weather came)
     * may finish its last slice; no batch starts after the stop */
    reg_registry_stats_t st;
    reg_registry_stats(reg_service_registry(svc), &st);
    assert_true(st.indexed <= 3);
    assert_int_equal(st.indexed + st.pending, 6);
    assert_int_equal(fx->warnings, 0); /* a stopped batch is no failure */
    size_t indexed = st.indexed;
    set_tools(svc, "tides", tools_wx2);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    reg_registry_stats(reg_service_registry(svc), &st);
    assert_int_equal(st.indexed, indexed);
    assert_int_equal(st.pending, 7 - indexed);

    answer_t a = {0};
    reg_query_t *q = NULL;
    assert_int_equal(reg_service_query(svc, "send a message", 3, NULL, NULL, answered, &a, &q),
                     REG_OK);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(a.calls, 1);
    assert_string_equal(a.top, "chat__send_message");
    assert_int_equal(a.info.pending, 7 - indexed);
    reg_service_free(svc);
}

static void test_an_unreachable_remote_falls_back_to_lexical(void **state)
{
    fixture_t *fx = *state;
    fx->remote_fails = true;
    reg_service_t *svc = service(fx, "remote", 0, NULL, REG_OK, NULL, 0);
    assert_string_equal(reg_registry_embedder_name(reg_service_registry(svc)), "lexical");
    assert_int_equal(fx->warnings, 1);
    assert_non_null(strstr(fx->log, "--embedder remote: connection refused; falling back to the "
                                    "built-in lexical embedder"));
    reg_service_free(svc);
}

static void test_start_up_errors_name_the_flag(void **state)
{
    fixture_t *fx = *state;
    char msg[512];
    assert_null(service(fx, "lexical", 0, "/nonexistent/tools.json", REG_EIO, msg, sizeof msg));
    assert_true(strncmp(msg, "--tools-file /nonexistent/tools.json: ", 38) == 0);
    assert_null(service(fx, "no-such-kind", 0, NULL, REG_EINVAL, msg, sizeof msg));
    assert_true(strncmp(msg, "--embedder no-such-kind: ", 25) == 0);
}

static void test_a_start_up_file_is_indexed(void **state)
{
    fixture_t *fx = *state;
    char path[] = "/tmp/ptc-test-service-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f, "{\"tools\": [{\"server\": \"weather\", \"name\": \"get_forecast\","
               " \"description\": \"Daily weather forecast for a place.\"}]}");
    fclose(f);
    reg_service_t *svc = service(fx, "lexical", 0, path, REG_OK, NULL, 0);
    unlink(path);
    assert_non_null(strstr(fx->log, "search_tools: embedder lexical, 1 tools from --tools-file"));
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0); /* indexing started by itself */
    reg_registry_stats_t st;
    reg_registry_stats(reg_service_registry(svc), &st);
    assert_int_equal(st.indexed, 1);
    reg_service_free(svc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_indexes_on_the_pool_as_tools_change, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_non_blocking_embedder_answers_before_the_call_returns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_blocking_embedder_embeds_queries_on_the_pool, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_cancelled_query_is_never_answered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_past_query_jobs_words_answer_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_tools_changed_while_a_batch_is_embedded_are_indexed_fresh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_ends_indexing_and_queries_still_answer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_an_unreachable_remote_falls_back_to_lexical, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_start_up_errors_name_the_flag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_start_up_file_is_indexed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
