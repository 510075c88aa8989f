/* client_wait.h - how the downstream client tests wait: the loop runs until a condition holds,
 * under the test's guard timer, which turns a hang into a failure that shows the log.
 * Header-only (static inline); include it after <cmocka.h> and "mcp.h". */
#ifndef PTC_TEST_MCP_CLIENT_WAIT_H
#define PTC_TEST_MCP_CLIENT_WAIT_H

#include <stdbool.h>
#include <stdio.h>

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

#endif
