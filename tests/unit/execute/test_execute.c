/* the execute_code engine (execute/) on its own: an MCP session (sink.h) calls execute_code and
   real sandboxes run the code, with the wiring's peers played by this file: the start-up gate
   that parks a call (and is told whether the code uses the tools package), the sentence about
   servers still starting in a failed run's note, and a search from the sandboxed code that
   reaches the peers' search through the bridge and the generated tools package. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "execute.h"
#include "mcp.h"
#include "repair.h"
#include "sink.h"

#define PYTHON "/usr/bin/python3"
/* a run here takes well under a second; past this the test fails rather than hangs */
#define WAIT_NS (60ull * 1000 * 1000 * 1000)

typedef struct fx {
    uv_loop_t loop;
    mcp_logger_t log;
    mcp_server_t *srv;
    mcp_session_t *a;
    sink_t sa;
    ptc_execute_t *ex;
    /* the gate: calls held while closed, what the last hold was told */
    bool gate_open;
    unsigned holds;
    bool needs_package;
    mcp_call_t *held;
    cJSON *held_args;
    mcp_tool_fn held_fn;
    void *held_data;
    const char *starting; /* the still-starting sentence, or NULL */
    /* the search the code made */
    unsigned searches;
    char query[64];
    char server_filter[32];
    size_t top_k;
    /* a tools package over an empty registry */
    reg_registry_t *reg;
    ptc_pybundle_cache_t *bundle;
    bool built;
    char cache_dir[64];
} fx_t;

/* --- the peers ---------------------------------------------------------------------------- */

static bool peer_hold(void *data, mcp_call_t *call, const cJSON *args, bool needs_package,
                      mcp_tool_fn fn, void *fn_data)
{
    fx_t *f = data;
    f->holds++;
    f->needs_package = needs_package;
    if (f->gate_open) return false;
    assert_null(f->held); /* one call at a time here */
    f->held = call;
    f->held_args = cJSON_Duplicate(args, true);
    assert_non_null(f->held_args);
    f->held_fn = fn;
    f->held_data = fn_data;
    return true;
}

static size_t peer_still_starting(void *data, char *buf, size_t size)
{
    const fx_t *f = data;
    const char *s = f->starting != NULL ? f->starting : "";
    snprintf(buf, size, "%s", s);
    return strlen(s);
}

static const reg_tool_t *peer_find_tool(void *data, const char *server, const char *tool)
{
    (void)data;
    (void)server;
    (void)tool;
    return NULL;
}

static mcp_client_t *peer_client(void *data, const char *server)
{
    (void)data;
    (void)server;
    return NULL;
}

static mcp_relay_t *peer_relay(void *data)
{
    (void)data;
    return NULL;
}

/* Answers at once with one hit naming what it was asked, so the code can print it back. */
static int peer_search(void *data, const char *query, size_t top_k, const char *server,
                       const char *category, ptc_execute_search_done_cb done, void *done_data,
                       void **handle)
{
    fx_t *f = data;
    (void)category;
    f->searches++;
    f->top_k = top_k;
    snprintf(f->query, sizeof f->query, "%s", query);
    snprintf(f->server_filter, sizeof f->server_filter, "%s", server != NULL ? server : "-");
    cJSON *sc = cJSON_Parse("{\"embedder\":\"fake\",\"tools\":[{\"id\":\"srv__found\","
                            "\"server\":\"srv\",\"name\":\"found\",\"description\":\"d\","
                            "\"inputSchema\":{\"type\":\"object\"},\"score\":0.5}]}");
    assert_non_null(sc);
    *handle = NULL;
    done(done_data, 0, sc, NULL);
    cJSON_Delete(sc);
    return 0;
}

static void peer_search_cancel(void *data, void *handle)
{
    (void)data;
    (void)handle;
    fail_msg("no search is in flight when a run ends here");
}

static char *peer_signatures(void *data, const char *code, const cJSON *used)
{
    (void)data;
    (void)code;
    (void)used;
    return NULL;
}

static const ptc_execute_peers_t peers = {
    .hold = peer_hold,
    .still_starting = peer_still_starting,
    .find_tool = peer_find_tool,
    .client = peer_client,
    .relay = peer_relay,
    .search = peer_search,
    .search_cancel = peer_search_cancel,
    .signatures = peer_signatures,
};

/* --- the fixture -------------------------------------------------------------------------- */

static void config(ptc_execute_config_t *c)
{
    memset(c, 0, sizeof *c);
    exec_options_init(&c->sandbox);
    c->sandbox.python = PYTHON;
    c->sandbox.launcher = TEST_LAUNCHER;
    c->sandbox.keep_warm = false;
    c->max_code_bytes = EXEC_MAX_CODE_BYTES;
    c->page_chars = 20000;
    c->max_timeout_s = 60;
    c->tool_timeout_s = 10;
    c->max_repairs = 0;
    c->request_deadline_s = 50;
    c->max_sessions = 2;
    c->session_idle_s = 60;
    c->wait_s = 45;
}

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    mcp_server_opts_t o;
    mcp_server_opts_default(&o);
    sink_sessions_open(&f->loop, &f->log, MCP_LOG_WARNING, &o, &f->srv, &f->a, &f->sa, NULL, NULL);
    ptc_execute_config_t c;
    config(&c);
    assert_int_equal(ptc_execute_new(&f->loop, &c, &f->log, NULL, &f->ex), 0);
    assert_int_equal(ptc_execute_register(f->ex, f->srv), 0);
    const char *init = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
                       "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}";
    mcp_session_receive(f->a, init, strlen(init));
    assert_int_equal(f->sa.n, 1);
    sink_clear(&f->sa);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    mcp_session_free(f->a);
    ptc_execute_stop(f->ex);
    ptc_execute_free(f->ex);
    if (f->bundle != NULL) ptc_pybundle_cache_stop(f->bundle);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    ptc_pybundle_cache_free(f->bundle);
    reg_registry_free(f->reg);
    mcp_server_free(f->srv);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    sink_clear(&f->sa);
    cJSON_Delete(f->held_args);
    free(f);
    return 0;
}

static void attach(fx_t *f, ptc_pybundle_cache_t *bundle)
{
    ptc_execute_peers_t p = peers;
    p.data = f;
    ptc_execute_attach(f->ex, &p, bundle);
}

/* The answer to request id, once the loop has produced it (NULL: none yet after one turn). */
static const cJSON *answer_of(const sink_t *k, int id)
{
    for (size_t i = 0; i < k->n; i++) {
        const cJSON *v = cJSON_GetObjectItem(k->msgs[i], "id");
        if (cJSON_IsNumber(v) && v->valueint == id) return k->msgs[i];
    }
    return NULL;
}

static const cJSON *wait_answer(fx_t *f, int id)
{
    uint64_t until = uv_hrtime() + WAIT_NS;
    const cJSON *m;
    while ((m = answer_of(&f->sa, id)) == NULL) {
        assert_true(uv_hrtime() < until);
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    return m;
}

static void call(fx_t *f, int id, const char *code)
{
    cJSON *req = cJSON_CreateObject();
    assert_non_null(req);
    cJSON_AddStringToObject(req, "jsonrpc", "2.0");
    cJSON_AddNumberToObject(req, "id", id);
    cJSON_AddStringToObject(req, "method", "tools/call");
    cJSON *params = cJSON_AddObjectToObject(req, "params");
    cJSON_AddStringToObject(params, "name", "execute_code");
    cJSON *args = cJSON_AddObjectToObject(params, "arguments");
    assert_non_null(cJSON_AddStringToObject(args, "code", code));
    char *json = cJSON_PrintUnformatted(req);
    assert_non_null(json);
    mcp_session_receive(f->a, json, strlen(json));
    free(json);
    cJSON_Delete(req);
}

static const char *sc_str(const cJSON *m, const char *name)
{
    const cJSON *sc = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "result"), "structuredContent");
    const cJSON *v = cJSON_GetObjectItem(sc, name);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static const char *text_of(const cJSON *m)
{
    const cJSON *content = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "result"), "content");
    const cJSON *t = cJSON_GetObjectItem(cJSON_GetArrayItem(content, 0), "text");
    assert_true(cJSON_IsString(t));
    return t->valuestring;
}

/* --- the tests ---------------------------------------------------------------------------- */

static void test_a_call_runs_its_code_and_answers(void **state)
{
    fx_t *f = *state;
    call(f, 1, "print(6 * 7)");
    const cJSON *m = wait_answer(f, 1);
    assert_string_equal(sc_str(m, "status"), "ok");
    assert_string_equal(sc_str(m, "stdout"), "42\n");
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "result"), "isError")));
}

static void test_without_peers_a_run_has_no_tools_package(void **state)
{
    fx_t *f = *state;
    call(f, 1, "import tools");
    const cJSON *m = wait_answer(f, 1);
    assert_string_equal(sc_str(m, "status"), "error");
    assert_non_null(strstr(sc_str(m, "stderr"), "ModuleNotFoundError"));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "result"), "isError")));
}

static void test_the_gate_holds_a_call_and_knows_what_its_code_needs(void **state)
{
    fx_t *f = *state;
    attach(f, NULL);
    call(f, 1, "from tools import x");
    assert_int_equal(f->holds, 1);
    assert_true(f->needs_package);
    assert_non_null(f->held);
    for (int i = 0; i < 5; i++)
        uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_null(answer_of(&f->sa, 1)); /* parked: nothing ran */

    /* The gate opens: the call goes through the handler again, which asks again and runs. */
    f->gate_open = true;
    mcp_call_t *held = f->held;
    f->held = NULL;
    call(f, 2, "print('plain')");
    assert_int_equal(f->holds, 2);
    assert_false(f->needs_package); /* no tools in that code */
    f->held_fn(held, f->held_args, f->held_data);
    assert_int_equal(f->holds, 3);
    const cJSON *m = wait_answer(f, 1);
    assert_string_equal(sc_str(m, "status"), "error"); /* no package was attached */
    assert_string_equal(sc_str(wait_answer(f, 2), "stdout"), "plain\n");
}

static void test_a_failed_run_names_the_servers_still_starting(void **state)
{
    fx_t *f = *state;
    attach(f, NULL);
    f->gate_open = true;
    f->starting = "Still starting: slowsrv (its tools may be missing).";
    call(f, 1, "raise SystemExit(3)");
    const cJSON *m = wait_answer(f, 1);
    assert_string_equal(sc_str(m, "status"), "error");
    assert_non_null(strstr(text_of(m), "Still starting: slowsrv"));
    call(f, 2, "print('fine')");
    m = wait_answer(f, 2);
    assert_string_equal(sc_str(m, "status"), "ok");
    assert_null(strstr(text_of(m), "Still starting"));
}

static void built(void *data)
{
    ((fx_t *)data)->built = true;
}

static void test_code_searches_through_the_peers(void **state)
{
    fx_t *f = *state;
    snprintf(f->cache_dir, sizeof f->cache_dir, "/tmp/ptc-execute-test-XXXXXX");
    assert_non_null(mkdtemp(f->cache_dir));
    assert_int_equal(setenv("XDG_CACHE_HOME", f->cache_dir, 1), 0);
    assert_int_equal(reg_registry_new(NULL, NULL, &f->reg), 0);
    assert_int_equal(ptc_pybundle_cache_new(&f->loop, f->reg, NULL, NULL, &f->bundle), 0);
    ptc_pybundle_cache_on_built(f->bundle, built, f);
    ptc_pybundle_cache_refresh(f->bundle);
    uint64_t until = uv_hrtime() + WAIT_NS;
    while (!f->built) {
        assert_true(uv_hrtime() < until);
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_non_null(ptc_pybundle_cache_root(f->bundle));
    attach(f, f->bundle);
    f->gate_open = true;
    call(f, 1,
         "import tools\n"
         "hits = tools.search('resize an image', top_k=3, server='srv')\n"
         "print(hits[0]['id'] if isinstance(hits, list) else hits)\n");
    const cJSON *m = wait_answer(f, 1);
    assert_string_equal(sc_str(m, "status"), "ok");
    assert_int_equal(f->searches, 1);
    assert_string_equal(f->query, "resize an image");
    assert_string_equal(f->server_filter, "srv");
    assert_int_equal(f->top_k, 3);
    assert_non_null(strstr(sc_str(m, "stdout"), "srv__found"));
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", f->cache_dir);
    assert_int_equal(system(rm), 0);
}

static void test_a_setting_out_of_bounds_is_refused(void **state)
{
    fx_t *f = *state;
    ptc_execute_config_t c;
    ptc_execute_t *ex = NULL;
    config(&c);
    c.max_repairs = PTC_REPAIR_MAX + 1;
    assert_int_equal(ptc_execute_new(&f->loop, &c, &f->log, NULL, &ex), MCP_EINVAL);
    assert_null(ex);
    config(&c);
    c.max_code_bytes = (size_t)EXEC_MAX_CODE_BYTES + 1;
    assert_int_equal(ptc_execute_new(&f->loop, &c, &f->log, NULL, &ex), MCP_EINVAL);
    config(&c);
    c.request_deadline_s = PTC_EXECUTE_DEADLINE_MAX_S + 1;
    assert_int_equal(ptc_execute_new(&f->loop, &c, &f->log, NULL, &ex), MCP_EINVAL);
    config(&c);
    c.page_chars = 0;
    assert_int_equal(ptc_execute_new(&f->loop, &c, &f->log, NULL, &ex), MCP_EINVAL);
    assert_null(ex);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_call_runs_its_code_and_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_without_peers_a_run_has_no_tools_package, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_the_gate_holds_a_call_and_knows_what_its_code_needs,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_failed_run_names_the_servers_still_starting, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_code_searches_through_the_peers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_setting_out_of_bounds_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
