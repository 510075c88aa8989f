/* Identifier splitting, stemming and stop words. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "registry.h"

static void split_is(const char *in, const char *want)
{
    char out[256];
    int n = reg_text_split(in, out, sizeof out);
    assert_int_equal(n, (int)strlen(want));
    assert_string_equal(out, want);
}

static void test_split_identifier_styles(void **state)
{
    (void)state;
    split_is("snake_case_name", "snake case name");
    split_is("kebab-case-name", "kebab case name");
    split_is("dotted.name.parts", "dotted name parts");
    split_is("camelCaseName", "camel case name");
    split_is("PascalCase", "pascal case");
    split_is("HTTPServerError", "http server error");
    split_is("getURL", "get url");
    split_is("asana_list_workspaces", "asana list workspaces");
    split_is("s3Bucket v2", "s3 bucket v2");
    split_is("  Hello,   World!  ", "hello world");
    split_is("", "");
    split_is("___", "");
}

static void test_split_keeps_utf8_inside_words(void **state)
{
    (void)state;
    split_is("caf\xc3\xa9_menu", "caf\xc3\xa9 menu");
}

static void test_split_reports_short_buffer(void **state)
{
    (void)state;
    char out[8];
    assert_int_equal(reg_text_split("a_long_identifier_name", out, sizeof out), REG_ETOOBIG);
    assert_true(strlen(out) < sizeof out);
    assert_int_equal(reg_text_split(NULL, out, sizeof out), REG_EINVAL);
}

static void stem_is(const char *in, const char *want)
{
    char w[64];
    snprintf(w, sizeof w, "%s", in);
    size_t n = reg_text_stem(w);
    assert_int_equal(n, strlen(want));
    assert_string_equal(w, want);
}

static void stem_same(const char *a, const char *b)
{
    char x[64], y[64];
    snprintf(x, sizeof x, "%s", a);
    snprintf(y, sizeof y, "%s", b);
    reg_text_stem(x);
    reg_text_stem(y);
    assert_string_equal(x, y);
}

static void test_stem_joins_inflections(void **state)
{
    (void)state;
    stem_same("issues", "issue");
    stem_same("tasks", "task");
    stem_same("listing", "list");
    stem_same("listed", "lists");
    stem_same("created", "create");
    stem_same("creating", "creates");
    stem_same("entries", "entry");
    stem_same("running", "run");
    stem_same("copied", "copy");
    stem_same("messages", "message");
    stem_is("status", "status");
    stem_is("get", "get");
    stem_is("s3", "s3");
    stem_is("v2s", "v2s");
}

static void test_stopwords(void **state)
{
    (void)state;
    const char *stop[] = {"a", "the", "of", "my", "your", "with", "please", "what", "yours"};
    for (size_t i = 0; i < sizeof stop / sizeof stop[0]; i++)
        assert_true(reg_text_is_stopword(stop[i]));
    const char *keep[] = {"list", "create", "issue", "get", "search", "all_"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        assert_false(reg_text_is_stopword(keep[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_identifier_styles),
        cmocka_unit_test(test_split_keeps_utf8_inside_words),
        cmocka_unit_test(test_split_reports_short_buffer),
        cmocka_unit_test(test_stem_joins_inflections),
        cmocka_unit_test(test_stopwords),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
