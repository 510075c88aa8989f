/* JSON-RPC classification, construction and protocol negotiation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "mcp.h"

static mcp_msg_kind_t kind_of(const char *json, const char **why)
{
    cJSON *m = cJSON_Parse(json);
    assert_non_null(m);
    mcp_msg_kind_t k = mcp_jsonrpc_classify(m, why);
    cJSON_Delete(m);
    return k;
}

static void messages_are_classified_by_their_members(void **state)
{
    (void)state;
    const char *why;
    assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &why),
                     MCP_MSG_REQUEST);
    assert_int_equal(
        kind_of("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"x\",\"params\":{}}", &why),
        MCP_MSG_REQUEST);
    assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"method\":\"n\"}", &why), MCP_MSG_NOTIFICATION);
    assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", &why),
                     MCP_MSG_RESPONSE);
    assert_int_equal(
        kind_of("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-1,\"message\":\"m\"}}",
                &why),
        MCP_MSG_ERROR);
}

static void malformed_messages_say_why(void **state)
{
    (void)state;
    const char *why;
    assert_int_equal(kind_of("[1]", &why), MCP_MSG_INVALID);
    assert_int_equal(kind_of("{\"id\":1,\"method\":\"ping\"}", &why), MCP_MSG_INVALID);
    assert_non_null(strstr(why, "jsonrpc"));
    assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", &why),
                     MCP_MSG_INVALID);
    assert_non_null(strstr(why, "id"));
    assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", &why),
                     MCP_MSG_INVALID);
    assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", &why), MCP_MSG_INVALID);
    assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":3}", &why),
                     MCP_MSG_INVALID);
    assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1}", &why), MCP_MSG_INVALID);
    assert_int_equal(
        kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"error\":{\"code\":1}}", &why),
        MCP_MSG_INVALID);
}

static void builders_produce_wire_format(void **state)
{
    (void)state;
    cJSON *id = cJSON_CreateString("x");
    cJSON *r = mcp_jsonrpc_error(id, MCP_JSONRPC_METHOD_NOT_FOUND, "nope", NULL);
    char *t = cJSON_PrintUnformatted(r);
    assert_string_equal(
        t, "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"error\":{\"code\":-32601,\"message\":\"nope\"}}");
    cJSON_free(t);
    cJSON_Delete(r);
    r = mcp_jsonrpc_error(NULL, MCP_JSONRPC_PARSE_ERROR, "bad", NULL);
    t = cJSON_PrintUnformatted(r);
    assert_string_equal(
        t, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"bad\"}}");
    cJSON_free(t);
    cJSON_Delete(r);
    r = mcp_jsonrpc_request(NULL, "notifications/x", NULL);
    t = cJSON_PrintUnformatted(r);
    assert_string_equal(t, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}");
    cJSON_free(t);
    cJSON_Delete(r);
    cJSON_Delete(id);
}

static void negotiation_echoes_supported_versions_and_answers_newest_otherwise(void **state)
{
    (void)state;
    assert_string_equal(mcp_protocol_negotiate("2024-11-05"), "2024-11-05");
    assert_string_equal(mcp_protocol_negotiate("2025-03-26"), "2025-03-26");
    assert_string_equal(mcp_protocol_negotiate("2025-06-18"), "2025-06-18");
    assert_string_equal(mcp_protocol_negotiate("2025-11-25"), "2025-11-25");
    assert_string_equal(mcp_protocol_negotiate("2024-10-07"), MCP_PROTOCOL_LATEST);
    assert_string_equal(mcp_protocol_negotiate(NULL), MCP_PROTOCOL_LATEST);
    assert_true(mcp_protocol_cmp("2025-03-26", "2025-06-18") < 0);
    assert_false(mcp_protocol_supported("2099-01-01"));
}

static void level_names_round_trip(void **state)
{
    (void)state;
    mcp_level_t lv;
    assert_int_equal(mcp_level_parse("warning", &lv), 0);
    assert_int_equal(lv, MCP_LOG_WARNING);
    assert_string_equal(mcp_level_name(MCP_LOG_EMERGENCY), "emergency");
    assert_int_equal(mcp_level_parse("loud", &lv), MCP_EINVAL);
    assert_string_equal(mcp_strerror(MCP_ETIMEDOUT), "timed out");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(messages_are_classified_by_their_members),
        cmocka_unit_test(malformed_messages_say_why),
        cmocka_unit_test(builders_produce_wire_format),
        cmocka_unit_test(negotiation_echoes_supported_versions_and_answers_newest_otherwise),
        cmocka_unit_test(level_names_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
