/* JSON-RPC classification, construction and protocol negotiation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base.h"
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

/* Prints with mcp_jsonrpc_print into a buffer that already holds "x": returns the text after
 * it (caller frees). */
static char *print_after_prefix(const cJSON *item)
{
    ptc_buf_t b;
    ptc_buf_init(&b, 1u << 20);
    assert_int_equal(ptc_buf_append(&b, "x", 1), 0);
    assert_int_equal(mcp_jsonrpc_print(item, &b), MCP_OK);
    char *text = strdup(ptc_buf_cstr(&b) + 1);
    assert_non_null(text);
    ptc_buf_free(&b);
    return text;
}

static void printer_gives_cjsons_text_for_every_kind_of_value(void **state)
{
    (void)state;
    /* Every type, escapes of each class, UTF-8 passed through, nesting, empty containers. */
    static const char *const docs[] = {
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}",
        "[1,-2,0,true,false,null,\"\",[],{},[[{\"a\":[null]}]]]",
        "{\"s\":\"q\\\"b\\\\s\\/n\\nr\\rt\\tb\\bf\\f\\u0001\\u001f \\u00e9\\u20ac\"}",
        "{\"k\\n\\\"ey\":1.5,\"big\":9007199254740991,\"neg\":-9007199254740991}",
        "[0.1,3.14159,1e-7,-2.5e+30,123456789012.5]",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        cJSON *v = cJSON_Parse(docs[i]);
        assert_non_null(v);
        char *ours = print_after_prefix(v);
        char *theirs = cJSON_PrintUnformatted(v);
        /* The same value back, and the same bytes where no number is large or fractional
         * (cJSON prints 2^53-1 as 9.00719925474099e+15, losing digits; we print it exact). */
        cJSON *back = cJSON_Parse(ours);
        assert_non_null(back);
        assert_true(cJSON_Compare(v, back, true));
        if (i < 3) assert_string_equal(ours, theirs);
        cJSON_Delete(back);
        cJSON_free(theirs);
        free(ours);
        cJSON_Delete(v);
    }
}

static void printer_writes_integers_without_exponent_and_non_finite_as_null(void **state)
{
    (void)state;
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateNumber(1e15));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(-0.0));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(1e300));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(0.1 + 0.2));
    cJSON_AddItemToArray(a, cJSON_CreateRaw("{\"raw\":1}"));
    char *t = print_after_prefix(a);
    assert_string_equal(t, "[1000000000000000,0,1e+300,0.30000000000000004,{\"raw\":1}]");
    free(t);
    cJSON_Delete(a);
}

static void printer_failure_leaves_the_buffer_as_it_was(void **state)
{
    (void)state;
    /* Nested past cJSON's own limit: refused, and what the buffer held stays. */
    cJSON *root = cJSON_CreateArray(), *cur = root;
    for (int i = 0; i < CJSON_NESTING_LIMIT + 5; i++) {
        cJSON *next = cJSON_CreateArray();
        cJSON_AddItemToArray(cur, next);
        cur = next;
    }
    ptc_buf_t b;
    ptc_buf_init(&b, 1u << 20);
    assert_int_equal(ptc_buf_append(&b, "kept", 4), 0);
    assert_int_equal(mcp_jsonrpc_print(root, &b), MCP_EINVAL);
    assert_string_equal(ptc_buf_cstr(&b), "kept");
    /* A buffer too small for the text: its cap is the error, same rule. */
    ptc_buf_t small;
    ptc_buf_init(&small, 8);
    cJSON *s = cJSON_CreateString("longer than eight bytes");
    assert_int_equal(mcp_jsonrpc_print(s, &small), MCP_ETOOBIG);
    assert_int_equal(ptc_buf_len(&small), 0);
    assert_int_equal(ptc_buf_error(&small), 0);
    cJSON_Delete(s);
    ptc_buf_free(&small);
    ptc_buf_free(&b);
    cJSON_Delete(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(messages_are_classified_by_their_members),
        cmocka_unit_test(malformed_messages_say_why),
        cmocka_unit_test(builders_produce_wire_format),
        cmocka_unit_test(negotiation_echoes_supported_versions_and_answers_newest_otherwise),
        cmocka_unit_test(level_names_round_trip),
        cmocka_unit_test(printer_gives_cjsons_text_for_every_kind_of_value),
        cmocka_unit_test(printer_writes_integers_without_exponent_and_non_finite_as_null),
        cmocka_unit_test(printer_failure_leaves_the_buffer_as_it_was),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
