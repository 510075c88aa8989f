/* The call gate: tool calls and tools/list parked at first contact until their level opens (the
 * host's condition, after a poke), or until the wait is over; a call cancelled or still parked at
 * the gate's end; driven through a session with a capturing transport. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"
#include "sink.h"

typedef struct env {
    uv_loop_t loop;
    mcp_logger_t log;
    mcp_server_t *srv;
    mcp_session_t *a;
    sink_t sa;
    mcp_call_gate_t *gate;
    bool open[3]; /* what is_open answers per level */
    int asked;    /* is_open calls */
    int ran;      /* handler runs past the gate */
} env_t;

static bool is_open(void *data, unsigned level)
{
    env_t *e = data;
    e->asked++;
    return e->open[level];
}

/* The tool: {"level": L, "tag": T} waits at the gate for level L, then answers "ran T". */
static void gated(mcp_call_t *call, const cJSON *args, void *data)
{
    env_t *e = data;
    const cJSON *level = cJSON_GetObjectItem(args, "level");
    if (mcp_call_gate_hold(e->gate, call, args, (unsigned)level->valueint, gated, e)) return;
    e->ran++;
    mcp_call_finish_text(call, false, "ran %s", cJSON_GetObjectItem(args, "tag")->valuestring);
}

static void open_gate(env_t *e, uint64_t wait_ms)
{
    const mcp_call_gate_opts_t o = {.wait_ms = wait_ms,
                                    .levels = 3,
                                    .is_open = is_open,
                                    .data = e,
                                    .cancelled_text = "cancelled while waiting",
                                    .closed_text = "shut down while waiting"};
    assert_int_equal(mcp_call_gate_new(&e->loop, &o, &e->gate), 0);
}

static int setup(void **state)
{
    env_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    assert_int_equal(uv_loop_init(&e->loop), 0);
    e->log.out = stderr;
    e->log.level = MCP_LOG_EMERGENCY;
    mcp_server_opts_t o;
    mcp_server_opts_default(&o);
    assert_int_equal(mcp_server_new(&e->loop, &o, &e->log, &e->srv), 0);
    mcp_tool_def_t def = {.name = "gated", .handler = gated, .data = e};
    assert_int_equal(mcp_server_add_tool(e->srv, &def), 0);
    assert_int_equal(mcp_session_new(e->srv, &sink_ops, &e->sa, &e->a), 0);
    const char *init = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}";
    mcp_session_receive(e->a, init, strlen(init));
    const char *done = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
    mcp_session_receive(e->a, done, strlen(done));
    sink_clear(&e->sa);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env_t *e = *state;
    mcp_call_gate_free(e->gate);
    sink_sessions_close(&e->loop, e->srv, e->a, &e->sa, NULL, NULL);
    free(e);
    return 0;
}

static void call(env_t *e, int id, unsigned level, const char *tag)
{
    char buf[512];
    snprintf(buf, sizeof buf,
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"gated\",\"arguments\":{\"level\":%u,\"tag\":\"%s\"}}}",
             id, level, tag);
    mcp_session_receive(e->a, buf, strlen(buf));
}

/* The answer with this id among the messages sent, or NULL. */
static const cJSON *answer(const env_t *e, int id)
{
    for (size_t i = 0; i < e->sa.n; i++) {
        const cJSON *mid = cJSON_GetObjectItem(e->sa.msgs[i], "id");
        if (cJSON_IsNumber(mid) && mid->valueint == id) return e->sa.msgs[i];
    }
    return NULL;
}

static const char *answer_text(const env_t *e, int id)
{
    const cJSON *a = answer(e, id);
    assert_non_null(a);
    const cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(a, "result"), "content");
    return cJSON_GetObjectItem(cJSON_GetArrayItem(c, 0), "text")->valuestring;
}

static bool answer_is_error(const env_t *e, int id)
{
    return cJSON_IsTrue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(answer(e, id), "result"), "isError"));
}

static void calls_wait_for_their_level_which_opens_in_order_and_for_good(void **state)
{
    env_t *e = *state;
    open_gate(e, 60000);
    call(e, 1, 1, "one");
    call(e, 2, 0, "zero");
    assert_null(answer(e, 1));
    assert_null(answer(e, 2));
    /* a level past the gate's is never held */
    call(e, 3, 3, "past");
    assert_string_equal(answer_text(e, 3), "ran past");

    /* level 1 may open only after level 0: its condition alone opens nothing */
    e->open[1] = true;
    mcp_call_gate_poke(e->gate);
    uv_run(&e->loop, UV_RUN_NOWAIT);
    assert_null(answer(e, 1));
    assert_null(answer(e, 2));

    e->open[0] = true;
    assert_null(answer(e, 2)); /* nothing before the poke */
    mcp_call_gate_poke(e->gate);
    uv_run(&e->loop, UV_RUN_NOWAIT);
    assert_string_equal(answer_text(e, 2), "ran zero");
    assert_string_equal(answer_text(e, 1), "ran one"); /* its arguments kept while parked */
    assert_false(answer_is_error(e, 1));

    /* open for good: conditions that fail later make nobody wait */
    e->open[0] = e->open[1] = false;
    call(e, 4, 1, "again");
    assert_string_equal(answer_text(e, 4), "ran again");
    /* level 2 still waits */
    call(e, 5, 2, "two");
    assert_null(answer(e, 5));
    assert_false(mcp_call_gate_over(e->gate));
    assert_int_equal(e->ran, 4);
}

static void the_end_of_the_wait_opens_every_level(void **state)
{
    env_t *e = *state;
    open_gate(e, 30);
    call(e, 1, 2, "late");
    assert_null(answer(e, 1));
    uint64_t t0 = uv_now(&e->loop);
    uv_run(&e->loop, UV_RUN_ONCE); /* the deadline's timer */
    assert_true(uv_now(&e->loop) - t0 >= 25);
    assert_string_equal(answer_text(e, 1), "ran late");
    assert_true(mcp_call_gate_over(e->gate));
    /* no wait at all: nothing is held and the host is not asked */
    mcp_call_gate_free(e->gate);
    open_gate(e, 0);
    int asked = e->asked;
    call(e, 2, 2, "now");
    assert_string_equal(answer_text(e, 2), "ran now");
    assert_int_equal(e->asked, asked);
}

static void cancelled_and_shutdown_calls_are_answered_and_never_run(void **state)
{
    env_t *e = *state;
    open_gate(e, 60000);
    call(e, 1, 1, "cancelled");
    call(e, 2, 1, "parked");
    const char *cancel = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                         "\"requestId\":1}}";
    mcp_session_receive(e->a, cancel, strlen(cancel));
    /* the cancelled call is gone from the gate: opening it runs the other one only */
    e->open[0] = e->open[1] = true;
    mcp_call_gate_poke(e->gate);
    uv_run(&e->loop, UV_RUN_NOWAIT);
    assert_null(answer(e, 1)); /* a cancelled request gets no answer */
    assert_string_equal(answer_text(e, 2), "ran parked");
    assert_int_equal(e->ran, 1);

    call(e, 3, 2, "at the end");
    assert_null(answer(e, 3));
    mcp_call_gate_free(e->gate);
    e->gate = NULL;
    assert_string_equal(answer_text(e, 3), "shut down while waiting");
    assert_true(answer_is_error(e, 3));
    assert_int_equal(e->ran, 1);
}

static void lists_wait_for_their_level_and_go_at_the_gates_end(void **state)
{
    env_t *e = *state;
    open_gate(e, 60000);
    mcp_call_gate_lists(e->gate, e->srv, 1);
    const char *list = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}";
    mcp_session_receive(e->a, list, strlen(list));
    assert_null(answer(e, 7));
    e->open[0] = true;
    mcp_call_gate_poke(e->gate);
    uv_run(&e->loop, UV_RUN_NOWAIT);
    assert_null(answer(e, 7)); /* level 0 is not enough */
    e->open[1] = true;
    mcp_call_gate_poke(e->gate);
    uv_run(&e->loop, UV_RUN_NOWAIT);
    const cJSON *tools = cJSON_GetObjectItem(cJSON_GetObjectItem(answer(e, 7), "result"), "tools");
    assert_int_equal(cJSON_GetArraySize(tools), 1);

    /* a list parked at the gate's end is answered, and later ones are not gated */
    mcp_call_gate_free(e->gate);
    e->open[0] = e->open[1] = false;
    open_gate(e, 60000);
    mcp_call_gate_lists(e->gate, e->srv, 0);
    const char *list2 = "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\"}";
    mcp_session_receive(e->a, list2, strlen(list2));
    assert_null(answer(e, 8));
    mcp_call_gate_free(e->gate);
    e->gate = NULL;
    assert_non_null(answer(e, 8));
    const char *list3 = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}";
    mcp_session_receive(e->a, list3, strlen(list3));
    assert_non_null(answer(e, 9));
}

static void options_without_a_condition_level_or_text_are_refused(void **state)
{
    env_t *e = *state;
    mcp_call_gate_t *g = (mcp_call_gate_t *)&g;
    mcp_call_gate_opts_t o = {
        .levels = 1, .is_open = is_open, .data = e, .cancelled_text = "c", .closed_text = "s"};
    o.levels = 0;
    assert_int_equal(mcp_call_gate_new(&e->loop, &o, &g), MCP_EINVAL);
    assert_null(g);
    o.levels = 1;
    o.is_open = NULL;
    assert_int_equal(mcp_call_gate_new(&e->loop, &o, &g), MCP_EINVAL);
    o.is_open = is_open;
    o.closed_text = NULL;
    assert_int_equal(mcp_call_gate_new(&e->loop, &o, &g), MCP_EINVAL);
    /* a NULL gate holds nothing and ignores pokes */
    assert_false(mcp_call_gate_hold(NULL, NULL, NULL, 0, gated, e));
    mcp_call_gate_poke(NULL);
    assert_true(mcp_call_gate_over(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            calls_wait_for_their_level_which_opens_in_order_and_for_good, setup, teardown),
        cmocka_unit_test_setup_teardown(the_end_of_the_wait_opens_every_level, setup, teardown),
        cmocka_unit_test_setup_teardown(cancelled_and_shutdown_calls_are_answered_and_never_run,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(lists_wait_for_their_level_and_go_at_the_gates_end, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(options_without_a_condition_level_or_text_are_refused,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
