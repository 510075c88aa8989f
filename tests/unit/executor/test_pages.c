/* The execute_code output page store: paging, cursors, bounds, expiry, UTF-8 handling; and a
 * page's text as a model reads it (exec_page_text). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"

/* Two owners (the MCP layer's client identities are opaque bytes here). */
static const unsigned char A[EXEC_OWNER_BYTES] = {1};
static const unsigned char B[EXEC_OWNER_BYTES] = {2};

static void short_output_fits_one_page_and_keeps_nothing(void **state)
{
    (void)state;
    exec_pages_t *p;
    assert_int_equal(exec_pages_new(1 << 20, 8, 60000, &p), 0);
    exec_page_t pg;
    assert_int_equal(exec_pages_first(p, A, NULL, "hello\n", 6, "warn\n", 5, 100, 0, &pg), 0);
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
        exec_pages_first(p, A, "{\"status\":\"ok\"}", out, strlen(out), "xyz", 3, 2, 0, &pg), 0);
    assert_string_equal(pg.out, "aé");
    assert_string_equal(pg.err, "");
    assert_non_null(pg.cursor);
    char cur[128];
    snprintf(cur, sizeof cur, "%s", pg.cursor);
    exec_page_clear(&pg);
    assert_int_equal(exec_pages_next(p, A, cur, 1, &pg), 0);
    assert_string_equal(pg.out, "€😀");
    assert_string_equal(pg.meta, "{\"status\":\"ok\"}");
    snprintf(cur, sizeof cur, "%s", pg.cursor);
    exec_page_clear(&pg);
    /* A page may hold the end of stdout and the start of stderr. */
    assert_int_equal(exec_pages_next(p, A, cur, 2, &pg), 0);
    assert_string_equal(pg.out, "b");
    assert_string_equal(pg.err, "x");
    char again[128];
    snprintf(again, sizeof again, "%s", cur);
    snprintf(cur, sizeof cur, "%s", pg.cursor);
    exec_page_clear(&pg);
    assert_int_equal(exec_pages_next(p, A, cur, 3, &pg), 0);
    assert_string_equal(pg.out, "");
    assert_string_equal(pg.err, "yz");
    assert_null(pg.cursor);
    exec_page_clear(&pg);
    /* Cursors can be fetched again until they expire. */
    assert_int_equal(exec_pages_next(p, A, again, 4, &pg), 0);
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
    exec_pages_first(p, A, NULL, "abcdef", 6, "", 0, 2, 0, &pg);
    char cur[128];
    snprintf(cur, sizeof cur, "%s", pg.cursor);
    exec_page_clear(&pg);
    assert_int_equal(exec_pages_next(p, A, "nonsense", 0, &pg), EXEC_EEXPIRED);
    assert_int_equal(exec_pages_next(p, A, "", 0, &pg), EXEC_EEXPIRED);
    char forged[128];
    snprintf(forged, sizeof forged, "%s", cur);
    forged[0] = forged[0] == 'a' ? 'b' : 'a';
    assert_int_equal(exec_pages_next(p, A, forged, 0, &pg), EXEC_EEXPIRED);
    char past[128];
    snprintf(past, sizeof past, "%.32s.99", cur);
    assert_int_equal(exec_pages_next(p, A, past, 0, &pg), EXEC_EEXPIRED);
    /* Idle past the TTL: gone. */
    assert_int_equal(exec_pages_next(p, A, cur, 1000, &pg), EXEC_EEXPIRED);
    assert_int_equal(exec_pages_entries(p), 0);
    exec_pages_free(p);
}

static void another_owners_cursor_is_unknown_and_refreshes_nothing(void **state)
{
    (void)state;
    exec_pages_t *p;
    exec_pages_new(1 << 20, 8, 1000, &p);
    exec_page_t pg;
    assert_int_equal(exec_pages_first(p, A, NULL, "secret-output", 13, "", 0, 4, 0, &pg), 0);
    char cur[128];
    snprintf(cur, sizeof cur, "%s", pg.cursor);
    exec_page_clear(&pg);
    /* The same answer as a cursor that never existed, and no page text handed out. */
    assert_int_equal(exec_pages_next(p, B, cur, 500, &pg), EXEC_EEXPIRED);
    assert_null(pg.out);
    assert_null(pg.meta);
    assert_int_equal(exec_pages_next(p, A, cur, 600, &pg), 0);
    assert_string_equal(pg.out, "et-o");
    exec_page_clear(&pg);
    /* B's use did not keep it alive: unused by A since 600, it expires at 1600. */
    assert_int_equal(exec_pages_next(p, B, cur, 1500, &pg), EXEC_EEXPIRED);
    assert_int_equal(exec_pages_next(p, A, cur, 1600, &pg), EXEC_EEXPIRED);
    exec_pages_free(p);
}

static void dropping_an_owner_forgets_only_its_outputs(void **state)
{
    (void)state;
    exec_pages_t *p;
    exec_pages_new(1 << 20, 8, 60000, &p);
    exec_page_t pg;
    char a1[128], a2[128], b1[128];
    exec_pages_first(p, A, NULL, "aaaaaaaa", 8, "", 0, 2, 0, &pg);
    snprintf(a1, sizeof a1, "%s", pg.cursor);
    exec_page_clear(&pg);
    exec_pages_first(p, B, NULL, "bbbbbbbb", 8, "", 0, 2, 0, &pg);
    snprintf(b1, sizeof b1, "%s", pg.cursor);
    exec_page_clear(&pg);
    exec_pages_first(p, A, NULL, "cccccccc", 8, "", 0, 2, 0, &pg);
    snprintf(a2, sizeof a2, "%s", pg.cursor);
    exec_page_clear(&pg);
    assert_int_equal(exec_pages_entries(p), 3);
    assert_int_equal(exec_pages_drop_owner(p, A), 2);
    assert_int_equal(exec_pages_entries(p), 1);
    assert_int_equal(exec_pages_bytes(p), 8);
    assert_int_equal(exec_pages_next(p, A, a1, 1, &pg), EXEC_EEXPIRED);
    assert_int_equal(exec_pages_next(p, A, a2, 1, &pg), EXEC_EEXPIRED);
    assert_int_equal(exec_pages_next(p, B, b1, 1, &pg), 0);
    assert_string_equal(pg.out, "bb");
    exec_page_clear(&pg);
    assert_int_equal(exec_pages_drop_owner(p, A), 0);
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
        assert_int_equal(exec_pages_first(p, A, NULL, buf, 40, "", 0, 10, (uint64_t)i, &pg), 0);
        if (i == 0) snprintf(first, sizeof first, "%s", pg.cursor);
        exec_page_clear(&pg);
        assert_true(exec_pages_entries(p) <= 3);
        assert_true(exec_pages_bytes(p) <= 100);
    }
    exec_page_t pg;
    assert_int_equal(exec_pages_next(p, A, first, 20, &pg), EXEC_EEXPIRED);
    /* One run larger than the whole budget keeps what fits. */
    char big[300];
    memset(big, 'z', sizeof big);
    assert_int_equal(exec_pages_first(p, A, NULL, big, sizeof big, "", 0, 10, 30, &pg), 0);
    exec_page_clear(&pg);
    assert_true(exec_pages_bytes(p) <= 100);
    exec_pages_free(p);
}

static void invalid_utf8_is_replaced(void **state)
{
    (void)state;
    size_t n;
    char *s = exec_pages_utf8_sanitize("ok\xff\xc3\xa9\xe2\x82 \xed\xa0\x80\xc0\xaf\x00z", 15, &n);
    /* As Python's errors="replace" decodes it: the cut E2 82 is one U+FFFD, the NUL another. */
    assert_string_equal(s, "ok\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd"
                           "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
    assert_int_equal(n, strlen(s));
    free(s);
    s = exec_pages_utf8_sanitize("\xf0\x9f\x98\x80", 4, &n);
    assert_string_equal(s, "\xf0\x9f\x98\x80");
    free(s);
}

/* The text of a page of out, err and cursor (may be NULL); the caller frees it. */
static char *text_for(const char *out, const char *err, const char *cursor, bool first,
                      const exec_page_info_t *in)
{
    exec_page_t pg = {.out = strdup(out), .err = strdup(err), .cursor = NULL};
    if (cursor != NULL) pg.cursor = strdup(cursor);
    assert_true(pg.out != NULL && pg.err != NULL && (cursor == NULL || pg.cursor != NULL));
    char *t = NULL;
    assert_int_equal(exec_page_text(&pg, first, in, &t), 0);
    assert_non_null(t);
    exec_page_clear(&pg);
    return t;
}

static void a_silent_success_says_no_output_and_a_plain_stdout_has_no_heading(void **state)
{
    (void)state;
    exec_page_info_t in = {.status = "ok", .exit_code = 0};
    char *t = text_for("", "", NULL, true, &in);
    assert_string_equal(t, "(no output)");
    free(t);
    t = text_for("42\n", "", NULL, true, &in);
    assert_string_equal(t, "42"); /* trailing newlines off */
    free(t);
    /* stderr beside it: both under headings, each ending in a newline */
    t = text_for("42", "careful", NULL, true, &in);
    assert_string_equal(t, "--- stdout ---\n42\n--- stderr ---\ncareful");
    free(t);
    /* no sandbox: the warning first, then the note */
    in.unsandboxed = true;
    in.note = "a note";
    t = text_for("x", "", NULL, true, &in);
    assert_string_equal(t, "WARNING: this code ran WITHOUT a sandbox (--unsafe-no-sandbox).\n"
                           "a note\nx");
    free(t);
}

static void
a_failure_puts_its_status_and_the_tracebacks_end_first_when_the_page_hides_it(void **state)
{
    (void)state;
    const char *tb = "Traceback (most recent call last):\n  l1\n  l2\n  l3\n  l4\n  l5\n"
                     "ValueError: boom\n";
    exec_page_info_t in = {.status = "error", .exit_code = 1, .err_tail = tb};
    /* the whole traceback on the page: no repetition */
    char *t = text_for("", tb, NULL, true, &in);
    const char *whole = "Status: error (exit code 1)\n--- stderr ---\nTraceback";
    assert_true(strncmp(t, whole, strlen(whole)) == 0);
    assert_null(strstr(t, "Last lines of stderr"));
    free(t);
    /* more pages to come: the last EXEC_TRACEBACK_LINES lines go first */
    t = text_for("", "Traceback (most", "CUR", true, &in);
    assert_string_equal(t, "Status: error (exit code 1)\nLast lines of stderr:\n"
                           "  l1\n  l2\n  l3\n  l4\n  l5\nValueError: boom\n\n"
                           "--- stderr ---\nTraceback (most\n"
                           "[more output: call execute_code with cursor \"CUR\"]");
    free(t);
    /* a long stdout pushes it up too, and a signal is named */
    char big[EXEC_INLINE_OUTPUT + 2];
    memset(big, 'o', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    in.exit_code = -1;
    in.signal_name = "SIGKILL";
    in.status = "killed";
    t = text_for(big, tb, NULL, true, &in);
    const char *head = "Status: killed (signal SIGKILL)\nLast lines of stderr:\n";
    assert_true(strncmp(t, head, strlen(head)) == 0);
    assert_non_null(strstr(t, "--- stdout ---\nooo"));
    free(t);
    /* a later page repeats no status */
    t = text_for("rest", "", NULL, false, &in);
    assert_string_equal(t, "--- stdout ---\nrest");
    free(t);
}

static void heal_files_truncation_and_cursor_lines_go_where_a_model_looks(void **state)
{
    (void)state;
    exec_page_info_t in = {.status = "ok",
                           .heal = "Repaired once.",
                           .files_text = "Files:\n- a.txt\n",
                           .truncated = true,
                           .out_total = 5000,
                           .err_total = 7};
    char *t = text_for("out", "", "C1", true, &in);
    assert_string_equal(t, "Repaired once.\n--- stdout ---\nout\nFiles:\n- a.txt\n"
                           "[output truncated: 5000 bytes of stdout and 7 of stderr were "
                           "produced; only the first part of each was kept (the server's "
                           "--max-output-bytes)]\n[more output: call execute_code with cursor "
                           "\"C1\"]");
    free(t);
    /* a middle page: no files, no truncation note; the last page has the note again */
    in.heal = NULL;
    t = text_for("out", "", "C1", false, &in);
    assert_string_equal(t, "out\n[more output: call execute_code with cursor \"C1\"]");
    free(t);
    t = text_for("end", "", NULL, false, &in);
    assert_non_null(strstr(t, "end\n[output truncated: 5000 bytes"));
    free(t);
    /* bad input */
    char *none = (char *)&none;
    assert_int_equal(exec_page_text(NULL, true, &in, &none), EXEC_EINVAL);
    assert_null(none);
    char o[] = "", e[] = "";
    exec_page_t pg = {.out = o, .err = e, .cursor = NULL};
    in.status = NULL;
    assert_int_equal(exec_page_text(&pg, true, &in, &none), EXEC_EINVAL);
}

/* The note of a session's cell, appended to what the note held. */
static char *cell_note(const char *before, const exec_cell_end_t *c)
{
    ptc_buf_t b;
    ptc_buf_init(&b, 1 << 16);
    ptc_buf_str(&b, before);
    assert_int_equal(exec_cell_end_note(&b, c), 0);
    char *t = ptc_buf_take(&b, NULL);
    assert_non_null(t);
    return t;
}

static void a_cells_note_says_how_it_ended_and_how_to_go_on(void **state)
{
    (void)state;
    exec_cell_end_t c = {.handle = "H1", .fresh = true, .cells = 1, .max_timeout_s = 300};
    char *t = cell_note("", &c);
    assert_string_equal(t, "Session \"H1\" started: pass \"session\": \"H1\" to run more code in "
                           "this interpreter (variables, imports and files in /tmp are kept); "
                           "{\"session\": \"H1\", \"close_session\": true} ends it.");
    free(t);
    c.fresh = false;
    c.cells = 3;
    t = cell_note("Warning: w", &c);
    assert_string_equal(t, "Warning: w\nSession \"H1\", cell 3.");
    free(t);
    c.timed_out = c.interrupted = true;
    c.timeout_s = 2.5;
    t = cell_note("", &c);
    assert_non_null(strstr(t, "hit its 2.5 s timeout (timeout_seconds) and was interrupted"));
    assert_non_null(
        strstr(t, "(at most 300, the server's --max-timeout).\nSession \"H1\", cell 3."));
    free(t);
    /* killed after the grace: no line about going on */
    c.interrupted = false;
    c.session_ended = true;
    t = cell_note("", &c);
    assert_non_null(strstr(t, "did not stop within 2 s of the KeyboardInterrupt"));
    assert_null(strstr(t, "Session \"H1\""));
    free(t);
    c.timed_out = false;
    c.end_reason = "closed by the client";
    t = cell_note("", &c);
    assert_string_equal(t, "The session has ended (closed by the client): its state is gone. Start "
                           "a new one with session: \"new\".");
    free(t);
    c.end_reason = NULL;
    c.cancelled = true;
    t = cell_note("", &c);
    assert_non_null(strstr(t, "cancelled (cancel: true) and, as it did not stop"));
    free(t);
    c.session_ended = false;
    t = cell_note("", &c);
    assert_non_null(strstr(t, "the session lives on with its state.\nSession \"H1\", cell 3."));
    free(t);
}

static void a_running_answer_gives_the_new_output_and_the_way_back(void **state)
{
    (void)state;
    exec_running_info_t r = {
        .elapsed_ms = 45000, .timeout_ms = 60000, .out = "", .err = "", .cursor = "RC"};
    char *t = NULL;
    assert_int_equal(exec_running_text(&r, &t), 0);
    assert_string_equal(t, "Still running after 45.0 s (status running; the run's own limit is "
                           "60.0 s, timeout_seconds). No new output yet.\n[still running: call "
                           "execute_code with cursor \"RC\" to wait for more output or the "
                           "result (wait_seconds sets how long), or with that cursor and cancel: "
                           "true to stop it]");
    free(t);
    r.out = "step 1";
    r.err = "warn\n";
    assert_int_equal(exec_running_text(&r, &t), 0);
    assert_non_null(strstr(t, "Output since the last answer:\nstep 1\n--- stderr ---\nwarn\n"
                              "[still running"));
    free(t);
    r.cursor = NULL;
    assert_int_equal(exec_running_text(&r, &t), EXEC_EINVAL);
    assert_null(t);
}

static void a_runs_note_says_why_it_was_killed_and_lines_stack(void **state)
{
    (void)state;
    ptc_buf_t b;
    ptc_buf_init(&b, 4096);
    exec_run_end_t r = {.status = EXEC_STATUS_TIMEOUT, .timeout_s = 30, .max_timeout_s = 300};
    assert_int_equal(exec_run_end_note(&b, &r), 0);
    assert_string_equal(ptc_buf_cstr(&b),
                        "The run hit its 30.0 s timeout (timeout_seconds) and was killed. For "
                        "more time pass a larger timeout_seconds (at most 300, the server's "
                        "--max-timeout).");
    exec_note_line(&b, "Warning: ", "w1");
    exec_note_line(&b, NULL, NULL); /* nothing */
    exec_note_line(&b, NULL, "env");
    assert_non_null(strstr(ptc_buf_cstr(&b), "--max-timeout).\nWarning: w1\nenv"));
    ptc_buf_truncate(&b, 0);
    r.deadline_cut = true;
    assert_int_equal(exec_run_end_note(&b, &r), 0);
    assert_non_null(strstr(ptc_buf_cstr(&b), "(cut to the request's overall deadline"));
    ptc_buf_truncate(&b, 0);
    /* a session's cell: its own note says it (exec_cell_end_note) */
    r.in_session = true;
    assert_int_equal(exec_run_end_note(&b, &r), 0);
    assert_int_equal(ptc_buf_len(&b), 0);
    r = (exec_run_end_t){.status = EXEC_STATUS_KILLED, .cancelled = true};
    assert_int_equal(exec_run_end_note(&b, &r), 0);
    assert_string_equal(ptc_buf_cstr(&b), "The run was cancelled (cancel: true) and killed.");
    ptc_buf_truncate(&b, 0);
    r = (exec_run_end_t){.status = EXEC_STATUS_OOM, .in_session = true};
    assert_int_equal(exec_run_end_note(&b, &r), 0);
    assert_string_equal(ptc_buf_cstr(&b), "The run hit its memory limit and was killed.");
    ptc_buf_truncate(&b, 0);
    r = (exec_run_end_t){.status = EXEC_STATUS_ERROR};
    assert_int_equal(exec_run_end_note(&b, &r), 0);
    assert_int_equal(ptc_buf_len(&b), 0);
    ptc_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(short_output_fits_one_page_and_keeps_nothing),
        cmocka_unit_test(pages_walk_stdout_then_stderr_by_characters),
        cmocka_unit_test(unknown_forged_and_expired_cursors_are_refused),
        cmocka_unit_test(another_owners_cursor_is_unknown_and_refreshes_nothing),
        cmocka_unit_test(dropping_an_owner_forgets_only_its_outputs),
        cmocka_unit_test(the_store_stays_within_its_entry_and_byte_bounds),
        cmocka_unit_test(invalid_utf8_is_replaced),
        cmocka_unit_test(a_silent_success_says_no_output_and_a_plain_stdout_has_no_heading),
        cmocka_unit_test(
            a_failure_puts_its_status_and_the_tracebacks_end_first_when_the_page_hides_it),
        cmocka_unit_test(heal_files_truncation_and_cursor_lines_go_where_a_model_looks),
        cmocka_unit_test(a_cells_note_says_how_it_ended_and_how_to_go_on),
        cmocka_unit_test(a_running_answer_gives_the_new_output_and_the_way_back),
        cmocka_unit_test(a_runs_note_says_why_it_was_killed_and_lines_stack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
