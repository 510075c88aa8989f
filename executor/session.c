/*
 * Sessions: one launcher started with --session per session, its stdin socket (ctl) carrying
 * cells one way and files plus the end of each cell the other (launcher/launch_session.c has
 * the protocol). stdout, stderr and the status pipe are read as a run's are. A cell ends at
 * the "D" line: init sends it after the driver flushed the cell's output, so the bytes still
 * in the pipes then are the cell's; they are drained at once, before the result is built.
 *
 * Everything from ctl is checked against the bounds this side announced; a breach ends the
 * session (the sandbox is hostile). The handle lives until exec_session_close, whichever
 * comes first of the sandbox's end and the close; the memory goes with the last of both.
 */
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { H_OUT, H_ERR, H_REP, H_CTL, N_SES_PIPES };
enum ses_phase { SP_IDLE, SP_TIMEOUT, SP_INTERRUPT, SP_KILL, SP_EOF };

struct exec_session {
    exec_pool_t *pool;
    exec_session_t *prev, *next;
    uv_process_t proc;
    uv_pipe_t pipes[N_SES_PIPES]; /* H_CTL is the launcher's stdin, a socket both ways */
    uv_timer_t timer, tick;
    enum ses_phase phase;
    int open_handles;
    bool proc_init, spawned, exited, handles_closing;
    bool eof[N_SES_PIPES];
    bool user_closed; /* exec_session_close was called: no callbacks, free at the end */
    bool ended;
    char end_reason[700];
    int64_t exit_status;
    int term_signal;
    uint64_t last_used;

    /* the running cell */
    bool busy;
    exec_session_callbacks_t cb;
    uint64_t timeout_ms, start_ns;
    bool interrupt_sent, cancelled, killed;
    exec__outbuf_t out, err;
    struct exec__files_rx rx; /* the files of the running cell */

    struct exec__report rep;
    char message[700];
    char signame[16];
    char readbuf[EXEC_READ_CHUNK];
};

static void ses_end(exec_session_t *s);

/* ---- lifetime ----------------------------------------------------------------------------- */

static void ses_free(exec_session_t *s)
{
    exec_pool_t *pool = s->pool;
    if (s->prev)
        s->prev->next = s->next;
    else
        pool->sessions = s->next;
    if (s->next) s->next->prev = s->prev;
    exec__files_rx_free(&s->rx);
    exec__buf_free(&s->out);
    exec__buf_free(&s->err);
    free(s);
    pool->n_alive--;
    exec__pool_maybe_free(pool);
}

static void on_closed(uv_handle_t *h)
{
    exec_session_t *s = h->data;
    if (--s->open_handles == 0 && s->user_closed) ses_free(s);
}

static void close_all(exec_session_t *s)
{
    if (s->handles_closing) return;
    s->handles_closing = true;
    uv_handle_t *hs[] = {(uv_handle_t *)&s->pipes[0], (uv_handle_t *)&s->pipes[1],
                         (uv_handle_t *)&s->pipes[2], (uv_handle_t *)&s->pipes[3],
                         (uv_handle_t *)&s->timer,    (uv_handle_t *)&s->tick,
                         (uv_handle_t *)&s->proc};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
        if (hs[i] == (uv_handle_t *)&s->proc && !s->proc_init) continue;
        if (uv_is_closing(hs[i])) continue;
        s->open_handles++;
        uv_close(hs[i], on_closed);
    }
    if (s->open_handles == 0 && s->user_closed) ses_free(s);
}

static void on_timer(uv_timer_t *t);

/* the launcher kills init and with it the session; SIGKILL if it does not within the grace */
static void kill_session(exec_session_t *s)
{
    if (!s->spawned || s->exited || s->phase == SP_KILL) return;
    uv_process_kill(&s->proc, SIGTERM);
    s->phase = SP_KILL;
    uv_timer_start(&s->timer, on_timer, EXEC_KILL_GRACE_MS, 0);
}

/* ends the session because the sandbox broke the protocol or our own resources ran out */
static void fail_session(exec_session_t *s, const char *why)
{
    if (!s->message[0]) snprintf(s->message, sizeof s->message, "%s", why);
    s->killed = true;
    kill_session(s);
}

/* ---- the end of a cell -------------------------------------------------------------------- */

static void cell_progress(uv_timer_t *t)
{
    exec_session_t *s = t->data;
    if (!s->busy || s->user_closed || !s->cb.on_progress) return;
    s->cb.on_progress(s, (uv_hrtime() - s->start_ns) / 1000000u, s->out.total + s->err.total,
                      s->cb.user);
}

/* what is in a pipe now, read without waiting (the descriptor is non-blocking) */
static void drain(exec_session_t *s, int i, exec__outbuf_t *b)
{
    uv_os_fd_t fd;
    /* not readbuf: the control bytes being parsed now are in it */
    char chunk[16384];
    if (s->eof[i] || uv_fileno((uv_handle_t *)&s->pipes[i], &fd) < 0) return;
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        exec__buf_append(b, chunk, (size_t)n);
    }
}

static void cell_done(exec_session_t *s, exec_result_t *res)
{
    s->busy = false;
    s->last_used = uv_now(s->pool->loop);
    uv_timer_stop(&s->tick);
    if (s->phase == SP_TIMEOUT || s->phase == SP_INTERRUPT) {
        uv_timer_stop(&s->timer);
        s->phase = SP_IDLE;
    }
    res->out = exec__buf_output(&s->out);
    res->err = exec__buf_output(&s->err);
    res->duration_ms = (uv_hrtime() - s->start_ns) / 1000000u;
    res->sandbox = exec__level(s->rep.layers);
    res->files = s->rx.n_files ? s->rx.files : NULL;
    res->n_files = s->rx.n_files;
    res->cancelled = s->cancelled;
    if (!s->user_closed && s->cb.on_done) s->cb.on_done(s, res, s->cb.user);
    exec__files_rx_clear(&s->rx);
}

/* "D EXIT": the cell ended and the session lives on */
static void cell_finished(exec_session_t *s, int code)
{
    if (!s->busy) {
        fail_session(s, "the sandbox ended a cell that was not running");
        return;
    }
    drain(s, H_OUT, &s->out);
    drain(s, H_ERR, &s->err);
    exec_result_t res;
    memset(&res, 0, sizeof res);
    res.exit_code = code;
    if (s->interrupt_sent && code != 0) {
        res.status = EXEC_STATUS_TIMEOUT;
        res.interrupted = true;
    } else {
        res.status = code == 0 ? EXEC_STATUS_OK : EXEC_STATUS_ERROR;
    }
    cell_done(s, &res);
}

/* the sandbox is gone: why, for this cell's result and for every later use */
static void ses_end(exec_session_t *s)
{
    if (s->ended) return;
    s->ended = true;
    uv_timer_stop(&s->timer);
    s->phase = SP_IDLE;
    exec_result_t res;
    memset(&res, 0, sizeof res);
    res.exit_code = -1;
    res.session_ended = true;
    const char *why;
    char buf[300];
    if (s->message[0]) {
        why = s->message;
        res.status =
            s->killed && s->busy && s->interrupt_sent ? EXEC_STATUS_TIMEOUT : EXEC_STATUS_ERROR;
        res.message = s->message;
    } else if (s->rep.error[0]) {
        snprintf(s->message, sizeof s->message,
                 "sandbox setup failed: %s. Run `ptc-mcp --check`; docs/sandbox.md explains each "
                 "layer.",
                 s->rep.error);
        why = s->message;
        res.status = EXEC_STATUS_REFUSED;
        res.message = s->message;
    } else if (s->rep.oom) {
        why = "the session ran out of memory (the memory limit was hit)";
        res.status = EXEC_STATUS_OOM;
        res.signal = s->rep.sig ? s->rep.code : 0;
    } else if (s->rep.sig) {
        snprintf(buf, sizeof buf, "the interpreter was killed by %s",
                 exec__signal_name(s->rep.code, s->signame, sizeof s->signame));
        why = buf;
        res.status = EXEC_STATUS_KILLED;
        res.signal = s->rep.code;
    } else if (s->rep.exit) {
        snprintf(buf, sizeof buf, "the interpreter exited with status %d", s->rep.code);
        why = buf;
        res.exit_code = s->rep.code;
        res.status = s->rep.code == 0 ? EXEC_STATUS_OK : EXEC_STATUS_ERROR;
    } else {
        snprintf(buf, sizeof buf,
                 "the sandbox launcher ended without a report (exit %lld, signal %d)",
                 (long long)s->exit_status, s->term_signal);
        why = buf;
        res.status = EXEC_STATUS_ERROR;
        res.signal = s->term_signal;
    }
    snprintf(s->end_reason, sizeof s->end_reason, "%s", why);
    if (res.signal) res.signal_name = exec__signal_name(res.signal, s->signame, sizeof s->signame);
    if (s->busy) {
        if (!res.message) res.message = s->end_reason;
        cell_done(s, &res);
    }
    close_all(s);
}

static void maybe_end(exec_session_t *s)
{
    if (s->exited && s->eof[H_OUT] && s->eof[H_ERR] && s->eof[H_REP] && s->eof[H_CTL]) ses_end(s);
}

static void on_timer(uv_timer_t *t)
{
    exec_session_t *s = t->data;
    switch (s->phase) {
    case SP_TIMEOUT: {       /* KeyboardInterrupt first */
        char line[] = "I\n"; /* uv_try_write copies nothing: it writes now or not at all */
        uv_buf_t b = uv_buf_init(line, 2);
        s->interrupt_sent = true;
        if (uv_try_write((uv_stream_t *)&s->pipes[H_CTL], &b, 1) != 2) {
            fail_session(s, "the cell timed out and could not be interrupted; the session was "
                            "killed");
            return;
        }
        s->phase = SP_INTERRUPT;
        uv_timer_start(&s->timer, on_timer, EXEC_SESSION_INTERRUPT_GRACE_MS, 0);
        break;
    }
    case SP_INTERRUPT:
        snprintf(s->message, sizeof s->message,
                 "the cell did not stop within %u ms of KeyboardInterrupt; the session was killed",
                 EXEC_SESSION_INTERRUPT_GRACE_MS);
        s->killed = true;
        kill_session(s);
        break;
    case SP_KILL:
        if (!s->exited) uv_process_kill(&s->proc, SIGKILL);
        s->phase = SP_IDLE;
        break;
    case SP_EOF: /* something kept a pipe open after the end */
        for (int i = 0; i < N_SES_PIPES; i++) {
            if (!s->eof[i]) uv_read_stop((uv_stream_t *)&s->pipes[i]);
            s->eof[i] = true;
        }
        s->phase = SP_IDLE;
        maybe_end(s);
        break;
    case SP_IDLE:
        break;
    }
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    exec_session_t *s = p->data;
    s->exited = true;
    s->exit_status = status;
    s->term_signal = sig;
    uv_timer_stop(&s->timer);
    s->phase = SP_EOF;
    uv_timer_start(&s->timer, on_timer, EXEC_EOF_WAIT_MS, 0);
    maybe_end(s);
}

/* ---- files from ctl ----------------------------------------------------------------------- */

static void ctl_feed(exec_session_t *s, const char *p, size_t n)
{
    while (n && !s->killed) {
        size_t used;
        int code;
        int r = exec__files_rx_feed(&s->rx, p, n, &used, &code);
        if (r == 0) return;
        if (r < 0) {
            fail_session(s, r == EXEC_ENOMEM
                                ? "out of memory for the files the cell wrote; the session was "
                                  "ended"
                                : "the sandbox broke the session protocol (files out); the "
                                  "session was killed");
            return;
        }
        cell_finished(s, code);
        p += used;
        n -= used;
    }
}

/* ---- reading ------------------------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    exec_session_t *s = h->data;
    *buf = uv_buf_init(s->readbuf, sizeof s->readbuf);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    exec_session_t *s = st->data;
    int i = 0;
    while (i < N_SES_PIPES && (uv_stream_t *)&s->pipes[i] != st)
        i++;
    if (i == N_SES_PIPES) return;
    if (n < 0) {
        uv_read_stop(st);
        s->eof[i] = true;
        maybe_end(s);
        return;
    }
    if (i == H_OUT)
        exec__buf_append(&s->out, buf->base, (size_t)n);
    else if (i == H_ERR)
        exec__buf_append(&s->err, buf->base, (size_t)n);
    else if (i == H_REP)
        exec__report_feed(&s->rep, buf->base, (size_t)n);
    else
        ctl_feed(s, buf->base, (size_t)n);
}

/* ---- starting ----------------------------------------------------------------------------- */

/* "B\n" with the bridge (SCM_RIGHTS), first on a fresh socket, so a plain sendmsg is in order */
static int send_bridge(exec_session_t *s, int bridge_fd)
{
    uv_os_fd_t sock;
    if (uv_fileno((uv_handle_t *)&s->pipes[H_CTL], &sock) < 0) return -1;
    return exec__send_fd(sock, "B\n", 2, bridge_fd);
}

static int ses_spawn(exec_session_t *s, char *ro_dir)
{
    exec_pool_t *pool = s->pool;
    char *argv[EXEC_MAX_ARGS + 8];
    size_t n = 0;
    char session_opt[] = "--session", lib_opt[] = "--ro-lib";
    for (size_t i = 0; i < pool->cmd.n_args; i++)
        argv[n++] = pool->cmd.args[i];
    argv[n++] = session_opt;
    if (ro_dir) {
        argv[n++] = lib_opt;
        argv[n++] = ro_dir;
    }
    argv[n] = NULL;
    uv_stdio_container_t stdio[4];
    stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE;
    stdio[0].data.stream = (uv_stream_t *)&s->pipes[H_CTL];
    for (int i = 0; i < 3; i++) {
        stdio[i + 1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
        stdio[i + 1].data.stream = (uv_stream_t *)&s->pipes[i];
    }
    uv_process_options_t o;
    memset(&o, 0, sizeof o);
    o.file = pool->cmd.launcher;
    o.args = argv;
    o.env = pool->cmd.env;
    o.exit_cb = on_exit_cb;
    o.stdio_count = 4;
    o.stdio = stdio;
    o.flags = UV_PROCESS_DETACHED; /* as a run's launcher (pool.c): out of the terminal's Ctrl-C */
    int r = uv_spawn(pool->loop, &s->proc, &o);
    s->proc_init = true;
    if (r < 0) return r;
    s->spawned = true;
    for (int i = 0; i < N_SES_PIPES; i++)
        uv_read_start((uv_stream_t *)&s->pipes[i], on_alloc, on_read);
    return 0;
}

static int session_new(exec_pool_t *pool, const exec_session_opts_t *so, exec_session_t **out)
{
    if (!pool || !out) return EXEC_EINVAL;
    if (pool->closing) return EXEC_ECLOSING;
    if (pool->unsafe) return EXEC_EUNSUPPORTED;
    if (pool->refusing) return EXEC_EREFUSED;
    char *ro_dir = NULL;
    if (so) {
        exec_run_opts_t ro;
        exec_run_opts_init(&ro);
        ro.ro_dir = so->ro_dir;
        ro.path_dirs = so->path_dirs;
        ro.n_path_dirs = so->n_path_dirs;
        int rc = exec__canonical_dirs(&ro, &ro_dir);
        if (rc != 0) return rc;
    }
    exec_session_t *s = calloc(1, sizeof *s);
    if (!s) {
        free(ro_dir);
        return EXEC_ENOMEM;
    }
    s->pool = pool;
    pool->n_alive++;
    s->next = pool->sessions;
    if (pool->sessions) pool->sessions->prev = s;
    pool->sessions = s;
    uv_timer_init(pool->loop, &s->timer);
    uv_timer_init(pool->loop, &s->tick);
    s->timer.data = s->tick.data = s->proc.data = s;
    for (int i = 0; i < N_SES_PIPES; i++) {
        uv_pipe_init(pool->loop, &s->pipes[i], 0);
        s->pipes[i].data = s;
    }
    int r = ses_spawn(s, ro_dir);
    free(ro_dir);
    if (r == 0 && so && so->bridge_fd >= 0 && send_bridge(s, so->bridge_fd) < 0) r = UV_EPIPE;
    if (r < 0) {
        s->user_closed = true;
        if (s->spawned) uv_process_kill(&s->proc, SIGKILL);
        close_all(s);
        return EXEC_ESPAWN;
    }
    s->last_used = uv_now(pool->loop);
    *out = s;
    return 0;
}

/* ---- public ------------------------------------------------------------------------------- */

int exec_pool_set_files_limits(exec_pool_t *pool, const exec_files_limits_t *lim)
{
    if (!pool) return EXEC_EINVAL;
    exec_files_limits_t l = lim ? *lim : (exec_files_limits_t){0};
    if (!l.file_bytes) l.file_bytes = EXEC_FILES_MAX_FILE_BYTES;
    if (!l.call_bytes) l.call_bytes = EXEC_FILES_MAX_CALL_BYTES;
    if (!l.count) l.count = EXEC_FILES_MAX_COUNT;
    if (exec_options_check(NULL, &l, 0, NULL) < 0) return EXEC_EINVAL;
    pool->files = l;
    return 0;
}

void exec_session_opts_init(exec_session_opts_t *so)
{
    memset(so, 0, sizeof *so);
    so->bridge_fd = -1;
}

int exec_session_new(exec_pool_t *pool, const exec_session_opts_t *so, exec_session_t **out)
{
    if (out) *out = NULL;
    int r = session_new(pool, so, out);
    /* the sandbox holds its own copy now (or never will) */
    if (so && so->bridge_fd >= 0) close(so->bridge_fd);
    return r;
}

typedef struct {
    uv_write_t req;
    char *buf;
} ses_write_t;

static void on_cell_written(uv_write_t *req, int status)
{
    ses_write_t *w = (ses_write_t *)req;
    exec_session_t *s = req->data;
    free(w->buf);
    free(w);
    if (status < 0 && status != UV_ECANCELED) kill_session(s); /* init is gone: its end says why */
}

int exec_session_run(exec_session_t *s, const char *code, uint64_t timeout_ms,
                     const exec_session_callbacks_t *cb)
{
    if (!s || !code || !cb || !cb->on_done || s->user_closed || timeout_ms == 0 ||
        timeout_ms > EXEC_MAX_TIMEOUT_MS)
        return EXEC_EINVAL;
    if (s->ended || s->killed) return EXEC_ESESSIONENDED;
    if (s->busy) return EXEC_EBUSY;
    size_t len = strlen(code);
    if (len > EXEC_MAX_CODE_BYTES) return EXEC_ETOOBIG;
    exec_files_limits_t lim = s->pool->files;
    char head[96];
    int hl =
        snprintf(head, sizeof head, "C %zu %llu %llu %u\n", len, (unsigned long long)lim.file_bytes,
                 (unsigned long long)lim.call_bytes, lim.count);
    ses_write_t *w = malloc(sizeof *w);
    char *buf = malloc((size_t)hl + len);
    if (!w || !buf) {
        free(w);
        free(buf);
        return EXEC_ENOMEM;
    }
    memcpy(buf, head, (size_t)hl);
    memcpy(buf + hl, code, len);
    w->buf = buf;
    w->req.data = s;
    uv_buf_t b = uv_buf_init(buf, (unsigned)((size_t)hl + len));
    if (uv_write(&w->req, (uv_stream_t *)&s->pipes[H_CTL], &b, 1, on_cell_written) < 0) {
        free(buf);
        free(w);
        return EXEC_ESESSIONENDED;
    }
    exec__buf_free(&s->out);
    exec__buf_free(&s->err);
    exec__buf_init(&s->out, s->pool->keep_out);
    exec__buf_init(&s->err, s->pool->keep_err);
    exec__files_rx_start(&s->rx, &lim);
    s->busy = true;
    s->cb = *cb;
    s->timeout_ms = timeout_ms;
    s->interrupt_sent = s->cancelled = false;
    s->start_ns = uv_hrtime();
    s->phase = SP_TIMEOUT;
    uv_update_time(s->pool->loop);
    uv_timer_start(&s->timer, on_timer, timeout_ms, 0);
    if (cb->on_progress && s->pool->progress_ms)
        uv_timer_start(&s->tick, cell_progress, s->pool->progress_ms, s->pool->progress_ms);
    return 0;
}

int exec_session_cancel(exec_session_t *s)
{
    if (!s || !s->busy || s->user_closed) return EXEC_EINVAL;
    s->cancelled = true;
    if (s->phase == SP_TIMEOUT) { /* interrupt now, the grace and the kill follow as usual */
        uv_timer_stop(&s->timer);
        on_timer(&s->timer);
    }
    return 0;
}

int exec_session_output(const exec_session_t *s, exec_output_t *out, exec_output_t *err)
{
    if (!s || !out || !err || !s->busy) return EXEC_EINVAL;
    *out = exec__buf_output(&s->out);
    *err = exec__buf_output(&s->err);
    return 0;
}

bool exec_session_busy(const exec_session_t *s)
{
    return s && s->busy;
}

const char *exec_session_end_reason(const exec_session_t *s)
{
    if (!s) return NULL;
    if (s->ended) return s->end_reason;
    return s->killed ? s->message : NULL;
}

uint64_t exec_session_last_used(const exec_session_t *s)
{
    if (!s) return 0;
    return s->busy ? uv_now(s->pool->loop) : s->last_used;
}

void exec_session_close(exec_session_t *s)
{
    if (!s || s->user_closed) return;
    s->user_closed = true;
    if (s->ended) {
        if (!s->handles_closing)
            close_all(s); /* the last close frees it */
        else if (s->open_handles == 0)
            ses_free(s);
        return;
    }
    kill_session(s); /* its end closes the handles, and the last close frees it */
}

void exec__sessions_kill(exec_pool_t *pool)
{
    for (exec_session_t *s = pool->sessions, *next; s; s = next) {
        next = s->next;
        if (s->user_closed) continue; /* on its way out already */
        exec_session_close(s);        /* no callbacks any more; the end frees it */
    }
}
