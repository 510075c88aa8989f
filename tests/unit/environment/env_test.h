/* env_test.h - what the environment module's test programs share: writing a small file and
 * joining two paths. Header-only; include it after <cmocka.h> and ../test_util.h. */
#ifndef PTC_ENV_TEST_H
#define PTC_ENV_TEST_H

#include <stdio.h>
#include <stdlib.h>

/* Writes text to path (created or truncated); fails the test when it cannot. */
static inline void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* "a/b" in a new buffer of TU_PATH_MAX bytes (caller frees). */
static inline char *path_join(const char *a, const char *b)
{
    char *p = malloc(TU_PATH_MAX);
    assert_non_null(p);
    int n = snprintf(p, TU_PATH_MAX, "%s/%s", a, b);
    assert_true(n > 0 && n < TU_PATH_MAX);
    return p;
}

#endif
