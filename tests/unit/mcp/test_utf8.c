/* mcp__utf8_sanitize (mcp/utf8.c): valid text is left alone, each maximal ill-formed subpart
 * becomes one U+FFFD (overlongs, surrogates, past U+10FFFF, cut sequences, stray bytes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client_internal.h"

#define R "\xEF\xBF\xBD"

static void check(const char *in, size_t len, int want_bad, const char *want)
{
    char *out = NULL;
    size_t out_len = 0;
    int bad = mcp__utf8_sanitize(in, len, &out, &out_len);
    assert_int_equal(bad, want_bad);
    if (want_bad == 0) {
        assert_null(out);
        assert_int_equal(out_len, len);
        return;
    }
    assert_non_null(out);
    assert_int_equal(out_len, strlen(want));
    assert_memory_equal(out, want, out_len);
    free(out);
}

static void test_valid_is_untouched(void **state)
{
    (void)state;
    check("", 0, 0, NULL);
    check("plain ascii", 11, 0, NULL);
    check("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF", 19, 0, NULL);
    check("a\0b", 3, 0, NULL); /* NUL is valid UTF-8 (JSON escapes it) */
}

static void test_ill_formed_become_fffd(void **state)
{
    (void)state;
    check("a\xFF"
          "b",
          3, 1, "a" R "b");
    check("caf\xC3", 4, 1, "caf" R);          /* cut at the end */
    check("\xC3(", 2, 1, R "(");              /* cut by the next character */
    check("\xE2\x82(", 3, 1, R "(");          /* a cut 3-byte sequence is one subpart */
    check("\xC0\xAF", 2, 2, R R);             /* overlong: C0 is never valid */
    check("\xE0\x80\x80", 3, 3, R R R);       /* overlong 3-byte */
    check("\xED\xA0\x80", 3, 3, R R R);       /* a UTF-16 surrogate */
    check("\xF4\x90\x80\x80", 4, 4, R R R R); /* past U+10FFFF */
    check("\x80\x80", 2, 2, R R);             /* stray continuation bytes */
    check("ok\xF0\x9F\x98", 5, 1, "ok" R);    /* a cut 4-byte sequence */
    check("\xF0\x9F\x98\x80\xFE", 5, 1, "\xF0\x9F\x98\x80" R);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_is_untouched),
        cmocka_unit_test(test_ill_formed_become_fffd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
