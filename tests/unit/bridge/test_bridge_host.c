/* The host end of the bridge: routing, checks, budgets, timeouts, emit bounds, audit, close. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mbedtls/sha256.h>

#include "bridge.h"

#define FAKE_CALLS_MAX 80
#define LOOP_TURNS_MAX 100000 /* a test that waits for more turns than this is stuck */

typedef struct fake_call {
    char server[64], tool[64]; /* search: server is the filter ("(none)" without one) */
    char category[64];         /* search: the category filter ("(none)" without one) */
    char *args;                /* printed arguments; search: the query */
    unsigned timeout_ms;
    ptc_bridge_done_cb done;
    void *done_data;
    bool answered, cancelled;
} fake_call_t;

typedef struct env {
    uv_loop_t loop;
    int sv[2];
    uv_pipe_t peer;
    bool peer_open;
    mcp_framer_t pf;
    cJSON *answers; /* every answer line the peer read, in order */
    ptc_bridge_host_t *h;
    reg_catalog_t *cat;
    mcp_logger_t lg;
    /* fake ops */
    bool defer;          /* keep calls for the test to answer */
    bool cancel_runs_cb; /* cancel calls done(MCP_ECANCELED) before returning */
    fake_call_t calls[FAKE_CALLS_MAX];
    int ncalls, ncancels, npeer_closed;
    cJSON *audits; /* records the audit hook saw */
} env_t;

/* ---------------------------------------------------------------------------------------- */
/* Fake ops                                                                                  */

static const reg_tool_t *fake_find(void *data, const char *server, const char *tool)
{
    env_t *e = data;
    char id[300];
    snprintf(id, sizeof id, "%s__%s", server, tool);
    return reg_catalog_find(e->cat, id);
}

static void fake_answer(fake_call_t *c, const char *text)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *content = mcp_text_content(text);
    assert_non_null(r);
    assert_non_null(content);
    cJSON_AddItemToObject(r, "content", content);
    cJSON_AddBoolToObject(r, "isError", false);
    c->answered = true;
    c->done(c->done_data, 0, r, NULL);
    cJSON_Delete(r);
}

static int fake_call(void *data, const reg_tool_t *tool, const cJSON *args, unsigned timeout_ms,
                     ptc_bridge_done_cb done, void *done_data, void **handle)
{
    env_t *e = data;
    if (strcmp(tool->name, "broken") == 0) return MCP_ECONNECT;
    assert_true(e->ncalls < FAKE_CALLS_MAX);
    fake_call_t *c = &e->calls[e->ncalls++];
    snprintf(c->server, sizeof c->server, "%s", tool->server);
    snprintf(c->tool, sizeof c->tool, "%s", tool->name);
    c->args = cJSON_PrintUnformatted(args);
    c->timeout_ms = timeout_ms;
    c->done = done;
    c->done_data = done_data;
    *handle = c;
    if (e->defer || strcmp(tool->name, "hang") == 0) return 0;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(args, "message");
    char text[128];
    snprintf(text, sizeof text, "%s:%s", tool->name, cJSON_IsString(m) ? m->valuestring : "-");
    fake_answer(c, text);
    return 0;
}

static int fake_search(void *data, const char *query, int top_k, const char *server,
                       const char *category, ptc_bridge_done_cb done, void *done_data,
                       void **handle)
{
    env_t *e = data;
    assert_true(e->ncalls < FAKE_CALLS_MAX);
    fake_call_t *c = &e->calls[e->ncalls++];
    snprintf(c->tool, sizeof c->tool, "search");
    snprintf(c->server, sizeof c->server, "%s", server ? server : "(none)");
    snprintf(c->category, sizeof c->category, "%s", category ? category : "(none)");
    c->args = strdup(query);
    c->done = done;
    c->done_data = done_data;
    *handle = c;
    if (e->defer) return 0;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "embedder", "lexical");
    cJSON_AddNumberToObject(r, "top_k", top_k);
    cJSON_AddStringToObject(r, "query", query);
    c->answered = true;
    done(done_data, 0, r, NULL);
    cJSON_Delete(r);
    return 0;
}

static void fake_cancel(void *data, void *handle)
{
    env_t *e = data;
    fake_call_t *c = handle;
    e->ncancels++;
    c->cancelled = true;
    if (e->cancel_runs_cb && !c->answered) {
        c->answered = true;
        c->done(c->done_data, MCP_ECANCELED, NULL, "cancelled");
    }
}

static void fake_audit(void *data, const cJSON *rec)
{
    env_t *e = data;
    cJSON_AddItemToArray(e->audits, cJSON_Duplicate(rec, true));
}

static void fake_peer_closed(void *data)
{
    ((env_t *)data)->npeer_closed++;
}

static const ptc_bridge_ops_t fake_ops = {
    .find_tool = fake_find,
    .call = fake_call,
    .search = fake_search,
    .cancel = fake_cancel,
    .audit = fake_audit,
    .peer_closed = fake_peer_closed,
};

/* ---------------------------------------------------------------------------------------- */
/* The sandbox's end                                                                         */

static void peer_line(void *data, const char *line, size_t len, bool too_big)
{
    env_t *e = data;
    assert_false(too_big);
    cJSON *j = cJSON_ParseWithLength(line, len);
    assert_non_null(j);
    cJSON_AddItemToArray(e->answers, j);
}

static void peer_alloc(uv_handle_t *h, size_t n, uv_buf_t *b)
{
    (void)h;
    *b = uv_buf_init(malloc(n), (unsigned)n);
}

static void peer_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    env_t *e = s->data;
    if (n > 0) mcp_framer_feed(&e->pf, b->base, (size_t)n);
    if (n < 0) uv_read_stop(s);
    free(b->base);
}

static void peer_written(uv_write_t *w, int status)
{
    (void)status;
    free(w->data);
    free(w);
}

static void peer_send(env_t *e, const char *text)
{
    uv_write_t *w = malloc(sizeof *w);
    size_t n = strlen(text);
    char *copy = malloc(n);
    assert_non_null(w);
    assert_non_null(copy);
    memcpy(copy, text, n);
    w->data = copy;
    uv_buf_t b = uv_buf_init(copy, (unsigned)n);
    assert_int_equal(uv_write(w, (uv_stream_t *)&e->peer, &b, 1, peer_written), 0);
}

static void peer_sendf(env_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void peer_sendf(env_t *e, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    peer_send(e, buf);
}

static void wait_answers(env_t *e, int n)
{
    for (int i = 0; cJSON_GetArraySize(e->answers) < n; i++) {
        assert_true(i < LOOP_TURNS_MAX);
        uv_run(&e->loop, UV_RUN_ONCE);
    }
}

static void wait_calls(env_t *e, int n)
{
    for (int i = 0; e->ncalls < n; i++) {
        assert_true(i < LOOP_TURNS_MAX);
        uv_run(&e->loop, UV_RUN_ONCE);
    }
}

static const cJSON *answer_for(env_t *e, int64_t id)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, e->answers)
    {
        const cJSON *i = cJSON_GetObjectItemCaseSensitive(a, "id");
        if (cJSON_IsNumber(i) && (int64_t)i->valuedouble == id) return a;
        if (id < 0 && cJSON_IsNull(i)) return a;
    }
    fail_msg("no answer for id %lld", (long long)id);
    return NULL;
}

static const char *error_code(env_t *e, int64_t id)
{
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(answer_for(e, id), "error");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(err, "code");
    return cJSON_IsString(c) ? c->valuestring : "";
}

static const char *error_message(env_t *e, int64_t id)
{
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(answer_for(e, id), "error");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(err, "message");
    return cJSON_IsString(c) ? c->valuestring : "";
}

static const char *result_text(env_t *e, int64_t id)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(answer_for(e, id), "result");
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "content"), 0);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "text");
    return cJSON_IsString(t) ? t->valuestring : "";
}

/* ---------------------------------------------------------------------------------------- */
/* Set-up                                                                                    */

static void add_tool(env_t *e, const char *server, const char *json)
{
    cJSON *t = cJSON_Parse(json);
    assert_non_null(t);
    char msg[256];
    assert_int_equal(reg_catalog_add(e->cat, server, t, msg, sizeof msg, NULL), 0);
    cJSON_Delete(t);
}

static env_t *env_new(const ptc_bridge_limits_t *lim)
{
    env_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    assert_int_equal(uv_loop_init(&e->loop), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, e->sv), 0);
    e->answers = cJSON_CreateArray();
    e->audits = cJSON_CreateArray();
    e->lg.out = stderr;
    e->lg.level = MCP_LOG_WARNING;
    assert_int_equal(reg_catalog_new(&e->cat), 0);
    add_tool(e, "srv",
             "{\"name\":\"echo\",\"inputSchema\":{\"type\":\"object\",\"properties\":"
             "{\"message\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"}},"
             "\"required\":[\"message\"]}}");
    add_tool(e, "srv", "{\"name\":\"delete\"}");
    add_tool(e, "srv", "{\"name\":\"hang\"}");
    add_tool(e, "srv", "{\"name\":\"broken\"}");
    add_tool(e, "other", "{\"name\":\"list\"}");
    add_tool(e, "srv", "{\"name\":\"read\",\"annotations\":{\"readOnlyHint\":true}}");
    assert_int_equal(mcp_framer_init(&e->pf, 64u << 20, peer_line, e), 0);
    assert_int_equal(uv_pipe_init(&e->loop, &e->peer, 0), 0);
    assert_int_equal(uv_pipe_open(&e->peer, e->sv[1]), 0);
    e->peer.data = e;
    e->peer_open = true;
    assert_int_equal(uv_read_start((uv_stream_t *)&e->peer, peer_alloc, peer_read), 0);
    char msg[256] = "";
    int rc =
        ptc_bridge_host_new(&e->loop, e->sv[0], lim, &fake_ops, e, &e->lg, &e->h, msg, sizeof msg);
    if (rc != 0) fail_msg("ptc_bridge_host_new: %s", msg);
    return e;
}

static void env_free(env_t *e)
{
    if (e->h != NULL) ptc_bridge_host_close(e->h, NULL);
    if (e->peer_open) uv_close((uv_handle_t *)&e->peer, NULL);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    mcp_framer_close(&e->pf);
    for (int i = 0; i < e->ncalls; i++)
        free(e->calls[i].args);
    cJSON_Delete(e->answers);
    cJSON_Delete(e->audits);
    reg_catalog_free(e->cat);
    free(e);
}

/* ---------------------------------------------------------------------------------------- */
/* Tests                                                                                     */

static void calls_and_searches_reach_ops_with_exact_arguments(void **state)
{
    (void)state;
    env_t *e = env_new(NULL);
    peer_send(e, "{\"id\":1,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
                 "\"arguments\":{\"message\":\"hi\",\"n\":2}}}\n"
                 "{\"id\":2,\"method\":\"search\",\"params\":{\"query\":\"read a file\","
                 "\"top_k\":3}}\n"
                 "{\"id\":3,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":"
                 "\"broken\"}}\n");
    wait_answers(e, 3);
    assert_int_equal(e->ncalls, 2);
    assert_string_equal(e->calls[0].server, "srv");
    assert_string_equal(e->calls[0].tool, "echo");
    assert_string_equal(e->calls[0].args, "{\"message\":\"hi\",\"n\":2}");
    assert_true(e->calls[0].timeout_ms > 0 && e->calls[0].timeout_ms <= PTC_BRIDGE_TIMEOUT_DEF);
    assert_string_equal(result_text(e, 1), "echo:hi");
    assert_string_equal(e->calls[1].args, "read a file");
    const cJSON *sr = cJSON_GetObjectItemCaseSensitive(answer_for(e, 2), "result");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(sr, "top_k")->valueint, 3);
    assert_string_equal(error_code(e, 3), PTC_BRIDGE_E_UNAVAIL);
    ptc_bridge_counters_t n;
    ptc_bridge_host_counters(e->h, &n);
    assert_int_equal(n.tool_calls, 1);
    assert_int_equal(n.searches, 1);
    assert_int_equal(n.in_flight, 0);
    assert_true(n.bytes_in > 100 && n.bytes_out > 50);
    env_free(e);
}

static void search_filters_reach_ops_and_absent_or_null_ones_are_none(void **state)
{
    (void)state;
    env_t *e = env_new(NULL);
    peer_send(e,
              "{\"id\":1,\"method\":\"search\",\"params\":{\"query\":\"q\",\"server\":"
              "\"files\",\"category\":\"storage\"}}\n"
              "{\"id\":2,\"method\":\"search\",\"params\":{\"query\":\"q\",\"category\":"
              "\"storage\"}}\n"
              "{\"id\":3,\"method\":\"search\",\"params\":{\"query\":\"q\",\"server\":null,"
              "\"category\":null}}\n"
              "{\"id\":4,\"method\":\"search\",\"params\":{\"query\":\"q\",\"category\":7}}\n"
              "{\"id\":5,\"method\":\"search\",\"params\":{\"query\":\"q\",\"category\":\"\"}}\n");
    wait_answers(e, 5);
    assert_int_equal(e->ncalls, 3);
    assert_string_equal(e->calls[0].server, "files");
    assert_string_equal(e->calls[0].category, "storage");
    assert_string_equal(e->calls[1].server, "(none)");
    assert_string_equal(e->calls[1].category, "storage");
    assert_string_equal(e->calls[2].server, "(none)");
    assert_string_equal(e->calls[2].category, "(none)");
    assert_string_equal(error_code(e, 4), PTC_BRIDGE_E_INVALID);
    assert_string_equal(error_code(e, 5), PTC_BRIDGE_E_INVALID);
    env_free(e);
}

static void allow_and_deny_patterns_refuse_tools_by_id(void **state)
{
    (void)state;
    ptc_bridge_limits_t lim = {.allow_tools = "srv__*, nope", .deny_tools = "srv__del*"};
    env_t *e = env_new(&lim);
    peer_send(
        e, "{\"id\":1,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"delete\"}}\n"
           "{\"id\":2,\"method\":\"call\",\"params\":{\"server\":\"other\",\"tool\":\"list\"}}\n"
           "{\"id\":3,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
           "\"arguments\":{\"message\":\"ok\"}}}\n"
           "{\"id\":4,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"nosuch\"}}\n");
    wait_answers(e, 4);
    assert_string_equal(error_code(e, 1), PTC_BRIDGE_E_DENIED);
    assert_non_null(strstr(error_message(e, 1), "srv__delete"));
    assert_non_null(strstr(error_message(e, 1), "--deny-tools"));
    assert_string_equal(error_code(e, 2), PTC_BRIDGE_E_DENIED);
    assert_non_null(strstr(error_message(e, 2), "--allow-tools"));
    assert_string_equal(result_text(e, 3), "echo:ok");
    assert_string_equal(error_code(e, 4), PTC_BRIDGE_E_UNKNOWN);
    assert_non_null(strstr(error_message(e, 4), "nosuch"));
    assert_int_equal(e->ncalls, 1);
    env_free(e);
}

static void schema_violation_is_refused_naming_the_field(void **state)
{
    (void)state;
    env_t *e = env_new(NULL);
    peer_send(e,
              "{\"id\":1,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
              "\"arguments\":{\"message\":\"x\",\"n\":\"two\"}}}\n"
              "{\"id\":2,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\"}}\n");
    wait_answers(e, 2);
    assert_string_equal(error_code(e, 1), PTC_BRIDGE_E_INVALID);
    assert_non_null(strstr(error_message(e, 1), "n:"));
    assert_string_equal(error_code(e, 2), PTC_BRIDGE_E_INVALID);
    assert_non_null(strstr(error_message(e, 2), "message"));
    assert_int_equal(e->ncalls, 0);
    env_free(e);
}

static void call_budget_stops_a_runaway_loop(void **state)
{
    (void)state;
    ptc_bridge_limits_t lim = {.max_calls = 3};
    env_t *e = env_new(&lim);
    for (int i = 1; i <= 5; i++)
        peer_sendf(e,
                   "{\"id\":%d,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":"
                   "\"echo\",\"arguments\":{\"message\":\"m%d\"}}}\n",
                   i, i);
    wait_answers(e, 5);
    for (int i = 1; i <= 3; i++)
        assert_non_null(strstr(result_text(e, i), "echo:m"));
    for (int i = 4; i <= 5; i++) {
        assert_string_equal(error_code(e, i), PTC_BRIDGE_E_BUDGET);
        assert_non_null(strstr(error_message(e, i), "budget"));
        assert_non_null(strstr(error_message(e, i), "spent"));
    }
    assert_int_equal(e->ncalls, 3);
    env_free(e);
}

static void a_hanging_tool_times_out_and_the_host_keeps_serving(void **state)
{
    (void)state;
    ptc_bridge_limits_t lim = {.tool_timeout_ms = 20};
    env_t *e = env_new(&lim);
    peer_send(e,
              "{\"id\":1,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"hang\"}}\n"
              "{\"id\":2,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
              "\"arguments\":{\"message\":\"a\"}}}\n");
    wait_answers(e, 2);
    assert_string_equal(error_code(e, 1), PTC_BRIDGE_E_TIMEOUT);
    assert_string_equal(result_text(e, 2), "echo:a");
    assert_int_equal(e->ncancels, 1);
    assert_true(e->calls[0].cancelled);
    assert_true(e->calls[0].timeout_ms <= 20);
    peer_send(e, "{\"id\":3,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
                 "\"arguments\":{\"message\":\"b\"}}}\n");
    wait_answers(e, 3);
    assert_string_equal(result_text(e, 3), "echo:b");
    /* the hang record is written when it times out, after echo's */
    int timeouts = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, e->audits)
    {
        if (strcmp(cJSON_GetObjectItemCaseSensitive(r, "outcome")->valuestring, "timeout") == 0) {
            timeouts++;
            assert_string_equal(cJSON_GetObjectItemCaseSensitive(r, "tool")->valuestring,
                                "srv__hang");
        }
    }
    assert_int_equal(timeouts, 1);
    env_free(e);
}

static void a_passed_run_deadline_refuses_new_calls_with_timeout(void **state)
{
    (void)state;
    /* uv_now counts milliseconds of a monotonic clock that is well past 1 by now */
    ptc_bridge_limits_t lim = {.deadline_ms = 1};
    env_t *e = env_new(&lim);
    assert_true(uv_now(&e->loop) > 1);
    peer_send(e, "{\"id\":7,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
                 "\"arguments\":{\"message\":\"late\"}}}\n");
    wait_answers(e, 1);
    assert_string_equal(error_code(e, 7), PTC_BRIDGE_E_TIMEOUT);
    assert_non_null(strstr(error_message(e, 7), "deadline"));
    assert_int_equal(e->ncalls, 0);
    env_free(e);
}

static void concurrent_calls_are_answered_by_id_out_of_order(void **state)
{
    (void)state;
    env_t *e = env_new(NULL);
    e->defer = true;
    for (int i = 1; i <= 3; i++)
        peer_sendf(e,
                   "{\"id\":%d,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":"
                   "\"echo\",\"arguments\":{\"message\":\"c%d\"}}}\n",
                   i, i);
    wait_calls(e, 3);
    ptc_bridge_counters_t n;
    ptc_bridge_host_counters(e->h, &n);
    assert_int_equal(n.in_flight, 3);
    int order[3] = {2, 0, 1};
    for (int k = 0; k < 3; k++) {
        fake_call_t *c = &e->calls[order[k]];
        char text[64];
        snprintf(text, sizeof text, "done:%s", c->args);
        fake_answer(c, text);
    }
    wait_answers(e, 3);
    int64_t want[3] = {3, 1, 2};
    for (int k = 0; k < 3; k++) {
        const cJSON *a = cJSON_GetArrayItem(e->answers, k);
        assert_int_equal((int64_t)cJSON_GetObjectItemCaseSensitive(a, "id")->valuedouble, want[k]);
        char expect[64];
        snprintf(expect, sizeof expect, "done:{\"message\":\"c%lld\"}", (long long)want[k]);
        assert_string_equal(result_text(e, want[k]), expect);
    }
    env_free(e);
}

static void emit_keeps_records_in_order_within_bounds_with_warnings(void **state)
{
    (void)state;
    ptc_bridge_limits_t lim = {.emit_record_max = 100, .emit_total_max = 250};
    env_t *e = env_new(&lim);
    char big[300];
    memset(big, 'x', 200);
    big[200] = '\0';
    char rec[100];
    memset(rec, 'r', 80);
    rec[80] = '\0';
    peer_send(e, "{\"id\":1,\"method\":\"emit\",\"params\":{\"record\":{\"a\":1}}}\n");
    peer_sendf(e, "{\"id\":2,\"method\":\"emit\",\"params\":{\"record\":\"%s\"}}\n", big);
    peer_sendf(e, "{\"id\":3,\"method\":\"emit\",\"params\":{\"record\":\"%s\"}}\n", rec);
    peer_sendf(e, "{\"id\":4,\"method\":\"emit\",\"params\":{\"record\":\"%s\"}}\n", rec);
    peer_sendf(e, "{\"id\":5,\"method\":\"emit\",\"params\":{\"record\":\"%s\"}}\n", rec);
    peer_send(e, "{\"id\":6,\"method\":\"emit\"}\n");
    peer_send(e, "{\"id\":7,\"method\":\"emit\",\"params\":{\"record\":null}}\n");
    peer_send(e, "not json at all\n");
    wait_answers(e, 8);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(answer_for(e, 1), "result")));
    assert_string_equal(error_code(e, 2), PTC_BRIDGE_E_TOOBIG);
    assert_non_null(strstr(error_message(e, 2), "100"));
    assert_string_equal(error_code(e, 5), PTC_BRIDGE_E_TOOBIG);
    assert_string_equal(error_code(e, 6), PTC_BRIDGE_E_INVALID);
    assert_string_equal(error_code(e, -1), PTC_BRIDGE_E_INVALID);
    /* a record cut off by the end of the stream */
    peer_send(e, "{\"id\":8,\"method\":\"emit\",\"params\":{\"record\":{\"x\":");
    uv_run(&e->loop, UV_RUN_NOWAIT);
    shutdown(e->sv[1], SHUT_WR);
    for (int i = 0; e->npeer_closed == 0; i++) {
        assert_true(i < LOOP_TURNS_MAX);
        uv_run(&e->loop, UV_RUN_ONCE);
    }
    assert_true(ptc_bridge_host_peer_closed(e->h));
    const cJSON *out = ptc_bridge_host_outputs(e->h);
    assert_int_equal(cJSON_GetArraySize(out), 4);
    char *s = cJSON_PrintUnformatted(out);
    char expect[400];
    snprintf(expect, sizeof expect, "[{\"a\":1},\"%s\",\"%s\",null]", rec, rec);
    assert_string_equal(s, expect);
    free(s);
    const cJSON *w = ptc_bridge_host_warnings(e->h);
    assert_int_equal(cJSON_GetArraySize(w), 5); /* 2, 5, 6, garbage, cut-off */
    assert_non_null(strstr(cJSON_GetArrayItem(w, 0)->valuestring, "record 2"));
    ptc_bridge_counters_t n;
    ptc_bridge_host_counters(e->h, &n);
    assert_int_equal(n.emits, 4);
    assert_int_equal(n.malformed, 2);
    cJSON *taken = ptc_bridge_host_take_outputs(e->h);
    assert_int_equal(cJSON_GetArraySize(taken), 4);
    assert_int_equal(cJSON_GetArraySize(ptc_bridge_host_outputs(e->h)), 0);
    cJSON_Delete(taken);
    /* The run's end hands over what is left: the warnings, no records, no calls; then none. */
    cJSON *outputs = NULL, *warnings = NULL;
    assert_int_equal(ptc_bridge_host_harvest(e->h, &outputs, &warnings), 0);
    assert_int_equal(cJSON_GetArraySize(outputs), 0);
    assert_int_equal(cJSON_GetArraySize(warnings), 5);
    cJSON_Delete(outputs);
    cJSON_Delete(warnings);
    assert_int_equal(ptc_bridge_host_harvest(e->h, NULL, &warnings), 0);
    assert_null(warnings);
    env_free(e);
}

static void close_cancels_calls_in_flight_and_frees_everything(void **state)
{
    (void)state;
    env_t *e = env_new(NULL);
    e->defer = true;
    e->cancel_runs_cb = true; /* as mcp_client_call_cancel: the callback runs inside cancel */
    peer_send(e, "{\"id\":1,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
                 "\"arguments\":{\"message\":\"a\"}}}\n"
                 "{\"id\":2,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
                 "\"arguments\":{\"message\":\"b\"}}}\n"
                 "{\"id\":3,\"method\":\"search\",\"params\":{\"query\":\"q\"}}\n");
    wait_calls(e, 3);
    ptc_bridge_counters_t n;
    ptc_bridge_host_close(e->h, &n);
    e->h = NULL;
    assert_int_equal(e->ncancels, 3);
    assert_int_equal(n.cancelled, 3);
    assert_int_equal(n.tool_calls, 2);
    assert_int_equal(n.in_flight, 0);
    int cancelled = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, e->audits)
    {
        if (strcmp(cJSON_GetObjectItemCaseSensitive(r, "outcome")->valuestring, "cancelled") == 0)
            cancelled++;
    }
    assert_int_equal(cancelled, 2);
    uv_run(&e->loop, UV_RUN_NOWAIT);
    assert_int_equal(cJSON_GetArraySize(e->answers), 0); /* nothing answered after close */
    env_free(e); /* uv_loop_close == 0 and ASan prove the handles and calls are gone */
}

static void audit_records_carry_time_run_tool_digest_outcome_duration(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    ptc_bridge_limits_t lim = {.audit = f, .run_id = "run-42", .deny_tools = "other__*"};
    env_t *e = env_new(&lim);
    peer_send(e, "{\"id\":1,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
                 "\"arguments\":{\"n\":1,\"message\":\"x\"}}}\n"
                 "{\"id\":2,\"method\":\"call\",\"params\":{\"server\":\"other\",\"tool\":\"list\","
                 "\"arguments\":{\"z\":{\"b\":[1,{\"d\":1,\"c\":2}],\"a\":null}}}}\n");
    wait_answers(e, 2);
    rewind(f);
    char line[2048];
    cJSON *recs[2];
    for (int i = 0; i < 2; i++) {
        assert_non_null(fgets(line, sizeof line, f));
        recs[i] = cJSON_Parse(line);
        assert_non_null(recs[i]);
    }
    assert_null(fgets(line, sizeof line, f));
    const char *canon[2] = {"{\"message\":\"x\",\"n\":1}",
                            "{\"z\":{\"a\":null,\"b\":[1,{\"c\":2,\"d\":1}]}}"};
    const char *tool[2] = {"srv__echo", "other__list"};
    const char *outcome[2] = {"ok", "denied"};
    for (int i = 0; i < 2; i++) {
        unsigned char d[32];
        char hex[65];
        mbedtls_sha256_ret((const unsigned char *)canon[i], strlen(canon[i]), d, 0);
        for (int k = 0; k < 32; k++)
            snprintf(hex + 2 * k, 3, "%02x", d[k]);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(recs[i], "time");
        assert_true(cJSON_IsString(t) && strlen(t->valuestring) == 24 &&
                    t->valuestring[23] == 'Z' && t->valuestring[10] == 'T');
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(recs[i], "run")->valuestring,
                            "run-42");
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(recs[i], "tool")->valuestring,
                            tool[i]);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(recs[i], "args_sha256")->valuestring,
                            hex);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(recs[i], "outcome")->valuestring,
                            outcome[i]);
        assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(recs[i], "duration_ms")));
        /* the hook saw the same record */
        assert_true(cJSON_Compare(recs[i], cJSON_GetArrayItem(e->audits, i), true));
        cJSON_Delete(recs[i]);
    }
    assert_int_equal(cJSON_GetArraySize(e->audits), 2);
    env_free(e);
    fclose(f);
}

static void garbage_and_an_early_peer_close_never_crash_the_host(void **state)
{
    (void)state;
    ptc_bridge_limits_t lim = {.line_max = 1024};
    env_t *e = env_new(&lim);
    char junk[5000];
    for (size_t i = 0; i < sizeof junk - 2; i++)
        junk[i] = (char)('!' + (i * 7919) % 90);
    junk[sizeof junk - 2] = '\n';
    junk[sizeof junk - 1] = '\0';
    peer_send(e, junk);
    peer_send(e, "{\"id\":\"x\"}\n[1,2]\n{\"id\":-5,\"method\":\"call\"}\n\n"
                 "{\"id\":9,\"method\":\"teleport\",\"params\":{}}\n");
    peer_send(e, "{\"id\":10,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
                 "\"arguments\":{\"message\":\"still here\"}}}\n");
    for (int i = 0; cJSON_GetArraySize(e->answers) < 7; i++) {
        assert_true(i < LOOP_TURNS_MAX);
        uv_run(&e->loop, UV_RUN_ONCE);
    }
    assert_string_equal(error_code(e, 9), PTC_BRIDGE_E_INVALID);
    assert_string_equal(result_text(e, 10), "echo:still here");
    assert_string_equal(error_code(e, -1), PTC_BRIDGE_E_TOOBIG);
    /* the sandbox goes away with a call in flight; its answer arrives afterwards */
    e->defer = true;
    peer_send(e, "{\"id\":11,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
                 "\"arguments\":{\"message\":\"gone\"}}}\n");
    wait_calls(e, 2);
    uv_close((uv_handle_t *)&e->peer, NULL);
    e->peer_open = false;
    for (int i = 0; e->npeer_closed == 0; i++) {
        assert_true(i < LOOP_TURNS_MAX);
        uv_run(&e->loop, UV_RUN_ONCE);
    }
    fake_answer(&e->calls[1], "late");
    ptc_bridge_counters_t n;
    ptc_bridge_host_counters(e->h, &n);
    assert_int_equal(n.in_flight, 0);
    assert_true(n.malformed >= 3);
    env_free(e);
}

static void refuse_writes_lets_only_read_only_tools_through(void **state)
{
    (void)state;
    ptc_bridge_limits_t lim = {.refuse_writes = true};
    env_t *e = env_new(&lim);
    peer_send(
        e, "{\"id\":1,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"read\"}}\n"
           "{\"id\":2,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"delete\"}}\n");
    wait_answers(e, 2);
    assert_string_equal(result_text(e, 1), "read:-");
    assert_string_equal(error_code(e, 2), PTC_BRIDGE_E_DENIED);
    assert_non_null(strstr(error_message(e, 2), "--confirm-writes"));
    assert_int_equal(e->ncalls, 1);
    env_free(e);
}

static void byte_budgets_refuse_requests_and_answers_past_them(void **state)
{
    (void)state;
    /* one call line is 93 bytes and its answer 80 */
    ptc_bridge_limits_t lim = {.bytes_in_max = 200, .bytes_out_max = 100};
    env_t *e = env_new(&lim);
    for (int i = 1; i <= 3; i++)
        peer_sendf(e,
                   "{\"id\":%d,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":"
                   "\"echo\",\"arguments\":{\"message\":\"a\"}}}\n",
                   i);
    wait_answers(e, 3);
    assert_string_equal(result_text(e, 1), "echo:a");
    assert_string_equal(error_code(e, 2), PTC_BRIDGE_E_BUDGET);
    assert_non_null(strstr(error_message(e, 2), "answer bytes"));
    assert_string_equal(error_code(e, 3), PTC_BRIDGE_E_BUDGET);
    assert_non_null(strstr(error_message(e, 3), "request bytes"));
    assert_int_equal(e->ncalls, 2);
    assert_int_equal(cJSON_GetArraySize(e->audits), 3);
    env_free(e);
}

static void calls_past_the_in_flight_cap_are_refused_until_some_finish(void **state)
{
    (void)state;
    env_t *e = env_new(NULL);
    e->defer = true;
    for (unsigned i = 1; i <= PTC_BRIDGE_INFLIGHT_MAX + 1; i++)
        peer_sendf(e,
                   "{\"id\":%u,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":"
                   "\"read\"}}\n",
                   i);
    wait_answers(e, 1);
    assert_int_equal(e->ncalls, PTC_BRIDGE_INFLIGHT_MAX);
    assert_string_equal(error_code(e, PTC_BRIDGE_INFLIGHT_MAX + 1), PTC_BRIDGE_E_BUDGET);
    assert_non_null(strstr(error_message(e, PTC_BRIDGE_INFLIGHT_MAX + 1), "in flight"));
    fake_answer(&e->calls[0], "first");
    peer_send(e, "{\"id\":1000,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":"
                 "\"read\"}}\n");
    wait_calls(e, PTC_BRIDGE_INFLIGHT_MAX + 1);
    ptc_bridge_counters_t n;
    ptc_bridge_host_counters(e->h, &n);
    assert_int_equal(n.in_flight, PTC_BRIDGE_INFLIGHT_MAX);
    env_free(e); /* closes with 64 calls in flight */
}

static void the_peer_half_closing_still_gets_its_answers(void **state)
{
    (void)state;
    env_t *e = env_new(NULL);
    e->defer = true;
    peer_send(e, "{\"id\":1,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":"
                 "\"read\"}}\n");
    wait_calls(e, 1);
    shutdown(e->sv[1], SHUT_WR);
    for (int i = 0; e->npeer_closed == 0; i++) {
        assert_true(i < LOOP_TURNS_MAX);
        uv_run(&e->loop, UV_RUN_ONCE);
    }
    fake_answer(&e->calls[0], "after eof");
    wait_answers(e, 1);
    assert_string_equal(result_text(e, 1), "after eof");
    env_free(e);
}

/* A client process run on the test's loop: its exit callback ends the wait, and a guard timer
 * kills it if it hangs (a broken host that never answers fails the test instead of stalling). */
typedef struct child {
    uv_process_t proc;
    uv_timer_t guard;
    bool exited, guard_fired;
    int64_t status;
    int term_signal;
} child_t;

#define CHILD_GUARD_MS 60000

static void on_child_exit(uv_process_t *p, int64_t status, int term_signal)
{
    child_t *c = p->data;
    c->exited = true;
    c->status = status;
    c->term_signal = term_signal;
    uv_timer_stop(&c->guard);
    uv_close((uv_handle_t *)p, NULL);
    uv_close((uv_handle_t *)&c->guard, NULL);
}

static void on_child_guard(uv_timer_t *t)
{
    child_t *c = t->data;
    c->guard_fired = true;
    uv_process_kill(&c->proc, SIGKILL);
}

/* The real client: the generated runtime's protocol from several Python threads at once. */
static void python_threads_calling_at_once_all_get_their_answers(void **state)
{
    (void)state;
    if (system("python3 -c 'pass' >/dev/null 2>&1") != 0) skip();
    env_t *e = env_new(NULL);
    int fd = dup(e->sv[1]); /* closing the peer closes sv[1] */
    assert_true(fd >= 0);
    uv_close((uv_handle_t *)&e->peer, NULL);
    e->peer_open = false;
    /* The socket is the child's descriptor 3. */
    char code[] =
        "import json, socket, threading\n"
        "s = socket.socket(fileno=3); s.setblocking(True)\n"
        "lock = threading.Lock()\n"
        "def go(i):\n"
        "    msg = {'id': i, 'method': 'call', 'params': {'server': 'srv', 'tool': "
        "'echo', 'arguments': {'message': 't%d' % i}}}\n"
        "    with lock: s.sendall((json.dumps(msg) + '\\n').encode())\n"
        "ts = [threading.Thread(target=go, args=(i,)) for i in range(1, 21)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "f = s.makefile('rb'); got = {}\n"
        "while len(got) < 20:\n"
        "    a = json.loads(f.readline()); got[a['id']] = a['result']['content'][0]['text']\n"
        "assert all(got[i] == 'echo:t%d' % i for i in range(1, 21)), got\n";
    char py[] = "python3", dash_c[] = "-c";
    char *args[] = {py, dash_c, code, NULL};
    uv_stdio_container_t stdio[4] = {
        {.flags = UV_IGNORE},
        {.flags = UV_INHERIT_FD, .data.fd = 1},
        {.flags = UV_INHERIT_FD, .data.fd = 2},
        {.flags = UV_INHERIT_FD, .data.fd = fd},
    };
    uv_process_options_t opts = {.exit_cb = on_child_exit,
                                 .file = "python3",
                                 .args = args,
                                 .stdio_count = 4,
                                 .stdio = stdio};
    child_t c = {0};
    c.proc.data = &c;
    c.guard.data = &c;
    assert_int_equal(uv_timer_init(&e->loop, &c.guard), 0);
    assert_int_equal(uv_spawn(&e->loop, &c.proc, &opts), 0);
    assert_int_equal(uv_timer_start(&c.guard, on_child_guard, CHILD_GUARD_MS, 0), 0);
    close(fd); /* the child's end only: its exit is the host's EOF */
    while (!c.exited)
        uv_run(&e->loop, UV_RUN_ONCE);
    uv_run(&e->loop, UV_RUN_NOWAIT); /* let the closes finish while c is in scope */
    assert_false(c.guard_fired);
    assert_int_equal(c.term_signal, 0);
    assert_int_equal(c.status, 0);
    assert_int_equal(e->ncalls, 20);
    env_free(e);
}

static void bad_limits_are_refused_with_a_message(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    ptc_bridge_limits_t lim = {.emit_record_max = PTC_BRIDGE_EMIT_RECORD_MAX + 1};
    ptc_bridge_host_t *h = (ptc_bridge_host_t *)&loop;
    char msg[256] = "";
    assert_int_equal(
        ptc_bridge_host_new(&loop, sv[0], &lim, &fake_ops, NULL, NULL, &h, msg, sizeof msg),
        PTC_BRIDGE_EINVAL);
    assert_null(h);
    assert_non_null(strstr(msg, "emit"));
    close(sv[1]);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* Two attempts of one request share a journal: the second gets the first's successful results
 * for the same tool, arguments (in any key order) and occurrence; errors and read-only tools
 * run again, and a further identical call is a new occurrence that runs. */
static void the_journal_replays_successful_calls_of_an_earlier_attempt(void **state)
{
    (void)state;
    ptc_journal_t *jr = NULL;
    assert_int_equal(ptc_journal_new(&jr), 0);
    ptc_bridge_limits_t lim = {.journal = jr};
    env_t *e = env_new(&lim);
    e->defer = true;
    peer_send(e,
              "{\"id\":1,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
              "\"arguments\":{\"message\":\"a\"}}}\n"
              "{\"id\":2,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
              "\"arguments\":{\"message\":\"b\",\"n\":1}}}\n"
              "{\"id\":3,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"read\"}}\n"
              "{\"id\":4,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
              "\"arguments\":{\"message\":\"a\"}}}\n");
    wait_calls(e, 4);
    fake_answer(&e->calls[0], "first a");
    e->calls[1].answered = true;
    e->calls[1].done(e->calls[1].done_data, MCP_EREMOTE, NULL, "boom");
    fake_answer(&e->calls[2], "read once");
    fake_answer(&e->calls[3], "second a");
    wait_answers(e, 4);
    assert_int_equal(ptc_journal_count(jr), 2); /* the two echo "a" results */
    env_free(e);

    ptc_journal_begin_attempt(jr);
    e = env_new(&lim);
    peer_send(e,
              "{\"id\":1,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
              "\"arguments\":{\"message\":\"a\"}}}\n"
              "{\"id\":2,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
              "\"arguments\":{\"n\":1,\"message\":\"b\"}}}\n"
              "{\"id\":3,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"read\"}}\n"
              "{\"id\":4,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
              "\"arguments\":{\"message\":\"a\"}}}\n"
              "{\"id\":5,\"method\":\"call\",\"params\":{\"server\":\"srv\",\"tool\":\"echo\","
              "\"arguments\":{\"message\":\"a\"}}}\n");
    wait_answers(e, 5);
    assert_string_equal(result_text(e, 1), "first a");
    assert_string_equal(result_text(e, 2), "echo:b"); /* the error was not kept: it ran again */
    assert_string_equal(result_text(e, 3), "read:-"); /* read-only: always runs */
    assert_string_equal(result_text(e, 4), "second a");
    assert_string_equal(result_text(e, 5), "echo:a"); /* a third "a": nothing kept, it runs */
    assert_int_equal(e->ncalls, 3);
    ptc_bridge_counters_t n;
    ptc_bridge_host_counters(e->h, &n);
    assert_int_equal(n.replayed, 2);
    assert_int_equal(n.tool_calls, 3);
    int replayed_audits = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, e->audits)
    {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(a, "outcome");
        if (strcmp(o->valuestring, "replayed") == 0) replayed_audits++;
    }
    assert_int_equal(replayed_audits, 2);
    cJSON *rp = ptc_journal_take_replayed(jr);
    assert_int_equal(cJSON_GetArraySize(rp), 2);
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rp, 1), "tool")->valuestring,
        "srv__echo");
    assert_int_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rp, 1), "occurrence")->valueint, 2);
    cJSON_Delete(rp);
    assert_int_equal(cJSON_GetArraySize(ptc_journal_used(jr)), 2); /* echo, read */
    env_free(e);
    ptc_journal_free(jr);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the binary does */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(calls_and_searches_reach_ops_with_exact_arguments),
        cmocka_unit_test(search_filters_reach_ops_and_absent_or_null_ones_are_none),
        cmocka_unit_test(the_journal_replays_successful_calls_of_an_earlier_attempt),
        cmocka_unit_test(allow_and_deny_patterns_refuse_tools_by_id),
        cmocka_unit_test(schema_violation_is_refused_naming_the_field),
        cmocka_unit_test(call_budget_stops_a_runaway_loop),
        cmocka_unit_test(a_hanging_tool_times_out_and_the_host_keeps_serving),
        cmocka_unit_test(a_passed_run_deadline_refuses_new_calls_with_timeout),
        cmocka_unit_test(concurrent_calls_are_answered_by_id_out_of_order),
        cmocka_unit_test(emit_keeps_records_in_order_within_bounds_with_warnings),
        cmocka_unit_test(close_cancels_calls_in_flight_and_frees_everything),
        cmocka_unit_test(audit_records_carry_time_run_tool_digest_outcome_duration),
        cmocka_unit_test(garbage_and_an_early_peer_close_never_crash_the_host),
        cmocka_unit_test(refuse_writes_lets_only_read_only_tools_through),
        cmocka_unit_test(byte_budgets_refuse_requests_and_answers_past_them),
        cmocka_unit_test(calls_past_the_in_flight_cap_are_refused_until_some_finish),
        cmocka_unit_test(the_peer_half_closing_still_gets_its_answers),
        cmocka_unit_test(python_threads_calling_at_once_all_get_their_answers),
        cmocka_unit_test(bad_limits_are_refused_with_a_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
