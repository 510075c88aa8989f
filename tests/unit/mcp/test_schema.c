/* Argument validation against tool input schemas. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "mcp.h"

static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{"
    "\"query\":{\"type\":\"string\",\"minLength\":1},"
    "\"top_k\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50},"
    "\"mode\":{\"enum\":[\"fast\",\"slow\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":2},"
    "\"opt\":{\"type\":[\"string\",\"null\"]},"
    "\"nested\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"number\"}},\"required\":["
    "\"n\"]}"
    "},\"required\":[\"query\"]}";

static int check(const char *args, char *msg)
{
    cJSON *schema = cJSON_Parse(SCHEMA);
    cJSON *v = cJSON_Parse(args);
    assert_non_null(schema);
    assert_non_null(v);
    int rc = mcp_schema_validate(schema, v, msg, 256);
    cJSON_Delete(schema);
    cJSON_Delete(v);
    return rc;
}

static void valid_arguments_pass(void **state)
{
    (void)state;
    char msg[256];
    assert_int_equal(check("{\"query\":\"q\"}", msg), 0);
    assert_int_equal(check("{\"query\":\"q\",\"top_k\":5,\"mode\":\"fast\",\"tags\":[\"a\"],"
                           "\"opt\":null,\"nested\":{\"n\":1.5},\"extra\":true}",
                           msg),
                     0);
}

static void each_violation_names_the_field_and_the_reason(void **state)
{
    (void)state;
    char msg[256];
    assert_int_equal(check("{}", msg), MCP_EINVAL);
    assert_string_equal(msg, "query: is required but missing");
    check("{\"query\":3}", msg);
    assert_string_equal(msg, "query: expected string, got integer");
    check("{\"query\":\"\"}", msg);
    assert_string_equal(msg, "query: needs at least 1 characters");
    check("{\"query\":\"q\",\"top_k\":\"5\"}", msg);
    assert_string_equal(msg, "top_k: expected integer, got string");
    check("{\"query\":\"q\",\"top_k\":2.5}", msg);
    assert_string_equal(msg, "top_k: expected integer, got number");
    check("{\"query\":\"q\",\"top_k\":51}", msg);
    assert_string_equal(msg, "top_k: must be <= 50");
    check("{\"query\":\"q\",\"mode\":\"medium\"}", msg);
    assert_string_equal(msg, "mode: must be one of [\"fast\",\"slow\"]");
    check("{\"query\":\"q\",\"tags\":[\"a\",2]}", msg);
    assert_string_equal(msg, "tags[1]: expected string, got integer");
    check("{\"query\":\"q\",\"tags\":[\"a\",\"b\",\"c\"]}", msg);
    assert_string_equal(msg, "tags: allows at most 2 items");
    check("{\"query\":\"q\",\"opt\":1}", msg);
    assert_string_equal(msg, "opt: expected string or null, got integer");
    check("{\"query\":\"q\",\"nested\":{}}", msg);
    assert_string_equal(msg, "nested.n: is required but missing");
    check("[]", msg);
    assert_string_equal(msg, "arguments: expected object, got array");
}

static void additional_properties_false_is_enforced(void **state)
{
    (void)state;
    cJSON *schema = cJSON_Parse(
        "{\"type\":\"object\",\"properties\":{\"a\":{}},\"additionalProperties\":false}");
    cJSON *v = cJSON_Parse("{\"a\":1,\"b\":2}");
    char msg[128];
    assert_int_equal(mcp_schema_validate(schema, v, msg, sizeof msg), MCP_EINVAL);
    assert_string_equal(msg, "b: is not an allowed property");
    cJSON_Delete(schema);
    cJSON_Delete(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_arguments_pass),
        cmocka_unit_test(each_violation_names_the_field_and_the_reason),
        cmocka_unit_test(additional_properties_false_is_enforced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
