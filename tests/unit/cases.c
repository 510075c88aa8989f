/* cases.c - one process per test case for every cmocka program (tests/unit/cases.cmake).
 *
 * Every unit program is linked with this file and with -Wl,--wrap=_cmocka_run_group_tests, so
 * each cmocka_run_group_tests* call of its main comes here first, without the program knowing:
 *   PTC_TEST_LIST=1            prints "ptc-case<TAB>GROUP<TAB>CASE" per case and runs nothing
 *                              (the build lists the cases this way, once per link);
 *   PTC_TEST_CASE=CASE         runs only that case of the group named PTC_TEST_GROUP (any group
 *   [PTC_TEST_GROUP=GROUP]     when unset), with the group's setup and teardown around it;
 *   neither                    runs every group whole, as before.
 * ctest then runs each case as a test of its own with its own timeout, so that a crash, a hang
 * or a sanitizer abort in one case no longer hides the cases after it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

int __real__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                                   const size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown);
int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                                   const size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown);

/* Whether the case PTC_TEST_CASE named was found in some group. A program state by nature: the
 * groups are separate calls from a main this file does not see, and only after the last one
 * (at exit) is it known that a requested case ran nowhere. */
static int cases_ran;

/* A requested case that no group has (a renamed test under a stale list, a typo) must fail,
 * not pass having run nothing. Runs after main returned; _exit keeps the status. */
__attribute__((destructor)) static void cases_check_ran(void)
{
    const char *only = getenv("PTC_TEST_CASE");
    if (only == NULL || getenv("PTC_TEST_LIST") != NULL || cases_ran) return;
    const char *group = getenv("PTC_TEST_GROUP");
    fprintf(stderr, "cases.c: no test case '%s' in %s%s%s of this program\n", only,
            group != NULL ? "group '" : "any group", group != NULL ? group : "",
            group != NULL ? "'" : "");
    fflush(stderr);
    _exit(2);
}

int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                                   const size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown)
{
    if (getenv("PTC_TEST_LIST") != NULL) {
        for (size_t i = 0; i < num_tests; i++)
            printf("ptc-case\t%s\t%s\n", group_name, tests[i].name);
        return 0;
    }
    const char *only = getenv("PTC_TEST_CASE");
    if (only == NULL)
        return __real__cmocka_run_group_tests(group_name, tests, num_tests, group_setup,
                                              group_teardown);
    const char *group = getenv("PTC_TEST_GROUP");
    if (group != NULL && strcmp(group, group_name) != 0) return 0;
    for (size_t i = 0; i < num_tests; i++) {
        if (strcmp(tests[i].name, only) != 0) continue;
        cases_ran = 1;
        return __real__cmocka_run_group_tests(group_name, &tests[i], 1, group_setup,
                                              group_teardown);
    }
    return 0;
}
