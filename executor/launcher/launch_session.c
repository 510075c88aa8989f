/*
 * A session's init (--session): instead of handing one run to the interpreter and waiting for
 * its end, init relays cells between the pool (its stdin socket) and a driver running in the
 * interpreter (the code channel), and after each cell hands back the files that appeared or
 * changed in the output folder. docs/sandbox.md, "Sessions", has the protocol; in short:
 *
 *   pool -> init   "B\n" (+ the bridge descriptor, SCM_RIGHTS)   forwarded as is
 *                  "C LEN FILE_CAP CALL_CAP COUNT_CAP\n" CODE     a cell
 *                  "I\n"                                          interrupt the running cell
 *                  EOF                                            the session is closed
 *   init -> driver "B\n" (+ descriptor), "C LEN\n" CODE
 *   driver -> init "D EXIT\n" once the cell ended and stdout/stderr are flushed
 *   init -> pool   "F SIZE SENT NAMELEN\n" NAME BYTES             a file (SENT <= SIZE)
 *                  "O SIZE REASON NAMELEN\n" NAME                 a file left out
 *                  "D EXIT\n"                                     the end of the cell
 *
 * Init reads the files itself, in C, with O_NOFOLLOW|O_NONBLOCK and fstat: a symlink, FIFO or
 * folder is listed as left out, never followed or opened for blocking. It sits inside every
 * wall the interpreter has, so it can only hand back what the code could have printed anyway;
 * the pool still checks every bound it announced.
 */
#include "launch.h"

#include "base.h"

#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The interpreter's first code in a session (see launch_session.c's header): the cell loop.
   Each cell runs in __main__'s globals like `-c` code ("<string>", no inherited future flags,
   the driver's frame cut from tracebacks); SystemExit ends the cell, not the session. SIGINT
   raises KeyboardInterrupt only while a cell runs, so an interrupt that comes as the cell ends
   cannot hit the driver. Figures matplotlib.pyplot (if the code imported it) holds open at the
   end, or on plt.show(), go to the output folder as PNGs. */
const char launch_session_driver[] =
    "def _ptc_session():\n"
    "    import os, sys, _socket, _signal\n"
    "    del globals()['_ptc_session']\n"
    "    s = _socket.socket(fileno=os.dup(3))\n"
    "    os.close(3)\n"
    "    d = sys.modules['__main__'].__dict__\n"
    "    busy = [False]\n"
    "    def on_int(n, f):\n"
    "        if busy[0]:\n"
    "            raise KeyboardInterrupt\n"
    "    _signal.signal(_signal.SIGINT, on_int)\n" LAUNCH_PLOT_HOOK "    buf = b''\n"
    "    while True:\n"
    "        while b'\\n' not in buf:\n"
    "            data, anc, _f, _a = s.recvmsg(65536, _socket.CMSG_SPACE(4), "
    "_socket.MSG_CMSG_CLOEXEC)\n"
    "            if not data:\n"
    "                os._exit(0)\n"
    "            for l, t, x in anc:\n"
    "                if l == _socket.SOL_SOCKET and t == _socket.SCM_RIGHTS:\n"
    "                    b = int.from_bytes(x[:4], sys.byteorder)\n"
    "                    if b != " LAUNCH_BRIDGE_FD_STR ":\n"
    "                        os.dup2(b, " LAUNCH_BRIDGE_FD_STR ")\n"
    "                        os.close(b)\n"
    "                    os.set_inheritable(" LAUNCH_BRIDGE_FD_STR ", True)\n"
    "                    os.environ['" EXEC_BRIDGE_ENV "'] = '" LAUNCH_BRIDGE_FD_STR "'\n"
    "            buf += data\n"
    "        line, buf = buf.split(b'\\n', 1)\n"
    "        if not line.startswith(b'C '):\n"
    "            continue\n"
    "        n = int(line[2:])\n"
    "        while len(buf) < n:\n"
    "            data = s.recv(max(65536, n - len(buf)))\n"
    "            if not data:\n"
    "                os._exit(0)\n"
    "            buf += data\n"
    "        src, buf = buf[:n], buf[n:]\n"
    "        code = 0\n"
    "        try:\n"
    "            try:\n"
    "                busy[0] = True\n"
    "                c = compile(src.decode('utf-8', 'surrogateescape'), '<string>', 'exec',\n"
    "                            dont_inherit=True)\n"
    "                del src\n"
    "                exec(c, d)\n"
    "            finally:\n"
    "                busy[0] = False\n"
    "                c = src = None\n"
    "        except SystemExit as e:\n"
    "            v = e.code\n"
    "            if v is None:\n"
    "                code = 0\n"
    "            elif isinstance(v, int):\n"
    "                code = v & 255\n"
    "            else:\n"
    "                sys.stderr.write(str(v) + '\\n')\n"
    "                code = 1\n"
    "            del e, v\n"
    "        except BaseException as e:\n"
    "            t = e.__traceback__.tb_next if e.__traceback__ else None\n"
    "            e.__traceback__ = t\n"
    "            sys.last_type, sys.last_value, sys.last_traceback = type(e), e, t\n"
    "            try:\n"
    "                sys.excepthook(type(e), e, t)\n"
    "            except BaseException:\n"
    "                pass\n"
    "            code = 1\n"
    "            del e, t\n"
    "        _ptc_plots_end()\n"
    "        for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):\n"
    "            try:\n"
    "                f.flush()\n"
    "            except BaseException:\n"
    "                pass\n"
    "        s.sendall(b'D %d\\n' % code)\n"
    "_ptc_session()\n";

#define SES_LINE_MAX 128 /* longest control line either side sends */

struct snap_ent {
    char name[256];
    mode_t mode;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
};

struct ses {
    pid_t py;
    int chan;           /* to the driver; -1 once it closed */
    const char *outdir; /* the output folder as init sees it */
    struct snap_ent *before;
    size_t n_before;
    bool before_more; /* the folder had more entries than before holds */
    struct snap_ent *after;
    bool busy;
    bool oneshot;   /* after a one-shot run: a failed send only stops the files */
    bool host_dead; /* a send to the pool failed */
    uint64_t file_cap, call_cap;
    unsigned count_cap;
    int pending_fd; /* a descriptor that came from the pool, for the next "B" line */
    char hbuf[4096];
    size_t hlen;
    char pbuf[SES_LINE_MAX];
    size_t plen;
};

static int cmp_ent(const void *a, const void *b)
{
    return strcmp(((const struct snap_ent *)a)->name, ((const struct snap_ent *)b)->name);
}

/* keeps heap[0..n) a max-heap by name from slot i down */
static void sift_down(struct snap_ent *heap, size_t n, size_t i)
{
    for (;;) {
        size_t top = i, l = 2 * i + 1, r = l + 1;
        if (l < n && cmp_ent(&heap[l], &heap[top]) > 0) top = l;
        if (r < n && cmp_ent(&heap[r], &heap[top]) > 0) top = r;
        if (top == i) return;
        struct snap_ent t = heap[i];
        heap[i] = heap[top];
        heap[top] = t;
        i = top;
    }
}

static void sift_up(struct snap_ent *heap, size_t i)
{
    while (i > 0 && cmp_ent(&heap[(i - 1) / 2], &heap[i]) < 0) {
        struct snap_ent t = heap[i];
        heap[i] = heap[(i - 1) / 2];
        heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

/* The output folder's entries (lstat: links are not followed), sorted by name: the max first
   names in byte order, whatever order the folder lists them in, so that two scans of a folder
   past the cap look at the same names; *more says whether there were others. */
static size_t scan_dir(const char *dir, struct snap_ent *out, size_t max, bool *more)
{
    *more = false;
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t n = 0;
    struct dirent *e;
    struct snap_ent x;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(x.name, sizeof x.name, "%s", e->d_name);
        /* A name that would not be kept costs no stat: a folder of millions stays a read. */
        if (n == max && (n == 0 || cmp_ent(&x, &out[0]) >= 0)) {
            *more = true;
            continue;
        }
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
        x.mode = st.st_mode;
        x.ino = st.st_ino;
        x.size = st.st_size;
        x.mtime = st.st_mtim;
        x.ctime = st.st_ctim;
        if (n < max) { /* out is a max-heap until the end, its largest name on top */
            out[n] = x;
            sift_up(out, n++);
            continue;
        }
        *more = true; /* x goes in place of the largest name kept */
        out[0] = x;
        sift_down(out, n, 0);
    }
    closedir(d);
    qsort(out, n, sizeof *out, cmp_ent);
    return n;
}

static bool unchanged(const struct snap_ent *a, const struct snap_ent *b)
{
    return a->mode == b->mode && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* the pool went away: nothing is left to serve */
_Noreturn static void host_gone(struct ses *s)
{
    kill(s->py, SIGKILL);
    waitpid(s->py, NULL, 0);
    _exit(0);
}

static void send_all(struct ses *s, int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len && !(fd == STDIN_FILENO && s->host_dead)) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == ENOTSOCK) w = write(fd, p, len);
        if (w <= 0) {
            if (fd == STDIN_FILENO && !s->oneshot) host_gone(s);
            if (fd == STDIN_FILENO) s->host_dead = true;
            return; /* the driver is gone: its end is reported when it is reaped */
        }
        p += w;
        len -= (size_t)w;
    }
}

static void send_omitted(struct ses *s, const struct snap_ent *e, const char *reason)
{
    char line[SES_LINE_MAX];
    size_t nl = strlen(e->name);
    int n = snprintf(line, sizeof line, "O %lld %s %zu\n", (long long)e->size, reason, nl);
    send_all(s, STDIN_FILENO, line, (size_t)n);
    send_all(s, STDIN_FILENO, e->name, nl);
}

/* Hands back one changed regular file: at most min(size, file cap, what the call has left). */
static void send_file(struct ses *s, int dfd, const struct snap_ent *e, uint64_t *left)
{
    int fd = openat(dfd, e->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0) close(fd);
        send_omitted(s, e, fd < 0 && errno != ELOOP ? "read" : "type");
        return;
    }
    uint64_t size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    uint64_t want = size < s->file_cap ? size : s->file_cap;
    if (want > *left) want = *left;
    unsigned char *buf = malloc(want ? want : 1);
    if (!buf) {
        close(fd);
        send_omitted(s, e, "read");
        return;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(fd, buf + got, want - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (size < got) size = got;
    char line[SES_LINE_MAX];
    size_t nl = strlen(e->name);
    int n = snprintf(line, sizeof line, "F %llu %zu %zu\n", (unsigned long long)size, got, nl);
    send_all(s, STDIN_FILENO, line, (size_t)n);
    send_all(s, STDIN_FILENO, e->name, nl);
    send_all(s, STDIN_FILENO, buf, got);
    free(buf);
    *left -= got;
}

/* Every entry of the output folder that is new or changed since the cell began, in name order,
   within the caps the pool announced; what is past a file cap is listed as left out. In a folder of
   more than PTC_CAP_SESSION_SNAPSHOT entries only the first names are compared (both scans
   keep the same first ones), and an entry that may have been there unseen is not called new. */
static void send_changed(struct ses *s)
{
    bool more;
    size_t n = scan_dir(s->outdir, s->after, PTC_CAP_SESSION_SNAPSHOT, &more);
    int dfd = open(s->outdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    uint64_t left = s->call_cap;
    unsigned count = 0;
    for (size_t i = 0; i < n; i++) {
        const struct snap_ent *e = &s->after[i];
        const struct snap_ent *old =
            s->n_before ? bsearch(e, s->before, s->n_before, sizeof *e, cmp_ent) : NULL;
        if (old && unchanged(old, e)) continue;
        /* Past the first scan's last name it saw nothing: an entry there may be old. */
        if (!old && s->before_more && cmp_ent(e, &s->before[s->n_before - 1]) > 0) continue;
        if (++count > s->count_cap)
            send_omitted(s, e, "count");
        else if (!S_ISREG(e->mode) || dfd < 0)
            send_omitted(s, e, dfd < 0 ? "read" : "type");
        else if (!left && e->size > 0)
            send_omitted(s, e, "budget");
        else
            send_file(s, dfd, e, &left);
    }
    if (dfd >= 0) close(dfd);
}

/* one read from the pool; a descriptor may come only for a "B" line */
static void read_host(struct ses *s)
{
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {s->hbuf + s->hlen, sizeof s->hbuf - s->hlen};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    ssize_t n;
    do {
        n = recvmsg(STDIN_FILENO, &mh, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) host_gone(s); /* EOF: the pool closed the session */
    if (mh.msg_flags & MSG_CTRUNC) launch_fatal("session", "more than one descriptor at once");
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int fd;
        memcpy(&fd, CMSG_DATA(c), sizeof fd);
        if (s->pending_fd >= 0 || c->cmsg_len != CMSG_LEN(sizeof(int))) {
            close(fd);
            launch_fatal("session", "an unexpected descriptor came from the pool");
        }
        s->pending_fd = fd;
    }
    s->hlen += (size_t)n;
}

/* forwards the bridge to the driver, which puts it on EXEC_BRIDGE_FD */
static void forward_bridge(struct ses *s)
{
    if (s->pending_fd < 0) launch_fatal("session", "a bridge line without a descriptor");
    char ctlbuf[CMSG_SPACE(sizeof(int))];
    memset(ctlbuf, 0, sizeof ctlbuf);
    char msg[] = "B\n";
    struct iovec iov = {msg, 2};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctlbuf, .msg_controllen = sizeof ctlbuf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &s->pending_fd, sizeof(int));
    ssize_t w;
    do {
        w = sendmsg(s->chan, &mh, MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    close(s->pending_fd);
    s->pending_fd = -1;
}

/* "C LEN FILE_CAP CALL_CAP COUNT_CAP": the code follows; read it whole, then pass it on */
static void start_cell(struct ses *s, const char *line, size_t consumed)
{
    uint64_t f[4];
    if (line[0] != 'C' || ptc_parse_u64s(line + 1, f, 4, NULL) < 0 || f[3] > UINT_MAX ||
        f[0] > EXEC_MAX_CODE_BYTES || s->busy)
        launch_fatal("session", "bad cell line '%s'", line);
    size_t len = (size_t)f[0];
    char *code = malloc(len + 1);
    if (!code) launch_fatal("session", "out of memory");
    size_t have = s->hlen - consumed < len ? s->hlen - consumed : len;
    memcpy(code, s->hbuf + consumed, have);
    memmove(s->hbuf, s->hbuf + consumed + have, s->hlen - consumed - have);
    s->hlen -= consumed + have;
    while (have < len) {
        ssize_t n = read(STDIN_FILENO, code + have, len - have);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) host_gone(s);
        have += (size_t)n;
    }
    s->file_cap = f[1];
    s->call_cap = f[2];
    s->count_cap = (unsigned)f[3];
    s->n_before = scan_dir(s->outdir, s->before, PTC_CAP_SESSION_SNAPSHOT, &s->before_more);
    s->busy = true;
    char head[32];
    int hn = snprintf(head, sizeof head, "C %zu\n", len);
    if (s->chan >= 0) {
        send_all(s, s->chan, head, (size_t)hn);
        send_all(s, s->chan, code, len);
    }
    free(code);
}

static void handle_host(struct ses *s)
{
    read_host(s);
    for (;;) {
        char *nl = memchr(s->hbuf, '\n', s->hlen);
        if (!nl) {
            if (s->hlen == sizeof s->hbuf) launch_fatal("session", "a control line too long");
            return;
        }
        *nl = '\0';
        size_t consumed = (size_t)(nl - s->hbuf) + 1;
        if (strcmp(s->hbuf, "B") == 0) {
            forward_bridge(s);
        } else if (strcmp(s->hbuf, "I") == 0) {
            if (s->busy) kill(s->py, SIGINT);
        } else if (s->hbuf[0] == 'C') {
            start_cell(s, s->hbuf, consumed);
            continue; /* start_cell consumed the line and the code */
        } else {
            launch_fatal("session", "unknown control line '%.40s'", s->hbuf);
        }
        memmove(s->hbuf, s->hbuf + consumed, s->hlen - consumed);
        s->hlen -= consumed;
    }
}

/* The driver's lines. It runs the user's code, so anything may come: only "D N" while a cell
   runs counts; a line too long is dropped. */
static void handle_driver(struct ses *s)
{
    char buf[SES_LINE_MAX];
    ssize_t n = read(s->chan, buf, sizeof buf);
    if (n < 0 && errno == EINTR) return;
    if (n <= 0) {
        close(s->chan);
        s->chan = -1; /* the interpreter is ending: reaping it says how */
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] != '\n') {
            if (s->plen < sizeof s->pbuf - 1) s->pbuf[s->plen++] = buf[i];
            continue;
        }
        s->pbuf[s->plen] = '\0';
        s->plen = 0;
        int code;
        if (!s->busy || s->pbuf[0] != 'D' || s->pbuf[1] != ' ' ||
            ptc_parse_int(s->pbuf + 2, NULL, &code) < 0)
            continue;
        s->busy = false;
        send_changed(s);
        char line[32];
        int ln = snprintf(line, sizeof line, "D %d\n", code);
        send_all(s, STDIN_FILENO, line, (size_t)ln);
    }
}

/* reaps what ended; the interpreter's end ends the session, reported as a run's would be */
static void reap(struct ses *s)
{
    int st;
    pid_t r;
    while ((r = waitpid(-1, &st, WNOHANG)) > 0) {
        if (r != s->py) continue;
        /* a cell that ended the session (an exit, a crash, the OOM killer) still hands back
           what it wrote, before the report that ends the session */
        if (s->busy) send_changed(s);
        if (WIFSIGNALED(st))
            launch_report("signal %d", WTERMSIG(st));
        else
            launch_report("exit %d", WEXITSTATUS(st));
        _exit(0);
    }
}

void launch_outputs_send(const struct launch_plan *plan, uint64_t file_cap, uint64_t call_cap,
                         unsigned count_cap)
{
    char outdir[LAUNCH_PATH_MAX];
    snprintf(outdir, sizeof outdir, "%s/" LAUNCH_OUTPUT_DIR_NAME,
             plan->landlock_only ? plan->run_dir : "/tmp");
    struct ses s = {.py = -1,
                    .chan = -1,
                    .outdir = outdir,
                    .oneshot = true,
                    .file_cap = file_cap,
                    .call_cap = call_cap,
                    .count_cap = count_cap,
                    .pending_fd = -1};
    /* a fresh folder: everything in it is the run's */
    s.after = calloc(PTC_CAP_SESSION_SNAPSHOT, sizeof *s.after);
    if (!s.after) return;
    send_changed(&s);
    free(s.after);
}

_Noreturn void launch_session_init(const struct launch_cfg *cfg, const struct launch_plan *plan,
                                   pid_t py, int chan)
{
    (void)cfg;
    struct snap_ent *before = calloc(PTC_CAP_SESSION_SNAPSHOT, sizeof *before);
    struct snap_ent *after = calloc(PTC_CAP_SESSION_SNAPSHOT, sizeof *after);
    if (!before || !after) launch_fatal("session", "out of memory");
    char outdir[LAUNCH_PATH_MAX];
    snprintf(outdir, sizeof outdir, "%s/" LAUNCH_OUTPUT_DIR_NAME,
             plan->landlock_only ? plan->run_dir : "/tmp");
    struct ses s = {.py = py,
                    .chan = chan,
                    .outdir = outdir,
                    .before = before,
                    .after = after,
                    .pending_fd = -1};
    int pfd = (int)syscall(SYS_pidfd_open, py, 0);
    for (;;) {
        struct pollfd pf[3] = {{.fd = STDIN_FILENO, .events = POLLIN},
                               {.fd = s.chan, .events = POLLIN},
                               {.fd = pfd, .events = POLLIN}};
        /* without a pidfd, look for the interpreter's end ten times a second */
        int r = poll(pf, 3, pfd >= 0 ? 1000 : 100);
        if (r < 0 && errno != EINTR) launch_fatal("session", "poll: %s", strerror(errno));
        if (r > 0 && pf[1].revents) handle_driver(&s);
        if (r > 0 && pf[0].revents) handle_host(&s);
        reap(&s);
    }
}
