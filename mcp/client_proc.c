/* client_proc.c - a downstream server's process: ${VAR} expansion, the PATH lookup, spawning
 * with three pipes, stderr into the log line by line, and a stop that escalates from closing
 * stdin to SIGTERM to SIGKILL without ever waiting on the loop thread.
 *
 * The child is forked here rather than by uv_spawn, which has no hook between fork and exec:
 * the child must set PR_SET_PDEATHSIG itself, so that it dies with ptc-mcp even when ptc-mcp is
 * killed with SIGKILL and no stop runs. A SIGCHLD watcher per child reaps exactly its pid. */
#include "client_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* After the child exits, how long its pipes may stay open (a grandchild may hold them). */
#define PROC_LINGER_MS 300
/* stderr lines logged per second and process: a server printing in a loop must not flood
 * ptc-mcp's own log (the rest are counted, and the count is logged). */
#define PROC_STDERR_LINES_PER_SEC 200

const char *mcp__client_env_get(char *const *env, const char *name)
{
    if (env == NULL) return NULL;
    size_t n = strlen(name);
    for (size_t i = 0; env[i] != NULL; i++)
        if (strncmp(env[i], name, n) == 0 && env[i][n] == '=') return env[i] + n + 1;
    return NULL;
}

static bool name_start(char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_';
}

static bool name_char(char ch)
{
    return name_start(ch) || (ch >= '0' && ch <= '9');
}

char *mcp__client_expand(const char *in, char *const *env, const char *server,
                         const mcp_logger_t *lg, bool *too_long)
{
    *too_long = false;
    ptc_buf_t out;
    ptc_buf_init(&out, PTC_CAP_CLIENT_EXPANDED - 1); /* the cap counts the NUL */
    const char *p = in;
    while (*p != '\0') {
        const char *val = NULL;
        size_t vlen = 0, skip = 1;
        if (p[0] == '$' && p[1] == '{' && name_start(p[2])) {
            size_t n = 3;
            while (name_char(p[n]))
                n++;
            if (p[n] == '}') {
                char name[256];
                size_t nl = n - 2;
                if (nl < sizeof name) {
                    memcpy(name, p + 2, nl);
                    name[nl] = '\0';
                    val = mcp__client_env_get(env, name);
                    if (val == NULL) {
                        mcp_log(lg, MCP_LOG_WARNING,
                                "downstream server %s: ${%s} is not set in ptc-mcp's environment; "
                                "using an empty string (export it before starting ptc-mcp)",
                                server, name);
                        val = "";
                    }
                    vlen = strlen(val);
                    skip = n + 1;
                }
            }
        }
        if (val == NULL) {
            val = p;
            vlen = 1;
        }
        if (ptc_buf_append(&out, val, vlen) < 0) break;
        p += skip;
    }
    *too_long = ptc_buf_error(&out) == PTC_ETOOBIG;
    return ptc_buf_take(&out, NULL);
}

char *mcp__client_which(const char *command, char *const *envp, char *why, size_t why_size)
{
    if (strchr(command, '/') != NULL) return mcp__strdup(command);
    const char *path = mcp__client_env_get(envp, "PATH");
    if (path == NULL || path[0] == '\0') path = "/usr/local/bin:/usr/bin:/bin";
    const char *p = path;
    while (true) {
        const char *colon = strchr(p, ':');
        size_t dl = colon != NULL ? (size_t)(colon - p) : strlen(p);
        if (dl > 0) {
            size_t n = dl + 1 + strlen(command) + 1;
            char *cand = malloc(n);
            if (cand == NULL) {
                snprintf(why, why_size, "out of memory");
                return NULL;
            }
            snprintf(cand, n, "%.*s/%s", (int)dl, p, command);
            struct stat st;
            if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) return cand;
            free(cand);
        }
        if (colon == NULL) break;
        p = colon + 1;
    }
    snprintf(why, why_size,
             "command \"%s\" was not found in PATH (%.1500s); give its full path as \"command\" "
             "or add its folder to the entry's \"env\": {\"PATH\": ...}",
             command, path);
    return NULL;
}

/* --- handles ------------------------------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *h)
{
    mcp__proc_t *p = h->data;
    if (--p->open_handles == 0) {
        mcp_framer_close(&p->framer);
        free(p->errbuf);
        free(p);
    }
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h)) uv_close(h, on_handle_closed);
}

static void close_stdin(mcp__proc_t *p)
{
    if (!p->in_open) return;
    p->in_open = false;
    close_handle((uv_handle_t *)&p->in);
}

/* Everything is over: tell the client (once) and close every handle. */
static void report_and_close(mcp__proc_t *p)
{
    if (p->reported) return;
    p->reported = true;
    uv_timer_stop(&p->timer);
    if (p->c != NULL) mcp__client_on_exit(p->c, p); /* the client detaches p */
    p->c = NULL;
    p->closing = true;
    close_stdin(p);
    close_handle((uv_handle_t *)&p->out);
    close_handle((uv_handle_t *)&p->err);
    close_handle((uv_handle_t *)&p->timer);
    close_handle((uv_handle_t *)&p->chld);
}

static void maybe_report(mcp__proc_t *p)
{
    if (p->exited && p->out_eof && p->err_eof) report_and_close(p);
}

/* --- stderr -------------------------------------------------------------------------------- */

static void report_suppressed(mcp__proc_t *p)
{
    if (p->err_suppressed == 0) return;
    mcp_log(p->lg, MCP_LOG_WARNING, "[%s] %lu stderr lines were not logged (more than %d a second)",
            p->name, p->err_suppressed, PROC_STDERR_LINES_PER_SEC);
    p->err_suppressed = 0;
}

static bool stderr_allowed(mcp__proc_t *p)
{
    uint64_t now = mcp__now_ms();
    if (now - p->err_window_ms >= 1000) {
        report_suppressed(p);
        p->err_window_ms = now;
        p->err_in_window = 0;
    }
    if (p->err_in_window >= PROC_STDERR_LINES_PER_SEC) {
        p->err_suppressed++;
        return false;
    }
    p->err_in_window++;
    return true;
}

static void log_stderr_line(mcp__proc_t *p, const char *line, size_t len, bool cut)
{
    if (len > 0 && line[len - 1] == '\r') len--;
    char *clean = p->errbuf; /* line points into it: clean in place */
    (void)line;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)clean[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) clean[i] = '?';
    }
    if (len == 0 && !cut) return;
    if (stderr_allowed(p))
        mcp_log(p->lg, MCP_LOG_INFO, "[%s] %.*s%s", p->name, (int)len, clean,
                cut ? " [line cut: longer than the stderr line limit]" : "");
    size_t keep = len < MCP__CLIENT_LAST_STDERR ? len : MCP__CLIENT_LAST_STDERR;
    memcpy(p->last_err, clean, keep);
    p->last_err[keep] = '\0';
}

static void feed_stderr(mcp__proc_t *p, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = buf[i];
        if (ch == '\n') {
            if (p->err_cutting)
                p->err_cutting = false;
            else
                log_stderr_line(p, p->errbuf, p->errlen, false);
            p->errlen = 0;
            continue;
        }
        if (p->err_cutting) continue;
        p->errbuf[p->errlen++] = ch;
        if (p->errlen == p->errmax) {
            log_stderr_line(p, p->errbuf, p->errlen, true);
            p->errlen = 0;
            p->err_cutting = true;
        }
    }
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    mcp__proc_t *p = h->data;
    (void)suggested;
    buf->base = p->readbuf;
    buf->len = sizeof p->readbuf;
}

static void on_err_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    mcp__proc_t *p = s->data;
    if (n > 0) {
        feed_stderr(p, buf->base, (size_t)n);
        return;
    }
    if (n < 0) {
        uv_read_stop(s);
        if (p->errlen > 0 && !p->err_cutting) log_stderr_line(p, p->errbuf, p->errlen, false);
        p->errlen = 0;
        p->err_eof = true;
        report_suppressed(p);
        maybe_report(p);
    }
}

/* --- stdout -------------------------------------------------------------------------------- */

static void on_line(void *data, const char *line, size_t len, bool too_big)
{
    mcp__proc_t *p = data;
    if (p->c != NULL) mcp__client_on_line(p->c, line, len, too_big);
}

static void on_out_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    mcp__proc_t *p = s->data;
    if (n > 0) {
        if (mcp_framer_feed(&p->framer, buf->base, (size_t)n) < 0)
            mcp_log(p->lg, MCP_LOG_ERROR,
                    "downstream server %s: out of memory buffering its output; a message was "
                    "dropped",
                    p->name);
        return;
    }
    if (n < 0) {
        uv_read_stop(s);
        if (!p->out_eof) mcp_framer_finish(&p->framer);
        p->out_eof = true;
        maybe_report(p);
    }
}

/* --- exit and stop ------------------------------------------------------------------------- */

static void on_timer(uv_timer_t *t)
{
    mcp__proc_t *p = t->data;
    if (p->exited) {
        /* The linger is over: pipes still open belong to a grandchild. */
        report_and_close(p);
        return;
    }
    int sig = p->kill_stage <= 1 ? SIGTERM : SIGKILL;
    p->kill_stage = p->kill_stage <= 1 ? 2 : 3;
    mcp_log(p->lg, MCP_LOG_WARNING, "downstream server %s (pid %d) is still running; sending %s",
            p->name, p->pid, sig == SIGTERM ? "SIGTERM" : "SIGKILL");
    /* The child leads its own process group: npx and uvx wrappers take their children along. */
    if (kill(-p->pid, sig) != 0) kill(p->pid, sig);
    if (sig == SIGTERM) uv_timer_start(&p->timer, on_timer, p->grace_ms, 0);
}

static void on_exited(mcp__proc_t *p, int wstatus)
{
    p->exited = true;
    p->exit_status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 0;
    p->term_signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
    uv_signal_stop(&p->chld);
    uv_timer_stop(&p->timer);
    if (p->out_eof && p->err_eof)
        report_and_close(p);
    else
        uv_timer_start(&p->timer, on_timer, PROC_LINGER_MS, 0);
}

/* Any child's SIGCHLD: only ours is reaped (WNOHANG), the others are left to their owners. */
static void on_sigchld(uv_signal_t *h, int signum)
{
    mcp__proc_t *p = h->data;
    (void)signum;
    if (p->exited || p->pid <= 0) return;
    int wstatus = 0;
    pid_t r;
    do
        r = waitpid(p->pid, &wstatus, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == p->pid) on_exited(p, wstatus);
}

void mcp__proc_describe_exit(const mcp__proc_t *p, char *buf, size_t size)
{
    int n;
    if (p->term_signal != 0)
        n = snprintf(buf, size, "was killed by signal %d", p->term_signal);
    else
        n = snprintf(buf, size, "exited with status %lld", (long long)p->exit_status);
    if (p->last_err[0] != '\0' && n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, " (last stderr line: %s)", p->last_err);
}

void mcp__proc_stop(mcp__proc_t *p, bool detach, bool hard)
{
    if (detach) p->c = NULL;
    if (p->exited || p->closing || p->kill_stage >= 1) return;
    close_stdin(p);
    if (hard) {
        p->kill_stage = 3;
        if (kill(-p->pid, SIGKILL) != 0) kill(p->pid, SIGKILL);
        return;
    }
    p->kill_stage = 1;
    uv_timer_start(&p->timer, on_timer, p->grace_ms, 0);
}

/* --- writing ------------------------------------------------------------------------------- */

typedef struct proc_write {
    uv_write_t req;
    char *buf;    /* the message, written with the newline after it */
    char newline; /* '\n' */
} proc_write_t;

static void on_written(uv_write_t *req, int status)
{
    proc_write_t *w = req->data;
    (void)status; /* a broken pipe shows up as the child's exit */
    free(w->buf);
    free(w);
}

int mcp__proc_send(mcp__proc_t *p, const cJSON *msg)
{
    if (!p->in_open) return MCP_ECLOSED;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&p->in) > MCP__CLIENT_MAX_QUEUED_WRITE)
        return MCP_EBUSY;
    char *text = cJSON_PrintUnformatted(msg);
    if (text == NULL) return MCP_ENOMEM;
    size_t len = strlen(text);
    proc_write_t *w = malloc(sizeof *w);
    if (w == NULL) {
        free(text);
        return MCP_ENOMEM;
    }
    w->buf = text;
    w->newline = '\n';
    w->req.data = w;
    uv_buf_t b[2] = {uv_buf_init(text, (unsigned)len), uv_buf_init(&w->newline, 1)};
    int rc = uv_write(&w->req, (uv_stream_t *)&p->in, b, 2, on_written);
    if (rc < 0) {
        free(text);
        free(w);
        return MCP_EIO;
    }
    return MCP_OK;
}

/* --- spawning ------------------------------------------------------------------------------ */

/* envp with MCP_DOWNSTREAM_PARENT_ENV set to our pid (replacing one the entry set): a ptc-mcp
 * started through any wrapper (npx, a shell script) then knows it is a downstream server and
 * starts no processes, which ends the chain a config listing ptc-mcp would start. The strings
 * are borrowed but for the marker, the last one before NULL. */
static char **env_with_marker(char **envp)
{
    size_t n = 0, plen = strlen(MCP_DOWNSTREAM_PARENT_ENV);
    while (envp != NULL && envp[n] != NULL)
        n++;
    char **out = calloc(n + 2, sizeof *out);
    if (out == NULL) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], MCP_DOWNSTREAM_PARENT_ENV, plen) != 0 || envp[i][plen] != '=')
            out[k++] = envp[i];
    char marker[64];
    snprintf(marker, sizeof marker, "%s=%ld", MCP_DOWNSTREAM_PARENT_ENV, (long)getpid());
    if ((out[k] = mcp__strdup(marker)) == NULL) {
        free(out);
        return NULL;
    }
    return out;
}

static void free_env_with_marker(char **env)
{
    size_t n = 0;
    while (env[n] != NULL)
        n++;
    if (n > 0) free(env[n - 1]);
    free(env);
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* In the child, between fork and exec: async-signal-safe calls only (the parent has threads).
 * Never returns; an error before exec goes to status_fd as errno. */
static void child_exec(const char *file, char **argv, char **envp, const char *cwd,
                       const int fds[3], int status_fd, pid_t parent)
{
    int e;
    /* Its own session and process group: a stop signals the group, so that wrappers (npx,
     * uvx, shells) take their children along, and a Ctrl-C in ptc-mcp's terminal does not
     * reach it. */
    if (setsid() < 0) goto fail;
    /* Dies with ptc-mcp even when ptc-mcp is SIGKILLed and no stop runs. SIGKILL: a server
     * that ignores SIGTERM must not outlive us; what a wrapper started sees its stdin close. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) goto fail;
    if (getppid() != parent) _exit(127); /* ptc-mcp died before the prctl */
    int moved[3];
    for (int i = 0; i < 3; i++) /* above 2 first, as one of them may be 0, 1 or 2 already */
        if ((moved[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3)) < 0) goto fail;
    for (int i = 0; i < 3; i++) /* dup2 clears close-on-exec on the copy */
        if (dup2(moved[i], i) < 0) goto fail;
    if (cwd != NULL && chdir(cwd) != 0) goto fail;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++) /* ignored ones (SIGPIPE) would stay ignored */
        if (sig != SIGKILL && sig != SIGSTOP) (void)sigaction(sig, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(file, argv, envp);
fail:
    e = errno;
    if (write(status_fd, &e, sizeof e) < 0) _exit(127);
    _exit(127);
}

int mcp__proc_spawn(mcp_client_t *c, const char *file, char **argv, char **envp, const char *cwd,
                    unsigned gen, size_t max_message, size_t max_stderr_line, unsigned grace_ms,
                    mcp__proc_t **out)
{
    *out = NULL;
    mcp__proc_t *p = calloc(1, sizeof *p);
    if (p == NULL) return UV_ENOMEM;
    p->errmax = max_stderr_line;
    p->errbuf = malloc(max_stderr_line + 1);
    if (p->errbuf == NULL || mcp_framer_init(&p->framer, max_message, on_line, p) < 0) {
        free(p->errbuf);
        free(p);
        return UV_ENOMEM;
    }
    char **env = env_with_marker(envp);
    if (env == NULL) {
        free(p->errbuf);
        mcp_framer_close(&p->framer);
        free(p);
        return UV_ENOMEM;
    }
    p->c = c;
    p->loop = c->loop;
    p->lg = c->lg;
    snprintf(p->name, sizeof p->name, "%s", c->name);
    p->gen = gen;
    p->grace_ms = grace_ms;
    uv_pipe_init(p->loop, &p->in, 0);
    uv_pipe_init(p->loop, &p->out, 0);
    uv_pipe_init(p->loop, &p->err, 0);
    uv_timer_init(p->loop, &p->timer);
    uv_signal_init(p->loop, &p->chld);
    p->in.data = p->out.data = p->err.data = p->timer.data = p->chld.data = p;
    p->open_handles = 5;

    pid_t parent = getpid();
    /* [0] the child's stdin (it reads [0]), [1] stdout, [2] stderr (it writes [1]); st: exec's
     * errno, when exec fails (CLOEXEC: a successful exec closes it). */
    int io[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}}, st[2] = {-1, -1};
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = uv_pipe(io[i], 0, 0);
    if (rc == 0) rc = uv_pipe(st, 0, 0);
    /* Before the fork: a child that exits at once must not be missed. */
    if (rc == 0) rc = uv_signal_start(&p->chld, on_sigchld, SIGCHLD);
    pid_t pid = -1;
    if (rc == 0) {
        /* Signals blocked across fork: no handler of ours may run in the child (it resets them
         * before exec). */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pid = fork();
        if (pid == 0)
            child_exec(file, argv, env, cwd, (int[3]){io[0][0], io[1][1], io[2][1]}, st[1], parent);
        if (pid < 0) rc = -errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    free_env_with_marker(env); /* the child has its copy */
    close_fd(&io[0][0]);
    close_fd(&io[1][1]);
    close_fd(&io[2][1]);
    close_fd(&st[1]);
    if (pid > 0) {
        int child_errno = 0;
        ssize_t n;
        do
            n = read(st[0], &child_errno, sizeof child_errno);
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof child_errno) {
            /* exec failed: the child _exits at once; reap it here, its watcher closes below. */
            rc = child_errno > 0 ? -child_errno : UV_EIO;
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
            pid = -1;
        }
    }
    close_fd(&st[0]);
    if (pid > 0) {
        p->pid = pid;
        rc = uv_pipe_open(&p->in, io[0][1]);
        if (rc == 0) io[0][1] = -1, rc = uv_pipe_open(&p->out, io[1][0]);
        if (rc == 0) io[1][0] = -1, rc = uv_pipe_open(&p->err, io[2][0]);
        if (rc == 0) io[2][0] = -1, p->in_open = true;
        if (rc == 0) rc = uv_read_start((uv_stream_t *)&p->out, alloc_cb, on_out_read);
        if (rc == 0) rc = uv_read_start((uv_stream_t *)&p->err, alloc_cb, on_err_read);
        if (rc == 0) {
            *out = p;
            return 0;
        }
        /* Cannot happen for fresh pipes; if it does, the child must not run unwatched. */
        close_fd(&io[0][1]);
        close_fd(&io[1][0]);
        close_fd(&io[2][0]);
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        p->c = NULL;
        p->out_eof = p->err_eof = true;
        close_stdin(p);
        return rc; /* the SIGCHLD watcher reaps it and closes the rest */
    }
    close_fd(&io[0][1]);
    close_fd(&io[1][0]);
    close_fd(&io[2][0]);
    /* Even a failed spawn leaves initialised handles that must be closed. */
    p->c = NULL;
    p->reported = true;
    p->closing = true;
    close_handle((uv_handle_t *)&p->in);
    close_handle((uv_handle_t *)&p->out);
    close_handle((uv_handle_t *)&p->err);
    close_handle((uv_handle_t *)&p->timer);
    close_handle((uv_handle_t *)&p->chld);
    return rc;
}
