/* Line framing: split reads, joined reads, CRLF, caps and EOF without a newline. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "mcp.h"

typedef struct seen {
    char lines[16][256];
    size_t n;
    size_t too_big[8];
    size_t n_big;
} seen_t;

static void on_line(void *data, const char *line, size_t len, bool too_big)
{
    seen_t *s = data;
    if (too_big) {
        s->too_big[s->n_big++] = len;
        return;
    }
    assert_true(len < 256);
    memcpy(s->lines[s->n], line, len);
    s->lines[s->n][len] = '\0';
    s->n++;
}

static void two_lines_in_one_read_are_two_messages(void **state)
{
    (void)state;
    seen_t s = {0};
    mcp_framer_t f;
    assert_int_equal(mcp_framer_init(&f, 100, on_line, &s), 0);
    const char *in = "{\"a\":1}\n{\"b\":2}\r\n";
    assert_int_equal(mcp_framer_feed(&f, in, strlen(in)), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.lines[0], "{\"a\":1}");
    assert_string_equal(s.lines[1], "{\"b\":2}");
    mcp_framer_close(&f);
}

static void one_line_over_many_reads_is_one_message(void **state)
{
    (void)state;
    seen_t s = {0};
    mcp_framer_t f;
    mcp_framer_init(&f, 100, on_line, &s);
    const char *in = "{\"method\":\"ping\"}\n";
    for (size_t i = 0; i < strlen(in); i++)
        mcp_framer_feed(&f, in + i, 1);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.lines[0], "{\"method\":\"ping\"}");
    mcp_framer_close(&f);
}

static void oversized_line_is_reported_and_framing_resumes(void **state)
{
    (void)state;
    seen_t s = {0};
    mcp_framer_t f;
    mcp_framer_init(&f, 10, on_line, &s);
    char big[64];
    memset(big, 'x', sizeof big);
    /* Split so the cap is crossed across reads. */
    mcp_framer_feed(&f, big, 8);
    mcp_framer_feed(&f, big, 30);
    mcp_framer_feed(&f, "yy\nok\n", 6);
    assert_int_equal(s.n_big, 1);
    assert_int_equal(s.too_big[0], 40);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.lines[0], "ok");
    /* A line of exactly the cap is accepted; one byte more is not. */
    mcp_framer_feed(&f, "0123456789\n01234567890\n", 23);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.lines[1], "0123456789");
    assert_int_equal(s.n_big, 2);
    mcp_framer_close(&f);
}

static void eof_delivers_an_unterminated_last_line(void **state)
{
    (void)state;
    seen_t s = {0};
    mcp_framer_t f;
    mcp_framer_init(&f, 100, on_line, &s);
    mcp_framer_feed(&f, "{}\n{\"last\":true}", 16);
    assert_int_equal(s.n, 1);
    mcp_framer_finish(&f);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.lines[1], "{\"last\":true}");
    mcp_framer_finish(&f);
    assert_int_equal(s.n, 2);
    mcp_framer_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_lines_in_one_read_are_two_messages),
        cmocka_unit_test(one_line_over_many_reads_is_one_message),
        cmocka_unit_test(oversized_line_is_reported_and_framing_resumes),
        cmocka_unit_test(eof_delivers_an_unterminated_last_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
