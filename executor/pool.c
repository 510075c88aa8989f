/*
 * The pool: a FIFO queue, at most max_concurrent children, and per run three pipes (stdout,
 * stderr, the launcher's status lines on fd 3), a timer (timeout, then kill grace, then the
 * wait for pipe EOF) and a progress timer. A run finishes when the launcher has exited and all
 * pipes reached EOF; then on_done fires and the handles close; the run's memory goes with the
 * last close callback.
 */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void start_run(exec_run_t *run);
static void maybe_finish(exec_run_t *run);
static void run_begin(exec_run_t *run);

/* ---- small helpers ------------------------------------------------------------------------ */

static void list_remove(exec_run_t **head, exec_run_t **tail, exec_run_t *run)
{
    if (run->prev)
        run->prev->next = run->next;
    else
        *head = run->next;
    if (run->next)
        run->next->prev = run->prev;
    else if (tail)
        *tail = run->prev;
    run->prev = run->next = NULL;
}

void exec__pool_maybe_free(exec_pool_t *pool)
{
    if (!pool->closing || pool->n_alive) return;
    exec__cmd_free(&pool->cmd);
    free(pool->warm_dir);
    free(pool);
}

void exec__run_free(exec_run_t *run)
{
    exec_pool_t *pool = run->pool;
    if (run->owner) exec__run_free(run->owner); /* the queued handle this sandbox ran for */
    if (run->bridge_fd >= 0) close(run->bridge_fd);
    if (run->pidfd >= 0) close(run->pidfd); /* its poll handle is closed by now */
    free(run->ro_dir);
    free(run->code);
    exec__buf_free(&run->out);
    exec__buf_free(&run->err);
    exec__files_rx_free(&run->rx);
    free(run);
    pool->n_alive--;
    exec__pool_maybe_free(pool);
}

static void on_handle_closed(uv_handle_t *h)
{
    exec_run_t *run = h->data;
    if (--run->open_handles == 0) {
        list_remove(&run->pool->active, NULL, run);
        exec__run_free(run);
    }
}

static void close_handle(exec_run_t *run, uv_handle_t *h)
{
    if (!uv_is_closing(h)) {
        run->open_handles++;
        uv_close(h, on_handle_closed);
    }
}

/* free a slot and start the next queued run */
static void pump(exec_pool_t *pool)
{
    while (!pool->closing && pool->q_head && pool->n_running < pool->max_concurrent) {
        exec_run_t *next = pool->q_head;
        list_remove(&pool->q_head, &pool->q_tail, next);
        pool->n_queued--;
        exec_run_t *w = exec__warm_take(pool, next->ro_dir);
        if (w) {
            exec__warm_adopt(w, next);
            run_begin(w);
        } else {
            start_run(next);
        }
    }
}

/* ---- killing ------------------------------------------------------------------------------ */

static void on_timer(uv_timer_t *t);

static int run_kill(exec_run_t *run, int sig)
{
    return run->zygote ? exec__zygote_signal(run, sig) : uv_process_kill(&run->proc, sig);
}

static void kill_tree(exec_run_t *run)
{
    if (!run->spawned || run->exited) return;
    if (run->pool->unsafe) {
        /* no PID namespace: the process group libuv made (detached) is the best we have */
        kill(-run->proc.pid, SIGKILL);
        return;
    }
    /* the launcher SIGKILLs init (and so the namespace) and removes the cgroup; if it cannot,
       SIGKILL it after the grace time and PDEATHSIG takes init down */
    run_kill(run, SIGTERM);
    run->phase = T_GRACE;
    uv_timer_start(&run->timer, on_timer, EXEC_KILL_GRACE_MS, 0);
}

static void on_timer(uv_timer_t *t)
{
    exec_run_t *run = t->data;
    switch (run->phase) {
    case T_TIMEOUT:
        run->timed_out = true;
        /* init still has the code's files: it kills the code and sends them, which the
           launcher's SIGTERM would prevent (init dies with the namespace) */
        if (!run->pool->unsafe && run->spawned && !run->exited && run->in_reading && !run->in_eof &&
            run_kill(run, EXEC__STOP_SIGNAL) == 0) {
            run->phase = T_FILES;
            uv_timer_start(&run->timer, on_timer, EXEC_TIMEOUT_FILES_MS, 0);
            break;
        }
        kill_tree(run);
        break;
    case T_FILES: /* init did not end in time: stop it the ordinary way */
        kill_tree(run);
        break;
    case T_GRACE:
        if (!run->exited) run_kill(run, SIGKILL);
        run->phase = T_IDLE;
        break;
    case T_EOF: /* something kept a pipe open after the end: stop waiting for it */
        for (int i = 0; i < N_PIPES; i++) {
            if (!run->eof[i]) {
                uv_read_stop((uv_stream_t *)&run->pipes[i]);
                run->eof[i] = true;
            }
        }
        if (run->in_reading && !run->in_eof) {
            uv_read_stop((uv_stream_t *)&run->in);
            run->in_eof = true;
        }
        run->phase = T_IDLE;
        maybe_finish(run);
        break;
    case T_DEFERRED:
        run->phase = T_IDLE;
        maybe_finish(run);
        break;
    case T_IDLE:
        break;
    }
}

static void on_tick(uv_timer_t *t)
{
    exec_run_t *run = t->data;
    if (run->detached || !run->cb.on_progress || run->state != RUN_RUNNING) return;
    uint64_t elapsed = (uv_hrtime() - run->start_ns) / 1000000u;
    run->cb.on_progress(run->owner ? run->owner : run, elapsed, run->out.total + run->err.total,
                        run->cb.user);
}

/* ---- the end of a run ------------------------------------------------------------------- */

static void finish(exec_run_t *run)
{
    exec_pool_t *pool = run->pool;
    bool had_slot = run->state == RUN_RUNNING;
    if (run->state == RUN_WARM) { /* died (or was let go) before a run took it */
        exec__warm_remove(pool, run);
        if (!pool->closing && !run->discarded && ++pool->warm_deaths >= EXEC_WARM_MAX_DEATHS)
            pool->warm_failed = true;
    } else if (run->took_warm) {
        pool->warm_deaths = 0;
    }
    run->state = RUN_FINISHED;
    uv_timer_stop(&run->timer);
    uv_timer_stop(&run->tick);
    if (had_slot) pool->n_running--;
    if (!run->detached && run->cb.on_done) {
        exec_result_t res;
        exec__build_result(run, &res);
        run->cb.on_done(run->owner ? run->owner : run, &res, run->cb.user);
    }
    for (int i = 0; i < N_PIPES; i++)
        close_handle(run, (uv_handle_t *)&run->pipes[i]);
    if (!uv_is_closing((uv_handle_t *)&run->in)) {
        close_handle(run, (uv_handle_t *)&run->in);
    } else if (!run->in_closed) { /* closed after the code was written, not called back yet */
        run->open_handles++;
        run->in_counted = true;
    }
    if (run->proc_init) close_handle(run, (uv_handle_t *)&run->proc);
    if (run->pidpoll_init) close_handle(run, (uv_handle_t *)&run->pidpoll);
    close_handle(run, (uv_handle_t *)&run->timer);
    close_handle(run, (uv_handle_t *)&run->tick);
    pump(pool);
    exec__warm_up(pool);
}

/* What the interpreter wrote before its end-of-program line is in the pipes already (its writes
   returned): read it now rather than wait for the loop's next turn. */
static void drain(exec_run_t *run, int i)
{
    uv_os_fd_t fd;
    if (run->eof[i] || uv_fileno((uv_handle_t *)&run->pipes[i], &fd) != 0) return;
    for (;;) {
        char *buf = run->pool->readbuf;
        ssize_t n = read(fd, buf, sizeof run->pool->readbuf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return; /* EAGAIN: all of it; EOF and errors: the loop sees them */
        exec__buf_append(i == P_OUT ? &run->out : &run->err, buf, (size_t)n);
    }
}

/* The answer before the sandbox's end (docs/sandbox.md, "The answer before the interpreter's
   end"): init said "answer STATUS" and the files' end came (there were none). The result goes
   out now; the run keeps its slot, its timeout and its handles until the launcher has exited,
   so --max-concurrent still bounds the sandboxes alive, and no callback follows. A timeout or
   a refusal already on its way takes the ordinary end. */
static void maybe_answer(exec_run_t *run)
{
    if (run->state != RUN_RUNNING || run->detached || !run->rep.answer || run->timed_out ||
        run->message[0] || run->rep.error[0] || run->pool->unsafe)
        return;
    if (run->in_reading && !run->in_eof) return;
    drain(run, P_OUT);
    drain(run, P_ERR);
    run->end_ns = uv_hrtime();
    run->answered = true;
    run->detached = true;
    exec_result_t res;
    exec__build_result(run, &res);
    run->cb.on_done(run->owner ? run->owner : run, &res, run->cb.user);
}

static void maybe_finish(exec_run_t *run)
{
    if (run->state != RUN_RUNNING && run->state != RUN_WARM) return;
    if (!run->exited || !run->eof[P_OUT] || !run->eof[P_ERR] || !run->eof[P_REP]) return;
    if (run->in_reading && !run->in_eof) return; /* the output files may still be coming */
    finish(run);
}

static void on_proc_exit(uv_process_t *p, int64_t status, int sig)
{
    exec__run_exited(p->data, status, sig);
}

void exec__run_exited(exec_run_t *run, int64_t status, int sig)
{
    if (run->exited) return;
    exec__report_resume(run); /* its last lines and EOF */
    run->exited = true;
    run->end_ns = uv_hrtime();
    run->exit_status = status;
    run->term_signal = sig;
    if (run->pool->unsafe) kill(-run->proc.pid, SIGKILL); /* grandchildren of an unsandboxed run */
    uv_timer_stop(&run->timer);
    bool all_eof =
        run->eof[P_OUT] && run->eof[P_ERR] && run->eof[P_REP] && (!run->in_reading || run->in_eof);
    if (!all_eof) {
        run->phase = T_EOF;
        uv_timer_start(&run->timer, on_timer, EXEC_EOF_WAIT_MS, 0);
    }
    maybe_finish(run);
}

/* ---- reading ------------------------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    exec_run_t *run = h->data;
    /* one buffer per pool is enough: libuv hands each read to on_read before the next alloc */
    *buf = uv_buf_init(run->pool->readbuf, sizeof run->pool->readbuf);
}

static int pipe_index(exec_run_t *run, uv_stream_t *s)
{
    for (int i = 0; i < N_PIPES; i++)
        if ((uv_stream_t *)&run->pipes[i] == s) return i;
    return -1;
}

/* the output files init sends after the run; anything out of bounds stops them */
static void on_files(exec_run_t *run, ssize_t n, const uv_buf_t *buf)
{
    size_t used;
    int code;
    if (n >= 0 && exec__files_rx_feed(&run->rx, buf->base, (size_t)n, &used, &code) == 0) return;
    uv_read_stop((uv_stream_t *)&run->in);
    run->in_eof = true;
    run->rx.active = false;
    maybe_answer(run);
    maybe_finish(run);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    exec_run_t *run = s->data;
    if (s == (uv_stream_t *)&run->in) {
        on_files(run, n, buf);
        return;
    }
    int i = pipe_index(run, s);
    if (i < 0) return;
    if (n < 0) {
        uv_read_stop(s);
        run->eof[i] = true;
        maybe_finish(run);
        return;
    }
    if (i == P_OUT) {
        exec__buf_append(&run->out, buf->base, (size_t)n);
    } else if (i == P_ERR) {
        exec__buf_append(&run->err, buf->base, (size_t)n);
    } else {
        exec__report_feed(&run->rep, buf->base, (size_t)n);
        if (run->rep.answer) maybe_answer(run);
    }
}

/* The launcher reports each layer of a sandbox as it sets it up, a line and a write each: read
   as they come, a warm sandbox's lines woke the loop ten times or more while it was made, for
   nothing until a run takes it (then the layers and a set-up error count) or it ends. */
void exec__report_resume(exec_run_t *run)
{
    uv_os_fd_t fd;
    bool later = run->rep_later;
    run->rep_later = false;
    if (!later || run->eof[P_REP] || uv_fileno((uv_handle_t *)&run->pipes[P_REP], &fd) != 0) return;
    char *buf = run->pool->readbuf;
    ssize_t n;
    do {
        n = read(fd, buf, sizeof run->pool->readbuf);
        if (n > 0) exec__report_feed(&run->rep, buf, (size_t)n);
    } while (n > 0 || (n < 0 && errno == EINTR));
    if (n == 0)
        run->eof[P_REP] = true; /* every writer is gone */
    else /* EAGAIN: the rest comes through the loop (an error shows there as EOF) */
        uv_read_start((uv_stream_t *)&run->pipes[P_REP], on_alloc, on_read);
}

/* Starts reading a spawned run's pipes; a warm sandbox's report waits (exec__report_resume). */
static void read_pipes(exec_run_t *run, int n_pipes)
{
    for (int i = 0; i < n_pipes; i++) {
        if (run->eof[i]) continue;
        if (i == P_REP && run->state == RUN_WARM)
            run->rep_later = true;
        else
            uv_read_start((uv_stream_t *)&run->pipes[i], on_alloc, on_read);
    }
}

/* ---- starting ----------------------------------------------------------------------------- */

/* ends a run that never spawned, from the loop (never inside exec_run_start) */
static void defer_refusal(exec_run_t *run, const char *msg)
{
    snprintf(run->message, sizeof run->message, "%s", msg);
    run->exited = true;
    for (int i = 0; i < N_PIPES; i++)
        run->eof[i] = true;
    run->phase = T_DEFERRED;
    uv_timer_start(&run->timer, on_timer, 0, 0);
}

void exec__on_in_closed(uv_handle_t *h)
{
    exec_run_t *run = h->data;
    run->in_closed = true;
    if (run->in_counted) on_handle_closed(h);
}

static void on_in_shut(uv_shutdown_t *req, int status)
{
    (void)req;
    (void)status; /* cancelled when the run ended first; a failure shows as EOF */
}

static void on_code_written(uv_write_t *req, int status)
{
    exec_run_t *run = req->data;
    /* the end of the run may have closed it already (the write is then cancelled) */
    if (uv_is_closing((uv_handle_t *)&run->in)) return;
    /* init reads EOF after the code, then sends the output files back on the same socket */
    run->shut.data = run;
    if (status == 0 && uv_shutdown(&run->shut, (uv_stream_t *)&run->in, on_in_shut) == 0 &&
        uv_read_start((uv_stream_t *)&run->in, on_alloc, on_read) == 0) {
        run->in_reading = true;
        return;
    }
    /* a failure means init is gone: its exit ends the run */
    uv_close((uv_handle_t *)&run->in, exec__on_in_closed);
}

/* handles of a run that is about to spawn; it joins the active list (killed by pool free) */
void exec__run_handles_init(exec_run_t *run)
{
    exec_pool_t *pool = run->pool;
    run->next = pool->active;
    if (pool->active) pool->active->prev = run;
    pool->active = run;
    uv_timer_init(pool->loop, &run->timer);
    uv_timer_init(pool->loop, &run->tick);
    run->timer.data = run->tick.data = run;
    for (int i = 0; i < N_PIPES; i++) {
        uv_pipe_init(pool->loop, &run->pipes[i], 0);
        run->pipes[i].data = run;
    }
    uv_pipe_init(pool->loop, &run->in, 0);
    run->in.data = run;
    run->proc.data = run;
    run->wreq.data = run;
}

/* Spawns the launcher (which sets the sandbox up and waits for the code on stdin) or, unsafe,
   the interpreter itself with the code. */
int exec__run_spawn(exec_run_t *run)
{
    exec_pool_t *pool = run->pool;
    char *argv[EXEC_MAX_ARGS + 8];
    size_t n = 0;
    char i_[] = "-I", s_[] = "-s", b_[] = "-B", u_[] = "-u", c_[] = "-c";
    char lib_opt[] = "--ro-lib";
    /* unsafe runs get the bridge variables here; sandboxed ones from init */
    char *env[EXEC_MAX_ENV + 3];
    char env_fd[32], env_path[(PATH_MAX + 1) * (EXEC_MAX_PATH_DIRS + 1) + 16];
    char env_safe[] = "PYTHONSAFEPATH=1";
    size_t ne = 0;
    for (; ne < pool->cmd.n_env; ne++)
        env[ne] = pool->cmd.env[ne];
    uv_stdio_container_t stdio[5];
    uv_process_options_t o;
    memset(&o, 0, sizeof o);
    if (pool->unsafe) {
        argv[n++] = pool->cmd.python;
        /* -I would ignore PYTHONPATH: docs/sandbox.md, "The interpreter's flags" */
        argv[n++] = run->ro_dir ? s_ : i_;
        argv[n++] = b_;
        argv[n++] = u_;
        argv[n++] = c_;
        argv[n++] = run->code;
        o.file = pool->cmd.python;
        o.cwd = "/tmp";
        o.stdio_count = 3;
        stdio[0].flags = UV_IGNORE;
        run->eof[P_REP] = true;
        if (run->bridge_fd >= 0) {
            snprintf(env_fd, sizeof env_fd, "%s=%d", EXEC_BRIDGE_ENV, EXEC_BRIDGE_FD);
            env[ne++] = env_fd;
        }
        if (run->ro_dir) {
            snprintf(env_path, sizeof env_path, "PYTHONPATH=%s", run->ro_dir);
            env[ne++] = env_path;
            env[ne++] = env_safe;
        }
    } else {
        for (size_t i = 0; i < pool->cmd.n_args; i++)
            argv[n++] = pool->cmd.args[i];
        if (run->ro_dir) {
            argv[n++] = lib_opt;
            argv[n++] = run->ro_dir;
        }
        o.file = pool->cmd.launcher;
        o.stdio_count = 4;
        /* both ways: the output files come back on it after the run */
        stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE;
        stdio[0].data.stream = (uv_stream_t *)&run->in;
    }
    argv[n] = NULL;
    env[ne] = NULL;
    /* Its own session and process group: killed as one (unsafe runs), and out of reach of the
     * terminal's Ctrl-C, which goes to our foreground group and must reach only ptc-mcp (its
     * shutdown gives runs their grace period, then kills them). */
    o.flags = UV_PROCESS_DETACHED;
    o.args = argv;
    o.env = env;
    o.exit_cb = on_proc_exit;
    for (int i = 0; i < N_PIPES; i++) {
        stdio[i + 1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
        stdio[i + 1].data.stream = (uv_stream_t *)&run->pipes[i];
    }
    if (pool->unsafe && run->bridge_fd >= 0) {
        /* the only descriptor passed on besides the pipes; a sandbox gets it later, with the
           code (run_begin) */
        stdio[EXEC_BRIDGE_FD].flags = UV_INHERIT_FD;
        stdio[EXEC_BRIDGE_FD].data.fd = run->bridge_fd;
        o.stdio_count = EXEC_BRIDGE_FD + 1;
    }
    o.stdio = stdio;
    if (!pool->unsafe && pool->zygote && exec__zygote_spawn(run, argv) == 0) {
        run->spawned = true;
        read_pipes(run, N_PIPES);
        return 0;
    }
    int r = uv_spawn(pool->loop, &run->proc, &o);
    run->proc_init = true; /* initialised even when spawning failed */
    /* the child has its copy (or never will): ours would keep the host from seeing EOF */
    if (pool->unsafe && run->bridge_fd >= 0) {
        close(run->bridge_fd);
        run->bridge_fd = -1;
    }
    if (r < 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "cannot start %s: %s. %s", o.file, uv_strerror(r),
                 exec_error_hint(EXEC_ESPAWN));
        defer_refusal(run, msg);
        return r;
    }
    run->spawned = true;
    read_pipes(run, pool->unsafe ? 2 : N_PIPES);
    return 0;
}

/* The header line goes with the bridge descriptor (SCM_RIGHTS) straight on the launcher's stdin
   socket, before anything else is written on it, so a plain sendmsg is in order; the stream is
   fresh and empty, so it does not block. Our copy is closed either way: the sandbox's tree then
   holds the only ones, and the host sees EOF when it is gone. */
static int send_bridge(exec_run_t *run, const char *header, size_t len)
{
    uv_os_fd_t sock;
    int r = uv_fileno((uv_handle_t *)&run->in, &sock);
    if (r == 0) {
        r = exec__send_fd(sock, header, len, run->bridge_fd);
    } else {
        errno = EBADF;
        r = -1;
    }
    int e = errno;
    close(run->bridge_fd);
    run->bridge_fd = -1;
    errno = e;
    return r;
}

/* the run takes its slot: hand over the code, start the clocks */
static void run_begin(exec_run_t *run)
{
    exec_pool_t *pool = run->pool;
    run->state = RUN_RUNNING;
    pool->n_running++;
    run->start_ns = uv_hrtime();
    if (!run->spawned) return; /* refused: the deferred end is on its way */
    if (!pool->unsafe) {
        /* CPU seconds follow the wall clock: a spinning run is stopped by either */
        const exec_files_limits_t *lim = &pool->files;
        exec__files_rx_start(&run->rx, lim);
        int hl = snprintf(run->header, sizeof run->header, "%" PRIu64 " %llu %llu %u%s\n",
                          run->timeout_ms / 1000 + 2, (unsigned long long)lim->file_bytes,
                          (unsigned long long)lim->call_bytes, lim->count,
                          run->bridge_fd >= 0 ? " B" : "");
        uv_buf_t bufs[2] = {uv_buf_init(run->header, (unsigned)hl),
                            uv_buf_init(run->code, (unsigned)strlen(run->code))};
        unsigned first = 0;
        if (run->bridge_fd >= 0) {
            if (send_bridge(run, run->header, (size_t)hl) < 0) {
                snprintf(run->message, sizeof run->message,
                         "cannot hand the bridge descriptor to the sandbox: %s", strerror(errno));
                uv_close((uv_handle_t *)&run->in, exec__on_in_closed);
                kill_tree(run); /* its timer now runs the kill grace, not the timeout */
                return;
            }
            first = 1; /* the header went with the descriptor */
        }
        if (uv_write(&run->wreq, (uv_stream_t *)&run->in, bufs + first, 2 - first,
                     on_code_written) < 0)
            uv_close((uv_handle_t *)&run->in, exec__on_in_closed);
    }
    run->phase = T_TIMEOUT;
    uv_update_time(pool->loop); /* the cached loop time may predate the spawn */
    uv_timer_start(&run->timer, on_timer, run->timeout_ms, 0);
    if (run->cb.on_progress && pool->progress_ms)
        uv_timer_start(&run->tick, on_tick, pool->progress_ms, pool->progress_ms);
}

static void start_run(exec_run_t *run)
{
    exec_pool_t *pool = run->pool;
    exec__run_handles_init(run);
    if (pool->refusing)
        defer_refusal(run, pool->refusal);
    else
        exec__run_spawn(run);
    run_begin(run);
}

exec_run_t *exec__run_alloc(exec_pool_t *pool)
{
    exec_run_t *run = calloc(1, sizeof *run);
    if (!run) return NULL;
    run->pool = pool;
    run->bridge_fd = -1;
    run->pidfd = -1;
    exec__buf_init(&run->out, pool->keep_out);
    exec__buf_init(&run->err, pool->keep_err);
    pool->n_alive++;
    return run;
}

/* ---- public ------------------------------------------------------------------------------- */

int exec_pool_new(uv_loop_t *loop, const exec_options_t *opts, exec_pool_t **out)
{
    if (!loop || !opts || !out) return EXEC_EINVAL;
    *out = NULL;
    if (exec_options_check(opts, NULL, 0, NULL) < 0) return EXEC_EINVAL;
    exec_pool_t *pool = calloc(1, sizeof *pool);
    if (!pool) return EXEC_ENOMEM;
    pool->loop = loop;
    exec_pool_set_files_limits(pool, NULL);
    int r = exec__cmd_build(opts, &pool->cmd);
    if (r < 0 && r != EXEC_ENOLAUNCHER) {
        exec__cmd_free(&pool->cmd);
        free(pool);
        return r;
    }
    unsigned cores = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
    pool->max_concurrent = opts->max_concurrent ? opts->max_concurrent : (cores ? cores : 1);
    pool->max_queue = opts->max_queue;
    pool->keep_out = opts->stdout_keep;
    pool->keep_err = opts->stderr_keep;
    pool->progress_ms = opts->progress_ms;
    pool->unsafe = opts->unsafe_no_sandbox;
    pool->test_switch = opts->test_disable_layer != NULL;
    pool->warm_idle_ms = opts->warm_idle_ms ? opts->warm_idle_ms : EXEC_WARM_IDLE_MS;
    pool->warm_target =
        opts->keep_warm ? (opts->warm_sandboxes ? opts->warm_sandboxes : EXEC_DEFAULT_WARM) : 0;
    if (pool->unsafe) {
        pool->probe.level = EXEC_SANDBOX_NONE;
        pool->probe.python_ok = true;
        snprintf(pool->probe.message, sizeof pool->probe.message,
                 "UNSAFE: --unsafe-no-sandbox is set; code runs without any isolation");
        return *out = pool, 0;
    }
    if (r == EXEC_ENOLAUNCHER) {
        pool->refusing = true;
        snprintf(pool->refusal, sizeof pool->refusal, "%s. %s", pool->cmd.error,
                 exec_error_hint(r));
        exec__copy(pool->probe.message, sizeof pool->probe.message, pool->refusal);
        return *out = pool, 0;
    }
    exec__warm_sizing_init(pool);
    r = exec_probe(opts, &pool->probe);
    if (r < 0 || ((!pool->probe.mandatory_ok || !pool->probe.python_ok) && !pool->test_switch)) {
        pool->refusing = true;
        exec__copy(pool->refusal, sizeof pool->refusal,
                   pool->probe.message[0] ? pool->probe.message : exec_error_hint(EXEC_EPROBE));
    }
    if (pool->probe.zygote && !pool->refusing && exec__zygote_start(pool) < 0)
        pool->probe.zygote = false; /* its reason says why; the launcher starts them */
    exec__warm_up(pool);
    *out = pool;
    return 0;
}

void exec_pool_free(exec_pool_t *pool)
{
    if (!pool || pool->closing) return;
    /* drop the queue first: run_free frees the pool only once closing is set */
    while (pool->q_head) {
        exec_run_t *run = pool->q_head;
        list_remove(&pool->q_head, &pool->q_tail, run);
        pool->n_queued--;
        exec__run_free(run);
    }
    pool->closing = true;
    exec__warm_sizing_close(pool);
    exec__zygote_close(pool);
    for (unsigned i = 0; i < pool->n_warm; i++) /* wait for their end */
        if (pool->warm[i]->spawned) exec__warm_ref(pool->warm[i], true);
    for (exec_run_t *run = pool->active; run; run = run->next) {
        run->detached = true;
        kill_tree(run);
    }
    exec__sessions_kill(pool);
    exec__pool_maybe_free(pool);
}

const exec_probe_t *exec_pool_probe(const exec_pool_t *pool)
{
    return pool ? &pool->probe : NULL;
}

bool exec_pool_refusing(const exec_pool_t *pool)
{
    return pool && pool->refusing;
}

unsigned exec_pool_running(const exec_pool_t *pool)
{
    return pool ? pool->n_running : 0;
}

unsigned exec_pool_queued(const exec_pool_t *pool)
{
    return pool ? pool->n_queued : 0;
}

void exec_run_opts_init(exec_run_opts_t *ro)
{
    memset(ro, 0, sizeof *ro);
    ro->bridge_fd = -1;
}

int exec_run_start(exec_pool_t *pool, const char *code, uint64_t timeout_ms,
                   const exec_callbacks_t *cb, exec_run_t **out)
{
    return exec_run_start_ex(pool, code, timeout_ms, NULL, cb, out);
}

/* the canonical form of a run's ro_dir, malloc'd; NULL when it is not a usable directory */
char *exec__canonical_dir(const char *dir)
{
    char real[PATH_MAX];
    struct stat st;
    if (!dir || dir[0] != '/' || !realpath(dir, real) || strchr(real, ':') || stat(real, &st) < 0 ||
        !S_ISDIR(st.st_mode))
        return NULL;
    return strdup(real);
}

/* The run's folders (ro_dir, then path_dirs) canonical and joined by ':' into *out (malloc'd;
   NULL when there are none): one string is the warm sandboxes' key, the launcher's --ro-lib
   and, unsafe, PYTHONPATH. A folder that is missing stays EINVAL, not ENOMEM: the caller can
   act on it. */
int exec__canonical_dirs(const exec_run_opts_t *ro, char **out)
{
    *out = NULL;
    if (!ro || (!ro->ro_dir && ro->n_path_dirs == 0)) return 0;
    if (ro->n_path_dirs > EXEC_MAX_PATH_DIRS || (ro->n_path_dirs && !ro->path_dirs))
        return EXEC_EINVAL;
    char *parts[EXEC_MAX_PATH_DIRS + 1];
    size_t n = 0, total = 0;
    int rc = 0;
    for (size_t i = 0; i <= ro->n_path_dirs && rc == 0; i++) {
        const char *d = i == 0 ? ro->ro_dir : ro->path_dirs[i - 1];
        if (i == 0 && !d) continue;
        if (!(parts[n] = exec__canonical_dir(d))) {
            rc = EXEC_EINVAL;
            break;
        }
        total += strlen(parts[n++]) + 1;
    }
    if (rc == 0 && !(*out = malloc(total))) rc = EXEC_ENOMEM;
    if (rc == 0) {
        size_t off = 0;
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(parts[i]);
            if (i) (*out)[off++] = ':';
            memcpy(*out + off, parts[i], len);
            off += len;
        }
        (*out)[off] = '\0';
    }
    for (size_t i = 0; i < n; i++)
        free(parts[i]);
    return rc;
}

static int start_checked(exec_pool_t *pool, const char *code, uint64_t timeout_ms,
                         const exec_run_opts_t *ro, const exec_callbacks_t *cb, exec_run_t **out)
{
    if (!pool || !code || !cb || !cb->on_done || timeout_ms == 0 ||
        timeout_ms > EXEC_MAX_TIMEOUT_MS)
        return EXEC_EINVAL;
    if (pool->closing) return EXEC_ECLOSING;
    size_t len = strlen(code);
    if (len > EXEC_MAX_CODE_BYTES) return EXEC_ETOOBIG;
    bool now = pool->n_running < pool->max_concurrent && !pool->q_head;
    if (!now && pool->n_queued >= pool->max_queue) return EXEC_EQUEUEFULL;
    char *ro_dir = NULL;
    int drc = exec__canonical_dirs(ro, &ro_dir);
    if (drc != 0) return drc;
    char *copy = malloc(len + 1);
    if (!copy) {
        free(ro_dir);
        return EXEC_ENOMEM;
    }
    memcpy(copy, code, len + 1);
    /* a warm sandbox made for the same ro_dir (the bridge comes with the code either way) */
    exec_run_t *run = now ? exec__warm_take(pool, ro_dir) : NULL;
    bool warm = run != NULL;
    if (!run && !(run = exec__run_alloc(pool))) {
        free(copy);
        free(ro_dir);
        return EXEC_ENOMEM;
    }
    run->code = copy;
    free(run->ro_dir); /* a warm one's copy of the same path */
    run->ro_dir = ro_dir;
    if (ro && ro->bridge_fd >= 0) run->bridge_fd = ro->bridge_fd;
    run->timeout_ms = timeout_ms;
    run->cb = *cb;
    if (warm) {
        run_begin(run); /* the next warm sandbox is made when this run ends, not competing */
    } else if (now) {
        start_run(run);
    } else {
        run->state = RUN_QUEUED;
        run->prev = pool->q_tail;
        if (pool->q_tail)
            pool->q_tail->next = run;
        else
            pool->q_head = run;
        pool->q_tail = run;
        pool->n_queued++;
    }
    if (out) *out = run;
    return 0;
}

int exec_run_start_ex(exec_pool_t *pool, const char *code, uint64_t timeout_ms,
                      const exec_run_opts_t *ro, const exec_callbacks_t *cb, exec_run_t **out)
{
    if (out) *out = NULL;
    int r = start_checked(pool, code, timeout_ms, ro, cb, out);
    /* on success the run owns the descriptor; on failure nobody else will close it */
    if (r < 0 && ro && ro->bridge_fd >= 0) close(ro->bridge_fd);
    return r;
}

void exec_run_cancel(exec_run_t *run)
{
    if (!run || run->detached) return;
    run->detached = true;
    if (run->taker) { /* a queued request a warm sandbox took over */
        exec_run_cancel(run->taker);
        return;
    }
    if (run->state == RUN_QUEUED) {
        exec_pool_t *pool = run->pool;
        list_remove(&pool->q_head, &pool->q_tail, run);
        pool->n_queued--;
        exec__run_free(run);
        return;
    }
    /* running: the tree dies now; the handles close through the normal end of the run, which
       no longer calls back */
    kill_tree(run);
}

int exec_run_output(const exec_run_t *run, exec_output_t *out, exec_output_t *err)
{
    if (!run || !out || !err) return EXEC_EINVAL;
    if (run->taker) run = run->taker; /* a queued request a warm sandbox took over */
    *out = exec__buf_output(&run->out);
    *err = exec__buf_output(&run->err);
    return 0;
}
