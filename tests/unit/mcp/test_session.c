/* Sessions driven directly through a capturing transport: lifecycle, paging, list_changed,
 * server-to-client request routing, cancellation and shutdown, progress. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"
#include "sink.h"

static cJSON *last(sink_t *s)
{
    assert_true(s->n > 0);
    return s->msgs[s->n - 1];
}

typedef struct env {
    uv_loop_t loop;
    mcp_logger_t log;
    mcp_server_t *srv;
    mcp_session_t *sess;
    sink_t sink;
    int cancels;
    mcp_call_t *held;
} env_t;

static void tool_now(mcp_call_t *call, const cJSON *args, void *data)
{
    (void)args;
    (void)data;
    mcp_call_finish_text(call, false, "%s", mcp_call_tool(call));
}

static void on_cancel(mcp_call_t *call, void *data)
{
    env_t *e = data;
    e->cancels++;
    e->held = NULL;
    mcp_call_finish_text(call, true, "cancelled");
}

static void tool_hold(mcp_call_t *call, const cJSON *args, void *data)
{
    (void)args;
    env_t *e = data;
    e->held = call;
    mcp_call_on_cancel(call, on_cancel, e);
}

static void add_tool(env_t *e, const char *name, mcp_tool_fn fn)
{
    mcp_tool_def_t d = {.name = name, .handler = fn, .data = e};
    assert_int_equal(mcp_server_add_tool(e->srv, &d), 0);
}

static int setup(void **state)
{
    env_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    mcp_server_opts_t o;
    mcp_server_opts_default(&o);
    o.list_page_size = 3;
    o.shutdown_grace_ms = 10;
    sink_sessions_open(&e->loop, &e->log, MCP_LOG_ERROR, &o, &e->srv, &e->sess, &e->sink, NULL,
                       NULL);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env_t *e = *state;
    sink_sessions_close(&e->loop, e->srv, e->sess, &e->sink, NULL, NULL);
    free(e);
    return 0;
}

static void feed(env_t *e, const char *json)
{
    mcp_session_receive(e->sess, json, strlen(json));
}

static void init(env_t *e)
{
    feed(e,
         "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
         "\"2025-06-18\",\"capabilities\":{\"sampling\":{}}}}");
    assert_string_equal(mcp_session_protocol(e->sess), "2025-06-18");
    assert_true(mcp_session_client_has(e->sess, "sampling"));
    assert_false(mcp_session_client_has(e->sess, "roots"));
    sink_clear(&e->sink);
}

static const char *next_cursor(cJSON *resp)
{
    cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(resp, "result"), "nextCursor");
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

static void cursor_pages_survive_tools_added_between_pages(void **state)
{
    env_t *e = *state;
    const char *names[] = {"a", "b", "c", "d", "e"};
    for (size_t i = 0; i < 5; i++)
        add_tool(e, names[i], tool_now);
    init(e);
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
    cJSON *page = last(&e->sink);
    assert_int_equal(
        cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(page, "result"), "tools")), 3);
    char cursor[128];
    snprintf(cursor, sizeof cursor, "%s", next_cursor(page));
    /* A tool sorting before the boundary must not shift the next page. */
    add_tool(e, "aa", tool_now);
    cJSON *note = last(&e->sink);
    assert_string_equal(cJSON_GetObjectItem(note, "method")->valuestring,
                        "notifications/tools/list_changed");
    char req[256];
    snprintf(
        req, sizeof req,
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{\"cursor\":\"%s\"}}",
        cursor);
    feed(e, req);
    cJSON *tools = cJSON_GetObjectItem(cJSON_GetObjectItem(last(&e->sink), "result"), "tools");
    assert_int_equal(cJSON_GetArraySize(tools), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(tools, 0), "name")->valuestring,
                        "d");
    assert_null(next_cursor(last(&e->sink)));
    assert_int_equal(mcp_server_remove_tool(e->srv, "aa"), 0);
    assert_int_equal(mcp_server_remove_tool(e->srv, "aa"), MCP_EINVAL);
    assert_int_equal(mcp_server_tool_count(e->srv), 5);
}

static void bad_tool_definitions_are_refused(void **state)
{
    env_t *e = *state;
    mcp_tool_def_t d = {.name = "bad name", .handler = tool_now};
    assert_int_equal(mcp_server_add_tool(e->srv, &d), MCP_EINVAL);
    d.name = "ok";
    d.input_schema = "{not json";
    assert_int_equal(mcp_server_add_tool(e->srv, &d), MCP_EINVAL);
    d.input_schema = NULL;
    assert_int_equal(mcp_server_add_tool(e->srv, &d), 0);
    assert_int_equal(mcp_server_add_tool(e->srv, &d), MCP_EINVAL);
}

typedef struct got {
    int *err;
    char text[64];
} got_t;

static void cb(void *data, int rc, const cJSON *result, const cJSON *error, const char *message)
{
    got_t *got = data;
    (void)error;
    (void)message;
    *got->err = rc;
    if (result)
        snprintf(got->text, sizeof got->text, "%s",
                 cJSON_GetObjectItem(result, "text")->valuestring);
}

static void outgoing_requests_are_routed_by_their_own_ids(void **state)
{
    env_t *e = *state;
    init(e);
    int err = 1;
    got_t got = {&err, ""};
    /* A client lacking the capability fails at once. */
    assert_int_equal(mcp_session_request(e->sess, "roots/list", NULL, "roots", 0, NULL, NULL, NULL),
                     MCP_ENOTSUP);
    assert_int_equal(e->sink.n, 0);
    assert_int_equal(mcp_session_request(e->sess, "sampling/createMessage", cJSON_CreateObject(),
                                         "sampling", 0, cb, &got, NULL),
                     0);
    cJSON *req = last(&e->sink);
    const char *id = cJSON_GetObjectItem(req, "id")->valuestring;
    assert_memory_equal(id, "ptc-", 4);
    /* A response to an unknown id is dropped; the right one is delivered. */
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":\"ptc-999\",\"result\":{}}");
    assert_int_equal(err, 1);
    char resp[128];
    snprintf(resp, sizeof resp, "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":{\"text\":\"hi\"}}",
             id);
    feed(e, resp);
    assert_int_equal(err, 0);
    assert_string_equal(got.text, "hi");
}

static void freeing_a_session_cancels_calls_in_flight(void **state)
{
    env_t *e = *state;
    add_tool(e, "hold", tool_hold);
    init(e);
    feed(e,
         "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"hold\"}}");
    assert_non_null(e->held);
    assert_int_equal(e->sink.n, 0);
    mcp_session_free(e->sess);
    assert_int_equal(e->cancels, 1);
    assert_int_equal(e->sink.n, 0);
    assert_int_equal(mcp_session_new(e->srv, &sink_ops, &e->sink, &e->sess), 0);
}

static void idle(mcp_session_t *s, void *data)
{
    (void)s;
    (*(int *)data)++;
}

static void shutdown_waits_for_calls_then_cancels_after_grace(void **state)
{
    env_t *e = *state;
    add_tool(e, "hold", tool_hold);
    init(e);
    feed(e,
         "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"hold\"}}");
    int idled = 0;
    mcp_session_shutdown(e->sess, idle, &idled);
    assert_int_equal(idled, 0);
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\"}");
    assert_int_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(last(&e->sink), "error"), "code")->valueint,
        MCP_JSONRPC_INTERNAL_ERROR);
    uv_run(&e->loop, UV_RUN_DEFAULT); /* the grace timer fires and cancels */
    assert_int_equal(e->cancels, 1);
    assert_int_equal(idled, 1);
    /* A server-side cancellation still answers the client. */
    cJSON *r = e->sink.msgs[e->sink.n - 1];
    assert_int_equal(cJSON_GetObjectItem(r, "id")->valueint, 5);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "isError")));
}

/* --- progress ------------------------------------------------------------------------------ */

/* Starts a held call (id 5) whose client asked for progress. */
static void call_with_progress(env_t *e)
{
    add_tool(e, "hold", tool_hold);
    init(e);
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"hold\",\"_meta\":{\"progressToken\":\"tok\"}}}");
    assert_non_null(e->held);
    assert_int_equal(e->sink.n, 0);
}

/* Message i of the sink, a notifications/progress for the call: checks its token and total
 * (10, as every update of these tests gives) and returns its value; *text gets its message. */
static double progress_at(env_t *e, size_t i, const char **text)
{
    assert_true(i < e->sink.n);
    const cJSON *m = e->sink.msgs[i];
    assert_string_equal(cJSON_GetObjectItem(m, "method")->valuestring, "notifications/progress");
    const cJSON *p = cJSON_GetObjectItem(m, "params");
    assert_string_equal(cJSON_GetObjectItem(p, "progressToken")->valuestring, "tok");
    const cJSON *total = cJSON_GetObjectItem(p, "total");
    assert_true(cJSON_IsNumber(total) && total->valuedouble == 10.0);
    const cJSON *v = cJSON_GetObjectItem(p, "progress");
    assert_true(cJSON_IsNumber(v));
    const cJSON *msg = cJSON_GetObjectItem(p, "message");
    assert_true(cJSON_IsString(msg));
    *text = msg->valuestring;
    return v->valuedouble;
}

/* Finishes the held call and checks that its response is the sink's last message, after n
 * progress notifications whose values strictly increase. */
static void finish_after_progress(env_t *e, size_t n)
{
    mcp_call_finish_text(e->held, false, "done");
    e->held = NULL;
    assert_int_equal(e->sink.n, n + 1);
    assert_int_equal(cJSON_GetObjectItem(last(&e->sink), "id")->valueint, 5);
    assert_non_null(cJSON_GetObjectItem(last(&e->sink), "result"));
    const char *text;
    for (size_t i = 1; i < n; i++)
        assert_true(progress_at(e, i, &text) > progress_at(e, i - 1, &text));
}

static void an_update_at_the_same_value_is_sent_raised_with_its_message(void **state)
{
    env_t *e = *state;
    call_with_progress(e);
    /* Two updates in one loop turn at the same step: the second's message is news. */
    mcp_call_progress(e->held, 5, 10, "step 5: compiling");
    mcp_call_progress(e->held, 5, 10, "step 5: linking");
    assert_int_equal(e->sink.n, 1); /* the second waits out the rate limit (100 ms) */
    uv_run(&e->loop, UV_RUN_DEFAULT);
    assert_int_equal(e->sink.n, 2);
    const char *text;
    assert_true(progress_at(e, 0, &text) == 5.0);
    assert_string_equal(text, "step 5: compiling");
    double v = progress_at(e, 1, &text);
    assert_string_equal(text, "step 5: linking");
    assert_true(v > 5.0 && v < 5.000001); /* raised, by a hair */
    /* The rate limit held (ms as the library counts them: a whole one may round away). */
    assert_true(e->sink.at_ns[1] - e->sink.at_ns[0] >= 98 * 1000000ull);
    /* A value JSON cannot carry is one that does not increase. */
    mcp_call_progress(e->held, NAN, 10, "step unknown");
    finish_after_progress(e, 3);
    assert_true(progress_at(e, 2, &text) > v);
    assert_string_equal(text, "step unknown");
}

static void a_waiting_update_going_back_goes_out_raised_before_the_response(void **state)
{
    env_t *e = *state;
    call_with_progress(e);
    mcp_call_progress(e->held, 7, 10, "step 7");
    /* Within the interval the update waits; one going back is raised above 7 and sent just
     * before the response. */
    mcp_call_progress(e->held, 3, 10, "back to step 3");
    assert_int_equal(e->sink.n, 1);
    finish_after_progress(e, 2);
    const char *text;
    assert_true(progress_at(e, 1, &text) > 7.0);
    assert_string_equal(text, "back to step 3");
}

/* --- MCP 2026-07-28: stateless requests, MRTR ------------------------------------------- */

#define META26(caps)                                                                               \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                       \
    "\"io.modelcontextprotocol/clientCapabilities\":" caps

static int error_code(const cJSON *msg)
{
    const cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(msg, "error"), "code");
    return cJSON_IsNumber(c) ? c->valueint : 0;
}

static const cJSON *result_of(const cJSON *msg)
{
    const cJSON *r = cJSON_GetObjectItem(msg, "result");
    assert_non_null(r);
    return r;
}

static void modern_requests_are_served_beside_the_legacy_session(void **state)
{
    env_t *e = *state;
    add_tool(e, "echo", tool_now);
    /* No initialize: a request with the 2026 _meta is served on its own. */
    feed(e,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META26("{}") "}}}");
    const cJSON *r = result_of(last(&e->sink));
    assert_string_equal(cJSON_GetObjectItem(r, "resultType")->valuestring, "complete");
    assert_int_equal(cJSON_GetObjectItem(r, "ttlMs")->valueint, 0);
    assert_string_equal(cJSON_GetObjectItem(r, "cacheScope")->valuestring, "private");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "tools")), 1);
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"server/discover\",\"params\":{" META26(
                "{}") "}}}");
    r = result_of(last(&e->sink));
    assert_string_equal(
        cJSON_GetArrayItem(cJSON_GetObjectItem(r, "supportedVersions"), 0)->valuestring,
        MCP_PROTOCOL_MODERN);
    assert_string_equal(
        cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(r, "_meta"), MCP_META_SERVER_INFO), "name")
            ->valuestring,
        "ptc-mcp");
    /* The session stays uninitialized: a legacy request is still refused. */
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
    assert_int_equal(error_code(last(&e->sink)), MCP_JSONRPC_INVALID_REQUEST);
    /* Version, _meta and removed methods. */
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
            "\"io.modelcontextprotocol/protocolVersion\":\"2030-01-01\","
            "\"io.modelcontextprotocol/clientCapabilities\":{}}}}");
    cJSON *m = last(&e->sink);
    assert_int_equal(error_code(m), MCP_ERR_UNSUPPORTED_PROTOCOL_VERSION);
    const cJSON *data = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "error"), "data");
    assert_string_equal(cJSON_GetObjectItem(data, "requested")->valuestring, "2030-01-01");
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(data, "supported"), 0)->valuestring,
                        MCP_PROTOCOL_MODERN);
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
            "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}");
    assert_int_equal(error_code(last(&e->sink)), MCP_JSONRPC_INVALID_PARAMS);
    assert_int_equal(cJSON_GetObjectItem(last(&e->sink), "id")->valueint, 5);
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\",\"params\":{" META26("{}") "}}}");
    assert_int_equal(error_code(last(&e->sink)), MCP_JSONRPC_METHOD_NOT_FOUND);
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
            "\"arguments\":{}," META26("{}") "}}}");
    r = result_of(last(&e->sink));
    assert_string_equal(cJSON_GetObjectItem(r, "resultType")->valuestring, "complete");
    assert_null(cJSON_GetObjectItem(r, "ttlMs")); /* a call is not cacheable */
    /* initialize still selects the legacy protocol, whose results carry no 2026 fields. */
    init(e);
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\"}");
    r = result_of(last(&e->sink));
    assert_null(cJSON_GetObjectItem(r, "resultType"));
    assert_null(cJSON_GetObjectItem(r, "ttlMs"));
}

#define RETRY_FMT                                                                                  \
    "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{"                        \
    "\"name\":\"%s\",\"inputResponses\":{\"ok\":{\"action\":\"accept\"}},"                         \
    "\"requestState\":\"%s\"," META26("{\"elicitation\":{}}") "}}}"

/* Asks for a confirmation in round 1 (state "asked"), answers in round 2. */
static void tool_confirm(mcp_call_t *call, const cJSON *args, void *data)
{
    (void)args;
    (void)data;
    /* 2026-07-28 has no server-to-client requests. */
    if (mcp_call_is_modern(call))
        assert_int_equal(
            mcp_call_request(call, "elicitation/create", cJSON_CreateObject(), NULL, NULL, NULL),
            MCP_ENOTSUP);
    if (!mcp_call_is_modern(call)) {
        mcp_call_finish_input_required(call, cJSON_Parse("{}"), NULL);
        return;
    }
    const char *st = mcp_call_request_state(call);
    const cJSON *in = mcp_call_input_responses(call);
    if (st == NULL) {
        mcp_call_finish_input_required(
            call,
            cJSON_Parse("{\"ok\":{\"method\":\"elicitation/create\",\"params\":{\"message\":"
                        "\"Sure?\",\"requestedSchema\":{\"type\":\"object\"}}}}"),
            "asked");
        return;
    }
    assert_string_equal(st, "asked");
    mcp_call_finish_text(call, false, "confirmed: %s",
                         cJSON_GetObjectItem(cJSON_GetObjectItem(in, "ok"), "action")->valuestring);
}

static void mrtr_state_round_trips_and_tampering_is_refused(void **state)
{
    env_t *e = *state;
    add_tool(e, "confirm", tool_confirm);
    add_tool(e, "other", tool_confirm);
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"confirm\"," META26("{\"elicitation\":{}}") "}}}");
    const cJSON *r = result_of(last(&e->sink));
    assert_string_equal(cJSON_GetObjectItem(r, "resultType")->valuestring, "input_required");
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "inputRequests"), "ok"));
    const char *rs = cJSON_GetObjectItem(r, "requestState")->valuestring;
    assert_null(strstr(rs, "asked")); /* opaque, not the tool's words */
    char good[512], bad[512], msg[1400];
    snprintf(good, sizeof good, "%s", rs);
    snprintf(bad, sizeof bad, "%s", rs);
    bad[strlen(bad) - 2] = bad[strlen(bad) - 2] == 'A' ? 'B' : 'A';

    snprintf(msg, sizeof msg, RETRY_FMT, 2, "confirm", bad);
    feed(e, msg);
    assert_int_equal(error_code(last(&e->sink)), MCP_JSONRPC_INVALID_PARAMS);
    snprintf(msg, sizeof msg, RETRY_FMT, 3, "other", good); /* another tool's state */
    feed(e, msg);
    assert_int_equal(error_code(last(&e->sink)), MCP_JSONRPC_INVALID_PARAMS);
    snprintf(msg, sizeof msg, RETRY_FMT, 4, "confirm", good);
    feed(e, msg);
    r = result_of(last(&e->sink));
    assert_string_equal(cJSON_GetObjectItem(r, "resultType")->valuestring, "complete");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r, "content"), 0), "text")
            ->valuestring,
        "confirmed: accept");
    /* A non-object answer never reaches the tool. */
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"confirm\",\"inputResponses\":{\"ok\":3}," META26("{\"elicitation\":{}}") "}}}");
    assert_int_equal(error_code(last(&e->sink)), MCP_JSONRPC_INVALID_PARAMS);
    /* Without the capability the input request needs: -32021 naming it. */
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"confirm\"," META26("{}") "}}}");
    cJSON *m = last(&e->sink);
    assert_int_equal(error_code(m), MCP_ERR_MISSING_CLIENT_CAPABILITY);
    assert_non_null(cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "error"), "data"),
                            "requiredCapabilities"),
        "elicitation"));
    /* A legacy call cannot finish with an InputRequiredResult. */
    init(e);
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"confirm\"}}");
    assert_int_equal(error_code(last(&e->sink)), MCP_JSONRPC_INTERNAL_ERROR);
}

/* A second server with its own session and the confirm tool, for states crossing servers. */
typedef struct peer {
    mcp_server_t *srv;
    mcp_session_t *sess;
    sink_t sink;
} peer_t;

static void peer_open(env_t *e, peer_t *p, const unsigned char *key, size_t len)
{
    memset(p, 0, sizeof *p);
    mcp_server_opts_t o;
    mcp_server_opts_default(&o);
    assert_int_equal(mcp_server_new(&e->loop, &o, &e->log, &p->srv), 0);
    if (key != NULL) assert_int_equal(mcp_server_set_state_key(p->srv, key, len), 0);
    mcp_tool_def_t d = {.name = "confirm", .handler = tool_confirm, .data = e};
    assert_int_equal(mcp_server_add_tool(p->srv, &d), 0);
    assert_int_equal(mcp_session_new(p->srv, &sink_ops, &p->sink, &p->sess), 0);
}

static void peer_close(env_t *e, peer_t *p)
{
    mcp_session_free(p->sess);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    mcp_server_free(p->srv);
    sink_clear(&p->sink);
}

static void peer_feed(peer_t *p, const char *json)
{
    mcp_session_receive(p->sess, json, strlen(json));
}

static void servers_sharing_a_state_key_honour_each_others_states(void **state)
{
    env_t *e = *state;
    unsigned char key[40], other[32];
    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (unsigned char)(i * 7 + 1);
    memcpy(other, key, sizeof other);
    other[0] ^= 1;
    /* Shorter than 256 bits: refused, and the server keeps its own random key. */
    assert_int_equal(mcp_server_set_state_key(e->srv, key, MCP_STATE_KEY_MIN_BYTES - 1),
                     MCP_EINVAL);
    peer_t a, b, c, d;
    peer_open(e, &a, key, sizeof key);
    peer_open(e, &b, key, sizeof key);
    peer_open(e, &c, other, sizeof other);
    peer_open(e, &d, NULL, 0); /* its own random key */
    peer_feed(&a, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"confirm\"," META26("{\"elicitation\":{}}") "}}}");
    const cJSON *r = result_of(last(&a.sink));
    assert_string_equal(cJSON_GetObjectItem(r, "resultType")->valuestring, "input_required");
    char rs[512], msg[1400];
    snprintf(rs, sizeof rs, "%s", cJSON_GetObjectItem(r, "requestState")->valuestring);
    snprintf(msg, sizeof msg, RETRY_FMT, 2, "confirm", rs);
    /* Another server with the same key verifies it: the handler sees the state a wrote. */
    peer_feed(&b, msg);
    r = result_of(last(&b.sink));
    assert_string_equal(cJSON_GetObjectItem(r, "resultType")->valuestring, "complete");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r, "content"), 0), "text")
            ->valuestring,
        "confirmed: accept");
    /* A key one bit apart, or the default random one: refused before the handler. */
    peer_feed(&c, msg);
    assert_int_equal(error_code(last(&c.sink)), MCP_JSONRPC_INVALID_PARAMS);
    peer_feed(&d, msg);
    assert_int_equal(error_code(last(&d.sink)), MCP_JSONRPC_INVALID_PARAMS);
    /* Setting the key again replaces it: a's own earlier state no longer verifies. */
    assert_int_equal(mcp_server_set_state_key(a.srv, other, sizeof other), 0);
    peer_feed(&a, msg);
    assert_int_equal(error_code(last(&a.sink)), MCP_JSONRPC_INVALID_PARAMS);
    peer_feed(&c, msg);
    assert_int_equal(error_code(last(&c.sink)), MCP_JSONRPC_INVALID_PARAMS);
    peer_close(e, &a);
    peer_close(e, &b);
    peer_close(e, &c);
    peer_close(e, &d);
}

static const char *method_of(const cJSON *msg)
{
    const cJSON *m = cJSON_GetObjectItem(msg, "method");
    return cJSON_IsString(m) ? m->valuestring : "";
}

static const char *sub_id_of(const cJSON *msg)
{
    const cJSON *id =
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(msg, "params"), "_meta"),
                            "io.modelcontextprotocol/subscriptionId");
    return cJSON_IsString(id) ? id->valuestring : NULL;
}

static void listen_streams_get_what_they_asked_for(void **state)
{
    env_t *e = *state;
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":\"t\",\"method\":\"subscriptions/listen\",\"params\":{"
            "\"notifications\":{\"toolsListChanged\":true,\"promptsListChanged\":true}," META26(
                "{}") "}}}");
    cJSON *ack = last(&e->sink);
    assert_string_equal(method_of(ack), "notifications/subscriptions/acknowledged");
    char tools_sub[32];
    snprintf(tools_sub, sizeof tools_sub, "%s", sub_id_of(ack));
    const cJSON *honored = cJSON_GetObjectItem(cJSON_GetObjectItem(ack, "params"), "notifications");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(honored, "toolsListChanged")));
    /* No prompts registered: not honoured, so not promised. */
    assert_null(cJSON_GetObjectItem(honored, "promptsListChanged"));
    feed(e, "{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"subscriptions/listen\",\"params\":{"
            "\"notifications\":{\"resourcesListChanged\":true}," META26("{}") "}}}");
    sink_clear(&e->sink);
    add_tool(e, "new_tool", tool_now);
    /* Only the tools subscription hears of it, tagged with its id; no legacy list_changed
     * (the session never initialized). */
    assert_int_equal(e->sink.n, 1);
    assert_string_equal(method_of(e->sink.msgs[0]), "notifications/tools/list_changed");
    assert_string_equal(sub_id_of(e->sink.msgs[0]), tools_sub);
    /* Cancelled by the client, it hears nothing more. */
    feed(e, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
            "\"requestId\":\"t\"}}");
    sink_clear(&e->sink);
    add_tool(e, "newer_tool", tool_now);
    assert_int_equal(e->sink.n, 0);
    /* A graceful end answers the remaining one. */
    int idled = 0;
    mcp_session_shutdown(e->sess, idle, &idled);
    assert_int_equal(idled, 1);
    cJSON *end = last(&e->sink);
    assert_string_equal(cJSON_GetObjectItem(end, "id")->valuestring, "r");
    assert_string_equal(cJSON_GetObjectItem(result_of(end), "resultType")->valuestring, "complete");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(cursor_pages_survive_tools_added_between_pages, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(bad_tool_definitions_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(outgoing_requests_are_routed_by_their_own_ids, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(freeing_a_session_cancels_calls_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(shutdown_waits_for_calls_then_cancels_after_grace, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(an_update_at_the_same_value_is_sent_raised_with_its_message,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_waiting_update_going_back_goes_out_raised_before_the_response, setup, teardown),
        cmocka_unit_test_setup_teardown(modern_requests_are_served_beside_the_legacy_session, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(mrtr_state_round_trips_and_tampering_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(servers_sharing_a_state_key_honour_each_others_states,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(listen_streams_get_what_they_asked_for, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
