/* test_file_utf8.c - the capped file reader and the UTF-8 checks. malloc and realloc are
 * wrapped (see CMakeLists.txt) to fail the sanitiser's and the reader's allocations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base.h"
#include "base_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A temporary file holding n bytes of data; its path in path (removed by the caller). */
static void write_temp(char path[64], const void *data, size_t n)
{
    snprintf(path, 64, "/tmp/ptc-base-test-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    close(fd);
}

static void test_file_read_gives_the_bytes_and_a_nul(void **state)
{
    (void)state;
    char path[64];
    write_temp(path, "ab\0cd", 5);
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(ptc_file_read(path, 5, &out, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(out, "ab\0cd", 6);
    free(out);
    assert_int_equal(ptc_file_read(path, 4, &out, &len), PTC_ETOOBIG);
    assert_null(out);
    unlink(path);
    write_temp(path, "", 0);
    assert_int_equal(ptc_file_read(path, 0, &out, &len), 0);
    assert_string_equal(out, "");
    free(out);
    unlink(path);
}

static void test_file_read_refuses_what_is_not_a_readable_file(void **state)
{
    (void)state;
    char *out = NULL;
    assert_int_equal(ptc_file_read("/nonexistent/ptc-base", 100, &out, NULL), -ENOENT);
    assert_int_equal(ptc_file_read("/tmp", 100, &out, NULL), -EISDIR);
    assert_int_equal(ptc_file_read(NULL, 100, &out, NULL), PTC_EINVAL);
    assert_null(out);
}

static void test_file_read_allocation_failure(void **state)
{
    (void)state;
    char path[64];
    write_temp(path, "hello", 5);
    char *out = NULL;
    allocs_left = 0;
    assert_int_equal(ptc_file_read(path, 100, &out, NULL), PTC_ENOMEM);
    allocs_left = -1;
    assert_null(out);
    unlink(path);
}

static void test_valid_follows_rfc_3629(void **state)
{
    (void)state;
    assert_true(ptc_utf8_valid("", 0));
    assert_true(ptc_utf8_valid("a\0b", 3)); /* NUL is valid UTF-8 */
    assert_true(ptc_utf8_valid("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 9));
    assert_false(ptc_utf8_valid("\xC0\xAF", 2));         /* overlong */
    assert_false(ptc_utf8_valid("\xE0\x80\xAF", 3));     /* overlong */
    assert_false(ptc_utf8_valid("\xED\xA0\x80", 3));     /* surrogate */
    assert_false(ptc_utf8_valid("\xF4\x90\x80\x80", 4)); /* past U+10FFFF */
    assert_false(ptc_utf8_valid("\xE2\x82", 2));         /* truncated */
    assert_false(ptc_utf8_valid("\x80", 1));             /* lone continuation */
    unsigned cp = 0;
    assert_int_equal(ptc_utf8_decode("\xE2\x82\xAC", 3, &cp), 3);
    assert_int_equal(cp, 0x20AC);
    assert_int_equal(ptc_utf8_decode("\xE2\x82\xAC", 2, &cp), 0);
}

/* The valid prefix, and whether the rest is a character the end of the data cut: every cut of
   a 2-, 3- and 4-byte character after valid text is, a sequence that could never be well formed
   (overlong, surrogate, past U+10FFFF, a lone continuation) is not, and decode's code points
   follow the same table (the first and last of each length). */
static void test_valid_len_tells_a_character_cut_at_the_end(void **state)
{
    (void)state;
    static const char *chars[] = {"\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xED\x9F\xBF",
                                  "\xF4\x8F\xBF\xBF"};
    for (size_t c = 0; c < sizeof chars / sizeof chars[0]; c++) {
        char buf[16];
        size_t clen = strlen(chars[c]);
        snprintf(buf, sizeof buf, "ab%s", chars[c]);
        bool cut = true;
        assert_int_equal(ptc_utf8_valid_len(buf, 2 + clen, &cut), 2 + clen);
        assert_false(cut);
        for (size_t k = 1; k < clen; k++) {
            cut = false;
            assert_int_equal(ptc_utf8_valid_len(buf, 2 + k, &cut), 2);
            assert_true(cut);
            assert_false(ptc_utf8_valid(buf, 2 + k));
        }
    }
    static const struct {
        const char *s;
        size_t n, valid;
    } never[] = {
        {"a\xC0\xAF", 3, 1}, {"a\xE0\x80", 3, 1}, {"a\xED\xA0", 3, 1},  {"a\xF4\x90\x80", 4, 1},
        {"a\x80", 2, 1},     {"a\xF5", 2, 1},     {"a\xE2\x82x", 4, 1}, {"\xC3\xA9\xFF\xC3", 4, 2},
    };
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        bool cut = true;
        assert_int_equal(ptc_utf8_valid_len(never[i].s, never[i].n, &cut), never[i].valid);
        assert_false(cut);
    }
    assert_int_equal(ptc_utf8_valid_len("abc", 3, NULL), 3);
    static const struct {
        const char *s;
        unsigned cp;
    } edges[] = {{"\x7F", 0x7F},
                 {"\xC2\x80", 0x80},
                 {"\xDF\xBF", 0x7FF},
                 {"\xE0\xA0\x80", 0x800},
                 {"\xEF\xBF\xBF", 0xFFFF},
                 {"\xF0\x90\x80\x80", 0x10000},
                 {"\xF4\x8F\xBF\xBF", 0x10FFFF}};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        unsigned cp = 0;
        assert_int_equal(ptc_utf8_decode(edges[i].s, strlen(edges[i].s), &cp), strlen(edges[i].s));
        assert_int_equal(cp, edges[i].cp);
    }
}

static void test_sanitize_replaces_bad_bytes_and_nul_with_fffd(void **state)
{
    (void)state;
    size_t n = 0;
    char *s = ptc_utf8_sanitize("a\0b\xFF\xC3\xA9\xE2\x82", 8, &n);
    assert_string_equal(s, "a\xEF\xBF\xBD"
                           "b\xEF\xBF\xBD\xC3\xA9\xEF\xBF\xBD"); /* a cut sequence is one */
    assert_int_equal(n, strlen(s));
    assert_true(ptc_utf8_valid(s, n));
    free(s);
    allocs_left = 0;
    assert_null(ptc_utf8_sanitize("abc", 3, &n));
    allocs_left = -1;
}

static void test_sanitize_replaces_each_byte_that_starts_no_valid_sequence(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t len;
        const char *want;
    } cases[] = {
        {"plain", 5, "plain"},
        {"h\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80", 12, "h\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80"},
        {"\xff", 1, "\xef\xbf\xbd"},
        {"a\xc3\x28", 3, "a\xef\xbf\xbd("},                          /* bad continuation */
        {"\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong '/' */
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* surrogate */
        {"\xf4\x90\x80\x80", 4,
         "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* past U+10FFFF */
        {"ok\xe2\x9c", 4, "ok\xef\xbf\xbd"},                  /* cut short: one */
        {"", 0, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = 99;
        char *t = ptc_utf8_sanitize(cases[i].in, cases[i].len, &n);
        assert_non_null(t);
        assert_string_equal(t, cases[i].want);
        assert_int_equal(n, strlen(cases[i].want));
        free(t);
    }
}

#define R "\xEF\xBF\xBD"

/* ptc_utf8_clean, as the downstream client runs it on every line: valid text is not copied,
 * each maximal ill-formed subpart becomes one U+FFFD and counts once, NUL too. */
static void clean_case(const char *in, size_t len, int want_replaced, const char *want)
{
    char *out = NULL;
    size_t out_len = 0;
    assert_int_equal(ptc_utf8_clean(in, len, &out, &out_len), want_replaced);
    if (want_replaced == 0) {
        assert_null(out);
        assert_int_equal(out_len, len);
        return;
    }
    assert_non_null(out);
    assert_int_equal(out_len, strlen(want));
    assert_memory_equal(out, want, out_len);
    assert_true(ptc_utf8_valid(out, out_len));
    free(out);
}

static void test_clean_replaces_maximal_subparts_and_copies_only_when_needed(void **state)
{
    (void)state;
    clean_case("", 0, 0, NULL);
    clean_case("plain ascii", 11, 0, NULL);
    clean_case("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF", 19, 0, NULL);
    clean_case("a\0b", 3, 1, "a" R "b"); /* NUL: valid UTF-8, but never passed on */
    clean_case("a\xFF"
               "b",
               3, 1, "a" R "b");
    clean_case("caf\xC3", 4, 1, "caf" R);          /* cut at the end */
    clean_case("\xC3(", 2, 1, R "(");              /* cut by the next character */
    clean_case("\xE2\x82(", 3, 1, R "(");          /* a cut 3-byte sequence is one subpart */
    clean_case("\xC0\xAF", 2, 2, R R);             /* overlong: C0 is never valid */
    clean_case("\xE0\x80\x80", 3, 3, R R R);       /* overlong 3-byte */
    clean_case("\xED\xA0\x80", 3, 3, R R R);       /* a UTF-16 surrogate */
    clean_case("\xF4\x90\x80\x80", 4, 4, R R R R); /* past U+10FFFF */
    clean_case("\x80\x80", 2, 2, R R);             /* stray continuation bytes */
    clean_case("ok\xF0\x9F\x98", 5, 1, "ok" R);    /* a cut 4-byte sequence */
    clean_case("\xF0\x9F\x98\x80\xFE", 5, 1, "\xF0\x9F\x98\x80" R);
    char sentinel = 'x';
    char *out = &sentinel; /* set to NULL on failure too */
    allocs_left = 0;
    assert_int_equal(ptc_utf8_clean("a\xFF", 2, &out, NULL), PTC_ENOMEM);
    assert_null(out);
    allocs_left = -1;
}

static void test_count_gives_characters_not_bytes(void **state)
{
    (void)state;
    const char *s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"; /* a é € 😀: 1+2+3+4 bytes */
    assert_int_equal(ptc_utf8_count(s, strlen(s)), 4);
    assert_int_equal(ptc_utf8_count(s, 3), 2);
    assert_int_equal(ptc_utf8_count("", 0), 0);
    assert_int_equal(ptc_utf8_count("a\0b", 3), 3); /* a NUL is a character */
}

static void test_last_lines_start_where_the_last_n_lines_do(void **state)
{
    (void)state;
    assert_string_equal(ptc_text_last_lines("a\nb\nc\nd\n\n", 2), "c\nd\n\n");
    assert_string_equal(ptc_text_last_lines("only", 5), "only");
    assert_string_equal(ptc_text_last_lines("", 3), "");
    assert_string_equal(ptc_text_last_lines("x\ny", 1), "y");
}

static void test_cut_never_splits_a_character(void **state)
{
    (void)state;
    const char *s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"; /* a é € 😀: 1+2+3+4 bytes */
    size_t n = strlen(s);
    assert_int_equal(ptc_utf8_cut(s, n, 100), n);
    assert_int_equal(ptc_utf8_cut(s, n, 0), 0);
    assert_int_equal(ptc_utf8_cut(s, n, 1), 1);
    assert_int_equal(ptc_utf8_cut(s, n, 2), 1);
    assert_int_equal(ptc_utf8_cut(s, n, 3), 3);
    assert_int_equal(ptc_utf8_cut(s, n, 4), 3);
    assert_int_equal(ptc_utf8_cut(s, n, 5), 3);
    assert_int_equal(ptc_utf8_cut(s, n, 6), 6);
    for (size_t m = 7; m < 10; m++)
        assert_int_equal(ptc_utf8_cut(s, n, m), 6);
    for (size_t m = 0; m <= n; m++)
        assert_true(ptc_utf8_valid(s, ptc_utf8_cut(s, n, m)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_last_lines_start_where_the_last_n_lines_do),
        cmocka_unit_test(test_file_read_gives_the_bytes_and_a_nul),
        cmocka_unit_test(test_file_read_refuses_what_is_not_a_readable_file),
        cmocka_unit_test(test_file_read_allocation_failure),
        cmocka_unit_test(test_valid_follows_rfc_3629),
        cmocka_unit_test(test_valid_len_tells_a_character_cut_at_the_end),
        cmocka_unit_test(test_sanitize_replaces_bad_bytes_and_nul_with_fffd),
        cmocka_unit_test(test_clean_replaces_maximal_subparts_and_copies_only_when_needed),
        cmocka_unit_test(test_sanitize_replaces_each_byte_that_starts_no_valid_sequence),
        cmocka_unit_test(test_cut_never_splits_a_character),
        cmocka_unit_test(test_count_gives_characters_not_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
