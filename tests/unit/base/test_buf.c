/* test_buf.c - the capped buffer: growth, the cap, printf, the sticky error, allocation
 * failures; the capped array: growth, the cap, overflow of the byte size, allocation failures
 * (malloc and realloc are wrapped: see CMakeLists.txt). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base.h"
#include "base_test.h"

#include <stdlib.h>
#include <string.h>

static void test_appends_grow_and_keep_a_nul(void **state)
{
    (void)state;
    ptc_buf_t b;
    ptc_buf_init(&b, 1 << 20);
    assert_string_equal(ptc_buf_cstr(&b), "");
    for (int i = 0; i < 1000; i++)
        assert_int_equal(ptc_buf_str(&b, "abc"), 0);
    assert_int_equal(b.len, 3000);
    assert_int_equal(strlen(ptc_buf_cstr(&b)), 3000);
    assert_int_equal(ptc_buf_append(&b, "x\0y", 3), 0);
    assert_int_equal(b.len, 3003);
    assert_int_equal(b.p[3003], '\0');
    assert_int_equal(ptc_buf_append(&b, NULL, 0), 0);
    ptc_buf_free(&b);
    assert_null(b.p);
    assert_int_equal(b.max, 1 << 20);
}

static void test_an_append_past_the_cap_is_refused_and_sticks(void **state)
{
    (void)state;
    ptc_buf_t b;
    ptc_buf_init(&b, 5);
    assert_int_equal(ptc_buf_str(&b, "12345"), 0);
    assert_string_equal(ptc_buf_cstr(&b), "12345");
    assert_int_equal(ptc_buf_str(&b, "6"), PTC_ETOOBIG);
    assert_string_equal(ptc_buf_cstr(&b), "12345"); /* nothing of the refused append */
    assert_int_equal(ptc_buf_error(&b), PTC_ETOOBIG);
    assert_int_equal(ptc_buf_append(&b, "", 0), PTC_ETOOBIG); /* sticky */
    assert_null(ptc_buf_take(&b, NULL));                      /* and take says so */
    assert_null(b.p);
    assert_int_equal(ptc_buf_error(&b), 0);
    ptc_buf_free(&b);
}

/* What a reader does with the bytes it handled: the rest moves to the front, the NUL follows
 * it, and the room freed takes appends again up to the cap. */
static void test_consume_drops_the_first_bytes(void **state)
{
    (void)state;
    ptc_buf_t b;
    ptc_buf_init(&b, 6);
    ptc_buf_consume(&b, 3); /* nothing held: nothing to do */
    assert_int_equal(ptc_buf_len(&b), 0);
    assert_int_equal(ptc_buf_str(&b, "abcdef"), 0);
    ptc_buf_consume(&b, 0);
    assert_string_equal(ptc_buf_cstr(&b), "abcdef");
    ptc_buf_consume(&b, 4);
    assert_string_equal(ptc_buf_cstr(&b), "ef");
    assert_int_equal(ptc_buf_len(&b), 2);
    assert_int_equal(ptc_buf_str(&b, "ghij"), 0);
    assert_string_equal(ptc_buf_cstr(&b), "efghij");
    assert_int_equal(ptc_buf_str(&b, "k"), PTC_ETOOBIG);
    ptc_buf_consume(&b, 100); /* more than held: empty, the failure kept */
    assert_string_equal(ptc_buf_cstr(&b), "");
    assert_int_equal(ptc_buf_error(&b), PTC_ETOOBIG);
    ptc_buf_free(&b);
}

static void test_printf_formats_any_length_within_the_cap(void **state)
{
    (void)state;
    ptc_buf_t b;
    ptc_buf_init(&b, 4096);
    char big[2000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(ptc_buf_printf(&b, "%d-%s-", 42, "x"), 0);
    assert_int_equal(ptc_buf_printf(&b, "%s", big), 0);
    assert_int_equal(b.len, 5 + 1999);
    assert_memory_equal(b.p, "42-x-qq", 7);
    assert_int_equal(ptc_buf_printf(&b, "%s", big), 0);
    assert_int_equal(ptc_buf_printf(&b, "%s", big), PTC_ETOOBIG);
    assert_int_equal(b.len, 5 + 2 * 1999);
    ptc_buf_free(&b);
}

static void test_take_hands_the_bytes_over(void **state)
{
    (void)state;
    ptc_buf_t b;
    ptc_buf_init(&b, 100);
    size_t len = 99;
    char *s = ptc_buf_take(&b, &len); /* empty: an allocated "" */
    assert_non_null(s);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    free(s);
    ptc_buf_str(&b, "hello");
    s = ptc_buf_take(&b, &len);
    assert_string_equal(s, "hello");
    assert_int_equal(len, 5);
    assert_null(b.p);
    assert_int_equal(b.len, 0);
    free(s);
}

static void test_allocation_failure_is_an_error_that_sticks(void **state)
{
    (void)state;
    ptc_buf_t b;
    ptc_buf_init(&b, 1 << 20);
    allocs_left = 0;
    assert_int_equal(ptc_buf_str(&b, "a"), PTC_ENOMEM);
    allocs_left = -1;
    assert_int_equal(ptc_buf_str(&b, "a"), PTC_ENOMEM);
    assert_null(ptc_buf_take(&b, NULL));

    /* A failure while growing keeps what was there and frees it with the buffer. */
    ptc_buf_init(&b, 1 << 20);
    assert_int_equal(ptc_buf_str(&b, "abc"), 0);
    allocs_left = 0;
    char big[1000];
    memset(big, 'z', sizeof big);
    assert_int_equal(ptc_buf_append(&b, big, sizeof big), PTC_ENOMEM);
    allocs_left = -1;
    assert_string_equal(ptc_buf_cstr(&b), "abc");
    assert_int_equal(ptc_buf_printf(&b, "%d", 1), PTC_ENOMEM);
    ptc_buf_free(&b);

    /* take of an empty buffer allocates its "": that may fail too. */
    ptc_buf_init(&b, 10);
    allocs_left = 0;
    assert_null(ptc_buf_take(&b, NULL));
    allocs_left = -1;
    ptc_buf_free(&b);
}

static void test_strerror_names_the_codes(void **state)
{
    (void)state;
    assert_string_equal(ptc_strerror(0), "success");
    assert_string_equal(ptc_strerror(PTC_ENOMEM), "out of memory");
    assert_string_equal(ptc_strerror(PTC_ETOOBIG), "size limit exceeded");
    assert_string_equal(ptc_strerror(-ENOENT), "no such file or directory");
    assert_string_equal(ptc_strerror(-EPIPE), "connection or object closed");
    assert_string_equal(ptc_strerror(-EXDEV), "system error");       /* an errno of no table */
    assert_string_equal(ptc_strerror(PTC_ERR_MCP), "unknown error"); /* a library's own */
}

typedef struct pair {
    int a;
    double b;
} pair_t;

static void test_array_reserve_grows_by_doubling_and_keeps_elements(void **state)
{
    (void)state;
    pair_t *v = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < 1000; i++) {
        assert_int_equal(ptc_array_reserve(&v, &cap, i + 1, sizeof *v, 4096), 0);
        assert_true(cap >= i + 1);
        v[i] = (pair_t){(int)i, (double)i / 2};
    }
    assert_int_equal(cap, 1024);
    for (size_t i = 0; i < 1000; i++) {
        assert_int_equal(v[i].a, (int)i);
        assert_true(v[i].b == (double)i / 2);
    }
    /* Room already: nothing changes. */
    pair_t *same = v;
    assert_int_equal(ptc_array_reserve(&v, &cap, 10, sizeof *v, 4096), 0);
    assert_ptr_equal(v, same);
    assert_int_equal(cap, 1024);
    free(v);
}

static void test_array_reserve_never_passes_the_cap(void **state)
{
    (void)state;
    char **v = NULL;
    size_t cap = 0;
    assert_int_equal(ptc_array_reserve(&v, &cap, 1, sizeof *v, 5), 0);
    assert_int_equal(cap, 5); /* the first 16 is clamped to the cap */
    assert_int_equal(ptc_array_reserve(&v, &cap, 5, sizeof *v, 5), 0);
    assert_int_equal(ptc_array_reserve(&v, &cap, 6, sizeof *v, 5), PTC_ETOOBIG);
    assert_int_equal(cap, 5);
    free(v);

    int *w = NULL;
    size_t wcap = 0;
    assert_int_equal(ptc_array_reserve(&w, &wcap, 17, sizeof *w, 20), 0);
    assert_int_equal(wcap, 20); /* 32 clamped */
    free(w);
}

static void test_array_reserve_refuses_a_byte_size_that_overflows(void **state)
{
    (void)state;
    pair_t *v = NULL;
    size_t cap = 0;
    assert_int_equal(ptc_array_reserve(&v, &cap, SIZE_MAX / sizeof *v + 1, sizeof *v, SIZE_MAX),
                     PTC_ETOOBIG);
    assert_null(v);
    assert_int_equal(cap, 0);
}

static void test_array_reserve_checks_its_arguments(void **state)
{
    (void)state;
    int *v = NULL;
    size_t cap = 0;
    assert_int_equal(ptc_array_reserve(NULL, &cap, 1, sizeof *v, 8), PTC_EINVAL);
    assert_int_equal(ptc_array_reserve(&v, NULL, 1, sizeof *v, 8), PTC_EINVAL);
    assert_int_equal(ptc_array_reserve(&v, &cap, 1, 0, 8), PTC_EINVAL);
    assert_int_equal(ptc_array_reserve(&v, &cap, 0, sizeof *v, 8), 0); /* nothing needed */
    assert_null(v);
}

static void test_a_failed_array_growth_leaves_the_array_as_it_was(void **state)
{
    (void)state;
    int *v = NULL;
    size_t cap = 0;
    allocs_left = 0;
    assert_int_equal(ptc_array_reserve(&v, &cap, 1, sizeof *v, 100), PTC_ENOMEM);
    assert_null(v);
    assert_int_equal(cap, 0);
    allocs_left = -1;
    assert_int_equal(ptc_array_reserve(&v, &cap, 16, sizeof *v, 100), 0);
    for (int i = 0; i < 16; i++)
        v[i] = i * 3;
    int *before = v;
    allocs_left = 0;
    assert_int_equal(ptc_array_reserve(&v, &cap, 17, sizeof *v, 100), PTC_ENOMEM);
    allocs_left = -1;
    assert_ptr_equal(v, before);
    assert_int_equal(cap, 16);
    for (int i = 0; i < 16; i++)
        assert_int_equal(v[i], i * 3);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appends_grow_and_keep_a_nul),
        cmocka_unit_test(test_an_append_past_the_cap_is_refused_and_sticks),
        cmocka_unit_test(test_consume_drops_the_first_bytes),
        cmocka_unit_test(test_printf_formats_any_length_within_the_cap),
        cmocka_unit_test(test_take_hands_the_bytes_over),
        cmocka_unit_test(test_allocation_failure_is_an_error_that_sticks),
        cmocka_unit_test(test_strerror_names_the_codes),
        cmocka_unit_test(test_array_reserve_grows_by_doubling_and_keeps_elements),
        cmocka_unit_test(test_array_reserve_never_passes_the_cap),
        cmocka_unit_test(test_array_reserve_refuses_a_byte_size_that_overflows),
        cmocka_unit_test(test_array_reserve_checks_its_arguments),
        cmocka_unit_test(test_a_failed_array_growth_leaves_the_array_as_it_was),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
