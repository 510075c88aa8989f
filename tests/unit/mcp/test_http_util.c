/* The HTTP server's pure parts: Accept/Content-Type rules, the bearer-token compare, the
 * DNS-rebinding checks, query parameters, SSE event formatting and ids, --listen parsing, and
 * the session router that puts each message on the stream of the request it belongs to. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "http_server_internal.h"

static void accept_lists_both_media_types(void **state)
{
    (void)state;
    const char *a = "application/json, text/event-stream";
    assert_true(mcp__http_accepts(a, "application/json"));
    assert_true(mcp__http_accepts(a, "text/event-stream"));
    assert_true(mcp__http_accepts("text/event-stream;q=0.9 ,APPLICATION/JSON", "application/json"));
    assert_false(mcp__http_accepts("application/json", "text/event-stream"));
    assert_false(mcp__http_accepts("*/*", "application/json"));
    assert_false(mcp__http_accepts("application/jsonx", "application/json"));
    assert_false(mcp__http_accepts(NULL, "application/json"));
    assert_false(mcp__http_accepts("", "application/json"));
}

static void content_type_ignores_parameters(void **state)
{
    (void)state;
    assert_true(mcp__http_media_is("application/json", "application/json"));
    assert_true(mcp__http_media_is("Application/JSON; charset=utf-8", "application/json"));
    assert_false(mcp__http_media_is("text/plain", "application/json"));
    assert_false(mcp__http_media_is("application/json-seq", "application/json"));
    assert_false(mcp__http_media_is("application/json, text/plain", "application/json"));
    assert_false(mcp__http_media_is(NULL, "application/json"));
}

static void secret_compare_needs_equal_bytes_and_lengths(void **state)
{
    (void)state;
    assert_true(mcp__http_secret_equal("s3cret", 6, "s3cret", 6));
    assert_false(mcp__http_secret_equal("s3cres", 6, "s3cret", 6));
    assert_false(mcp__http_secret_equal("s3cre", 5, "s3cret", 6));
    assert_false(mcp__http_secret_equal("s3crett", 7, "s3cret", 6));
    assert_false(mcp__http_secret_equal("", 0, "s3cret", 6));
    /* A prefix repeated must not pass (the compare wraps around the shorter string). */
    assert_false(mcp__http_secret_equal("ab", 2, "abab", 4));
}

static void loopback_names(void **state)
{
    (void)state;
    assert_true(mcp__http_is_loopback("127.0.0.1"));
    assert_true(mcp__http_is_loopback("127.1.2.3"));
    assert_true(mcp__http_is_loopback("::1"));
    assert_true(mcp__http_is_loopback("localhost"));
    assert_false(mcp__http_is_loopback("0.0.0.0"));
    assert_false(mcp__http_is_loopback("10.0.0.1"));
    assert_false(mcp__http_is_loopback("::"));
}

static void host_header_must_name_this_server(void **state)
{
    (void)state;
    assert_true(mcp__http_host_allowed("127.0.0.1:8765", "127.0.0.1", 8765));
    assert_true(mcp__http_host_allowed("localhost:8765", "127.0.0.1", 8765));
    assert_true(mcp__http_host_allowed("LOCALHOST", "127.0.0.1", 8765));
    assert_true(mcp__http_host_allowed("[::1]:8765", "127.0.0.1", 8765));
    assert_true(mcp__http_host_allowed("[::1]:8765", "::1", 8765));
    assert_true(mcp__http_host_allowed(NULL, "127.0.0.1", 8765));
    assert_false(mcp__http_host_allowed("evil.example.com", "127.0.0.1", 8765));
    assert_false(mcp__http_host_allowed("evil.example.com:8765", "127.0.0.1", 8765));
    assert_false(mcp__http_host_allowed("127.0.0.1:9999", "127.0.0.1", 8765));
    assert_false(mcp__http_host_allowed("127.0.0.1:", "127.0.0.1", 8765));
    assert_false(mcp__http_host_allowed("127.0.0.1:87x5", "127.0.0.1", 8765));
    assert_false(mcp__http_host_allowed("[::1", "127.0.0.1", 8765));
    assert_false(mcp__http_host_allowed("", "127.0.0.1", 8765));
}

static void origin_must_be_a_local_name(void **state)
{
    (void)state;
    assert_true(mcp__http_origin_allowed("http://127.0.0.1:8765", "127.0.0.1"));
    assert_true(mcp__http_origin_allowed("http://localhost:6274", "127.0.0.1"));
    assert_true(mcp__http_origin_allowed("https://[::1]:8765", "127.0.0.1"));
    assert_true(mcp__http_origin_allowed("http://localhost", "127.0.0.1"));
    assert_true(mcp__http_origin_allowed("http://myhost:1", "myhost"));
    assert_false(mcp__http_origin_allowed("http://evil.example.com", "127.0.0.1"));
    assert_false(mcp__http_origin_allowed("http://evil.example.com:8765", "127.0.0.1"));
    assert_false(mcp__http_origin_allowed("http://localhost.evil.com", "127.0.0.1"));
    assert_false(mcp__http_origin_allowed("http://localhost:8765@evil.com", "127.0.0.1"));
    assert_false(mcp__http_origin_allowed("http://localhost/x", "127.0.0.1"));
    assert_false(mcp__http_origin_allowed("null", "127.0.0.1"));
    assert_false(mcp__http_origin_allowed("file://", "127.0.0.1"));
    assert_false(mcp__http_origin_allowed(NULL, "127.0.0.1"));
}

static void query_parameters(void **state)
{
    (void)state;
    char v[40];
    assert_int_equal(mcp__http_query_param("/messages?sessionId=abc123", "sessionId", v, sizeof v),
                     0);
    assert_string_equal(v, "abc123");
    assert_int_equal(mcp__http_query_param("/m?x=1&sessionId=z&y=2", "sessionId", v, sizeof v), 0);
    assert_string_equal(v, "z");
    assert_int_equal(mcp__http_query_param("/m?xsessionId=1", "sessionId", v, sizeof v),
                     MCP_EINVAL);
    assert_int_equal(mcp__http_query_param("/m", "sessionId", v, sizeof v), MCP_EINVAL);
    assert_int_equal(mcp__http_query_param("/m?sessionId=0123456789", "sessionId", v, 5),
                     MCP_EINVAL);
    assert_int_equal(mcp__http_path_len("/mcp?x=1"), 4);
    assert_int_equal(mcp__http_path_len("/mcp"), 4);
}

static void sse_events_are_formatted_line_by_line(void **state)
{
    (void)state;
    size_t n = 0;
    char *e = mcp__sse_format("3_7", "message", 0, "{\"a\":1}", 7, &n);
    assert_non_null(e);
    const char want[] = "id: 3_7\nevent: message\ndata: {\"a\":1}\n\n";
    assert_int_equal(n, sizeof want - 1);
    assert_memory_equal(e, want, n);
    free(e);
    e = mcp__sse_format(NULL, NULL, 0, "one\r\ntwo\nthree", 14, &n);
    const char want2[] = "data: one\ndata: two\ndata: three\n\n";
    assert_int_equal(n, sizeof want2 - 1);
    assert_memory_equal(e, want2, n);
    free(e);
    /* The priming event: an id, the retry hint and empty data. */
    e = mcp__sse_format("1_0", NULL, 1000, "", 0, &n);
    const char want3[] = "id: 1_0\nretry: 1000\ndata: \n\n";
    assert_int_equal(n, sizeof want3 - 1);
    assert_memory_equal(e, want3, n);
    free(e);
}

static void event_ids_round_trip(void **state)
{
    (void)state;
    uint64_t s = 0, q = 0;
    assert_int_equal(mcp__sse_parse_event_id("12_345", &s, &q), 0);
    assert_int_equal(s, 12);
    assert_int_equal(q, 345);
    assert_int_equal(mcp__sse_parse_event_id("0_0", &s, &q), 0);
    assert_int_equal(mcp__sse_parse_event_id("12", &s, &q), MCP_EINVAL);
    assert_int_equal(mcp__sse_parse_event_id("_1", &s, &q), MCP_EINVAL);
    assert_int_equal(mcp__sse_parse_event_id("1_", &s, &q), MCP_EINVAL);
    assert_int_equal(mcp__sse_parse_event_id("1_2x", &s, &q), MCP_EINVAL);
    assert_int_equal(mcp__sse_parse_event_id("99999999999999999999_1", &s, &q), MCP_EINVAL);
    char hex[9];
    const unsigned char b[4] = {0x00, 0x9f, 0xa0, 0xff};
    mcp__hex(b, 4, hex);
    assert_string_equal(hex, "009fa0ff");
}

static void listen_addresses(void **state)
{
    (void)state;
    char h[64];
    unsigned p = 1;
    assert_int_equal(mcp_http_parse_listen("127.0.0.1:8765", h, sizeof h, &p), 0);
    assert_string_equal(h, "127.0.0.1");
    assert_int_equal(p, 8765);
    assert_int_equal(mcp_http_parse_listen("[::1]:0", h, sizeof h, &p), 0);
    assert_string_equal(h, "::1");
    assert_int_equal(p, 0);
    assert_int_equal(mcp_http_parse_listen("localhost:80", h, sizeof h, &p), 0);
    assert_string_equal(h, "localhost");
    assert_int_equal(mcp_http_parse_listen("::1:80", h, sizeof h, &p), MCP_EINVAL);
    assert_int_equal(mcp_http_parse_listen("127.0.0.1", h, sizeof h, &p), MCP_EINVAL);
    assert_int_equal(mcp_http_parse_listen(":80", h, sizeof h, &p), MCP_EINVAL);
    assert_int_equal(mcp_http_parse_listen("h:65536", h, sizeof h, &p), MCP_EINVAL);
    assert_int_equal(mcp_http_parse_listen("h:8o", h, sizeof h, &p), MCP_EINVAL);
    assert_int_equal(mcp_http_parse_listen("h:", h, sizeof h, &p), MCP_EINVAL);
    assert_int_equal(mcp_http_parse_listen("averyveryverylonghostname:1", h, 8, &p), MCP_EINVAL);
}

/* --- routing of a session's messages -------------------------------------------------------- */

typedef struct routed {
    cJSON *msg;
    cJSON *related; /* NULL: none */
    bool answer;
} routed_t;

typedef struct env {
    uv_loop_t loop;
    mcp_logger_t log;
    mcp_server_t *srv;
    mcp_session_t *sess;
    routed_t out[32];
    size_t n;
    mcp_call_t *held;
    int sampled_err, request_rc;
    bool sampled;
} env_t;

static int route(void *tdata, const char *json, size_t len, const cJSON *related, bool answer)
{
    env_t *e = tdata;
    assert_true(e->n < 32);
    routed_t *r = &e->out[e->n++];
    r->msg = json != NULL ? cJSON_ParseWithLength(json, len) : NULL;
    assert_true(json == NULL || r->msg != NULL);
    r->related = related ? cJSON_Duplicate(related, true) : NULL;
    r->answer = answer;
    return 0;
}

static const mcp_transport_ops_t no_ops = {.send = NULL};

static void on_sampled(void *data, int err, const cJSON *result, const cJSON *error,
                       const char *message)
{
    env_t *e = data;
    (void)result;
    (void)error;
    (void)message;
    e->sampled = true;
    e->sampled_err = err;
}

/* Logs, reports progress and asks the client to sample, all before answering. */
static void tool_chatty(mcp_call_t *call, const cJSON *args, void *data)
{
    (void)args;
    env_t *e = data;
    e->held = call;
    mcp_call_log(call, MCP_LOG_INFO, "t", cJSON_CreateString("working"));
    mcp_call_progress(call, 1, 2, NULL);
    cJSON *p = cJSON_CreateObject();
    cJSON_AddArrayToObject(p, "messages");
    e->request_rc = mcp_call_request(call, "sampling/createMessage", p, on_sampled, e, NULL);
}

static void clear(env_t *e)
{
    for (size_t i = 0; i < e->n; i++) {
        cJSON_Delete(e->out[i].msg);
        cJSON_Delete(e->out[i].related);
    }
    e->n = 0;
}

static int setup(void **state)
{
    env_t *e = calloc(1, sizeof *e);
    assert_int_equal(uv_loop_init(&e->loop), 0);
    e->log.out = stderr;
    e->log.level = MCP_LOG_CRITICAL;
    mcp_server_opts_t o;
    mcp_server_opts_default(&o);
    o.name = "t";
    o.version = "1";
    o.progress_min_interval_ms = 0;
    assert_int_equal(mcp_server_new(&e->loop, &o, &e->log, &e->srv), 0);
    mcp_tool_def_t d = {.name = "chatty", .handler = tool_chatty, .data = e};
    assert_int_equal(mcp_server_add_tool(e->srv, &d), 0);
    assert_int_equal(mcp_session_new(e->srv, &no_ops, e, &e->sess), 0);
    mcp_session_set_router(e->sess, route);
    const char *init = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"sampling\":{}}}}";
    mcp_session_receive(e->sess, init, strlen(init));
    assert_int_equal(e->n, 1);
    assert_true(e->out[0].answer);
    assert_int_equal(e->out[0].related->valueint, 0);
    clear(e);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env_t *e = *state;
    clear(e);
    mcp_session_free(e->sess);
    mcp_server_free(e->srv);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    free(e);
    return 0;
}

static void call_messages_carry_the_call_id(void **state)
{
    env_t *e = *state;
    const char *req = "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"tools/call\",\"params\":{"
                      "\"name\":\"chatty\",\"_meta\":{\"progressToken\":5}}}";
    mcp_session_receive(e->sess, req, strlen(req));
    /* log, progress, sampling request: related to c1, none of them the answer */
    assert_int_equal(e->request_rc, 0);
    assert_int_equal(e->n, 3);
    const char *methods[3] = {"notifications/message", "notifications/progress",
                              "sampling/createMessage"};
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(cJSON_GetObjectItem(e->out[i].msg, "method")->valuestring, methods[i]);
        assert_non_null(e->out[i].related);
        assert_string_equal(e->out[i].related->valuestring, "c1");
        assert_false(e->out[i].answer);
    }
    /* The client answers the sampling request; then the tool answers. */
    const char *sid = cJSON_GetObjectItem(e->out[2].msg, "id")->valuestring;
    char ans[160];
    snprintf(ans, sizeof ans, "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":{}}", sid);
    clear(e);
    mcp_session_receive(e->sess, ans, strlen(ans));
    assert_true(e->sampled);
    assert_int_equal(e->sampled_err, 0);
    assert_int_equal(e->n, 0); /* a response from the client gets no answer */
    mcp_call_finish_text(e->held, false, "done");
    assert_int_equal(e->n, 1);
    assert_true(e->out[0].answer);
    assert_string_equal(e->out[0].related->valuestring, "c1");
    /* Unrelated traffic has no request. */
    clear(e);
    mcp_session_notify(e->sess, "notifications/tools/list_changed", NULL);
    assert_int_equal(e->n, 1);
    assert_null(e->out[0].related);
    assert_false(e->out[0].answer);
}

static void request_cancelled_with_its_call_goes_with_it(void **state)
{
    env_t *e = *state;
    const char *req = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{"
                      "\"name\":\"chatty\"}}";
    mcp_session_receive(e->sess, req, strlen(req));
    clear(e);
    mcp_outreq_t *r = NULL;
    cJSON *p = cJSON_CreateObject();
    assert_int_equal(mcp_call_request(e->held, "sampling/createMessage", p, on_sampled, e, &r), 0);
    clear(e);
    mcp_outreq_cancel(r, "no longer needed");
    assert_int_equal(e->sampled_err, MCP_ECANCELED);
    assert_int_equal(e->n, 1);
    assert_string_equal(cJSON_GetObjectItem(e->out[0].msg, "method")->valuestring,
                        "notifications/cancelled");
    assert_int_equal(e->out[0].related->valueint, 7);
    /* A method whose capability the client lacks is refused at once. */
    assert_int_equal(
        mcp_call_request(e->held, "elicitation/create", cJSON_CreateObject(), on_sampled, e, NULL),
        MCP_ENOTSUP);
    mcp_call_finish_text(e->held, false, "done");
}

static void cancelled_call_and_early_close_reach_the_router(void **state)
{
    env_t *e = *state;
    const char *req = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{"
                      "\"name\":\"chatty\"}}";
    mcp_session_receive(e->sess, req, strlen(req));
    clear(e);
    /* The tool closes its stream early: no message, not the answer, the call's id. */
    assert_int_equal(mcp_call_close_stream(e->held), 0);
    assert_int_equal(e->n, 1);
    assert_null(e->out[0].msg);
    assert_false(e->out[0].answer);
    assert_int_equal(e->out[0].related->valueint, 9);
    clear(e);
    /* The client cancels: the call ends without an answer, and the router hears of it. */
    const char *cancel = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                         "\"params\":{\"requestId\":9}}";
    mcp_session_receive(e->sess, cancel, strlen(cancel));
    assert_int_equal(e->n, 0); /* no cancel callback was set: the tool still holds the call */
    mcp_call_finish_text(e->held, false, "late");
    /* the pending sampling request is not answered by the client; no answer for 9 */
    size_t ends = 0;
    for (size_t i = 0; i < e->n; i++) {
        if (e->out[i].msg == NULL) {
            ends++;
            assert_true(e->out[i].answer);
            assert_int_equal(e->out[i].related->valueint, 9);
        } else {
            assert_false(e->out[i].answer);
        }
    }
    assert_int_equal(ends, 1);
}

static void close_stream_needs_a_router(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    mcp_logger_t lg = {stderr, MCP_LOG_CRITICAL};
    mcp_server_opts_t o;
    mcp_server_opts_default(&o);
    o.name = "t";
    o.version = "1";
    mcp_server_t *srv = NULL;
    assert_int_equal(mcp_server_new(&loop, &o, &lg, &srv), 0);
    env_t e;
    memset(&e, 0, sizeof e);
    mcp_tool_def_t d = {.name = "chatty", .handler = tool_chatty, .data = &e};
    assert_int_equal(mcp_server_add_tool(srv, &d), 0);
    mcp_session_t *s = NULL;
    assert_int_equal(mcp_session_new(srv, &no_ops, NULL, &s), 0);
    const char *init = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}";
    mcp_session_receive(s, init, strlen(init));
    const char *req = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                      "\"name\":\"chatty\"}}";
    /* chatty asks for sampling, which this client lacks: the request fails in the tool. */
    e.held = NULL;
    mcp_session_receive(s, req, strlen(req));
    assert_non_null(e.held);
    assert_int_equal(e.request_rc, MCP_ENOTSUP);
    assert_int_equal(mcp_call_close_stream(e.held), MCP_ENOTSUP);
    mcp_call_finish_text(e.held, false, "done");
    mcp_session_free(s);
    mcp_server_free(srv);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accept_lists_both_media_types),
        cmocka_unit_test(content_type_ignores_parameters),
        cmocka_unit_test(secret_compare_needs_equal_bytes_and_lengths),
        cmocka_unit_test(loopback_names),
        cmocka_unit_test(host_header_must_name_this_server),
        cmocka_unit_test(origin_must_be_a_local_name),
        cmocka_unit_test(query_parameters),
        cmocka_unit_test(sse_events_are_formatted_line_by_line),
        cmocka_unit_test(event_ids_round_trip),
        cmocka_unit_test(listen_addresses),
        cmocka_unit_test_setup_teardown(call_messages_carry_the_call_id, setup, teardown),
        cmocka_unit_test_setup_teardown(request_cancelled_with_its_call_goes_with_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(cancelled_call_and_early_close_reach_the_router, setup,
                                        teardown),
        cmocka_unit_test(close_stream_needs_a_router),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
