/* The SEP-2243 header value encoding both sides use (mcp/header_value.c): what goes literally,
 * what as =?base64?...?=, and that the decoder gives back every value the encoder wrote. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "header_value.h"

static void plain_visible_ascii_goes_literally(void **state)
{
    (void)state;
    char out[64];
    const char *plain[] = {"eu-west", "42", "1.5", "true", "a b", "{\"k\":1}", "?="};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        assert_true(mcp__header_value_encode(plain[i], out, sizeof out));
        assert_string_equal(out, plain[i]);
    }
}

static void other_values_go_as_base64_and_decode_back(void **state)
{
    (void)state;
    char out[64], back[64];
    /* Non-ASCII, edge blanks, control characters, the sentinel itself, the empty value. */
    const char *coded[] = {"gr\303\266\303\237er", " padded",      "padded ", "tab\there",
                           "line\nbreak",          "=?base64?x?=", ""};
    for (size_t i = 0; i < sizeof coded / sizeof coded[0]; i++) {
        assert_true(mcp__header_value_encode(coded[i], out, sizeof out));
        assert_int_equal(strncmp(out, "=?base64?", 9), 0);
        assert_string_equal(out + strlen(out) - 2, "?=");
        assert_string_equal(mcp__header_value_decode(out, back, sizeof back), coded[i]);
    }
    assert_true(mcp__header_value_encode("\xc3\xa9", out, sizeof out));
    assert_string_equal(out, "=?base64?w6k=?=");
    /* A literal value decodes to itself (no copy). */
    const char *lit = "eu-west";
    assert_ptr_equal(mcp__header_value_decode(lit, back, sizeof back), lit);
}

static void bad_base64_and_small_buffers_are_refused(void **state)
{
    (void)state;
    char out[16], back[4];
    assert_null(mcp__header_value_decode("=?base64?ZXUtd2VzdA?=", out, sizeof out)); /* no pad */
    assert_null(mcp__header_value_decode("=?base64?!!!!?=", out, sizeof out));
    assert_null(mcp__header_value_decode("=?base64?ZXUtd2VzdB==?=", out, sizeof out)); /* bits */
    assert_null(mcp__header_value_decode("=?base64?ZXUtd2VzdA===?=", out, sizeof out));
    assert_string_equal(mcp__header_value_decode("=?base64?ZXUtd2VzdA==?=", out, sizeof out),
                        "eu-west");
    assert_null(mcp__header_value_decode("=?base64?ZXUtd2VzdA==?=", back, sizeof back));
    assert_false(mcp__header_value_encode("a value longer than sixteen", out, sizeof out));
    assert_false(mcp__header_value_encode("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", out, sizeof out));
}

static void param_header_names_are_tokens(void **state)
{
    (void)state;
    assert_true(mcp__header_name_is_token("Region"));
    assert_true(mcp__header_name_is_token("X-Tenant_ID.v2"));
    assert_false(mcp__header_name_is_token(""));
    assert_false(mcp__header_name_is_token(NULL));
    assert_false(mcp__header_name_is_token("two words"));
    assert_false(mcp__header_name_is_token("a:b"));
    assert_false(mcp__header_name_is_token("new\nline"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_visible_ascii_goes_literally),
        cmocka_unit_test(other_values_go_as_base64_and_decode_back),
        cmocka_unit_test(bad_base64_and_small_buffers_are_refused),
        cmocka_unit_test(param_header_names_are_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
