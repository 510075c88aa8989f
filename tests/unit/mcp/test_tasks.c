/* test_tasks.c - the tasks extension (mcp/tasks.c) through sessions with a sink transport: a
 * task is seen only by the identity that made it, input inside a task (partial answers, then
 * the next round with all of them and its state), cancellation reaching the handler, and the
 * server's cancel of every live task. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sink.h"

#define EXT "{\"extensions\":{\"" MCP_EXT_TASKS "\":{}}}"
#define META(caps)                                                                                 \
    "\"_meta\":{\"" MCP_META_PROTOCOL_VERSION "\":\"2026-07-28\",\"" MCP_META_CLIENT_CAPABILITIES  \
    "\":" caps "}"

/* A tools/call of "ask" from a client that can elicit and declared the extension. */
#define ASK_CALL                                                                                   \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"ask\"," META(  \
        "{\"elicitation\":{},\"extensions\":{\"" MCP_EXT_TASKS "\":{}}}") "}}"

typedef struct env {
    uv_loop_t loop;
    mcp_logger_t log;
    mcp_server_t *srv;
    mcp_session_t *a, *b; /* two clients: different credentials */
    sink_t sa, sb;
    mcp_call_t *held;
    int cancels;
    int rounds;
    char seen[256]; /* what the last round of "ask" saw */
} env_t;

static void on_cancel(mcp_call_t *call, void *data)
{
    env_t *e = data;
    e->cancels++;
    e->held = NULL;
    mcp_call_finish_text(call, true, "cancelled");
}

/* Becomes a task and holds it until the test finishes it or it is cancelled. */
static void tool_hold(mcp_call_t *call, const cJSON *args, void *data)
{
    (void)args;
    env_t *e = data;
    if (mcp_call_can_become_task(call)) assert_int_equal(mcp_call_become_task(call), MCP_OK);
    e->held = call;
    mcp_call_on_cancel(call, on_cancel, e);
}

/* A task that asks two questions, then answers with what its next round saw. */
static void tool_ask(mcp_call_t *call, const cJSON *args, void *data)
{
    (void)args;
    env_t *e = data;
    e->rounds++;
    const cJSON *r = mcp_call_input_responses(call);
    if (r == NULL) {
        assert_int_equal(mcp_call_become_task(call), MCP_OK);
        cJSON *reqs = cJSON_Parse(
            "{\"one\":{\"method\":\"elicitation/create\",\"params\":{\"message\":\"1?\"}},"
            "\"two\":{\"method\":\"elicitation/create\",\"params\":{\"message\":\"2?\"}}}");
        mcp_call_finish_input_required(call, reqs, "round-one-state");
        return;
    }
    assert_true(mcp_call_is_task(call));
    char *answers = cJSON_PrintUnformatted(r);
    snprintf(e->seen, sizeof e->seen, "%s|%s", answers, mcp_call_request_state(call));
    free(answers);
    mcp_call_finish_text(call, false, "done");
}

static int setup(void **state)
{
    env_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    mcp_server_opts_t o;
    mcp_server_opts_default(&o);
    sink_sessions_open(&e->loop, &e->log, MCP_LOG_ERROR, &o, &e->srv, &e->a, &e->sa, &e->b, &e->sb);
    unsigned char d[MCP__CRED_BYTES];
    mcp__credential_digest("alice", 5, d);
    mcp__session_set_credential(e->a, d);
    mcp__credential_digest("bob", 3, d);
    mcp__session_set_credential(e->b, d);
    mcp_tool_def_t hold = {
        .name = "hold", .handler = tool_hold, .data = e, .task_support = MCP_TASK_OPTIONAL};
    mcp_tool_def_t ask = {
        .name = "ask", .handler = tool_ask, .data = e, .task_support = MCP_TASK_REQUIRED};
    assert_int_equal(mcp_server_add_tool(e->srv, &hold), 0);
    assert_int_equal(mcp_server_add_tool(e->srv, &ask), 0);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env_t *e = *state;
    sink_sessions_close(&e->loop, e->srv, e->a, &e->sa, e->b, &e->sb);
    free(e);
    return 0;
}

/* Sends one request to s and returns its answer (the last message its sink got). */
static const cJSON *ask_of(mcp_session_t *s, sink_t *k, const char *json)
{
    sink_clear(k);
    mcp_session_receive(s, json, strlen(json));
    assert_true(k->n > 0);
    return k->msgs[k->n - 1];
}

static int code_of(const cJSON *msg)
{
    const cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(msg, "error"), "code");
    return cJSON_IsNumber(c) ? c->valueint : 0;
}

static const char *field(const cJSON *msg, const char *name)
{
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(msg, "result"), name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A tasks/ request for id from s, with or without the extension. */
static const cJSON *task_req(mcp_session_t *s, sink_t *k, const char *method, const char *id,
                             bool ext, const char *extra)
{
    char json[600];
    snprintf(json, sizeof json,
             "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"%s\",\"params\":{\"taskId\":\"%s\"%s,"
             "\"_meta\":{\"" MCP_META_PROTOCOL_VERSION
             "\":\"2026-07-28\",\"" MCP_META_CLIENT_CAPABILITIES "\":%s}}}",
             method, id, extra, ext ? EXT : "{}");
    return ask_of(s, k, json);
}

static void a_task_is_seen_only_by_its_maker(void **state)
{
    env_t *e = *state;
    const cJSON *m = ask_of(e->a, &e->sa,
                            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                            "\"name\":\"hold\"," META(EXT) "}}");
    assert_string_equal(field(m, "resultType"), "task");
    assert_string_equal(field(m, "status"), "working");
    char id[64];
    snprintf(id, sizeof id, "%s", field(m, "taskId"));
    assert_int_equal(strlen(id), 32);
    assert_int_equal(strspn(id, "0123456789abcdef"), 32);
    assert_non_null(e->held);

    /* Another credential: the answer an unknown id gets, and the task is untouched. */
    assert_int_equal(code_of(task_req(e->b, &e->sb, "tasks/get", id, true, "")), -32602);
    assert_int_equal(code_of(task_req(e->b, &e->sb, "tasks/cancel", id, true, "")), -32602);
    assert_int_equal(e->cancels, 0);
    /* The maker without the extension: refused as a missing capability. */
    assert_int_equal(code_of(task_req(e->a, &e->sa, "tasks/get", id, false, "")), -32021);
    assert_string_equal(field(task_req(e->a, &e->sa, "tasks/get", id, true, ""), "status"),
                        "working");

    /* A second task gets another id. */
    mcp_call_t *first = e->held;
    m = ask_of(e->a, &e->sa,
               "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"hold\"," META(EXT) "}}");
    assert_string_not_equal(field(m, "taskId"), id);

    /* The maker's cancel reaches the handler; the finish it makes is dropped. */
    e->held = first;
    assert_string_equal(field(task_req(e->a, &e->sa, "tasks/cancel", id, true, ""), "resultType"),
                        "complete");
    assert_int_equal(e->cancels, 1);
    m = task_req(e->a, &e->sa, "tasks/get", id, true, "");
    assert_string_equal(field(m, "status"), "cancelled");
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "result"), "result"));

    /* The server's stop cancels the one still working. */
    mcp_server_cancel_tasks(e->srv);
    assert_int_equal(e->cancels, 2);
}

static void a_legacy_call_never_becomes_a_task(void **state)
{
    env_t *e = *state;
    const char *init = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"2025-11-25\",\"capabilities\":" EXT "}}";
    ask_of(e->a, &e->sa, init);
    sink_clear(&e->sa);
    const char *call = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"hold\"}}";
    mcp_session_receive(e->a, call, strlen(call));
    assert_int_equal(e->sa.n, 0); /* held in its request, no CreateTaskResult */
    assert_non_null(e->held);
    assert_false(mcp_call_is_task(e->held));
    mcp_call_finish_text(e->held, false, "ok");
    assert_int_equal(e->sa.n, 1);
    /* A required tool for a client without the extension: -32021 before the handler. */
    const cJSON *m = ask_of(e->a, &e->sa,
                            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                            "\"name\":\"ask\"," META("{}") "}}");
    assert_int_equal(code_of(m), -32021);
    assert_int_equal(e->rounds, 0);
}

static void input_inside_a_task_is_answered_in_parts(void **state)
{
    env_t *e = *state;
    const cJSON *m = ask_of(e->a, &e->sa, ASK_CALL);
    char id[64];
    snprintf(id, sizeof id, "%s", field(m, "taskId"));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "result"), "requestState"));
    m = task_req(e->a, &e->sa, "tasks/get", id, true, "");
    assert_string_equal(field(m, "status"), "input_required");
    const cJSON *reqs = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "result"), "inputRequests");
    assert_int_equal(cJSON_GetArraySize(reqs), 2);

    /* One answer (and a key nobody asked): acknowledged, the other still pending. */
    m = task_req(e->a, &e->sa, "tasks/update", id, true,
                 ",\"inputResponses\":{\"one\":{\"action\":\"accept\",\"content\":{\"v\":1}},"
                 "\"stray\":{}}");
    assert_string_equal(field(m, "resultType"), "complete");
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "result"), "status"));
    m = task_req(e->a, &e->sa, "tasks/get", id, true, "");
    assert_string_equal(field(m, "status"), "input_required");
    reqs = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "result"), "inputRequests");
    assert_int_equal(cJSON_GetArraySize(reqs), 1);
    assert_non_null(cJSON_GetObjectItem(reqs, "two"));
    assert_int_equal(e->rounds, 1);
    /* Not an object: refused. */
    assert_int_equal(
        code_of(task_req(e->a, &e->sa, "tasks/update", id, true, ",\"inputResponses\":[]")),
        -32602);

    /* The last answer: the next round sees both and the state it asked with. */
    task_req(e->a, &e->sa, "tasks/update", id, true,
             ",\"inputResponses\":{\"two\":{\"action\":\"accept\",\"content\":{\"v\":2}}}");
    assert_int_equal(e->rounds, 2);
    assert_string_equal(e->seen, "{\"one\":{\"action\":\"accept\",\"content\":{\"v\":1}},"
                                 "\"two\":{\"action\":\"accept\",\"content\":{\"v\":2}}}|"
                                 "round-one-state");
    m = task_req(e->a, &e->sa, "tasks/get", id, true, "");
    assert_string_equal(field(m, "status"), "completed");
    const cJSON *res = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "result"), "result");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(res, "content"), 0), "text")
            ->valuestring,
        "done");
}

static void on_task_cancel(const char *task_id, const mcp_identity_t *who, void *data)
{
    (void)who;
    env_t *e = data;
    snprintf(e->seen, sizeof e->seen, "cancelled %s", task_id);
}

static void a_task_waiting_for_input_tells_its_tool_when_cancelled(void **state)
{
    env_t *e = *state;
    mcp_server_on_task_cancel(e->srv, on_task_cancel, e);
    const cJSON *m = ask_of(e->a, &e->sa, ASK_CALL);
    char id[64], want[100];
    snprintf(id, sizeof id, "%s", field(m, "taskId"));
    assert_string_equal(field(task_req(e->a, &e->sa, "tasks/get", id, true, ""), "status"),
                        "input_required");
    task_req(e->a, &e->sa, "tasks/cancel", id, true, "");
    snprintf(want, sizeof want, "cancelled %s", id);
    assert_string_equal(e->seen, want);
    /* An answer that comes now runs no round. */
    task_req(e->a, &e->sa, "tasks/update", id, true, ",\"inputResponses\":{\"one\":{},\"two\":{}}");
    assert_int_equal(e->rounds, 1);
    assert_string_equal(field(task_req(e->a, &e->sa, "tasks/get", id, true, ""), "status"),
                        "cancelled");
}

/* The notifications/tasks in k after index from, as "status" strings joined by spaces, each
 * checked to name the subscription sub and to carry what its status shows. */
static void task_notes(const sink_t *k, size_t from, const char *sub, const char *task_id,
                       char *out, size_t size)
{
    out[0] = '\0';
    for (size_t i = from; i < k->n; i++) {
        const cJSON *m = k->msgs[i];
        const cJSON *method = cJSON_GetObjectItem(m, "method");
        if (!cJSON_IsString(method) || strcmp(method->valuestring, "notifications/tasks") != 0)
            continue;
        const cJSON *p = cJSON_GetObjectItem(m, "params");
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "_meta"),
                                                "io.modelcontextprotocol/subscriptionId")
                                ->valuestring,
                            sub);
        assert_string_equal(cJSON_GetObjectItem(p, "taskId")->valuestring, task_id);
        const char *st = cJSON_GetObjectItem(p, "status")->valuestring;
        assert_non_null(cJSON_GetObjectItem(p, "lastUpdatedAt"));
        if (strcmp(st, "completed") == 0) assert_non_null(cJSON_GetObjectItem(p, "result"));
        if (strcmp(st, "input_required") == 0)
            assert_non_null(cJSON_GetObjectItem(p, "inputRequests"));
        size_t n = strlen(out);
        snprintf(out + n, size - n, "%s%s", n ? " " : "", st);
    }
}

/* The acknowledgement of a listen request from s asking for taskIds (JSON array text). */
static const cJSON *listen_tasks(mcp_session_t *s, sink_t *k, const char *id, const char *ids,
                                 bool ext)
{
    char json[700];
    snprintf(json, sizeof json,
             "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"subscriptions/listen\",\"params\":{"
             "\"notifications\":{\"taskIds\":%s},\"_meta\":{\"" MCP_META_PROTOCOL_VERSION
             "\":\"2026-07-28\",\"" MCP_META_CLIENT_CAPABILITIES "\":%s}}}",
             id, ids, ext ? EXT : "{}");
    const cJSON *ack = ask_of(s, k, json);
    assert_string_equal(cJSON_GetObjectItem(ack, "method")->valuestring,
                        "notifications/subscriptions/acknowledged");
    return cJSON_GetObjectItem(cJSON_GetObjectItem(ack, "params"), "notifications");
}

static void listen_streams_tell_their_owner_of_its_tasks_status_changes(void **state)
{
    env_t *e = *state;
    const cJSON *m = ask_of(e->a, &e->sa, ASK_CALL);
    char ask[64], hold[64], ids[200], sub[32], seen[200];
    snprintf(ask, sizeof ask, "%s", field(m, "taskId"));
    m = ask_of(e->a, &e->sa,
               "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"hold\"," META(EXT) "}}");
    snprintf(hold, sizeof hold, "%s", field(m, "taskId"));
    snprintf(ids, sizeof ids, "[\"%s\",\"%s\",\"0123456789abcdef0123456789abcdef\"]", ask, hold);

    /* Another identity naming them is granted nothing; so is the owner without the extension
     * (not even the key); the owner gets its two, not the unknown id. */
    const cJSON *granted =
        cJSON_GetObjectItem(listen_tasks(e->b, &e->sb, "b", ids, true), "taskIds");
    assert_int_equal(cJSON_GetArraySize(granted), 0);
    assert_null(cJSON_GetObjectItem(listen_tasks(e->a, &e->sa, "plain", ids, false), "taskIds"));
    granted = cJSON_GetObjectItem(listen_tasks(e->a, &e->sa, "L", ids, true), "taskIds");
    assert_int_equal(cJSON_GetArraySize(granted), 2);
    assert_string_equal(cJSON_GetArrayItem(granted, 0)->valuestring, ask);
    assert_string_equal(cJSON_GetArrayItem(granted, 1)->valuestring, hold);
    snprintf(sub, sizeof sub, "%s",
             cJSON_GetObjectItem(
                 cJSON_GetObjectItem(cJSON_GetObjectItem(e->sa.msgs[0], "params"), "_meta"),
                 "io.modelcontextprotocol/subscriptionId")
                 ->valuestring);

    /* A partial answer changes no status: nothing is sent. The last one runs the next round,
     * which completes: working, then completed with its result. */
    task_req(e->a, &e->sa, "tasks/update", ask, true, ",\"inputResponses\":{\"one\":{}}");
    task_notes(&e->sa, 0, sub, ask, seen, sizeof seen);
    assert_string_equal(seen, "");
    task_req(e->a, &e->sa, "tasks/update", ask, true, ",\"inputResponses\":{\"two\":{}}");
    task_notes(&e->sa, 0, sub, ask, seen, sizeof seen);
    assert_string_equal(seen, "working completed");

    /* The held one finishes, or is cancelled: told once, to the owner's stream only. */
    sink_clear(&e->sa);
    sink_clear(&e->sb);
    assert_string_equal(field(task_req(e->a, &e->sa, "tasks/cancel", hold, true, ""), "resultType"),
                        "complete");
    assert_int_equal(e->cancels, 1);
    task_notes(&e->sa, 0, sub, hold, seen, sizeof seen);
    assert_string_equal(seen, "cancelled");
    assert_int_equal(e->sb.n, 0);
    /* Cancelled by its client, the stream hears nothing more. */
    const char *stop = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                       "\"requestId\":\"L\"}}";
    mcp_session_receive(e->a, stop, strlen(stop));
    sink_clear(&e->sa);
    m = ask_of(e->a, &e->sa,
               "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"hold\"," META(EXT) "}}");
    snprintf(hold, sizeof hold, "%s", field(m, "taskId"));
    mcp_call_finish_text(e->held, false, "ok");
    task_notes(&e->sa, 0, sub, hold, seen, sizeof seen);
    assert_string_equal(seen, "");
    /* taskIds that are not strings: refused. */
    m = ask_of(e->a, &e->sa,
               "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"subscriptions/listen\",\"params\":{"
               "\"notifications\":{\"taskIds\":[1]}," META(EXT) "}}");
    assert_int_equal(code_of(m), -32602);
}

/* At MCP_TASK_MAX_TASKS the oldest task that waits for input makes room, and its tool is told
 * (it can never go on). */
static void a_full_table_forgets_the_oldest_waiting_task(void **state)
{
    env_t *e = *state;
    mcp_server_on_task_cancel(e->srv, on_task_cancel, e);
    static const char call[] =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"
        "call\",\"params\":{\"name\":\"ask\"," META(
            "{\"elicitation\":{},\"extensions\":{\"" MCP_EXT_TASKS "\":{}}}") "}}";
    char first[64], want[100];
    snprintf(first, sizeof first, "%s", field(ask_of(e->a, &e->sa, call), "taskId"));
    for (unsigned i = 1; i < MCP_TASK_MAX_TASKS; i++)
        assert_string_equal(field(ask_of(e->a, &e->sa, call), "resultType"), "task");
    assert_string_equal(e->seen, "");
    assert_string_equal(field(ask_of(e->a, &e->sa, call), "resultType"), "task");
    snprintf(want, sizeof want, "cancelled %s", first);
    assert_string_equal(e->seen, want);
    assert_int_equal(code_of(task_req(e->a, &e->sa, "tasks/get", first, true, "")), -32602);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_task_is_seen_only_by_its_maker, setup, teardown),
        cmocka_unit_test_setup_teardown(a_legacy_call_never_becomes_a_task, setup, teardown),
        cmocka_unit_test_setup_teardown(input_inside_a_task_is_answered_in_parts, setup, teardown),
        cmocka_unit_test_setup_teardown(a_task_waiting_for_input_tells_its_tool_when_cancelled,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(listen_streams_tell_their_owner_of_its_tasks_status_changes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_full_table_forgets_the_oldest_waiting_task, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
