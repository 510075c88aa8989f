/* The repair loop (repair/loop.c) driven by fake run and ask operations: every stop rule ends
 * the loop at the point it should (success, no repairer at all, the same error, an unchanged
 * repair, the budget, a lost journal, nothing to rerun in, no time left, the deadline while
 * waiting) and nothing else runs or is asked for afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repair.h"

#define FAKE_MAX 8

#define TB(type, msg)                                                                              \
    "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n" type ": " msg \
    "\n"

typedef struct fake {
    uv_loop_t uv;
    ptc_repair_loop_t *loop;
    int runs, asks, cancels, finished, refused;
    const char *errs[FAKE_MAX];    /* run i's stderr: NULL for a run that succeeds */
    const char *replies[FAKE_MAX]; /* the model's reply to ask i */
    int start_fail_at;             /* the run (1-based) that cannot start; 0: none */
    bool no_repairer, silent, lose_journal, ask_fails;
    const char *no_rerun; /* every run says so (a session cell that ended its session) */
    uv_timer_t reply_timer;
    ptc_repair_cb cb;
    void *cb_data;
    char reason[400];
    char codes[FAKE_MAX][256]; /* the program of each run */
    bool report_progress;      /* each run reports progress (1.5 s, 42 bytes, 3 calls) */
    bool in_run_progress;
    char progress[FAKE_MAX][160];
    double progress_elapsed[FAKE_MAX], progress_total[FAKE_MAX];
} fake_t;

static const ptc_repairer_desc_t desc = {
    .id = "fake", .who = "fake repairer", .by = "the fake repairer", .asking = "the fake"};

static int f_run(void *data, const char *code, uint64_t timeout_ms, char *msg, size_t msg_size)
{
    fake_t *f = data;
    (void)timeout_ms;
    int i = f->runs++;
    assert_true(i < FAKE_MAX);
    snprintf(f->codes[i], sizeof f->codes[i], "%s", code);
    if (f->report_progress) {
        f->in_run_progress = true; /* the loop's own messages (asking, ...) are not recorded */
        ptc_repair_loop_run_progress(f->loop, 1500, 42, 3);
        f->in_run_progress = false;
    }
    if (f->start_fail_at == i + 1) {
        snprintf(msg, msg_size, "The run was not started: no launcher");
        return -1;
    }
    if (f->lose_journal) {
        /* More distinct calls than the journal can count: it is lost. */
        ptc_journal_t *j = ptc_repair_loop_journal(f->loop);
        assert_non_null(j);
        char key[32];
        for (unsigned k = 0; k <= PTC_JOURNAL_KEYS_MAX; k++) {
            snprintf(key, sizeof key, "t\n{\"k\":%u}", k);
            (void)ptc_journal_occurrence(j, key);
        }
        assert_true(ptc_journal_lost(j));
    }
    ptc_repair_run_t r = {
        .status = f->errs[i] ? "error" : "ok",
        .exit_code = f->errs[i] ? 1 : 0,
        .err = f->errs[i] ? f->errs[i] : "",
        .timeout_ms = timeout_ms,
        .duration_ms = 5,
        .no_rerun = f->errs[i] ? f->no_rerun : NULL,
    };
    ptc_repair_loop_ran(f->loop, &r);
    return 0;
}

static void f_refused(void *data, const char *message)
{
    fake_t *f = data;
    f->refused++;
    snprintf(f->reason, sizeof f->reason, "%s", message);
}

static void f_finish(void *data)
{
    fake_t *f = data;
    f->finished++;
    snprintf(f->reason, sizeof f->reason, "%s", ptc_repair_loop_stopped(f->loop));
}

static const ptc_repairer_desc_t *f_repairer(void *data, char *why, size_t why_size)
{
    fake_t *f = data;
    if (!f->no_repairer) return &desc;
    snprintf(why, why_size, "no repairer here");
    return NULL;
}

static void on_reply_timer(uv_timer_t *t)
{
    fake_t *f = t->data;
    f->cb(f->cb_data, 0, f->replies[f->asks - 1], NULL);
}

static int f_ask(void *data, const char *prompt, ptc_repair_cb cb, void *cb_data, void **handle)
{
    fake_t *f = data;
    assert_non_null(strstr(prompt, "```"));
    if (f->ask_fails) return -5;
    f->asks++;
    assert_true(f->asks <= FAKE_MAX);
    *handle = f;
    if (f->silent) return 0;
    f->cb = cb;
    f->cb_data = cb_data;
    uv_timer_start(&f->reply_timer, on_reply_timer, 0, 0); /* answered later, never inside */
    return 0;
}

static void f_cancel(void *data, void *handle)
{
    fake_t *f = data;
    assert_ptr_equal(handle, f);
    f->cancels++;
    uv_timer_stop(&f->reply_timer);
}

static const char *f_strerror(int err)
{
    return err == -5 ? "fake send failure" : "fake error";
}

static void f_progress(void *data, double elapsed_ms, double total_ms, const char *msg)
{
    fake_t *f = data;
    int i = f->runs - 1; /* the run going on */
    if (!f->in_run_progress) return;
    snprintf(f->progress[i], sizeof f->progress[i], "%s", msg);
    f->progress_elapsed[i] = elapsed_ms;
    f->progress_total[i] = total_ms;
}

static const ptc_repair_ops_t ops = {
    .run = f_run,
    .refused = f_refused,
    .finish = f_finish,
    .repairer = f_repairer,
    .ask = f_ask,
    .cancel = f_cancel,
    .strerror = f_strerror,
    .progress = f_progress,
};

static void fake_init(fake_t *f)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(uv_loop_init(&f->uv), 0);
    assert_int_equal(uv_timer_init(&f->uv, &f->reply_timer), 0);
    f->reply_timer.data = f;
}

/* Runs the loop over code to its end. */
static void drive(fake_t *f, const char *code, long max_repairs, uint64_t timeout_ms,
                  uint64_t deadline_ms)
{
    assert_int_equal(ptc_repair_loop_new(&f->uv, code, timeout_ms, max_repairs, deadline_ms,
                                         1 << 16, &ops, f, &f->loop),
                     0);
    ptc_repair_loop_start(f->loop);
    uv_run(&f->uv, UV_RUN_DEFAULT);
    assert_int_equal(f->finished + f->refused, 1); /* exactly one answer */
}

/* The number of attempts in the history (taking it: call after any report). */
static int n_attempts(fake_t *f)
{
    cJSON *a = ptc_repair_loop_take_attempts(f->loop);
    int n = cJSON_GetArraySize(a);
    cJSON_Delete(a);
    return n;
}

static void fake_close(fake_t *f)
{
    ptc_repair_loop_free(f->loop);
    uv_close((uv_handle_t *)&f->reply_timer, NULL);
    uv_run(&f->uv, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->uv), 0);
}

static void test_success_ends_at_once(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    drive(&f, "print(1)\n", 3, 1000, 60000);
    assert_int_equal(n_attempts(&f), 1);
    assert_int_equal(f.runs, 1);
    assert_int_equal(f.asks, 0);
    assert_string_equal(f.reason, "");
    fake_close(&f);
}

static void test_repair_then_success(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    f.replies[0] = "Fixed:\n```python\nx = 1\nprint(x)\n```\n";
    drive(&f, "print(x)\n", 3, 1000, 60000);
    assert_int_equal(f.runs, 2);
    assert_int_equal(f.asks, 1);
    assert_string_equal(f.codes[1], "x = 1\nprint(x)\n");
    assert_string_equal(f.reason, "");
    /* A success after a repair: the history and the final code, no packet. */
    ptc_repair_run_t ok = {.status = "ok", .exit_code = 0, .err = ""};
    char *text = NULL;
    cJSON *packet = NULL;
    assert_int_equal(ptc_repair_loop_report(f.loop, &ok, &text, &packet), 0);
    assert_non_null(strstr(text, "the last one succeeded"));
    assert_non_null(strstr(text, "Final code that worked:"));
    assert_null(packet);
    free(text);
    assert_int_equal(n_attempts(&f), 2);
    fake_close(&f);
}

static void test_no_healing_no_repair(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    drive(&f, "print(x)\n", 0, 1000, 60000);
    assert_int_equal(n_attempts(&f), 1);
    assert_int_equal(f.asks, 0);
    assert_null(ptc_repair_loop_journal(f.loop));
    assert_string_equal(f.reason, "");
    fake_close(&f);
}

/* Nobody to repair: no self-healing to speak of (no attempt numbers, no stop reason, the run
 * gets its own timeout, not the request's deadline), but the failure keeps its packet. */
static void test_no_repairer_says_nothing_of_repairs(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.no_repairer = true;
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    drive(&f, "print(x)\n", 3, 1000, 60000);
    assert_int_equal(f.asks, 0);
    assert_string_equal(f.reason, "");
    assert_false(ptc_repair_loop_healing(f.loop));
    assert_null(ptc_repair_loop_journal(f.loop));
    ptc_repair_run_t last = {.status = "error", .exit_code = 1, .err = f.errs[0]};
    char *text = NULL;
    cJSON *packet = NULL;
    assert_int_equal(ptc_repair_loop_report(f.loop, &last, &text, &packet), 0);
    assert_null(strstr(text, "Repairs stopped"));
    assert_null(strstr(text, "no repairer here"));
    assert_non_null(strstr(text, "Repair packet: error NameError"));
    assert_non_null(packet);
    assert_null(cJSON_GetObjectItemCaseSensitive(packet, "stopped"));
    free(text);
    cJSON_Delete(packet);
    assert_int_equal(n_attempts(&f), 1);
    fake_close(&f);
}

static void test_stop_same_error(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    f.errs[1] = TB("NameError", "name 'x' is not defined");
    f.replies[0] = "```python\nprint(x + 0)\n```";
    f.replies[1] = "```python\nprint(x + 1)\n```";
    drive(&f, "print(x)\n", 3, 1000, 60000);
    assert_int_equal(n_attempts(&f), 2);
    assert_int_equal(f.runs, 2);
    assert_int_equal(f.asks, 1);
    assert_non_null(strstr(f.reason, "the same error came back after the repair"));
    fake_close(&f);
}

static void test_stop_unchanged_code(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    f.replies[0] = "```python\nprint(x)   \n\n```"; /* only white space differs */
    drive(&f, "print(x)\n", 3, 1000, 60000);
    assert_int_equal(n_attempts(&f), 1);
    assert_int_equal(f.runs, 1);
    assert_int_equal(f.asks, 1);
    assert_non_null(strstr(f.reason, "the repair changed nothing (the same code as attempt 1)"));
    fake_close(&f);
}

static void test_stop_budget(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    f.errs[1] = TB("ValueError", "bad value");
    f.errs[2] = TB("KeyError", "'k'");
    f.replies[0] = "```python\nprint(1 + x)\n```";
    f.replies[1] = "```python\nprint(2 + x)\n```";
    drive(&f, "print(x)\n", 1, 1000, 60000);
    assert_int_equal(n_attempts(&f), 2);
    assert_int_equal(f.runs, 2);
    assert_int_equal(f.asks, 1);
    assert_string_equal(f.reason, "the repair budget is spent (max_repairs 1)");
    fake_close(&f);
}

static void test_stop_lost_journal(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.lose_journal = true;
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    f.replies[0] = "```python\nprint(1 + x)\n```";
    drive(&f, "print(x)\n", 3, 1000, 60000);
    assert_int_equal(n_attempts(&f), 1);
    assert_int_equal(f.asks, 0);
    assert_non_null(strstr(f.reason, "not every tool call could be journaled"));
    fake_close(&f);
}

/* a failure after which nothing can rerun (the session it ran in ended) asks for no fix */
static void test_stop_no_rerun(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.no_rerun = "the cell ended its session";
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    f.replies[0] = "```python\nprint(1 + x)\n```";
    drive(&f, "print(x)\n", 3, 1000, 60000);
    assert_int_equal(n_attempts(&f), 1);
    assert_int_equal(f.runs, 1);
    assert_int_equal(f.asks, 0);
    assert_string_equal(f.reason,
                        "the cell ended its session, so a repaired version could not run");
    fake_close(&f);
}

static void test_stop_no_time_left(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    f.replies[0] = "```python\nprint(1 + x)\n```";
    /* 500 ms for everything: less than PTC_REPAIR_MIN_LEFT_MS is left after the failure. */
    drive(&f, "print(x)\n", 3, 100, 500);
    assert_int_equal(n_attempts(&f), 1);
    assert_int_equal(f.asks, 0);
    assert_non_null(strstr(f.reason, "the request's overall deadline"));
    assert_non_null(strstr(f.reason, "leaves no time for a repair"));
    fake_close(&f);
}

static void test_stop_deadline_while_waiting(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.silent = true; /* the model never answers */
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    uint64_t t0 = uv_now(&f.uv);
    drive(&f, "print(x)\n", 3, 100, PTC_REPAIR_MIN_LEFT_MS + 200);
    assert_int_equal(n_attempts(&f), 1);
    assert_true(uv_now(&f.uv) - t0 >= PTC_REPAIR_MIN_LEFT_MS);
    assert_int_equal(f.asks, 1);
    assert_int_equal(f.cancels, 1); /* the request in flight was withdrawn */
    assert_non_null(strstr(f.reason, "passed while waiting for the repair"));
    fake_close(&f);
}

static void test_refused_and_unstartable(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.start_fail_at = 1; /* the first run cannot start: refused, not a failure to repair */
    drive(&f, "print(x)\n", 3, 1000, 60000);
    assert_int_equal(n_attempts(&f), 0);
    assert_int_equal(f.refused, 1);
    assert_string_equal(f.reason, "The run was not started: no launcher");
    fake_close(&f);

    fake_init(&f);
    f.start_fail_at = 2; /* the repaired code cannot start: the loop ends on the last failure */
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    f.replies[0] = "```python\nprint(1 + x)\n```";
    drive(&f, "print(x)\n", 3, 1000, 60000);
    assert_int_equal(n_attempts(&f), 1);
    assert_int_equal(f.finished, 1);
    assert_non_null(strstr(f.reason, "the repaired code could not be started: The run was not"));
    fake_close(&f);

    fake_init(&f);
    f.ask_fails = true;
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    drive(&f, "print(x)\n", 3, 1000, 60000);
    assert_int_equal(n_attempts(&f), 1);
    assert_string_equal(f.reason, "the repair request could not be sent: fake send failure");
    fake_close(&f);
}

static void test_report(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    f.errs[1] = TB("NameError", "name 'x' is not defined");
    f.replies[0] = "```python\nprint(x + 0)\n```";
    assert_int_equal(
        ptc_repair_loop_new(&f.uv, "print(x)\n", 1000, 3, 60000, 1 << 16, &ops, &f, &f.loop), 0);
    ptc_repair_loop_start(f.loop);
    uv_run(&f.uv, UV_RUN_DEFAULT);
    ptc_repair_run_t last = {.status = "error", .exit_code = 1, .err = f.errs[1]};
    char *text = NULL;
    cJSON *packet = NULL;
    assert_int_equal(ptc_repair_loop_report(f.loop, &last, &text, &packet), 0);
    assert_non_null(strstr(text, "Self-healing: 2 attempts, 1 repair by the fake repairer"));
    assert_non_null(strstr(text, "Repairs stopped: the same error came back"));
    assert_non_null(strstr(text, "Last code tried:\n```python\nprint(x + 0)\n```"));
    assert_non_null(packet);
    assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(packet, "stopped")));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(packet, "line")->valueint, 1);
    free(text);
    cJSON_Delete(packet);
    fake_close(&f);
}

/* A run's progress: its own clock without self-healing; with it, the attempt and the request's
 * clock, which keeps increasing from one attempt to the next. */
static void test_run_progress_counts_attempts_against_the_deadline(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    f.report_progress = true;
    drive(&f, "print(1)\n", 0, 1000, 60000);
    assert_string_equal(f.progress[0], "running 1.5 s, 42 bytes of output, 3 tool calls");
    assert_true(f.progress_elapsed[0] == 1500.0);
    assert_true(f.progress_total[0] == 1000.0);
    fake_close(&f);

    fake_init(&f);
    f.report_progress = true;
    f.errs[0] = TB("NameError", "name 'x' is not defined");
    f.replies[0] = "```python\nx = 1\nprint(x)\n```\n";
    drive(&f, "print(x)\n", 3, 1000, 60000);
    assert_int_equal(f.runs, 2);
    assert_string_equal(f.progress[0], "attempt 1 of 4: running 1.5 s, 42 bytes of output, 3 tool "
                                       "calls");
    assert_string_equal(f.progress[1], "attempt 2 of 4: running 1.5 s, 42 bytes of output, 3 tool "
                                       "calls");
    assert_true(f.progress_total[0] == 60000.0);
    assert_true(f.progress_elapsed[1] >= f.progress_elapsed[0]);
    assert_true(f.progress_elapsed[1] < 60000.0);
    fake_close(&f);
}

/* Progress made from the clock must increase: two readings in one loop iteration (uv_now() does
 * not move) still differ, and the total stays the deadline. */
static void test_clock_always_advances(void **state)
{
    (void)state;
    fake_t f;
    fake_init(&f);
    assert_int_equal(
        ptc_repair_loop_new(&f.uv, "print(1)\n", 1000, 3, 60000, 1 << 16, &ops, &f, &f.loop), 0);
    double first, second, total;
    ptc_repair_loop_clock(f.loop, &first, &total);
    ptc_repair_loop_clock(f.loop, &second, &total);
    assert_true(second > first);
    assert_true(total == 60000.0);
    fake_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_success_ends_at_once),
        cmocka_unit_test(test_repair_then_success),
        cmocka_unit_test(test_no_healing_no_repair),
        cmocka_unit_test(test_no_repairer_says_nothing_of_repairs),
        cmocka_unit_test(test_stop_same_error),
        cmocka_unit_test(test_stop_unchanged_code),
        cmocka_unit_test(test_stop_budget),
        cmocka_unit_test(test_stop_lost_journal),
        cmocka_unit_test(test_stop_no_rerun),
        cmocka_unit_test(test_stop_no_time_left),
        cmocka_unit_test(test_stop_deadline_while_waiting),
        cmocka_unit_test(test_refused_and_unstartable),
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_run_progress_counts_attempts_against_the_deadline),
        cmocka_unit_test(test_clock_always_advances),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
