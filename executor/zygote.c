/*
 * The zygote (docs/sandbox.md, "A fork server (zygote)"): one pre-started interpreter per pool
 * that forks the launcher of every sandbox, so that no sandbox starts an interpreter of its own.
 *
 * The zygote is the pool's --python itself (`-I -B -u -c ZYGOTE`), started once, with fds 0 and
 * 3 the control socket (SOCK_SEQPACKET, one message per request) and the sandbox's environment.
 * It reads two kinds of message from the pool and nothing from anyone else:
 *
 *     "L PATH"                        once: the launcher's library (launcher/launch_zygote.c)
 *     "R ARG0\0ARG1\0..." + 4 fds     fork one sandbox: the launcher's command line and its
 *                                     fds 0-3 (stdin socket, stdout, stderr, status pipe)
 *
 * and answers each R, in order, with "P PID" and the child's pidfd (SCM_RIGHTS), or "F ERRNO".
 * The library forks (in C, with Python's own fork hooks around it, as os.fork runs them); the
 * child puts the four on 0-3 and runs the launcher's program, which closes every other
 * descriptor first: from there on it is the launcher, init and the sandbox of a cold or warm run,
 * built by the same code in the same order, and no Python runs in the launcher's and init's
 * processes (so they copy none of the interpreter's pages). Where init's child would exec the
 * interpreter it runs Python's after-fork hook and comes back into this Python instead, copies
 * the sandbox's environment into os.environ, puts the package folders on sys.path (what
 * PYTHONPATH would have done: the zygote runs with -I) and runs the ordinary bootstrap, which
 * follows the zygote's code in the same script, so that the run's frames are those of an exec'd
 * one. The zygote holds nothing of any run but, once it has ended, its empty net namespace (below):
 * no code, bridge or output ever reaches it.
 *
 * The pool watches a forked launcher through its pidfd (a uv_poll: readable when it exits) and
 * signals it with pidfd_send_signal; the zygote reaps it. Each launcher also hands the zygote
 * its ended run's net namespace on a datagram socket the zygote made (fd 4 in the launcher,
 * closed in init): the zygote keeps them and closes them in batches (ZYGOTE_NETNS_BATCH,
 * or after ZYGOTE_NETNS_IDLE_S without a request), which halves the kernel's teardown per
 * namespace; a dead run's namespace holds no process and no socket, and no run can reach it.
 * The launcher's PDEATHSIG (SIGTERM) is tied to the zygote, which exits when the pool closes
 * the control socket (or the server dies), so a dead zygote takes its sandboxes down the
 * ordinary way.
 */
#include "internal.h"

#include "launcher/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ZYGOTE_STR_(x) #x
#define ZYGOTE_STR(x)  ZYGOTE_STR_(x) /* a number spelt for the script */
/* Ended runs' net namespaces the zygote holds before it closes them together, and how long it
   holds fewer while no request comes (seconds); strings for the script. */
#define ZYGOTE_NETNS_BATCH  "32"
#define ZYGOTE_NETNS_IDLE_S "1.0"

/* clang-format off */
static const char zygote_script[] =
    "def _ptc_zygote():\n"
    "    import os, sys, _socket, ctypes, signal, gc\n"
    "    del globals()['_ptc_zygote']\n"
    /* the first compile() of an interpreter makes the ast module's node types (about 120
       classes): made here once, not in every run's bootstrap */
    "    compile('pass', '<string>', 'exec', dont_inherit=True)\n"
    /* launchers are reaped as they end (recvmsg is retried after the handler, PEP 475) */
    "    def reap(*_a):\n"
    "        try:\n"
    "            while os.waitpid(-1, os.WNOHANG)[0] > 0:\n"
    "                pass\n"
    "        except ChildProcessError:\n"
    "            pass\n"
    "    signal.signal(signal.SIGCHLD, reap)\n"
    /* SIGCHLD is blocked from fork to pidfd_open: a launcher that ends at once stays a zombie
       until its pidfd exists (reaped before, pidfd_open fails with ESRCH and the pid may be
       reused); the pool then sees it end through the pidfd like any other */
    "    chld = {signal.SIGCHLD}\n"
    "    ctl = _socket.socket(fileno=3)\n"
    "    sol, rights = _socket.SOL_SOCKET, _socket.SCM_RIGHTS\n"
    /* the net namespaces of runs: each launcher sends one on nw (launch_main.c's hand_netns),
       kept in held and closed ZYGOTE_NETNS_BATCH at a time, or when no request came for
       ZYGOTE_NETNS_IDLE_S: the kernel's teardown of a batch costs about half as much per
       namespace (docs/sandbox.md). A dead run's namespace holds no process and no socket. */
    "    nr, nw = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_DGRAM)\n"
    "    nr.setblocking(False)\n"
    "    held = []\n"
    "    def release():\n"
    "        for fd in held:\n"
    "            os.close(fd)\n"
    "        held.clear()\n"
    "    def collect():\n"
    "        while True:\n"
    "            try:\n"
    "                _m, na, _f, _a = nr.recvmsg(1, _socket.CMSG_SPACE(4), _socket.MSG_CMSG_CLOEXEC)\n"
    "            except OSError:\n"
    "                return\n"
    "            for l, t, d in na:\n"
    "                if l == sol and t == rights:\n"
    "                    held.extend(int.from_bytes(d[i:i + 4], sys.byteorder) for i in range(0, len(d) - 3, 4))\n"
    "            if len(held) >= " ZYGOTE_NETNS_BATCH ":\n"
    "                release()\n"
    "    launch = None\n"
    "    wait = None\n"
    "    while True:\n"
    "        collect()\n"
    "        if (wait is None) != (not held):\n"
    "            wait = " ZYGOTE_NETNS_IDLE_S " if held else None\n"
    "            ctl.settimeout(wait)\n"
    "        try:\n"
    "            msg, anc, _f, _a = ctl.recvmsg(" ZYGOTE_STR(PTC_CAP_ZYGOTE_REQUEST) ", _socket.CMSG_SPACE(16),\n"
    "                                           _socket.MSG_CMSG_CLOEXEC)\n"
    "        except TimeoutError:\n"
    "            release()\n"
    "            continue\n"
    "        except OSError:\n"
    "            msg = b''\n"
    /* EOF (or a reset): the pool is gone, and so are we (and our launchers, through their
       PDEATHSIG) */
    "        if not msg:\n"
    "            os._exit(0)\n"
    "        fds = []\n"
    "        for l, t, d in anc:\n"
    "            if l == sol and t == rights:\n"
    "                fds += [int.from_bytes(d[i:i + 4], sys.byteorder) for i in range(0, len(d) - 3, 4)]\n"
    "        if msg[:2] == b'L ' and launch is None and not fds:\n"
    "            launch = ctypes.PyDLL(os.fsdecode(msg[2:])).ptc_zygote_fork\n"
    "            launch.restype = ctypes.c_int\n"
    "            launch.argtypes = (ctypes.POINTER(ctypes.c_int), ctypes.c_int,\n"
    "                               ctypes.POINTER(ctypes.c_char_p))\n"
    /* the C variable environ itself (read through at each index): the sandbox's, in the child */
    "            env = ctypes.POINTER(ctypes.c_char_p).in_dll(ctypes.CDLL(None), 'environ')\n"
    "            continue\n"
    "        pid = -1\n"
    "        err = 22\n"
    "        if msg[:2] == b'R ' and len(fds) == 4 and launch is not None:\n"
    /* the child's arguments are made here: the launcher's process runs no Python */
    "            args = msg[2:].split(b'\\0')\n"
    "            argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)\n"
    "            fda = (ctypes.c_int * 5)(*fds, nw.fileno())\n"
    "            signal.pthread_sigmask(signal.SIG_BLOCK, chld)\n"
    /* every object the zygote has goes to the permanent generation: the child's collections
       (its own as the run allocates, and the one at its end, LAUNCH_BOOTSTRAP_ZYGOTE_END) do
       not walk them, so they do not write to, and copy, the zygote's pages */
    "            gc.freeze()\n"
    /* forks in C (launcher/launch_zygote.c, with os.fork's hooks): returns in the zygote, and
       in the interpreter's process of the sandbox, its descriptors in place, SIGCHLD unblocked */
    "            pid = launch(fda, len(args), argv)\n"
    "            if pid < 0:\n"
    "                pid, err = -1, -pid\n"
    "            del args, argv, fda\n"
    "        if pid == 0:\n"
    "            break\n"
    "        for fd in fds:\n"
    "            os.close(fd)\n"
    "        a = []\n"
    "        if pid > 0:\n"
    "            try:\n"
    "                p = os.pidfd_open(pid)\n"
    "                a = [(sol, rights, p.to_bytes(4, sys.byteorder))]\n"
    "            except OSError as e:\n"
    "                os.kill(pid, 9)\n"
    "                pid, err = -1, e.errno\n"
    "        signal.pthread_sigmask(signal.SIG_UNBLOCK, chld)\n"
    "        try:\n"
    "            ctl.sendmsg([b'P %d\\n' % pid if a else b'F %d\\n' % err], a)\n"
    "        except OSError:\n"
    "            os._exit(0)\n"
    "        if a:\n"
    "            os.close(p)\n"
    /* the interpreter's process, in its sandbox: the launcher closed everything past 3, the
       zygote's socket too (detached, so that no object closes that number later); SIGCHLD as
       an exec'd one has it (the C side put back the zygote's dispositions); environ is the
       sandbox's */
    "    ctl.detach()\n"
    "    nr.detach()\n"
    "    nw.detach()\n"
    "    held.clear()\n"
    "    signal.signal(signal.SIGCHLD, signal.SIG_DFL)\n"
    "    kv = []\n"
    "    while env[len(kv)] is not None:\n"
    "        kv.append(env[len(kv)])\n"
    /* os.environ's own mapping (encoded names and values, as Python builds it at its start
       from the same environ), without its unsetenv/putenv per name: environ is already right */
    "    data = os.environ._data\n"
    "    data.clear()\n"
    "    for e in kv:\n"
    "        k, s, v = e.partition(b'=')\n"
    "        if s:\n"
    "            data[k] = v\n"
    "    pp = os.environ.get('PYTHONPATH')\n"
    "    if pp:\n"
    "        sys.path[0:0] = [d for d in pp.split(os.pathsep) if d]\n"
    /* the run's __main__ is a module of its own with -c's names (this script's functions have
       deleted theirs): at its end it is freed apart from the zygote's (launch.h,
       LAUNCH_BOOTSTRAP_ZYGOTE_END), and the code cannot reach the bootstrap's globals */
    "    m = type(sys)('__main__')\n"
    "    m.__dict__.update(sys.modules['__main__'].__dict__)\n"
    "    sys.modules['__main__'] = m\n"
    "_ptc_zygote()\n"
    LAUNCH_BOOTSTRAP_RUN LAUNCH_BOOTSTRAP_ZYGOTE_END;
/* clang-format on */

struct exec__zygote {
    exec_pool_t *pool;
    uv_process_t proc;
    uv_poll_t poll;
    int fd; /* the pool's end of the control socket, -1 once closed */
    bool exited, proc_init, poll_init;
    int open_handles;
    exec_run_t *wait_head, *wait_tail; /* runs whose pidfd has not come, in request order */
};

int exec__zygote_library(const char *launcher, char *buf, size_t len)
{
    if (!launcher) return -1;
    const char *slash = strrchr(launcher, '/');
    if (!slash) return -1;
    int n = snprintf(buf, len, "%.*s/%s", (int)(slash - launcher), launcher, EXEC_ZYGOTE_LIBRARY);
    if (n < 0 || (size_t)n >= len) return -1;
    return access(buf, R_OK) == 0 ? 0 : -1;
}

static void zygote_maybe_free(struct exec__zygote *z)
{
    if (z->open_handles || !z->exited || z->fd >= 0) return;
    exec_pool_t *pool = z->pool;
    free(z);
    pool->n_alive--;
    exec__pool_maybe_free(pool);
}

static void on_zygote_handle_closed(uv_handle_t *h)
{
    struct exec__zygote *z = h->data;
    z->open_handles--;
    zygote_maybe_free(z);
}

/* a run whose launcher will never come (the zygote refused or is gone): it ends as a launcher
   that exited without a report, or with the refusal already set */
static void fail_waiting(struct exec__zygote *z)
{
    while (z->wait_head) {
        exec_run_t *run = z->wait_head;
        z->wait_head = run->znext;
        run->znext = NULL;
        /* a launcher forked just before may still live: its init ends at EOF on stdin */
        if (!uv_is_closing((uv_handle_t *)&run->in))
            uv_close((uv_handle_t *)&run->in, exec__on_in_closed);
        exec__run_exited(run, 127, 0);
    }
    z->wait_tail = NULL;
}

/* no more requests: the zygote exits when it reads EOF, and its launchers with it */
static void zygote_shut(struct exec__zygote *z)
{
    exec_pool_t *pool = z->pool;
    bool was = pool->zygote == z;
    if (was) { /* first: what ends below makes new sandboxes, with the launcher now */
        pool->zygote = NULL;
        pool->probe.zygote = false;
    }
    if (z->poll_init && !uv_is_closing((uv_handle_t *)&z->poll)) {
        z->open_handles++;
        uv_close((uv_handle_t *)&z->poll, on_zygote_handle_closed);
    }
    if (z->fd >= 0) {
        close(z->fd);
        z->fd = -1;
    }
    /* the loop waits for its exit now (a pool being freed must see it go) */
    if (!z->exited) uv_ref((uv_handle_t *)&z->proc);
    fail_waiting(z);
    if (was && !pool->closing) exec__warm_drop_zygote(pool);
}

static void on_zygote_exit(uv_process_t *p, int64_t status, int sig)
{
    struct exec__zygote *z = p->data;
    z->exited = true;
    if (!z->pool->closing) {
        exec_probe_t *probe = &z->pool->probe;
        snprintf(probe->zygote_reason, sizeof probe->zygote_reason,
                 "the zygote ended (exit %lld, signal %d): sandboxes are started by the launcher",
                 (long long)status, sig);
    }
    zygote_shut(z);
    z->open_handles++;
    uv_close((uv_handle_t *)&z->proc, on_zygote_handle_closed);
}

static void on_pid_exit(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    exec_run_t *run = h->data;
    uv_poll_stop(h);
    /* the zygote reaps it: its exit status is not ours to read, and the status lines said
       everything the result needs */
    exec__run_exited(run, 0, 0);
}

static void got_answer(struct exec__zygote *z, const char *msg, size_t n, int fd)
{
    exec_run_t *run = z->wait_head;
    if (!run) { /* an answer nobody asked for: the zygote is broken */
        if (fd >= 0) close(fd);
        zygote_shut(z);
        return;
    }
    z->wait_head = run->znext;
    if (!z->wait_head) z->wait_tail = NULL;
    run->znext = NULL;
    if (n < 2 || msg[0] != 'P' || fd < 0) {
        if (fd >= 0) close(fd);
        exec__run_exited(run, 127, 0);
        return;
    }
    run->pidfd = fd;
    if (uv_poll_init(z->pool->loop, &run->pidpoll, fd) < 0) {
        syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
        exec__run_exited(run, 127, 0);
        return;
    }
    run->pidpoll.data = run;
    run->pidpoll_init = true;
    uv_poll_start(&run->pidpoll, UV_READABLE, on_pid_exit);
    if (run->state == RUN_WARM && !run->discarded) uv_unref((uv_handle_t *)&run->pidpoll);
    if (run->pending_sig) syscall(SYS_pidfd_send_signal, fd, run->pending_sig, NULL, 0);
}

static void on_control(uv_poll_t *h, int status, int events)
{
    (void)events;
    struct exec__zygote *z = h->data;
    if (status < 0) {
        zygote_shut(z);
        return;
    }
    for (;;) {
        char msg[64];
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int))];
        } c;
        struct iovec iov = {msg, sizeof msg - 1};
        struct msghdr mh = {0};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = c.buf;
        mh.msg_controllen = sizeof c.buf;
        ssize_t n = recvmsg(z->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        int fd = -1;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
                cm->cmsg_len == CMSG_LEN(sizeof(int)) && fd < 0)
                memcpy(&fd, CMSG_DATA(cm), sizeof fd);
        if (n <= 0 || (mh.msg_flags & MSG_CTRUNC)) { /* gone, or broken */
            if (fd >= 0) close(fd);
            zygote_shut(z);
            return;
        }
        got_answer(z, msg, (size_t)n, fd);
        if (z->fd < 0) return;
    }
}

int exec__zygote_start(exec_pool_t *pool)
{
    exec_probe_t *probe = &pool->probe;
    char lib[PATH_MAX];
    if (exec__zygote_library(pool->cmd.launcher, lib, sizeof lib) < 0) {
        snprintf(probe->zygote_reason, sizeof probe->zygote_reason, "%s not found next to %s",
                 EXEC_ZYGOTE_LIBRARY, pool->cmd.launcher ? pool->cmd.launcher : "the launcher");
        return EXEC_ENOLAUNCHER;
    }
    struct exec__zygote *z = calloc(1, sizeof *z);
    if (!z) return EXEC_ENOMEM;
    z->pool = pool;
    z->fd = -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        snprintf(probe->zygote_reason, sizeof probe->zygote_reason, "socketpair: %s",
                 strerror(errno));
        free(z);
        return EXEC_ESPAWN;
    }
    char script[sizeof zygote_script];
    memcpy(script, zygote_script, sizeof script);
    char i_[] = "-I", b_[] = "-B", u_[] = "-u", c_[] = "-c";
    char *argv[] = {pool->cmd.python, i_, b_, u_, c_, script, NULL};
    uv_stdio_container_t stdio[4];
    stdio[0].flags = UV_INHERIT_FD;
    stdio[0].data.fd = sv[1];
    stdio[1].flags = UV_IGNORE;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = STDERR_FILENO;
    stdio[3].flags = UV_INHERIT_FD;
    stdio[3].data.fd = sv[1];
    uv_process_options_t o;
    memset(&o, 0, sizeof o);
    o.file = pool->cmd.python;
    o.args = argv;
    o.env = pool->cmd.env;
    o.cwd = "/";
    o.flags = UV_PROCESS_DETACHED; /* out of reach of the terminal's Ctrl-C, as the launchers */
    o.stdio = stdio;
    o.stdio_count = 4;
    o.exit_cb = on_zygote_exit;
    z->proc.data = z;
    int r = uv_spawn(pool->loop, &z->proc, &o);
    close(sv[1]);
    if (r < 0) {
        snprintf(probe->zygote_reason, sizeof probe->zygote_reason, "cannot start %s: %s",
                 pool->cmd.python, uv_strerror(r));
        close(sv[0]);
        /* the handle was initialised: it must be closed before z goes */
        z->exited = true;
        z->open_handles++;
        pool->n_alive++;
        uv_close((uv_handle_t *)&z->proc, on_zygote_handle_closed);
        return EXEC_ESPAWN;
    }
    pool->n_alive++;
    z->fd = sv[0];
    uv_unref((uv_handle_t *)&z->proc);
    char msg[PATH_MAX + 4];
    int n = snprintf(msg, sizeof msg, "L %s", lib);
    if (send(z->fd, msg, (size_t)n, MSG_NOSIGNAL) != n ||
        uv_poll_init(pool->loop, &z->poll, z->fd) < 0) {
        snprintf(probe->zygote_reason, sizeof probe->zygote_reason, "cannot talk to the zygote: %s",
                 strerror(errno));
        zygote_shut(z);
        return EXEC_ESPAWN;
    }
    z->poll.data = z;
    z->poll_init = true;
    uv_poll_start(&z->poll, UV_READABLE, on_control);
    uv_unref((uv_handle_t *)&z->poll);
    pool->zygote = z;
    snprintf(probe->zygote_reason, sizeof probe->zygote_reason,
             "sandboxes forked from a pre-started %s (no interpreter start per run)",
             pool->cmd.python);
    return 0;
}

void exec__zygote_close(exec_pool_t *pool)
{
    if (pool->zygote) zygote_shut(pool->zygote);
}

int exec__zygote_spawn(exec_run_t *run, char *const *argv)
{
    struct exec__zygote *z = run->pool->zygote;
    if (!z || z->fd < 0) return -1;
    char *req = malloc(PTC_CAP_ZYGOTE_REQUEST);
    if (!req) return -1;
    size_t len = 2;
    memcpy(req, "R ", 2);
    for (size_t i = 0; argv[i]; i++) {
        size_t a = strlen(argv[i]) + (i ? 1 : 0);
        if (len + a > PTC_CAP_ZYGOTE_REQUEST) {
            free(req);
            return -1;
        }
        if (i) req[len++] = '\0';
        memcpy(req + len, argv[i], a - (i ? 1 : 0));
        len += a - (i ? 1 : 0);
    }
    int in[2] = {-1, -1}, p[N_PIPES][2];
    for (int i = 0; i < N_PIPES; i++)
        p[i][0] = p[i][1] = -1;
    int ok = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) == 0;
    for (int i = 0; ok && i < N_PIPES; i++)
        ok = pipe2(p[i], O_CLOEXEC) == 0;
    int child[4] = {in[1], p[P_OUT][1], p[P_ERR][1], p[P_REP][1]};
    if (ok) {
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof child)];
        } c;
        memset(&c, 0, sizeof c);
        struct iovec iov = {req, len};
        struct msghdr mh = {0};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = c.buf;
        mh.msg_controllen = sizeof c.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof child);
        memcpy(CMSG_DATA(cm), child, sizeof child);
        ssize_t w;
        do {
            w = sendmsg(z->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        } while (w < 0 && errno == EINTR);
        ok = w == (ssize_t)len;
    }
    free(req);
    /* the zygote's child has its copies (or never will) */
    for (int i = 0; i < 4; i++)
        if (child[i] >= 0) close(child[i]);
    if (!ok) {
        if (in[0] >= 0) close(in[0]);
        for (int i = 0; i < N_PIPES; i++)
            if (p[i][0] >= 0) close(p[i][0]);
        return -1;
    }
    /* a descriptor libuv does not take (it never refuses a fresh one) reads as EOF; the run
       still ends through its launcher's exit */
    if (uv_pipe_open(&run->in, in[0]) < 0) close(in[0]);
    for (int i = 0; i < N_PIPES; i++)
        if (uv_pipe_open(&run->pipes[i], p[i][0]) < 0) {
            close(p[i][0]);
            run->eof[i] = true;
        }
    run->zygote = true;
    run->pidfd = -1;
    if (z->wait_tail)
        z->wait_tail->znext = run;
    else
        z->wait_head = run;
    z->wait_tail = run;
    return 0;
}

int exec__zygote_signal(exec_run_t *run, int sig)
{
    if (run->pidfd < 0) {
        /* asked before the zygote answered: sent when it does */
        if (!run->pending_sig || sig == SIGKILL || run->pending_sig == EXEC__STOP_SIGNAL)
            run->pending_sig = sig;
        return 0;
    }
    return syscall(SYS_pidfd_send_signal, run->pidfd, sig, NULL, 0) < 0 ? -errno : 0;
}
