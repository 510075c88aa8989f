/* the workspace's tables (workspace.c) through executor.h on a real loop: sessions behind
   handles bound to an owner, their limit, idle expiry and the ring of ended handles; runs kept
   behind a cursor and their expiry; requests parked for a next round (workspace_park.c): their
   handles, tags, bound and expiry; what goes when an owner ends. No code runs here (the pool
   is NULL, so no session starts): test_session.c runs cells in a workspace session. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"

#define MSG 700
/* parked at once in every fixture */
#define FX_MAX_PARKED 3
/* a test string as the opaque pointer the workspace keeps */
#define U(str) ((void *)(uintptr_t)(str))

static const unsigned char OWNER_A[EXEC_OWNER_BYTES] = {1};
static const unsigned char OWNER_B[EXEC_OWNER_BYTES] = {2};

/* what the callbacks saw, in order */
typedef struct {
    char log[4096];
    size_t released, sessions_ended, runs_ended;
    size_t pages, files;
    bool dropped;
} seen_t;

static void note(seen_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(seen_t *s, const char *fmt, ...)
{
    size_t k = strlen(s->log);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->log + k, sizeof s->log - k, fmt, ap);
    va_end(ap);
}

static void on_session_ended(const char *handle, exec_ws_end_t why, void *claimant, void *data)
{
    seen_t *s = data;
    s->sessions_ended++;
    assert_memory_equal(handle, "ses-", 4);
    note(s, "session %s why %d;", claimant != NULL ? (const char *)claimant : "-", (int)why);
}

static void on_run_ended(void *user, exec_ws_end_t why, void *data)
{
    seen_t *s = data;
    s->runs_ended++;
    note(s, "run %s why %d;", (const char *)user, (int)why);
}

static void on_release(void *user, void *data)
{
    seen_t *s = data;
    s->released++;
    note(s, "release %s;", user != NULL ? (const char *)user : "-");
}

static void on_dropped(size_t pages, size_t files, void *data)
{
    seen_t *s = data;
    s->dropped = true;
    s->pages = pages;
    s->files = files;
}

typedef struct {
    uv_loop_t loop;
    exec_workspace_t *ws;
    exec_pages_t *pages;
    exec_filestore_t *files;
    seen_t seen;
} fixture_t;

static fixture_t *fx_new(size_t max_sessions, uint64_t idle_ms, size_t max_runs, uint64_t keep_ms)
{
    fixture_t *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    assert_int_equal(uv_loop_init(&fx->loop), 0);
    assert_int_equal(exec_pages_new(1 << 20, 16, 60000, &fx->pages), 0);
    assert_int_equal(exec_filestore_new(1 << 20, 16, 60000, &fx->files), 0);
    const exec_ws_options_t o = {.pages = fx->pages,
                                 .files = fx->files,
                                 .max_sessions = max_sessions,
                                 .session_idle_ms = idle_ms,
                                 .max_runs = max_runs,
                                 .run_keep_ms = keep_ms,
                                 .max_parked = FX_MAX_PARKED};
    const exec_ws_callbacks_t cb = {.session_ended = on_session_ended,
                                    .run_ended = on_run_ended,
                                    .session_release = on_release,
                                    .owner_dropped = on_dropped,
                                    .data = &fx->seen};
    assert_int_equal(exec_workspace_new(&fx->loop, &o, &cb, &fx->ws), 0);
    return fx;
}

static void fx_free(fixture_t *fx)
{
    exec_workspace_free(fx->ws);
    exec_pages_free(fx->pages);
    exec_filestore_free(fx->files);
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    free(fx);
}

/* turns the loop for about ms: a timer of the test's own stops it (UV_RUN_ONCE would block on
   the workspace's own timers once this one has run) */
static void on_wake(uv_timer_t *t)
{
    uv_stop(t->loop);
}

static void spin(fixture_t *fx, uint64_t ms)
{
    uv_timer_t t;
    assert_int_equal(uv_timer_init(&fx->loop, &t), 0);
    assert_int_equal(uv_timer_start(&t, on_wake, ms, 0), 0);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&fx->loop, UV_RUN_NOWAIT);
}

static exec_ws_session_t *create(fixture_t *fx, const unsigned char *owner, const char *user)
{
    char msg[MSG] = "";
    exec_ws_session_t *s = exec_ws_session_create(fx->ws, owner, U(user), msg, sizeof msg);
    if (s == NULL) fprintf(stderr, "create: %s\n", msg);
    assert_non_null(s);
    return s;
}

static void test_handles_are_unguessable_and_fit(void **state)
{
    (void)state;
    char a[EXEC_WS_HANDLE_MAX], b[EXEC_WS_HANDLE_MAX];
    assert_true(exec_random_handle("run-", a, sizeof a));
    assert_true(exec_random_handle("run-", b, sizeof b));
    assert_int_equal(strlen(a), 4 + 32);
    assert_memory_equal(a, "run-", 4);
    assert_string_not_equal(a, b);
    char small[20];
    assert_false(exec_random_handle("run-", small, sizeof small));
}

static void test_a_session_is_found_by_its_owner_only(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(4, 60000, 4, 60000);
    exec_ws_session_t *s = create(fx, OWNER_A, "a");
    const char *h = exec_ws_session_handle(s);
    assert_memory_equal(h, "ses-", 4);
    assert_int_equal(strlen(h), 4 + 32);
    char msg[MSG];
    assert_ptr_equal(exec_ws_session_find(fx->ws, h, OWNER_A, msg, sizeof msg), s);
    assert_string_equal(exec_ws_session_user(s), "a");
    assert_false(exec_ws_session_busy(s));
    assert_null(exec_ws_session_sandbox(s));
    assert_null(exec_ws_session_end_reason(s));

    /* Another owner's handle reads exactly as one that never existed. */
    char other[MSG], unknown[MSG], want[MSG];
    assert_null(exec_ws_session_find(fx->ws, h, OWNER_B, other, sizeof other));
    assert_null(exec_ws_session_find(fx->ws, "ses-nope", OWNER_A, unknown, sizeof unknown));
    assert_non_null(strstr(other, "Unknown session"));
    char *p = strstr(unknown, "ses-nope");
    assert_non_null(p);
    snprintf(want, sizeof want, "%.*s%s%s", (int)(p - unknown), unknown, h, p + strlen("ses-nope"));
    assert_string_equal(other, want);

    /* Without a pool nothing starts or runs. */
    assert_int_equal(exec_ws_session_start(s, NULL), EXEC_EINVAL);
    exec_session_callbacks_t cb = {0};
    assert_int_equal(exec_ws_session_run(s, "pass", 1000, &cb), EXEC_EINVAL);
    exec_output_t out, err;
    assert_int_equal(exec_ws_session_output(s, &out, &err), EXEC_EINVAL);
    assert_int_equal(exec_ws_session_cancel(s), EXEC_EINVAL);
    assert_int_equal(exec_ws_session_cells(s), 0);
    fx_free(fx);
}

static void test_the_limit_names_the_oldest_idle_session_to_its_owner_only(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(2, 60000, 4, 60000);
    exec_ws_session_t *first = create(fx, OWNER_A, "a1");
    spin(fx, 5);
    exec_ws_session_t *second = create(fx, OWNER_A, "a2");
    char msg[MSG];
    assert_null(exec_ws_session_create(fx->ws, OWNER_A, NULL, msg, sizeof msg));
    assert_non_null(strstr(msg, "Too many sessions: 2 are open"));
    assert_non_null(strstr(msg, "--max-sessions 2"));
    assert_non_null(strstr(msg, exec_ws_session_handle(first)));
    assert_null(strstr(msg, exec_ws_session_handle(second)));

    assert_null(exec_ws_session_create(fx->ws, OWNER_B, NULL, msg, sizeof msg));
    assert_non_null(strstr(msg, "belongs to another client"));
    assert_null(strstr(msg, exec_ws_session_handle(first)));

    exec_ws_session_claim(first, U("job1"));
    exec_ws_session_claim(second, U("job2"));
    assert_true(exec_ws_session_busy(first));
    assert_string_equal(exec_ws_session_claimant(first), "job1");
    assert_null(exec_ws_session_create(fx->ws, OWNER_A, NULL, msg, sizeof msg));
    assert_non_null(strstr(msg, "Every one is running a cell now"));

    /* A closed one frees a place; its claimant stays the caller's: no session_ended. */
    exec_ws_session_close(second, "was closed (close_session)");
    assert_int_equal(fx->seen.sessions_ended, 0);
    assert_int_equal(fx->seen.released, 1);
    assert_non_null(create(fx, OWNER_B, "b"));
    fx_free(fx);
}

static void test_a_closed_session_says_why_to_its_owner(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(4, 60000, 4, 60000);
    exec_ws_session_t *s = create(fx, OWNER_A, "a");
    char h[EXEC_WS_HANDLE_MAX], msg[MSG];
    snprintf(h, sizeof h, "%s", exec_ws_session_handle(s));
    exec_ws_session_close(s, "was closed (close_session)");
    assert_string_equal(fx->seen.log, "release a;");
    assert_null(exec_ws_session_find(fx->ws, h, OWNER_A, msg, sizeof msg));
    assert_non_null(strstr(msg, "was closed (close_session); its variables and files are gone"));
    assert_null(exec_ws_session_find(fx->ws, h, OWNER_B, msg, sizeof msg));
    assert_non_null(strstr(msg, "Unknown session"));
    fx_free(fx);
}

static void test_the_ring_of_ended_handles_is_bounded(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(4, 60000, 4, 60000);
    char first[EXEC_WS_HANDLE_MAX] = "", last[EXEC_WS_HANDLE_MAX] = "", msg[MSG];
    for (unsigned i = 0; i <= EXEC_WS_GONE_KEPT; i++) {
        exec_ws_session_t *s = create(fx, OWNER_A, NULL);
        char *to = i == 0 ? first : last;
        snprintf(to, EXEC_WS_HANDLE_MAX, "%s", exec_ws_session_handle(s));
        exec_ws_session_close(s, "was closed (close_session)");
    }
    assert_null(exec_ws_session_find(fx->ws, last, OWNER_A, msg, sizeof msg));
    assert_non_null(strstr(msg, "was closed"));
    assert_null(exec_ws_session_find(fx->ws, first, OWNER_A, msg, sizeof msg));
    assert_non_null(strstr(msg, "Unknown session"));
    fx_free(fx);
}

static void test_an_idle_session_expires_and_a_claimed_one_does_not(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(4, 50, 4, 60000);
    exec_ws_session_t *idle = create(fx, OWNER_A, "idle");
    exec_ws_session_t *held = create(fx, OWNER_A, "held");
    char h[EXEC_WS_HANDLE_MAX], msg[MSG];
    snprintf(h, sizeof h, "%s", exec_ws_session_handle(idle));
    exec_ws_session_claim(held, U("job"));
    for (int i = 0; i < 100 && fx->seen.sessions_ended == 0; i++)
        spin(fx, 20);
    assert_int_equal(fx->seen.sessions_ended, 1);
    assert_string_equal(fx->seen.log, "release idle;session - why 0;");
    assert_null(exec_ws_session_find(fx->ws, h, OWNER_A, msg, sizeof msg));
    assert_non_null(strstr(msg, "expired: it was unused for 0 s (--session-idle-timeout)"));
    spin(fx, 300);
    assert_ptr_equal(
        exec_ws_session_find(fx->ws, exec_ws_session_handle(held), OWNER_A, msg, sizeof msg), held);
    /* Released, the claimed one is idle again (it never started: kept unless told). */
    exec_ws_session_release(held, "job", false);
    assert_false(exec_ws_session_busy(held));
    assert_int_equal(fx->seen.released, 1);
    fx_free(fx);
}

static void test_release_forgets_a_session_that_never_started(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(4, 60000, 4, 60000);
    exec_ws_session_t *s = create(fx, OWNER_A, "a");
    char h[EXEC_WS_HANDLE_MAX], msg[MSG];
    snprintf(h, sizeof h, "%s", exec_ws_session_handle(s));
    exec_ws_session_claim(s, U("job"));
    exec_ws_session_release(s, "other job", true); /* not its claimant: nothing happens */
    assert_int_equal(fx->seen.released, 0);
    assert_string_equal(exec_ws_session_claimant(s), "job");
    exec_ws_session_release(s, "job", true); /* it never started: gone */
    assert_int_equal(fx->seen.released, 1);
    assert_null(exec_ws_session_find(fx->ws, h, OWNER_A, msg, sizeof msg));
    assert_non_null(strstr(msg, "Unknown session")); /* no trace in the ring */
    fx_free(fx);
}

static void test_runs_are_bounded_and_found_by_their_owner_only(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(4, 60000, 2, 60000);
    exec_ws_run_t *r1, *r2, *r3;
    assert_int_equal(exec_ws_run_add(fx->ws, OWNER_A, U("r1"), &r1), 0);
    assert_false(exec_ws_runs_full(fx->ws));
    assert_int_equal(exec_ws_run_add(fx->ws, OWNER_B, U("r2"), &r2), 0);
    assert_true(exec_ws_runs_full(fx->ws));
    assert_int_equal(exec_ws_run_add(fx->ws, OWNER_A, U("r3"), &r3), EXEC_EBUSY);
    assert_null(r3);
    const char *c1 = exec_ws_run_cursor(r1);
    assert_memory_equal(c1, "run-", 4);
    assert_string_not_equal(c1, exec_ws_run_cursor(r2));
    assert_string_equal(exec_ws_run_find(fx->ws, c1, OWNER_A), "r1");
    assert_null(exec_ws_run_find(fx->ws, c1, OWNER_B));
    assert_null(exec_ws_run_find(fx->ws, "run-nope", OWNER_A));
    char c[EXEC_WS_HANDLE_MAX];
    snprintf(c, sizeof c, "%s", c1);
    exec_ws_run_remove(r1);
    assert_null(exec_ws_run_find(fx->ws, c, OWNER_A));
    assert_false(exec_ws_runs_full(fx->ws));
    assert_int_equal(fx->seen.runs_ended, 0); /* removing is the caller's: no callback */
    fx_free(fx);                              /* r2 ends with the workspace */
}

static void test_a_kept_run_expires_unless_held(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(4, 60000, 4, 40);
    exec_ws_run_t *gone, *held;
    assert_int_equal(exec_ws_run_add(fx->ws, OWNER_A, U("gone"), &gone), 0);
    assert_int_equal(exec_ws_run_add(fx->ws, OWNER_A, U("held"), &held), 0);
    char c[EXEC_WS_HANDLE_MAX];
    snprintf(c, sizeof c, "%s", exec_ws_run_cursor(gone));
    exec_ws_run_keep(gone);
    exec_ws_run_keep(held);
    exec_ws_run_hold(held); /* a request waits on it again */
    for (int i = 0; i < 100 && fx->seen.runs_ended == 0; i++)
        spin(fx, 20);
    assert_string_equal(fx->seen.log, "run gone why 0;");
    assert_null(exec_ws_run_find(fx->ws, c, OWNER_A));
    spin(fx, 150);
    assert_int_equal(fx->seen.runs_ended, 1);
    assert_string_equal(exec_ws_run_find(fx->ws, exec_ws_run_cursor(held), OWNER_A), "held");
    exec_ws_run_remove(held);
    fx_free(fx);
}

static void test_an_ended_owner_loses_everything_at_the_next_turn(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(4, 60000, 4, 60000);
    exec_ws_session_t *a1 = create(fx, OWNER_A, "a1");
    exec_ws_session_t *b = create(fx, OWNER_B, "b");
    (void)create(fx, OWNER_A, "a2");
    exec_ws_session_claim(a1, U("job-a1"));
    char h[EXEC_WS_HANDLE_MAX], msg[MSG];
    snprintf(h, sizeof h, "%s", exec_ws_session_handle(a1));
    exec_ws_run_t *ra, *rb;
    assert_int_equal(exec_ws_run_add(fx->ws, OWNER_A, U("ra"), &ra), 0);
    assert_int_equal(exec_ws_run_add(fx->ws, OWNER_B, U("rb"), &rb), 0);
    exec_page_t page;
    assert_int_equal(
        exec_pages_first(fx->pages, OWNER_A, NULL, "abcdefghij", 10, "", 0, 3, 0, &page), 0);
    exec_page_clear(&page);
    assert_int_equal(
        exec_pages_first(fx->pages, OWNER_B, NULL, "abcdefghij", 10, "", 0, 3, 0, &page), 0);
    exec_page_clear(&page);
    char *key = NULL;
    assert_int_equal(exec_filestore_put(fx->files, OWNER_A, "a.txt", (const unsigned char *)"x", 1,
                                        "text/plain", 0, &key),
                     0);
    free(key);

    assert_int_equal(exec_ws_owner_ended(fx->ws, OWNER_A), 0);
    /* Not at once: the caller may hold one of its entries now. */
    assert_ptr_equal(exec_ws_session_find(fx->ws, h, OWNER_A, msg, sizeof msg), a1);
    assert_int_equal(fx->seen.runs_ended + fx->seen.sessions_ended, 0);
    spin(fx, 1);
    /* Its run first, then its sessions (the claimed one hands its claimant back). */
    assert_non_null(strstr(fx->seen.log, "run ra why 2;"));
    assert_non_null(strstr(fx->seen.log, "session job-a1 why 2"));
    assert_non_null(strstr(fx->seen.log, "session - why 2"));
    assert_true(strstr(fx->seen.log, "run ra") < strstr(fx->seen.log, "session"));
    assert_int_equal(fx->seen.runs_ended, 1);
    assert_int_equal(fx->seen.sessions_ended, 2);
    assert_true(fx->seen.dropped);
    assert_int_equal(fx->seen.pages, 1);
    assert_int_equal(fx->seen.files, 1);
    assert_null(exec_ws_session_find(fx->ws, h, OWNER_A, msg, sizeof msg));
    assert_non_null(strstr(msg, "the MCP session that made it ended"));
    /* The other owner keeps its own. */
    assert_ptr_equal(
        exec_ws_session_find(fx->ws, exec_ws_session_handle(b), OWNER_B, msg, sizeof msg), b);
    assert_string_equal(exec_ws_run_find(fx->ws, exec_ws_run_cursor(rb), OWNER_B), "rb");
    assert_int_equal(exec_pages_entries(fx->pages), 1);
    fx_free(fx);
}

/* A parked entry's user: what its end callback saw goes into the fixture's log; with again
   set, the callback parks that entry anew (for again_owner), as a caller may. */
typedef struct parked {
    fixture_t *fx;
    const char *name;
    struct parked *again;
    const unsigned char *again_owner;
} parked_t;

static void on_park_end(void *user, exec_ws_end_t why, const char *handle)
{
    parked_t *p = user;
    assert_memory_equal(handle, "tst-", 4);
    assert_null(exec_ws_park_find(p->fx->ws, handle, OWNER_A)); /* gone before the call */
    note(&p->fx->seen, "parked %s why %d;", p->name, (int)why);
    if (p->again != NULL) {
        exec_ws_park_t *e = NULL;
        assert_int_equal(exec_ws_park_add(p->fx->ws, p->again_owner, "tst-", NULL, 60000,
                                          on_park_end, p->again, &e),
                         0);
        p->again = NULL;
    }
}

static exec_ws_park_t *park(fixture_t *fx, const char *tag, uint64_t keep_ms, parked_t *user)
{
    exec_ws_park_t *p = NULL;
    user->fx = fx;
    assert_int_equal(exec_ws_park_add(fx->ws, OWNER_A, "tst-", tag, keep_ms, on_park_end, user, &p),
                     0);
    assert_non_null(p);
    return p;
}

static void test_a_parked_request_is_found_by_its_owner_only_until_removed(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(4, 60000, 4, 60000);
    parked_t a = {.name = "a"}, b = {.name = "b"};
    exec_ws_park_t *pa = park(fx, "task-1", 60000, &a);
    exec_ws_park_t *pb = park(fx, NULL, 60000, &b);
    const char *h = exec_ws_park_handle(pa);
    assert_memory_equal(h, "tst-", 4);
    assert_int_equal(strlen(h), 4 + 32);
    assert_string_not_equal(h, exec_ws_park_handle(pb));
    assert_int_equal(exec_ws_parked(fx->ws), 2);
    assert_ptr_equal(exec_ws_park_find(fx->ws, h, OWNER_A), pa);
    assert_ptr_equal(exec_ws_park_user(pa), &a);
    assert_null(exec_ws_park_find(fx->ws, h, OWNER_B));
    assert_null(exec_ws_park_find(fx->ws, "tst-nope", OWNER_A));
    /* The tag finds it for its owner; no tag finds nothing. */
    assert_ptr_equal(exec_ws_park_find_tag(fx->ws, "task-1", OWNER_A), pa);
    assert_null(exec_ws_park_find_tag(fx->ws, "task-1", OWNER_B));
    assert_null(exec_ws_park_find_tag(fx->ws, "task-2", OWNER_A));
    assert_null(exec_ws_park_find_tag(fx->ws, "", OWNER_A));
    /* Removed, its handle is unknown for good, with no callback. */
    char copy[EXEC_WS_HANDLE_MAX];
    snprintf(copy, sizeof copy, "%s", h);
    exec_ws_park_remove(pa);
    exec_ws_park_remove(NULL);
    assert_null(exec_ws_park_find(fx->ws, copy, OWNER_A));
    assert_null(exec_ws_park_find_tag(fx->ws, "task-1", OWNER_A));
    assert_int_equal(exec_ws_parked(fx->ws), 1);
    assert_string_equal(fx->seen.log, "");
    fx_free(fx); /* b ends with the workspace */
}

static void test_parking_is_bounded_and_checks_its_arguments(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(4, 60000, 4, 60000);
    parked_t u[FX_MAX_PARKED] = {{.name = "u"}, {.name = "u"}, {.name = "u"}};
    exec_ws_park_t *p = NULL;
    for (size_t i = 0; i < FX_MAX_PARKED; i++)
        p = park(fx, NULL, 60000, &u[i]);
    parked_t over = {.fx = fx, .name = "over"};
    /* p names a parked entry: an error sets it to NULL. */
    assert_int_equal(exec_ws_park_add(fx->ws, OWNER_B, "tst-", NULL, 1, on_park_end, &over, &p),
                     EXEC_EBUSY);
    assert_null(p);
    exec_ws_park_remove(exec_ws_park_find_tag(fx->ws, "x", OWNER_A)); /* NULL: nothing */
    assert_int_equal(exec_ws_parked(fx->ws), FX_MAX_PARKED);
    exec_workspace_stop(fx->ws); /* a place again, and the arguments are checked */
    char tag[EXEC_WS_PARK_TAG_MAX + 1];
    memset(tag, 't', sizeof tag - 1);
    tag[sizeof tag - 1] = '\0';
    assert_int_equal(exec_ws_park_add(fx->ws, OWNER_A, "tst-", tag, 1, on_park_end, &over, &p),
                     EXEC_EINVAL);
    tag[EXEC_WS_PARK_TAG_MAX - 1] = '\0'; /* the longest that fits */
    assert_int_equal(exec_ws_park_add(fx->ws, OWNER_A, "tst-", tag, 1, on_park_end, &over, &p), 0);
    assert_ptr_equal(exec_ws_park_find_tag(fx->ws, tag, OWNER_A), p);
    exec_ws_park_remove(p);
    assert_int_equal(
        exec_ws_park_add(fx->ws, OWNER_A, "toolongprefix-", NULL, 1, on_park_end, &over, &p),
        EXEC_EINVAL);
    assert_int_equal(exec_ws_park_add(fx->ws, OWNER_A, "tst-", NULL, 1, NULL, &over, &p),
                     EXEC_EINVAL);
    assert_int_equal(exec_ws_parked(fx->ws), 0);
    fx_free(fx);
}

static void test_a_parked_request_expires_on_its_own_bound(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(4, 60000, 4, 60000);
    parked_t soon = {.name = "soon"}, later = {.name = "later"}, gone = {.name = "gone"},
             again = {.name = "again"};
    (void)park(fx, NULL, 30, &soon);
    (void)park(fx, NULL, 200, &later);
    exec_ws_park_remove(park(fx, NULL, 10, &gone)); /* removed first: never told */
    soon.again = &again;                            /* its callback parks another, for a minute */
    soon.again_owner = OWNER_A;
    again.fx = fx;
    for (int i = 0; i < 100 && strstr(fx->seen.log, "later") == NULL; i++)
        spin(fx, 20);
    assert_string_equal(fx->seen.log, "parked soon why 0;parked later why 0;");
    assert_int_equal(exec_ws_parked(fx->ws), 1); /* the one parked from the callback */
    spin(fx, 50);
    assert_int_equal(exec_ws_parked(fx->ws), 1);
    fx_free(fx); /* it ends with the workspace (stopped) */
}

static void test_stop_ends_parked_then_runs_then_sessions(void **state)
{
    (void)state;
    fixture_t *fx = fx_new(4, 60000, 4, 60000);
    exec_ws_session_t *s = create(fx, OWNER_B, "s");
    exec_ws_session_claim(s, U("job"));
    exec_ws_run_t *r;
    assert_int_equal(exec_ws_run_add(fx->ws, OWNER_B, U("r"), &r), 0);
    parked_t p = {.name = "p"}, q = {.name = "q"};
    (void)park(fx, "task", 60000, &p);
    /* An owner's end leaves its parked entries to their own bound. */
    assert_int_equal(exec_ws_owner_ended(fx->ws, OWNER_A), 0);
    spin(fx, 1);
    assert_int_equal(exec_ws_parked(fx->ws), 1);
    assert_true(fx->seen.dropped);
    (void)park(fx, NULL, 60000, &q);
    /* Parked first (newest first): what they hold may own a run or a session. Stopping drops
     * no owner's pages or files. */
    fx->seen.dropped = false;
    exec_workspace_stop(fx->ws);
    assert_false(fx->seen.dropped);
    assert_string_equal(fx->seen.log,
                        "parked q why 3;parked p why 3;run r why 3;release s;session job why 3;");
    assert_int_equal(exec_ws_parked(fx->ws), 0);
    fx_free(fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handles_are_unguessable_and_fit),
        cmocka_unit_test(test_a_session_is_found_by_its_owner_only),
        cmocka_unit_test(test_the_limit_names_the_oldest_idle_session_to_its_owner_only),
        cmocka_unit_test(test_a_closed_session_says_why_to_its_owner),
        cmocka_unit_test(test_the_ring_of_ended_handles_is_bounded),
        cmocka_unit_test(test_an_idle_session_expires_and_a_claimed_one_does_not),
        cmocka_unit_test(test_release_forgets_a_session_that_never_started),
        cmocka_unit_test(test_runs_are_bounded_and_found_by_their_owner_only),
        cmocka_unit_test(test_a_kept_run_expires_unless_held),
        cmocka_unit_test(test_an_ended_owner_loses_everything_at_the_next_turn),
        cmocka_unit_test(test_a_parked_request_is_found_by_its_owner_only_until_removed),
        cmocka_unit_test(test_parking_is_bounded_and_checks_its_arguments),
        cmocka_unit_test(test_a_parked_request_expires_on_its_own_bound),
        cmocka_unit_test(test_stop_ends_parked_then_runs_then_sessions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
