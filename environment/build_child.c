/* The child process of a build stage (the interpreter's version report, then pip): spawned
 * in its own session with stdout and stderr on one pipe and a timer; its output read line by
 * line into the version buffer, the log and the ring of pip's last lines, where the requirement
 * pip was busy with or named in an error is remembered. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_internal.h"

/* ---- reading the child's output ------------------------------------------------------------ */
static void copy_name(char *dst, size_t len, const char *src)
{
    /* a requirement ends at white space, a quote, a parenthesis or a comma */
    size_t n = 0;
    while (src[n] && n + 1 < len && !strchr(" \t'\"(),", src[n]))
        n++;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Remembers which requirement pip was busy with or named in an error. */
static void scan_pip_line(env_t *env, const char *l)
{
    static const char *const named[] = {
        "No matching distribution found for ",
        "satisfies the requirement ",
        "Failed building wheel for ",
        "Failed to build ",
        "Could not build wheels for ",
        "Invalid requirement: ",
        "Cannot install ",
    };
    const char *p = l;
    while (*p == ' ')
        p++;
    if (strncmp(p, "Collecting ", 11) == 0)
        copy_name(env->collecting, sizeof env->collecting, p + 11);
    if (env->named[0]) return; /* the first error names the culprit; later ones follow from it */
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        const char *m = strstr(l, named[i]);
        if (m == NULL) continue;
        m += strlen(named[i]);
        while (*m == '\'' || *m == '"')
            m++;
        copy_name(env->named, sizeof env->named, m);
        if (env->named[0]) return;
    }
}

static void end_line(env_t *env)
{
    env->line[env->line_len] = '\0';
    if (env->stage == STAGE_PIP) {
        if (env->line_len > 0) {
            memcpy(env->tail[env->tail_next], env->line, env->line_len + 1);
            env->tail_next = (env->tail_next + 1) % ENV_TAIL_LINES;
            if (env->tail_count < ENV_TAIL_LINES) env->tail_count++;
            scan_pip_line(env, env->line);
            env__logf(env, ENV_LOG_PROGRESS, "pip: %s%s", env->line, env->line_cut ? "..." : "");
        }
    }
    env->line_len = 0;
    env->line_cut = false;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    env_t *env = h->data;
    buf->base = env->readbuf;
    buf->len = sizeof env->readbuf;
}

static void on_out_closed(uv_handle_t *h)
{
    env_t *env = h->data;
    env->handles--;
    env->out_eof = true;
    env__stage_maybe_done(env);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    env_t *env = s->data;
    if (n < 0) {
        if (env->line_len) end_line(env);
        uv_read_stop(s);
        if (env->out_open) {
            env->out_open = false;
            uv_close((uv_handle_t *)&env->out, on_out_closed);
        }
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        char c = buf->base[i];
        if (env->stage == STAGE_VERSION) {
            if (env->version_len < ENV__VERSION_MAX - 1) {
                env->version[env->version_len++] = c;
                env->version[env->version_len] = '\0';
            }
            continue;
        }
        if (c == '\n' || c == '\r') {
            end_line(env);
        } else if (env->line_len < LINE_MAX_KEEP) {
            env->line[env->line_len++] = c;
        } else {
            env->line_cut = true;
        }
    }
}

static void on_proc_closed(uv_handle_t *h)
{
    env_t *env = h->data;
    env->handles--;
    env->proc_open = false;
    env->exited = true;
    env__stage_maybe_done(env);
}

static void on_exit_(uv_process_t *p, int64_t status, int sig)
{
    env_t *env = p->data;
    env->proc_alive = false;
    env->exit_status = status;
    env->term_signal = sig;
    if (env->timer_open) uv_timer_stop(&env->timer);
    uv_close((uv_handle_t *)p, on_proc_closed);
}

void env__kill_group(env_t *env)
{
    if (env->proc_alive && env->proc.pid > 0) {
        /* pip runs in its own session (UV_PROCESS_DETACHED): its build back ends die with it */
        kill(-env->proc.pid, SIGKILL);
        kill(env->proc.pid, SIGKILL);
    }
}

static void on_timeout(uv_timer_t *t)
{
    env_t *env = t->data;
    env->timed_out = true;
    env__kill_group(env);
}

/* Spawns argv with stdout and stderr on one pipe, the timer armed for timeout_ms. */
int env__spawn_stage(env_t *env, stage_t stage, char **argv, char **envp, uint64_t timeout_ms)
{
    uv_file fds[2];
    int rc = uv_pipe(fds, UV_NONBLOCK_PIPE, 0);
    if (rc != 0) return rc;
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_INHERIT_FD, .data.fd = fds[1]},
        {.flags = UV_INHERIT_FD, .data.fd = fds[1]},
    };
    uv_process_options_t po = {
        .exit_cb = on_exit_,
        .file = argv[0],
        .args = argv,
        .env = envp,
        .stdio_count = 3,
        .stdio = stdio,
        .flags = UV_PROCESS_DETACHED,
    };
    env->stage = stage;
    env->exited = env->out_eof = env->timed_out = false;
    env->spawn_failed = 0;
    env->line_len = 0;
    env->proc.data = env;
    rc = uv_spawn(env->loop, &env->proc, &po);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        /* uv_spawn leaves an initialised handle that must still be closed; the stage is over
           only when it is (the handle is reused), so the caller fails from its callback */
        env->handles++;
        env->proc.data = env;
        env->spawn_failed = rc;
        env->proc_open = true;
        env->out_eof = true;
        uv_close((uv_handle_t *)&env->proc, on_proc_closed);
        return 0;
    }
    env->handles++;
    env->proc_open = true;
    env->proc_alive = true;
    bool fd_owned = false;
    rc = uv_pipe_init(env->loop, &env->out, 0);
    if (rc == 0) {
        env->handles++;
        env->out_open = true;
        env->out.data = env;
        rc = uv_pipe_open(&env->out, fds[0]);
        fd_owned = rc == 0;
        if (rc == 0) rc = uv_read_start((uv_stream_t *)&env->out, on_alloc, on_read);
    }
    if (rc != 0) {
        if (!fd_owned) close(fds[0]);
        if (env->out_open) {
            env->out_open = false;
            uv_close((uv_handle_t *)&env->out, on_out_closed);
        } else {
            env->out_eof = true;
        }
        /* the exit callback ends the stage as a failure (killed); its output is lost */
        env__kill_group(env);
        return 0;
    }
    env->started_ms = env__now_ms(env);
    uv_timer_start(&env->timer, on_timeout, timeout_ms, 0);
    return 0;
}
