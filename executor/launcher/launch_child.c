/*
 * The sandbox's init: runs as PID 1 of the new PID namespace, builds the filesystem view
 * (rootfs.c), drops credentials, applies rlimits, no_new_privs, Landlock and seccomp, forks the
 * interpreter and reports its end. Order matters (SANDBOX-NOTES.md): binds need the capabilities of
 * the new user namespace, so mounts come first; the bounding set is dropped before setuid;
 * PDEATHSIG is set after the uid change (which clears it); Landlock needs no_new_privs; seccomp
 * comes last because it forbids mount and friends.
 */
#include "launch.h"

#include "base.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int last_cap(void)
{
    int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
    char buf[16] = {0};
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        buf[strcspn(buf, "\n")] = '\0'; /* buf was zeroed and read() left its last byte */
        int last;
        if (n > 0 && ptc_parse_int(buf, NULL, &last) == 0) return last;
    }
    return 63; /* PR_CAPBSET_DROP fails with EINVAL past the last one: harmless */
}

static void drop_credentials(const struct launch_cfg *cfg, const struct launch_plan *plan)
{
    if (plan->landlock_only) {
        /* an ordinary user with no namespace to map: the uid stays (it is not 0), and there are
           no capabilities to drop (the bounding set needs CAP_SETPCAP; no_new_privs keeps file
           capabilities from adding any) */
        struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct data[2];
        memset(data, 0, sizeof data);
        if (syscall(SYS_capset, &hdr, data) < 0) launch_die_errno("caps", "capset");
        if (getuid() == 0 || geteuid() == 0) launch_fatal("uid", "uid 0 without a namespace");
        launch_layer(EXEC_LAYER_UID_DROP, EXEC_LAYER_ACTIVE, "the server's own uid %d (not 0)",
                     (int)getuid());
        launch_layer(EXEC_LAYER_CAPS_DROP, EXEC_LAYER_ACTIVE, "no capabilities (ordinary user)");
        return;
    }
    uid_t uid = plan->userns ? LAUNCH_INNER_UID : LAUNCH_NOBODY;
    bool caps = !launch_disabled(cfg, EXEC_LAYER_CAPS_DROP);
    bool drop_uid = !launch_disabled(cfg, EXEC_LAYER_UID_DROP);
    int top = last_cap();
    if (caps) {
        /* the bounding set needs CAP_SETPCAP, which the uid change below takes away */
        for (int c = 0; c <= top; c++)
            if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                launch_die_errno("caps", "PR_CAPBSET_DROP");
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
            launch_die_errno("caps", "clear ambient capabilities");
    }
    if (drop_uid) {
        if (!plan->userns || plan->root_mapped) {
            if (setgroups(0, NULL) < 0) launch_die_errno("uid", "setgroups");
        }
        if (setresgid(uid, uid, uid) < 0) launch_die_errno("uid", "setresgid");
        if (setresuid(uid, uid, uid) < 0) launch_die_errno("uid", "setresuid");
        if (getuid() == 0 || geteuid() == 0) launch_fatal("uid", "still uid 0 after setresuid");
        launch_layer(EXEC_LAYER_UID_DROP, EXEC_LAYER_ACTIVE, "uid/gid %d%s", (int)uid,
                     plan->root_mapped ? " (outer nobody)" : "");
    } else {
        launch_layer(EXEC_LAYER_UID_DROP, EXEC_LAYER_DISABLED, "test switch");
    }
    if (caps) {
        /* inside a user namespace a non-zero uid keeps the capabilities it was born with */
        struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct data[2];
        memset(data, 0, sizeof data);
        if (syscall(SYS_capset, &hdr, data) < 0) launch_die_errno("caps", "capset");
        launch_layer(EXEC_LAYER_CAPS_DROP, EXEC_LAYER_ACTIVE,
                     "effective, permitted, inheritable, ambient and bounding sets empty");
    } else {
        launch_layer(EXEC_LAYER_CAPS_DROP, EXEC_LAYER_DISABLED, "test switch");
    }
}

static void set_limit(int res, rlim_t v, const char *name)
{
    struct rlimit rl = {v, v};
    if (setrlimit(res, &rl) < 0) launch_fatal("rlimits", "%s: %s", name, strerror(errno));
}

static void apply_rlimits(const struct launch_cfg *cfg, const struct launch_plan *plan)
{
    set_limit(RLIMIT_CPU, cfg->cpu_seconds, "RLIMIT_CPU");
    set_limit(RLIMIT_FSIZE, cfg->fsize_bytes, "RLIMIT_FSIZE");
    set_limit(RLIMIT_NOFILE, cfg->nofile, "RLIMIT_NOFILE");
    set_limit(RLIMIT_NPROC, plan->landlock_only ? plan->nproc : cfg->pids, "RLIMIT_NPROC");
    set_limit(RLIMIT_CORE, 0, "RLIMIT_CORE");
    if (!plan->memory_cgroup) {
        /* no cgroup: address space is the only memory cap; it counts reservations (thread
           arenas, BLAS buffers), so it gets headroom over the memory limit */
        uint64_t as = cfg->memory_bytes * 4;
        if (as < (1ull << 30)) as = 1ull << 30;
        set_limit(RLIMIT_AS, as, "RLIMIT_AS");
    }
}

/* One read from the pool's socket (init's stdin). At most one descriptor may come with the
   request, on its first bytes; any other is closed and refused. A pipe or file (run by hand)
   has no ancillary data: plain read. */
static ssize_t recv_part(char *buf, size_t len, int *fd_out, bool first)
{
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {buf, len};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    ssize_t n = recvmsg(STDIN_FILENO, &mh, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == ENOTSOCK) return read(STDIN_FILENO, buf, len);
    if (n < 0) return n;
    if (mh.msg_flags & MSG_CTRUNC) launch_fatal("code", "more than one descriptor with the code");
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int fd;
        memcpy(&fd, CMSG_DATA(c), sizeof fd);
        if (!first || *fd_out >= 0 || c->cmsg_len != CMSG_LEN(sizeof(int))) {
            close(fd);
            launch_fatal("code", "an unexpected descriptor came with the code");
        }
        *fd_out = fd;
    }
    return n;
}

/* "CPU_SECONDS[ FILE_CAP CALL_CAP COUNT_CAP][ B]\nCODE" from stdin (B: the bridge descriptor came
   on the first bytes), bounded; NULL on EOF before any byte (a warm sandbox the pool discarded). */
static char *read_request(struct launch_cfg *run)
{
    size_t cap = EXEC_MAX_CODE_BYTES + 32, len = 0;
    char *buf = malloc(cap + 1);
    if (!buf) launch_fatal("code", "out of memory");
    int fd = -1;
    for (;;) {
        // cppcheck-suppress nullPointerArithmeticRedundantCheck ; launch_fatal does not return
        ssize_t n = recv_part(buf + len, cap - len, &fd, len == 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) launch_fatal("code", "reading the code: %s", strerror(errno));
        if (n == 0) break;
        len += (size_t)n;
        if (len == cap) launch_fatal("code", "more than %u bytes of code", EXEC_MAX_CODE_BYTES);
    }
    if (len == 0) {
        free(buf);
        if (fd >= 0) close(fd);
        return NULL;
    }
    buf[len] = '\0';
    char *nl = memchr(buf, '\n', len);
    if (!nl) launch_fatal("code", "no CPU seconds line before the code");
    // cppcheck-suppress nullPointerRedundantCheck ; launch_fatal does not return
    *nl = '\0';
    char *end;
    unsigned long cpu = strtoul(buf, &end, 10);
    /* " FILE_CAP CALL_CAP COUNT_CAP": hand the output files back after the run */
    uint64_t caps[3];
    const char *after;
    if (ptc_parse_u64s(end, caps, 3, &after) == 0 && caps[2] <= UINT_MAX) {
        run->files = true;
        run->files_file_cap = caps[0];
        run->files_call_cap = caps[1];
        run->files_count_cap = (unsigned)caps[2];
        end += after - end;
    }
    bool bridge = strcmp(end, " B") == 0;
    if ((*end && !bridge) || cpu == 0 || cpu > LAUNCH_WARM_CPU_SECONDS)
        launch_fatal("code", "bad request line '%s'", buf);
    if (bridge != (fd >= 0))
        launch_fatal("code", "the bridge descriptor did not come as announced");
    run->cpu_seconds = (unsigned)cpu;
    run->bridge_fd = fd;
    run->code = nl + 1;
    if (strlen(run->code) != len - (size_t)(nl + 1 - buf))
        launch_fatal("code", "the code contains a NUL byte");
    return buf;
}

/* CPU time the process has used, in whole seconds rounded up */
static unsigned long used_cpu_seconds(pid_t pid)
{
    clockid_t id;
    struct timespec ts;
    if (clock_getcpuclockid(pid, &id) != 0 || clock_gettime(id, &ts) < 0) return 1;
    return (unsigned long)ts.tv_sec + (ts.tv_nsec > 0 ? 1 : 0);
}

/* Waits for the code while watching the interpreter: if it dies before the code came (a
   broken --python), its end is reported as a run's would be. Returns the request buffer, or
   NULL when the pool discarded this sandbox (EOF) or the interpreter is gone (*py_gone). */
static char *wait_request(struct launch_cfg *run, pid_t py, bool *py_gone)
{
    *py_gone = false;
    int pfd = (int)syscall(SYS_pidfd_open, py, 0);
    for (;;) {
        struct pollfd pf[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                               {.fd = pfd, .events = POLLIN}};
        int r = poll(pf, pfd >= 0 ? 2 : 1, -1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) launch_fatal("code", "poll: %s", strerror(errno));
        if (pf[0].revents) break;
        if (pfd >= 0 && pf[1].revents) {
            *py_gone = true;
            close(pfd);
            return NULL;
        }
    }
    if (pfd >= 0) close(pfd);
    return read_request(run);
}

/* Hands the run to the waiting interpreter: one header byte ('B' carrying the bridge, or '-'),
   then the code, then EOF (a half close: the bootstrap's end-of-program line comes back on
   the same socket). A dead interpreter (EPIPE) is not an error here: its end is. */
static void send_code(int chan, const struct launch_cfg *run)
{
    char h = run->bridge_fd >= 0 ? 'B' : '-';
    char ctl[CMSG_SPACE(sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    struct iovec iov = {&h, 1};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (run->bridge_fd >= 0) {
        mh.msg_control = ctl;
        mh.msg_controllen = sizeof ctl;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &run->bridge_fd, sizeof(int));
    }
    ssize_t w;
    do {
        w = sendmsg(chan, &mh, MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    size_t len = strlen(run->code), off = 0;
    while (w > 0 && off < len) {
        w = send(chan, run->code + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            w = 1;
        else if (w > 0)
            off += (size_t)w;
    }
    /* EOF for the bootstrap's read; the other way stays open for its end-of-program line */
    shutdown(chan, SHUT_WR);
}

/* Nothing in the output folder (or no folder): init would have nothing to hand back after the
   interpreter's end, so the answer may go before it. Unreadable counts as not empty. */
static bool outputs_empty(const struct launch_plan *plan)
{
    char dir[LAUNCH_PATH_MAX];
    launch_fmt_path(dir, sizeof dir, plan->landlock_only ? plan->run_dir : "/tmp",
                    "/" LAUNCH_OUTPUT_DIR_NAME);
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT;
    bool empty = true;
    struct dirent *e;
    while (empty && (e = readdir(d)))
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty;
}

/* The answer before the interpreter's end: no files ("D STATUS", the files' end, on stdin when
   the pool asked for them), then "answer STATUS" on the status pipe. A failed send only means
   the pool is gone; the end is reported either way. */
static void answer_early(const struct launch_cfg *run, int status)
{
    if (run->files) {
        char line[32];
        int n = snprintf(line, sizeof line, "D %d\n", status);
        ssize_t w;
        do {
            w = send(STDIN_FILENO, line, (size_t)n, MSG_NOSIGNAL);
        } while (w < 0 && errno == EINTR);
    }
    launch_report("answer %d", status);
}

/* The interpreter ended: the files (unless the answer went already) and how it ended. */
_Noreturn static void report_end(const struct launch_cfg *run, const struct launch_plan *plan,
                                 int st, bool answered)
{
    if (run->files && !answered)
        launch_outputs_send(plan, run->files_file_cap, run->files_call_cap, run->files_count_cap);
    if (WIFSIGNALED(st))
        launch_report("signal %d", WTERMSIG(st));
    else
        launch_report("exit %d", WEXITSTATUS(st));
    _exit(0);
}

/* One line "E STATUS" from the bootstrap, read from the channel (chan; -1 closes it). Only the
   first line counts, and only when it parses: the code can write on that socket too, which
   gains it nothing it could not do with sys.exit. */
static int read_end_line(int chan, char *line, size_t *len, size_t cap, int *status)
{
    char buf[32];
    ssize_t n = read(chan, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
    if (n <= 0) return -1;
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] != '\n') {
            if (*len + 1 >= cap) return -1;
            line[(*len)++] = buf[i];
            continue;
        }
        line[*len] = '\0';
        uint64_t v;
        if (strncmp(line, "E ", 2) != 0 || ptc_parse_u64(line + 2, NULL, &v) < 0 || v > 255)
            return -1;
        *status = (int)v;
        return 1;
    }
    return 0;
}

/* The run's timeout (LAUNCH_STOP_SIGNAL, forwarded by the launcher): kill the code but not init.
   PID 1 of a namespace: -1 is every process in it but init. Without a PID namespace -1 would
   reach the host's processes of our uid, so only the interpreter is killed; what it started is
   the launcher's to kill (it is their subreaper). */
static void stop_code(const struct launch_plan *plan, pid_t py)
{
    kill((plan->ns_flags & CLONE_NEWPID) ? -1 : py, SIGKILL);
}

/* Reaps every child until the interpreter ends and returns its wait status. LAUNCH_STOP_SIGNAL
   (the run's timeout, forwarded by the launcher) kills the code but not init, so the files
   the code wrote before it still go back. Both signals have been blocked since the clone (the
   launcher's mask; the interpreter unblocks them before exec), so none is lost between the
   reaping and the wait: a blocked signal is queued even for a PID namespace's init. */
static int wait_interpreter(const struct launch_plan *plan, pid_t py, bool stopped)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, LAUNCH_STOP_SIGNAL);
    for (;;) {
        int st;
        pid_t r;
        while ((r = waitpid(-1, &st, WNOHANG)) > 0)
            if (r == py) return st;
        if (r < 0 && errno != EINTR) launch_fatal("wait", "%s", strerror(errno));
        int sig = sigwaitinfo(&set, NULL);
        if (sig != LAUNCH_STOP_SIGNAL || stopped) continue;
        stopped = true;
        stop_code(plan, py);
    }
}

/* init after the hand-over: reap everything; when the bootstrap says the program ended, answer
   (when nothing is left to hand back); when the interpreter ends, say how, and leave (taking the
   PID namespace with us). Orphans are reaped every 100 ms while the channel is open,
   as a session's init does; after it, by a blocking wait. */
_Noreturn static void wait_end(const struct launch_cfg *run, const struct launch_plan *plan,
                               pid_t py, int chan)
{
    int pfd = chan >= 0 ? (int)syscall(SYS_pidfd_open, py, 0) : -1;
    char line[16];
    size_t len = 0;
    bool answered = false;
    int st;
    pid_t r;
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, LAUNCH_STOP_SIGNAL);
    const struct timespec now = {0, 0};
    bool stopped = false;
    while (chan >= 0) {
        /* the stop signal stays blocked (wait_interpreter takes it after the channel): looked
           for at every turn, so a timeout is acted on within 100 ms */
        if (!stopped && sigtimedwait(&stop, NULL, &now) == LAUNCH_STOP_SIGNAL) {
            stopped = true;
            stop_code(plan, py);
        }
        struct pollfd pf[2] = {{.fd = chan, .events = POLLIN}, {.fd = pfd, .events = POLLIN}};
        int k = poll(pf, pfd >= 0 ? 2 : 1, 100);
        if (k < 0 && errno != EINTR) launch_fatal("wait", "poll: %s", strerror(errno));
        int status = 0, got = k > 0 && pf[0].revents
                                  ? read_end_line(chan, line, &len, sizeof line, &status)
                                  : 0;
        if (got == 1 && outputs_empty(plan)) {
            answer_early(run, status);
            answered = true;
        }
        if (got != 0) {
            close(chan);
            chan = -1;
        }
        while ((r = waitpid(-1, &st, WNOHANG)) > 0)
            if (r == py) report_end(run, plan, st, answered);
    }
    if (pfd >= 0) close(pfd);
    report_end(run, plan, wait_interpreter(plan, py, stopped), answered);
}

/* with --ro-lib the interpreter reads PYTHONPATH, so only our PYTHON* variables may remain */
static void set_module_path(const struct launch_cfg *cfg, const struct launch_plan *plan)
{
    for (bool again = true; again;) {
        again = false;
        for (char **e = environ; *e; e++) {
            if (strncmp(*e, "PYTHON", 6) != 0 || strncmp(*e, "PYTHONDONTWRITEBYTECODE=", 24) == 0 ||
                strncmp(*e, "PYTHONUNBUFFERED=", 17) == 0)
                continue;
            char name[128];
            size_t n = strcspn(*e, "=");
            if (n >= sizeof name) launch_die_errno("exec", "variable name too long");
            memcpy(name, *e, n);
            // cppcheck-suppress arrayIndexOutOfBoundsCond ; launch_die_errno does not return
            name[n] = '\0';
            if (unsetenv(name) < 0) launch_die_errno("exec", "unsetenv");
            again = true;
            break;
        }
    }
    /* Landlock-only: no mount namespace to move them, so the host paths themselves */
    char path[(LAUNCH_PATH_MAX + 1) * (EXEC_MAX_PATH_DIRS + 1)];
    size_t off = 0;
    path[0] = '\0';
    for (size_t i = 0; i < cfg->n_ro_libs && off + 1 < sizeof path; i++) {
        if (i) path[off++] = ':';
        if (plan->landlock_only)
            snprintf(path + off, sizeof path - off, "%s", cfg->ro_libs[i]);
        else
            launch_ro_lib_path(i, path + off, sizeof path - off);
        off += strlen(path + off);
    }
    if (setenv("PYTHONPATH", path, 1) < 0 || setenv("PYTHONSAFEPATH", "1", 1) < 0 ||
        setenv("PYTHONNOUSERSITE", "1", 1) < 0)
        launch_die_errno("exec", "setenv");
}

/* The interpreter's own first code, run before the user's code is known. It waits on fd 3
   for one byte ('B' with the bridge descriptor attached, or '-') and the code up to EOF, puts
   the bridge on fd 3 (closing the channel first), then runs the code in __main__ as `-c`
   would: same globals, "<string>" as the file name, no inherited future flags (exec of the
   text: the bootstrap has none to give; not compile(), whose first call in an interpreter makes
   the ast module's 120 node types, 1-1.5 ms of every run here, to check whether its argument
   is a tree), and an uncaught exception printed through sys.excepthook without the bootstrap's
   own frame, exit status 1. It deletes its own name first, so the code sees the __main__ that
   -c gives.
   The end of the program (docs/sandbox.md, "The answer before the interpreter's end"): what
   Py_FinalizeEx does first and the run can see - wait for non-daemon threads, the atexit
   handlers, flush stdout and stderr - then "E STATUS\n" on stdin, which is the channel too (a
   socket init shut for writing: reads see EOF as on /dev/null, and no descriptor is added), so
   init can answer while the rest of the finalization and the tear-down go on. Only while fd 0
   is still that socket; a SystemExit whose code is neither None nor a C int (Python prints it)
   takes the ordinary way: no line. */
static const char bootstrap[] = LAUNCH_BOOTSTRAP;

/* The interpreter's child of init: limits, directory, environment, then descriptors 0
   the channel (a session: /dev/null), 1 and 2 the pipes, 3 the code channel (the bootstrap replaces
   it with the bridge when the run has one), nothing else across exec. The status pipe stays
   reachable on fd 4, close-on-exec, until the exec, so that a failure is still reported. */
_Noreturn static void exec_interpreter(const struct launch_cfg *cfg, const struct launch_plan *plan,
                                       int chan)
{
    /* execve's argv is not const; copied before the rlimits (RLIMIT_AS may refuse it later) */
    char *boot = strdup(cfg->session ? launch_session_driver : bootstrap);
    if (!boot) launch_die_errno("exec", "strdup");
    /* a run's stdin is the channel as well (the bootstrap's end-of-program line goes back on
       it); a session's driver keeps the channel on a descriptor of its own */
    if (!cfg->session) {
        if (dup2(chan, 0) < 0) launch_die_errno("exec", "stdin");
    } else {
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull < 0 || dup2(devnull, 0) < 0) launch_die_errno("exec", "stdin /dev/null");
        close(devnull);
    }
    const char *tmp = plan->landlock_only ? plan->run_dir : "/tmp";
    if (chdir(tmp) < 0) launch_die_errno("exec", "chdir to the run's directory");
    if (plan->landlock_only) {
        /* init is not PID 1 here: make sure the interpreter does not outlive it */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char outputs[LAUNCH_PATH_MAX];
        launch_fmt_path(outputs, sizeof outputs, tmp, "/" LAUNCH_OUTPUT_DIR_NAME);
        if (setenv("HOME", tmp, 1) < 0 || setenv("TMPDIR", tmp, 1) < 0 ||
            setenv("PTC_OUTPUT_DIR", outputs, 1) < 0)
            launch_die_errno("exec", "setenv");
    }
    if (cfg->ro_lib) set_module_path(cfg, plan);
    /* the limits after the last allocation: RLIMIT_AS counts an ASan build's reservations, so
       a malloc that needs a new mapping would fail after it */
    if (!launch_disabled(cfg, EXEC_LAYER_RLIMITS)) {
        /* CPU: a ceiling above any run's; init lowers it when the code comes */
        struct launch_cfg warm = *cfg;
        warm.cpu_seconds = LAUNCH_WARM_CPU_SECONDS;
        apply_rlimits(&warm, plan);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    /* from here on fd 3 is the channel: a failure before exec must restore the report first */
    int rep = fcntl(LAUNCH_REPORT_FD, F_DUPFD_CLOEXEC, LAUNCH_CODE_FD + 2);
    if (rep < 0) launch_die_errno("exec", "move the status pipe");
    if (dup2(chan, LAUNCH_CODE_FD) < 0) launch_die_errno("exec", "code channel to fd 3");
    if (dup3(rep, LAUNCH_CODE_FD + 1, O_CLOEXEC) < 0) _exit(127);
    if (syscall(SYS_close_range, LAUNCH_CODE_FD + 2, ~0u, 0u) < 0)
        for (int fd = LAUNCH_CODE_FD + 2; fd < 1024; fd++)
            close(fd);
    /* -I: no user site, no PYTHON* variables, no script dir on sys.path; -B: the view is
       read-only anyway; -u: output reaches the pipes before a timeout kill. With --ro-lib,
       -s and the variables set above instead, since -I ignores PYTHONPATH (docs/sandbox.md,
       "The interpreter's flags") */
    if (cfg->resume) {
        /* a zygote's child: this process is already the interpreter (launch_zygote.c). What
           the exec would have done: close the close-on-exec descriptors (here every one past
           the channel), and make the process dumpable again (exec does for a program that is
           not setuid; init made itself undumpable for its uid maps' sake), so the run's /proc/self
           is its own as after an exec */
        free(boot);
        if (syscall(SYS_close_range, LAUNCH_CODE_FD + 1, ~0u, 0u) < 0)
            for (int fd = LAUNCH_CODE_FD + 1; fd < 1024; fd++)
                close(fd);
        prctl(PR_SET_DUMPABLE, 1);
        longjmp(*cfg->resume, 1);
    }
    char o_i[] = "-I", o_s[] = "-s", o_b[] = "-B", o_u[] = "-u", o_c[] = "-c";
    char *args[] = {cfg->python, cfg->ro_lib ? o_s : o_i, o_b, o_u, o_c, boot, NULL};
    execve(cfg->python, args, environ);
    int e = errno;
    dup2(LAUNCH_CODE_FD + 1, LAUNCH_REPORT_FD); /* the report, not the channel */
    launch_fatal("exec", "cannot run %s inside the sandbox: %s", cfg->python, strerror(e));
}

/* A cgroup namespace rooted at the run's cgroup (the launcher's when it made none): the
   interpreter, forked after this, sees "/" in /proc/self/cgroup instead of the host's paths. */
static void cgroup_ns(const struct launch_cfg *cfg, const struct launch_plan *plan)
{
    if (launch_disabled(cfg, EXEC_LAYER_CGROUP_NS)) {
        launch_layer(EXEC_LAYER_CGROUP_NS, EXEC_LAYER_DISABLED, "test switch");
        return;
    }
    if (unshare(CLONE_NEWCGROUP) < 0) {
        /* EINVAL: a kernel without cgroup namespaces; EPERM: no user namespace (Landlock-only
           mode), where the run sees its cgroup's host path */
        launch_layer(EXEC_LAYER_CGROUP_NS, EXEC_LAYER_UNAVAILABLE, "unshare(CLONE_NEWCGROUP): %s",
                     strerror(errno));
        return;
    }
    launch_layer(EXEC_LAYER_CGROUP_NS, EXEC_LAYER_ACTIVE, "rooted at %s",
                 plan->run_cgroup ? "the run's cgroup" : "the server's cgroup (no run cgroup)");
}

_Noreturn void launch_child(const struct launch_cfg *cfg, const struct launch_plan *plan,
                            int sync_fd, int life_fd)
{
    if (cfg->netns_sink >= 0) close(cfg->netns_sink); /* the launcher's, not init's */
    char go = 0;
    ssize_t n;
    do {
        n = read(sync_fd, &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) _exit(125); /* the launcher died or refused: nothing to report to */
    if (setsid() < 0) launch_die_errno("setsid", "setsid");
    if (plan->ns_flags & CLONE_NEWUTS) sethostname("sandbox", 7);

    bool memfd_ok = false;
    launch_setup_rootfs(cfg, plan, &memfd_ok);

    /* the launcher has put us in the cgroup (or given up and killed us): it moved us while the
       root was built. Waited for here, not later, because the cgroup namespace needs the
       capabilities that drop_credentials takes. */
    do {
        n = read(sync_fd, &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1 || go != 'c') _exit(125);
    close(sync_fd);
    cgroup_ns(cfg, plan);

    drop_credentials(cfg, plan);
    /* PDEATHSIG is cleared by the uid change: set it now, then make sure the launcher did not die
       in between (its end of the life pipe would be closed) */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct pollfd pf = {.fd = life_fd, .events = POLLIN};
    if (poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLIN))) _exit(125);
    prctl(PR_SET_DUMPABLE, 0);
    /* the folder whose new files come back with the result; EROFS when the test switch took
       the private /tmp away, and then there is none */
    char outputs[LAUNCH_PATH_MAX];
    launch_fmt_path(outputs, sizeof outputs, plan->landlock_only ? plan->run_dir : "/tmp",
                    "/" LAUNCH_OUTPUT_DIR_NAME);
    if (mkdir(outputs, 0755) < 0 && errno != EEXIST && errno != EROFS && errno != EACCES)
        launch_die_errno("outputs", outputs);

    if (launch_disabled(cfg, EXEC_LAYER_NO_NEW_PRIVS)) {
        launch_layer(EXEC_LAYER_NO_NEW_PRIVS, EXEC_LAYER_DISABLED, "test switch");
    } else {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) launch_die_errno("no-new-privs", "prctl");
        launch_layer(EXEC_LAYER_NO_NEW_PRIVS, EXEC_LAYER_ACTIVE, "PR_SET_NO_NEW_PRIVS");
    }

    char err[EXEC_REASON_MAX];
    if (launch_disabled(cfg, EXEC_LAYER_LANDLOCK)) {
        launch_layer(EXEC_LAYER_LANDLOCK, EXEC_LAYER_DISABLED, "test switch");
    } else {
        int r = launch_landlock_apply(cfg, plan, err, sizeof err);
        if (r < 0) launch_fatal("landlock", "%s", err);
        launch_layer(EXEC_LAYER_LANDLOCK, r ? EXEC_LAYER_ACTIVE : EXEC_LAYER_UNAVAILABLE, "%s",
                     err);
    }

    if (launch_disabled(cfg, EXEC_LAYER_RLIMITS))
        launch_layer(EXEC_LAYER_RLIMITS, EXEC_LAYER_DISABLED, "test switch");
    else
        launch_layer(EXEC_LAYER_RLIMITS, EXEC_LAYER_ACTIVE,
                     "cpu timeout+2s, fsize %llu MiB, nofile %u, nproc %u, core 0%s",
                     (unsigned long long)(cfg->fsize_bytes >> 20), cfg->nofile,
                     plan->landlock_only ? plan->nproc : cfg->pids,
                     plan->memory_cgroup ? "" : ", address space (no memory cgroup)");

    if (launch_disabled(cfg, EXEC_LAYER_SECCOMP)) {
        launch_layer(EXEC_LAYER_SECCOMP, EXEC_LAYER_DISABLED, "test switch");
    } else {
        if (launch_seccomp_apply(err, sizeof err) < 0) launch_fatal("seccomp", "%s", err);
        launch_layer(EXEC_LAYER_SECCOMP, EXEC_LAYER_ACTIVE, "%s%s", err,
                     memfd_ok ? "" : ", memfd_create denied");
    }

    /* The interpreter starts now, before the code is known (a warm sandbox waits here for a
       run), and blocks in its bootstrap reading the code from fd 3; init hands it over once
       the pool sends it. Cold and warm runs take this same path. */
    int chan[2], limits[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) < 0)
        launch_die_errno("fork", "socketpair for the code");
    if (pipe2(limits, O_CLOEXEC) < 0) launch_die_errno("fork", "pipe");
    pid_t py = fork();
    if (py < 0) launch_die_errno("fork", "fork interpreter");
    if (py == 0) {
        close(limits[0]);
        exec_interpreter(cfg, plan, chan[1]);
    }
    close(chan[1]);
    close(life_fd);
    /* the child closes its end once its own limits are set: lowering RLIMIT_CPU below must
       come after, or the child's setrlimit of the ceiling would fail */
    close(limits[1]);
    while (read(limits[0], &go, 1) < 0 && errno == EINTR) {
    }
    close(limits[0]);

    if (cfg->session) launch_session_init(cfg, plan, py, chan[0]);
    struct launch_cfg run = *cfg;
    char *code_buf = NULL;
    int end_chan = -1;
    if (!run.code) {
        bool py_gone;
        code_buf = wait_request(&run, py, &py_gone);
        if (!code_buf && !py_gone) {
            /* discarded unused: nothing to report (without a PID namespace init is not PID 1,
               so the interpreter is killed here rather than by the kernel) */
            kill(py, SIGKILL);
            waitpid(py, NULL, 0);
            _exit(0);
        }
    }
    if (code_buf || run.code) {
        /* RLIMIT_CPU counts from the interpreter's start; the run gets its full allowance on
           top of what the start-up used (lowering a limit needs no privilege) */
        if (!launch_disabled(cfg, EXEC_LAYER_RLIMITS)) {
            rlim_t v = (rlim_t)run.cpu_seconds + used_cpu_seconds(py);
            struct rlimit rl = {v, v};
            if (prlimit(py, RLIMIT_CPU, &rl, NULL) < 0) {
                kill(py, SIGKILL);
                launch_fatal("rlimits", "RLIMIT_CPU of the interpreter: %s", strerror(errno));
            }
        }
        send_code(chan[0], &run);
        end_chan = chan[0];
    } else {
        close(chan[0]);
    }
    /* only the interpreter (and what it starts) holds the bridge now */
    if (run.bridge_fd >= 0) close(run.bridge_fd);
    free(code_buf);
    run.code = NULL; /* it pointed into code_buf */
    wait_end(&run, plan, py, end_chan);
}
