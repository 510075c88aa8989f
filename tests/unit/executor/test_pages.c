/* The execute_code output page store: paging, cursors, bounds, expiry, UTF-8 handling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"

static void short_output_fits_one_page_and_keeps_nothing(void **state)
{
    (void)state;
    exec_pages_t *p;
    assert_int_equal(exec_pages_new(1 << 20, 8, 60000, &p), 0);
    exec_page_t pg;
    assert_int_equal(exec_pages_first(p, NULL, "hello\n", 6, "warn\n", 5, 100, 0, &pg), 0);
    assert_string_equal(pg.out, "hello\n");
    assert_string_equal(pg.err, "warn\n");
    assert_null(pg.cursor);
    assert_int_equal(exec_pages_entries(p), 0);
    exec_page_clear(&pg);
    exec_pages_free(p);
}

static void pages_walk_stdout_then_stderr_by_characters(void **state)
{
    (void)state;
    exec_pages_t *p;
    exec_pages_new(1 << 20, 8, 60000, &p);
    const char *out = "aé€😀b"; /* 1-, 2-, 3- and 4-byte characters */
    exec_page_t pg;
    assert_int_equal(
        exec_pages_first(p, "{\"status\":\"ok\"}", out, strlen(out), "xyz", 3, 2, 0, &pg), 0);
    assert_string_equal(pg.out, "aé");
    assert_string_equal(pg.err, "");
    assert_non_null(pg.cursor);
    char cur[128];
    snprintf(cur, sizeof cur, "%s", pg.cursor);
    exec_page_clear(&pg);
    assert_int_equal(exec_pages_next(p, cur, 1, &pg), 0);
    assert_string_equal(pg.out, "€😀");
    assert_string_equal(pg.meta, "{\"status\":\"ok\"}");
    snprintf(cur, sizeof cur, "%s", pg.cursor);
    exec_page_clear(&pg);
    /* A page may hold the end of stdout and the start of stderr. */
    assert_int_equal(exec_pages_next(p, cur, 2, &pg), 0);
    assert_string_equal(pg.out, "b");
    assert_string_equal(pg.err, "x");
    char again[128];
    snprintf(again, sizeof again, "%s", cur);
    snprintf(cur, sizeof cur, "%s", pg.cursor);
    exec_page_clear(&pg);
    assert_int_equal(exec_pages_next(p, cur, 3, &pg), 0);
    assert_string_equal(pg.out, "");
    assert_string_equal(pg.err, "yz");
    assert_null(pg.cursor);
    exec_page_clear(&pg);
    /* Cursors can be fetched again until they expire. */
    assert_int_equal(exec_pages_next(p, again, 4, &pg), 0);
    assert_string_equal(pg.out, "b");
    exec_page_clear(&pg);
    exec_pages_free(p);
}

static void unknown_forged_and_expired_cursors_are_refused(void **state)
{
    (void)state;
    exec_pages_t *p;
    exec_pages_new(1 << 20, 8, 1000, &p);
    exec_page_t pg;
    exec_pages_first(p, NULL, "abcdef", 6, "", 0, 2, 0, &pg);
    char cur[128];
    snprintf(cur, sizeof cur, "%s", pg.cursor);
    exec_page_clear(&pg);
    assert_int_equal(exec_pages_next(p, "nonsense", 0, &pg), EXEC_PAGES_EXPIRED);
    assert_int_equal(exec_pages_next(p, "", 0, &pg), EXEC_PAGES_EXPIRED);
    char forged[128];
    snprintf(forged, sizeof forged, "%s", cur);
    forged[0] = forged[0] == 'a' ? 'b' : 'a';
    assert_int_equal(exec_pages_next(p, forged, 0, &pg), EXEC_PAGES_EXPIRED);
    char past[128];
    snprintf(past, sizeof past, "%.32s.99", cur);
    assert_int_equal(exec_pages_next(p, past, 0, &pg), EXEC_PAGES_EXPIRED);
    /* Idle past the TTL: gone. */
    assert_int_equal(exec_pages_next(p, cur, 1000, &pg), EXEC_PAGES_EXPIRED);
    assert_int_equal(exec_pages_entries(p), 0);
    exec_pages_free(p);
}

static void the_store_stays_within_its_entry_and_byte_bounds(void **state)
{
    (void)state;
    exec_pages_t *p;
    exec_pages_new(100, 3, 60000, &p);
    char first[128] = "";
    char buf[64];
    memset(buf, 'q', sizeof buf);
    for (int i = 0; i < 10; i++) {
        exec_page_t pg;
        assert_int_equal(exec_pages_first(p, NULL, buf, 40, "", 0, 10, (uint64_t)i, &pg), 0);
        if (i == 0) snprintf(first, sizeof first, "%s", pg.cursor);
        exec_page_clear(&pg);
        assert_true(exec_pages_entries(p) <= 3);
        assert_true(exec_pages_bytes(p) <= 100);
    }
    exec_page_t pg;
    assert_int_equal(exec_pages_next(p, first, 20, &pg), EXEC_PAGES_EXPIRED);
    /* One run larger than the whole budget keeps what fits. */
    char big[300];
    memset(big, 'z', sizeof big);
    assert_int_equal(exec_pages_first(p, NULL, big, sizeof big, "", 0, 10, 30, &pg), 0);
    exec_page_clear(&pg);
    assert_true(exec_pages_bytes(p) <= 100);
    exec_pages_free(p);
}

static void invalid_utf8_is_replaced(void **state)
{
    (void)state;
    size_t n;
    char *s = exec_pages_utf8_sanitize("ok\xff\xc3\xa9\xe2\x82 \xed\xa0\x80\xc0\xaf\x00z", 15, &n);
    assert_string_equal(s, "ok\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd"
                           "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
    assert_int_equal(n, strlen(s));
    free(s);
    s = exec_pages_utf8_sanitize("\xf0\x9f\x98\x80", 4, &n);
    assert_string_equal(s, "\xf0\x9f\x98\x80");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(short_output_fits_one_page_and_keeps_nothing),
        cmocka_unit_test(pages_walk_stdout_then_stderr_by_characters),
        cmocka_unit_test(unknown_forged_and_expired_cursors_are_refused),
        cmocka_unit_test(the_store_stays_within_its_entry_and_byte_bounds),
        cmocka_unit_test(invalid_utf8_is_replaced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
