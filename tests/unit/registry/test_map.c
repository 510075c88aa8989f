/* The internal string map (ids -> rows everywhere): random operations against a plain array. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

#define KEYS 600

static void test_map_matches_reference(void **state)
{
    (void)state;
    static char keys[KEYS][16];
    static long ref[KEYS]; /* -1: absent */
    for (int i = 0; i < KEYS; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i * 7919 % 100003);
        ref[i] = -1;
    }
    reg__map_t m = {0};
    uint64_t rng = 88172645463325252ULL;
    size_t live = 0;
    for (int op = 0; op < 200000; op++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        int k = (int)(rng % KEYS);
        switch ((rng >> 20) % 3) {
        case 0:
            assert_int_equal(reg__map_put(&m, keys[k], (size_t)op), REG_OK);
            if (ref[k] < 0) live++;
            ref[k] = op;
            break;
        case 1:
            assert_int_equal(reg__map_del(&m, keys[k]), ref[k] >= 0);
            if (ref[k] >= 0) live--;
            ref[k] = -1;
            break;
        default: {
            size_t v = 0;
            int found = reg__map_get(&m, keys[k], &v);
            assert_int_equal(found, ref[k] >= 0);
            if (found) assert_int_equal(v, (size_t)ref[k]);
        }
        }
        assert_int_equal(m.n, live);
    }
    for (int k = 0; k < KEYS; k++) {
        size_t v;
        assert_int_equal(reg__map_get(&m, keys[k], &v), ref[k] >= 0);
    }
    reg__map_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
