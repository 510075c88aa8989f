/* client_wait.h - how the downstream client tests wait: the loop runs until a condition holds,
 * under the test's guard timer, which turns a hang into a failure that shows the log.
 * Header-only (static inline); include it after <cmocka.h> and "mcp.h". */
#ifndef PTC_TEST_MCP_CLIENT_WAIT_H
#define PTC_TEST_MCP_CLIENT_WAIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct client_waiter {
    bool (*pred)(void *);
    void *arg;
} client_waiter_t;

/* Stops the loop before it would block once the condition holds: a callback run by a timer
 * may satisfy it, and UV_RUN_ONCE would then still poll. */
static inline void client_wait_on_prepare(uv_prepare_t *h)
{
    client_waiter_t *w = h->data;
    if (w->pred(w->arg)) uv_stop(h->loop);
}

static inline void client_guard_on_fire(uv_timer_t *t)
{
    *(bool *)t->data = true;
    uv_stop(t->loop);
}

/* Starts guard on loop: when ms pass while a wait runs, *fired is set and the loop stops (the
 * guard is unref'd between waits, so it never keeps the loop alive). */
static inline void client_guard_start(uv_loop_t *loop, uv_timer_t *guard, bool *fired, uint64_t ms)
{
    uv_timer_init(loop, guard);
    guard->data = fired;
    uv_timer_start(guard, client_guard_on_fire, ms, 0);
    uv_unref((uv_handle_t *)guard);
}

/* A debug-level logger lg writing into memory (*buf, *len: open_memstream's); NULL on failure. */
static inline FILE *client_log_open(char **buf, size_t *len, mcp_logger_t *lg)
{
    FILE *f = open_memstream(buf, len);
    lg->out = f;
    lg->level = MCP_LOG_DEBUG;
    return f;
}

/* The teardown's check: lets the loop finish what freed clients left (their children stop in
 * the background), then closes guard and asserts that nothing else was left on loop, which
 * closes empty. guard is rearmed for ms (unref'd: it never keeps the loop alive, but a handle
 * that never ends is stopped by it and fails the check instead of hanging). */
static inline void client_loop_close_empty(uv_loop_t *loop, uv_timer_t *guard, bool *fired,
                                           uint64_t ms)
{
    *fired = false;
    uv_timer_start(guard, client_guard_on_fire, ms, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    assert_false(*fired);
    uv_close((uv_handle_t *)guard, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(loop), 0);
}

/* Runs loop until pred(arg) holds; guard (unref'd while idle) sets *guard_fired when it fires,
 * and then the test fails with what logf (a memstream over *logbuf) holds. */
static inline void client_run_until(uv_loop_t *loop, uv_timer_t *guard, const bool *guard_fired,
                                    FILE *logf, char *const *logbuf, bool (*pred)(void *),
                                    void *arg)
{
    client_waiter_t w = {pred, arg};
    uv_prepare_t prep;
    uv_prepare_init(loop, &prep);
    prep.data = &w;
    uv_prepare_start(&prep, client_wait_on_prepare);
    uv_ref((uv_handle_t *)guard);
    while (!pred(arg) && !*guard_fired)
        uv_run(loop, UV_RUN_DEFAULT);
    uv_unref((uv_handle_t *)guard);
    uv_close((uv_handle_t *)&prep, NULL);
    uv_run(loop, UV_RUN_NOWAIT); /* let the close finish while prep is in scope */
    if (*guard_fired) {
        fflush(logf);
        fail_msg("gave up waiting; log:\n%s", *logbuf != NULL ? *logbuf : "");
    }
}

/* What every downstream client test's environment starts with: the loop, its guard and a
 * debug log in memory. */
typedef struct client_env {
    uv_loop_t loop;
    uv_timer_t guard;
    bool guard_fired;
    FILE *logf;
    char *logbuf;
    size_t loglen;
    mcp_logger_t lg;
} client_env_t;

/* The loop, the guard started for ms, the log. */
static inline void client_env_open(client_env_t *ce, uint64_t ms)
{
    assert_int_equal(uv_loop_init(&ce->loop), 0);
    client_guard_start(&ce->loop, &ce->guard, &ce->guard_fired, ms);
    ce->logf = client_log_open(&ce->logbuf, &ce->loglen, &ce->lg);
    assert_non_null(ce->logf);
}

/* The teardown's check (client_loop_close_empty, the guard rearmed for ms), then the log. */
static inline void client_env_close(client_env_t *ce, uint64_t ms)
{
    client_loop_close_empty(&ce->loop, &ce->guard, &ce->guard_fired, ms);
    fclose(ce->logf);
    free(ce->logbuf);
}

#endif
