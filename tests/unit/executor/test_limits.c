/* The bounds a host's settings must keep (exec_options_check): each one named when passed, in
 * order, the same check behind exec_pool_new and exec_pool_set_files_limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "executor.h"

static void settings_within_every_bound_pass(void **state)
{
    (void)state;
    exec_options_t o;
    exec_options_init(&o);
    exec_bound_t bad = EXEC_BOUND_WARM;
    assert_int_equal(exec_options_check(&o, NULL, 0, &bad), 0);
    assert_int_equal(bad, EXEC_BOUND_NONE);
    o.max_concurrent = EXEC_MAX_CONCURRENT;
    o.stdout_keep = o.stderr_keep = EXEC_MAX_KEEP_BYTES;
    o.warm_sandboxes = EXEC_MAX_WARM;
    const exec_files_limits_t fl = {.file_bytes = EXEC_FILES_LIMIT_BYTES,
                                    .call_bytes = EXEC_FILES_LIMIT_BYTES,
                                    .count = EXEC_FILES_LIMIT_COUNT};
    assert_int_equal(exec_options_check(&o, &fl, EXEC_MAX_CODE_BYTES, &bad), 0);
    assert_int_equal(exec_options_check(NULL, NULL, 0, NULL), 0);
}

static void each_bound_passed_is_named(void **state)
{
    (void)state;
    exec_options_t o;
    exec_bound_t bad;
    exec_options_init(&o);
    o.max_concurrent = EXEC_MAX_CONCURRENT + 1;
    assert_int_equal(exec_options_check(&o, NULL, 0, &bad), EXEC_EINVAL);
    assert_int_equal(bad, EXEC_BOUND_CONCURRENT);
    exec_options_init(&o);
    o.stderr_keep = EXEC_MAX_KEEP_BYTES + 1;
    assert_int_equal(exec_options_check(&o, NULL, 0, &bad), EXEC_EINVAL);
    assert_int_equal(bad, EXEC_BOUND_KEEP_BYTES);
    exec_options_init(&o);
    o.warm_sandboxes = EXEC_MAX_WARM + 1;
    assert_int_equal(exec_options_check(&o, NULL, 0, &bad), EXEC_EINVAL);
    assert_int_equal(bad, EXEC_BOUND_WARM);
    assert_int_equal(exec_options_check(NULL, NULL, EXEC_MAX_CODE_BYTES + 1, &bad), EXEC_EINVAL);
    assert_int_equal(bad, EXEC_BOUND_CODE_BYTES);
    exec_files_limits_t fl = {.call_bytes = EXEC_FILES_LIMIT_BYTES + 1};
    assert_int_equal(exec_options_check(NULL, &fl, 0, &bad), EXEC_EINVAL);
    assert_int_equal(bad, EXEC_BOUND_FILE_BYTES);
    fl = (exec_files_limits_t){.count = EXEC_FILES_LIMIT_COUNT + 1};
    assert_int_equal(exec_options_check(NULL, &fl, 0, &bad), EXEC_EINVAL);
    assert_int_equal(bad, EXEC_BOUND_FILE_COUNT);
    /* the first in order when several are passed */
    exec_options_init(&o);
    o.stdout_keep = EXEC_MAX_KEEP_BYTES + 1;
    assert_int_equal(exec_options_check(&o, &fl, EXEC_MAX_CODE_BYTES + 1, &bad), EXEC_EINVAL);
    assert_int_equal(bad, EXEC_BOUND_KEEP_BYTES);
}

/* The pool refuses what the check refuses, before it makes anything. */
static void the_pool_checks_the_same_bounds(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    exec_options_t o;
    exec_options_init(&o);
    o.warm_sandboxes = EXEC_MAX_WARM + 1;
    exec_pool_t *pool = NULL;
    assert_int_equal(exec_pool_new(&loop, &o, &pool), EXEC_EINVAL);
    assert_null(pool);
    exec_options_init(&o);
    o.unsafe_no_sandbox = true; /* no probe: the pool is made at once */
    o.keep_warm = false;
    assert_int_equal(exec_pool_new(&loop, &o, &pool), 0);
    const exec_files_limits_t fl = {.file_bytes = EXEC_FILES_LIMIT_BYTES + 1};
    assert_int_equal(exec_pool_set_files_limits(pool, &fl), EXEC_EINVAL);
    assert_int_equal(exec_pool_set_files_limits(pool, NULL), 0);
    exec_pool_free(pool);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* The zygote's switch (docs/sandbox.md): on unless the environment turns it off, and every
 * usual spelling of "off" does. */
static void the_zygote_is_on_unless_the_environment_says_off(void **state)
{
    (void)state;
    static const struct {
        const char *value; /* NULL: unset */
        bool on;
    } cases[] = {{NULL, true},   {"", true},     {"1", true},   {"yes", true},   {"0", false},
                 {"off", false}, {"OFF", false}, {"no", false}, {"False", false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].value == NULL)
            assert_int_equal(unsetenv(EXEC_ZYGOTE_ENV), 0);
        else
            assert_int_equal(setenv(EXEC_ZYGOTE_ENV, cases[i].value, 1), 0);
        exec_options_t o;
        exec_options_init(&o);
        if (o.zygote != cases[i].on)
            fail_msg("PTC_ZYGOTE=%s", cases[i].value ? cases[i].value : "(unset)");
    }
    assert_int_equal(unsetenv(EXEC_ZYGOTE_ENV), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(settings_within_every_bound_pass),
        cmocka_unit_test(each_bound_passed_is_named),
        cmocka_unit_test(the_pool_checks_the_same_bounds),
        cmocka_unit_test(the_zygote_is_on_unless_the_environment_says_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
