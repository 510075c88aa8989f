/* mcp__nul_scan (mcp/nulscan.c): finds \u0000 in params.arguments.NAME strings of single
 * messages and batch members, counts offsets in characters, and is not fooled by an escaped
 * backslash, by a key spelled "\u0000" or by a NUL outside the arguments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

static size_t scan(const char *json, mcp__nul_hit_t *hits)
{
    return mcp__nul_scan(json, strlen(json), hits, 4);
}

static void test_single_message(void **state)
{
    (void)state;
    mcp__nul_hit_t h[4];
    const char *m = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                    "\"execute_code\",\"arguments\":{\"timeout_seconds\":5,\"code\":"
                    "\"a\\u00e9\\ud83d\\ude00\\\"x\\u0000y\\u0000\"}}}";
    assert_int_equal(scan(m, h), 1);
    assert_int_equal(h[0].member, 0);
    assert_string_equal(h[0].arg, "code");
    assert_int_equal(h[0].offset, 5); /* a, é, one emoji (a surrogate pair), ", x */

    const char *utf8 = "{\"params\":{\"arguments\":{\"q\":[1,{\"d\":\"\xC3\xA9\xF0\x9F\x98\x80"
                       "\\u0000\"}]}}}";
    assert_int_equal(scan(utf8, h), 1);
    assert_string_equal(h[0].arg, "q");
    assert_int_equal(h[0].offset, 2);
}

static void test_not_a_nul(void **state)
{
    (void)state;
    mcp__nul_hit_t h[4];
    assert_int_equal(scan("{\"params\":{\"arguments\":{\"code\":\"\\\\u0000\"}}}", h), 0);
    assert_int_equal(scan("{\"params\":{\"arguments\":{\"k\\u0000\":\"v\"}}}", h), 0);
    assert_int_equal(scan("{\"params\":{\"name\":\"x\\u0000\",\"arguments\":{}}}", h), 0);
    assert_int_equal(scan("{\"id\":\"\\u0000\",\"params\":{\"arguments\":{\"c\":\"ok\"}}}", h), 0);
    assert_int_equal(scan("{\"params\":{\"arguments\":{\"c\":\"ok\"}}}", h), 0);
}

static void test_batch_members(void **state)
{
    (void)state;
    mcp__nul_hit_t h[4];
    const char *b = "[{\"params\":{\"arguments\":{\"c\":\"ok\"}}},"
                    "{\"params\":{\"arguments\":{\"c\":\"\\u0000\",\"d\":\"\\u0000\"}}},"
                    "{\"params\":{\"arguments\":{\"e\":\"xy\\u0000\"}}}]";
    assert_int_equal(scan(b, h), 2);
    assert_int_equal(h[0].member, 1);
    assert_string_equal(h[0].arg, "c");
    assert_int_equal(h[0].offset, 0);
    assert_int_equal(h[1].member, 2);
    assert_string_equal(h[1].arg, "e");
    assert_int_equal(h[1].offset, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_message),
        cmocka_unit_test(test_not_a_nul),
        cmocka_unit_test(test_batch_members),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
