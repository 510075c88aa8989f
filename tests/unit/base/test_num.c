/* test_num.c - strict decimal parsing: what sscanf would take and these refuse (signs, blanks,
 * overflow, trailing bytes), and the field lists of the sandbox protocol lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base.h"
#include "base_test.h" /* the allocation wrappers; nothing here fails one */

#include <stdlib.h>
#include <string.h>

static void test_u64_takes_digits_only(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_int_equal(ptc_parse_u64("0", NULL, &v), 0);
    assert_true(v == 0);
    assert_int_equal(ptc_parse_u64("18446744073709551615", NULL, &v), 0);
    assert_true(v == UINT64_MAX);
    v = 7;
    assert_int_equal(ptc_parse_u64("18446744073709551616", NULL, &v), PTC_ERANGE);
    assert_int_equal(ptc_parse_u64("-1", NULL, &v), PTC_EINVAL);
    assert_int_equal(ptc_parse_u64("+1", NULL, &v), PTC_EINVAL);
    assert_int_equal(ptc_parse_u64(" 1", NULL, &v), PTC_EINVAL);
    assert_int_equal(ptc_parse_u64("", NULL, &v), PTC_EINVAL);
    assert_int_equal(ptc_parse_u64("12x", NULL, &v), PTC_EINVAL);
    assert_true(v == 7); /* untouched on failure */
    assert_string_equal(ptc_strerror(PTC_ERANGE), "number out of range");
}

static void test_u64_end_points_after_the_number(void **state)
{
    (void)state;
    uint64_t v;
    const char *end;
    const char *s = "42 rest";
    assert_int_equal(ptc_parse_u64(s, &end, &v), 0);
    assert_true(v == 42);
    assert_ptr_equal(end, s + 2);
}

static void test_int_takes_one_minus_and_the_int_range(void **state)
{
    (void)state;
    int v = 0;
    assert_int_equal(ptc_parse_int("-2147483648", NULL, &v), 0);
    assert_int_equal(v, INT32_MIN);
    assert_int_equal(ptc_parse_int("2147483647", NULL, &v), 0);
    assert_int_equal(v, INT32_MAX);
    assert_int_equal(ptc_parse_int("2147483648", NULL, &v), PTC_ERANGE);
    assert_int_equal(ptc_parse_int("-2147483649", NULL, &v), PTC_ERANGE);
    assert_int_equal(ptc_parse_int("--1", NULL, &v), PTC_EINVAL);
    assert_int_equal(ptc_parse_int("-", NULL, &v), PTC_EINVAL);
    assert_int_equal(ptc_parse_int("137", NULL, &v), 0);
    assert_int_equal(v, 137);
}

static void test_fields_need_one_space_before_each(void **state)
{
    (void)state;
    uint64_t f[3];
    const char *end;
    assert_int_equal(ptc_parse_u64s(" 1 22 333", f, 3, NULL), 0);
    assert_true(f[0] == 1 && f[1] == 22 && f[2] == 333);
    assert_int_equal(ptc_parse_u64s(" 1 22 333 name", f, 3, &end), 0);
    assert_string_equal(end, " name");
    assert_int_equal(ptc_parse_u64s(" 1 22", f, 3, NULL), PTC_EINVAL);     /* too few */
    assert_int_equal(ptc_parse_u64s(" 1  22 3", f, 3, NULL), PTC_EINVAL);  /* two spaces */
    assert_int_equal(ptc_parse_u64s(" 1 22 3 4", f, 3, NULL), PTC_EINVAL); /* trailing */
    assert_int_equal(ptc_parse_u64s(" 1 -2 3", f, 3, NULL), PTC_EINVAL);
    assert_int_equal(ptc_parse_u64s("", f, 0, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u64_takes_digits_only),
        cmocka_unit_test(test_u64_end_points_after_the_number),
        cmocka_unit_test(test_int_takes_one_minus_and_the_int_range),
        cmocka_unit_test(test_fields_need_one_space_before_each),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
