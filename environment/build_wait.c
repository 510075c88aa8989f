/* Runs waiting for a build: each waiter has a deadline, one timer of ENV_WAIT_TICK_MS checks
 * them while any is waiting, and the end of the build releases them all (env__finish). */
#include <stdlib.h>

#include "build_internal.h"

struct env_waiter {
    env_t *env;           /* NULL once env_free let it go: its owner frees it */
    uint64_t deadline_ms; /* uv_now */
    void (*cb)(void *data);
    void *data;
    struct env_waiter *next;
};

void env__release_waiters(env_t *env, bool all)
{
    uint64_t now = uv_now(env->loop);
    /* a waiter added after the build ended has nothing more to wait for */
    if (env->state != ENV_STATE_BUILDING) all = true;
    env_waiter_t **p = &env->waiters;
    while (*p != NULL && !env->closing) {
        env_waiter_t *w = *p;
        if (!all && w->deadline_ms > now) {
            p = &w->next;
            continue;
        }
        *p = w->next;
        void (*cb)(void *) = w->cb;
        void *data = w->data;
        free(w);
        cb(data); /* may add or cancel other waiters: the list is re-read */
        p = &env->waiters;
    }
    if (env->waiters == NULL && env->tick_on) {
        uv_timer_stop(&env->tick);
        env->tick_on = false;
    }
}

static void on_tick(uv_timer_t *t)
{
    env__release_waiters(t->data, false);
}

env_waiter_t *env_wait(env_t *env, uint64_t max_ms, void (*cb)(void *data), void *data)
{
    if (env == NULL || cb == NULL || env->closing) return NULL;
    if (!env->tick_open) {
        if (uv_timer_init(env->loop, &env->tick) != 0) return NULL;
        env->tick.data = env;
        env->tick_open = true;
        env->handles++;
    }
    env_waiter_t *w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    w->env = env;
    w->deadline_ms = uv_now(env->loop) + max_ms;
    w->cb = cb;
    w->data = data;
    w->next = env->waiters;
    env->waiters = w;
    if (!env->tick_on) {
        uv_timer_start(&env->tick, on_tick, ENV_WAIT_TICK_MS, ENV_WAIT_TICK_MS);
        env->tick_on = true;
    }
    return w;
}

void env_wait_cancel(env_waiter_t *w)
{
    if (w == NULL) return;
    if (w->env == NULL) {
        free(w);
        return;
    }
    for (env_waiter_t **p = &w->env->waiters; *p != NULL; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            free(w);
            return;
        }
}

void env__drop_waiters(env_t *env)
{
    /* Waiting requests are cancelled by their owners (which may end after this); a waiter
       still held is only detached, so that its owner's cancel frees it safely. */
    while (env->waiters != NULL) {
        env_waiter_t *w = env->waiters;
        env->waiters = w->next;
        w->env = NULL;
        w->next = NULL;
    }
    env->tick_on = false;
}
