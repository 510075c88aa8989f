/* base_test.h - what base's test programs share: the malloc and realloc wrappers that the
 * CMakeLists links every base test with (-Wl,--wrap), failing allocations on demand so that
 * each module's out-of-memory paths are tested. Include it once per program, after <cmocka.h>:
 * it defines the wrappers. */
#ifndef PTC_BASE_TEST_H
#define PTC_BASE_TEST_H

#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_realloc(void *p, size_t n);

/* Allocations left before the next one fails; -1: none fails. */
static int allocs_left = -1;

void *__wrap_malloc(size_t n)
{
    if (allocs_left == 0) return NULL;
    if (allocs_left > 0) allocs_left--;
    return __real_malloc(n);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (allocs_left == 0) return NULL;
    if (allocs_left > 0) allocs_left--;
    return __real_realloc(p, n);
}

#endif
