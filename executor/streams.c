/* What comes out of a sandbox, shared by runs (pool.c) and sessions (session.c): the retained
   output streams, the launcher's status lines and signal names. */
#include "internal.h"

#include "base.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

const char *exec__signal_name(int sig, char *buf, size_t len)
{
    static const char *const names[] = {
        [SIGHUP] = "SIGHUP",   [SIGINT] = "SIGINT",   [SIGQUIT] = "SIGQUIT", [SIGILL] = "SIGILL",
        [SIGTRAP] = "SIGTRAP", [SIGABRT] = "SIGABRT", [SIGBUS] = "SIGBUS",   [SIGFPE] = "SIGFPE",
        [SIGKILL] = "SIGKILL", [SIGUSR1] = "SIGUSR1", [SIGSEGV] = "SIGSEGV", [SIGUSR2] = "SIGUSR2",
        [SIGPIPE] = "SIGPIPE", [SIGALRM] = "SIGALRM", [SIGTERM] = "SIGTERM", [SIGXCPU] = "SIGXCPU",
        [SIGXFSZ] = "SIGXFSZ", [SIGSYS] = "SIGSYS",
    };
    if (sig > 0 && (size_t)sig < sizeof names / sizeof names[0] && names[sig]) return names[sig];
    snprintf(buf, len, "SIG%d", sig);
    return buf;
}

void exec__buf_init(exec__outbuf_t *b, size_t keep)
{
    ptc_buf_init(&b->kept, keep);
    b->total = 0;
}

void exec__buf_free(exec__outbuf_t *b)
{
    ptc_buf_free(&b->kept);
    b->total = 0;
}

void exec__buf_append(exec__outbuf_t *b, const char *data, size_t n)
{
    b->total += n;
    size_t len = ptc_buf_len(&b->kept), keep = b->kept.max;
    if (len >= keep) return;
    /* A failure sticks: after ENOMEM the buffer keeps what it has; the rest only counts. */
    (void)ptc_buf_append(&b->kept, data, keep - len < n ? keep - len : n);
}

exec_output_t exec__buf_output(const exec__outbuf_t *b)
{
    /* ptc_buf_cstr is never NULL, so that callers may memcpy/fwrite without a special case */
    size_t len = ptc_buf_len(&b->kept);
    return (exec_output_t){(const unsigned char *)ptc_buf_cstr(&b->kept), len, b->total,
                           b->total > len};
}

static void report_line(struct exec__report *r, const char *line)
{
    if (strncmp(line, "layer ", 6) == 0) {
        exec__parse_layer(line + 6, r->layers, NULL);
    } else if (strncmp(line, "exit ", 5) == 0) {
        r->exit = ptc_parse_int(line + 5, NULL, &r->code) == 0;
    } else if (strncmp(line, "signal ", 7) == 0) {
        r->sig = ptc_parse_int(line + 7, NULL, &r->code) == 0;
    } else if (strncmp(line, "answer ", 7) == 0) {
        r->answer = ptc_parse_int(line + 7, NULL, &r->answer_code) == 0;
    } else if (strcmp(line, "oom") == 0) {
        r->oom = true;
    } else if (strncmp(line, "error ", 6) == 0 && !r->error[0]) {
        snprintf(r->error, sizeof r->error, "%s", line + 6);
    }
}

void exec__report_feed(struct exec__report *r, const char *data, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        char c = data[k];
        if (c == '\n') {
            r->line[r->len] = '\0';
            report_line(r, r->line);
            r->len = 0;
        } else if (r->len < sizeof r->line - 1) {
            r->line[r->len++] = c;
        }
    }
}

int exec__send_fd(int sock, const void *data, size_t len, int fd)
{
    char ctl[CMSG_SPACE(sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    struct iovec iov = {(void *)(uintptr_t)data, len};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ssize_t w;
    do {
        w = sendmsg(sock, &mh, MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    if (w == (ssize_t)len) return 0;
    if (w >= 0) errno = EAGAIN; /* a partial message: the sandbox will refuse it anyway */
    return -1;
}
