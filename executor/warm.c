/* Warm sandboxes (docs/sandbox.md, "Warm start"): launchers set up ahead, each with its
   interpreter started and waiting for the code, for runs of the pool's current ro_dir. */
#include "internal.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* an idle warm sandbox must not keep uv_run alive; a run or pool free takes it back */
void exec__warm_ref(exec_run_t *run, bool ref)
{
    uv_handle_t *hs[] = {(uv_handle_t *)&run->proc,     (uv_handle_t *)&run->pidpoll,
                         (uv_handle_t *)&run->pipes[0], (uv_handle_t *)&run->pipes[1],
                         (uv_handle_t *)&run->pipes[2], (uv_handle_t *)&run->in};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
        if (hs[i] == (uv_handle_t *)&run->proc && !run->proc_init) continue;
        if (hs[i] == (uv_handle_t *)&run->pidpoll && !run->pidpoll_init) continue;
        if (ref)
            uv_ref(hs[i]);
        else
            uv_unref(hs[i]);
    }
}

void exec__warm_remove(exec_pool_t *pool, exec_run_t *run)
{
    for (unsigned i = 0; i < pool->n_warm; i++) {
        if (pool->warm[i] != run) continue;
        memmove(&pool->warm[i], &pool->warm[i + 1], (pool->n_warm - i - 1) * sizeof run);
        pool->n_warm--;
        return;
    }
}

bool exec__same_dir(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* Lets the newest warm sandboxes go until keep are left: each one's init reads EOF instead of
   code, kills the waiting interpreter and exits. The loop waits for them (they are referenced
   again). */
static void warm_trim(exec_pool_t *pool, unsigned keep)
{
    while (pool->n_warm > keep) {
        exec_run_t *run = pool->warm[--pool->n_warm];
        run->discarded = true;
        if (run->spawned) exec__warm_ref(run, true);
        if (!uv_is_closing((uv_handle_t *)&run->in))
            uv_close((uv_handle_t *)&run->in, exec__on_in_closed);
    }
}

/* The zygote ended: the sandboxes it forked die with it (their launchers' PDEATHSIG), so none
   may be taken; the launcher makes the next ones. */
void exec__warm_drop_zygote(exec_pool_t *pool)
{
    unsigned k = 0;
    for (unsigned i = 0; i < pool->n_warm; i++) {
        exec_run_t *run = pool->warm[i];
        if (!run->zygote) {
            pool->warm[k++] = run;
            continue;
        }
        run->discarded = true;
        if (run->spawned) exec__warm_ref(run, true);
        if (!uv_is_closing((uv_handle_t *)&run->in))
            uv_close((uv_handle_t *)&run->in, exec__on_in_closed);
    }
    pool->n_warm = k;
    exec__warm_up(pool);
}

static void warm_discard(exec_pool_t *pool)
{
    warm_trim(pool, 0);
}

/* idle: fewer sandboxes (each holds about 12 MB), down to one */
static void on_warm_idle(uv_timer_t *t)
{
    exec_pool_t *pool = t->data;
    if (pool->warm_want > 1) pool->warm_want /= 2;
    warm_trim(pool, pool->warm_want);
    if (pool->warm_want > 1) uv_timer_start(t, on_warm_idle, pool->warm_idle_ms, 0);
}

static void on_warm_idle_closed(uv_handle_t *h)
{
    exec_pool_t *pool = h->data;
    pool->n_alive--;
    exec__pool_maybe_free(pool);
}

void exec__warm_sizing_init(exec_pool_t *pool)
{
    pool->warm_want = pool->warm_target < EXEC_WARM_START ? pool->warm_target : EXEC_WARM_START;
    if (!pool->warm_target || uv_timer_init(pool->loop, &pool->warm_idle) != 0) return;
    pool->warm_idle.data = pool;
    uv_unref((uv_handle_t *)&pool->warm_idle);
    pool->warm_idle_init = true;
    pool->n_alive++; /* the close callback is the last thing that touches the pool */
    uv_timer_start(&pool->warm_idle, on_warm_idle, pool->warm_idle_ms, 0);
}

void exec__warm_sizing_close(exec_pool_t *pool)
{
    if (!pool->warm_idle_init) return;
    pool->warm_idle_init = false;
    uv_close((uv_handle_t *)&pool->warm_idle, on_warm_idle_closed);
}

/* a run came: found is whether a warm sandbox was there for it */
static void warm_demand(exec_pool_t *pool, bool found)
{
    unsigned want = found ? pool->warm_want + (pool->n_warm == 0) : pool->warm_want * 2;
    pool->warm_want = want < pool->warm_target ? want : pool->warm_target;
    if (pool->warm_idle_init) uv_timer_start(&pool->warm_idle, on_warm_idle, pool->warm_idle_ms, 0);
}

/* Keeps warm_want sandboxes set up ahead, each with its interpreter started and waiting for
   code, for runs whose ro_dir is warm_dir: a run then pays only for its own code and the end.
   Called when a run ends (its result is out), so the set-up does not compete with it. */
void exec__warm_up(exec_pool_t *pool)
{
    while (pool->n_warm < pool->warm_want && !pool->unsafe && !pool->refusing && !pool->closing &&
           !pool->warm_failed) {
        exec_run_t *run = exec__run_alloc(pool);
        if (!run) return;
        if (pool->warm_dir && !(run->ro_dir = strdup(pool->warm_dir))) {
            exec__run_free(run);
            return;
        }
        run->state = RUN_WARM;
        run->detached = true; /* nobody to call back until a run takes it */
        pool->warm[pool->n_warm++] = run;
        exec__run_handles_init(run);
        if (exec__run_spawn(run) == 0) exec__warm_ref(run, false);
    }
}

/* Whether a warm sandbox is still there to take, from what the kernel knows now rather than
   what the loop has seen: a sandbox that died while idle (a stray kill, the OOM killer) is
   seen by the pool only at the loop's next turn (its process exit, its pidfd, its pipes), and a
   run started before then would be handed the dead one. Its report was just read
   (exec__report_resume): the interpreter's end in it, or every writer of the status pipe gone,
   says it died; else its launcher's own end, not yet reaped (WNOWAIT leaves that to libuv) or
   its pidfd readable (the zygote reaps it). Two system calls at most per take. */
static bool warm_alive(exec_run_t *run)
{
    if (run->eof[P_REP] || run->rep.exit || run->rep.sig || run->rep.answer) return false;
    if (run->pidpoll_init) {
        uv_os_fd_t fd;
        if (uv_fileno((uv_handle_t *)&run->pidpoll, &fd) != 0) return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        return poll(&p, 1, 0) == 0;
    }
    if (run->proc_init && run->proc.pid > 0) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)run->proc.pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0)
            return si.si_pid == 0;
    }
    return true;
}

/* The oldest warm sandbox made for ro_dir and still alive, taken out of the set; NULL when
   none. A run with another ro_dir makes that its key: the old ones go, new ones follow. */
exec_run_t *exec__warm_take(exec_pool_t *pool, const char *ro_dir)
{
    if (!pool->warm_target || pool->unsafe || pool->refusing) return NULL;
    if (!exec__same_dir(pool->warm_dir, ro_dir)) {
        char *key = ro_dir ? strdup(ro_dir) : NULL;
        if (ro_dir && !key) return NULL;
        warm_discard(pool);
        free(pool->warm_dir);
        pool->warm_dir = key;
        return NULL;
    }
    for (unsigned i = 0; i < pool->n_warm; i++) {
        exec_run_t *run = pool->warm[i];
        if (run->spawned) exec__report_resume(run); /* a set-up error, and the layers */
        if (run->exited || !run->spawned || run->rep.error[0] || !warm_alive(run)) continue;
        exec__warm_remove(pool, run);
        run->took_warm = true;
        run->detached = false;
        exec__warm_ref(run, true);
        warm_demand(pool, true);
        return run;
    }
    warm_demand(pool, false);
    return NULL;
}

/* Moves a run's request into a warm sandbox's run, which then runs it; the request's handle
   stays the caller's (callbacks and cancel go through it) and is freed with the sandbox's. */
void exec__warm_adopt(exec_run_t *w, exec_run_t *req)
{
    w->code = req->code;
    req->code = NULL;
    free(w->ro_dir);
    w->ro_dir = req->ro_dir;
    req->ro_dir = NULL;
    w->bridge_fd = req->bridge_fd;
    req->bridge_fd = -1;
    w->timeout_ms = req->timeout_ms;
    w->cb = req->cb;
    w->owner = req;
    req->taker = w;
    req->state = RUN_RUNNING; /* its slot is counted on w */
}

int exec_pool_warm_for(exec_pool_t *pool, const char *ro_dir)
{
    exec_run_opts_t ro;
    exec_run_opts_init(&ro);
    ro.ro_dir = ro_dir;
    return exec_pool_warm_for_ex(pool, &ro);
}

int exec_pool_warm_for_ex(exec_pool_t *pool, const exec_run_opts_t *ro)
{
    if (!pool) return EXEC_EINVAL;
    if (pool->closing) return EXEC_ECLOSING;
    char *dir = NULL;
    int rc = exec__canonical_dirs(ro, &dir);
    if (rc != 0) return rc;
    if (!exec__same_dir(pool->warm_dir, dir)) {
        warm_discard(pool);
        free(pool->warm_dir);
        pool->warm_dir = dir;
        dir = NULL;
        exec__warm_up(pool);
    }
    free(dir);
    return 0;
}
