/*
 * ptc-sandbox-launch: the helper between the server and the interpreter.
 *
 * Why a helper program: uv_spawn has no hook between fork and exec, and the server's process
 * may have threads (libuv's pool), after which a forked child may only call async-signal-safe
 * functions - libseccomp, mount setup and error reporting are not. This program is
 * single-threaded, so it can clone with namespaces, build the filesystem view, drop credentials
 * and load seccomp with ordinary code, and the server keeps plain uv_spawn, pipes and exit
 * callbacks. The price is one extra exec (about a millisecond).
 *
 * Process tree: server -> launcher (this, host namespaces, writes the id maps, owns the cgroup)
 * -> init (PID 1 of a new PID namespace, applies every layer) -> python (PID 2). When init
 * exits, the kernel kills everything else in the namespace, so no descendant outlives the run.
 * SIGTERM to the launcher kills init at once; the launcher dying kills init (PDEATHSIG);
 * SIGUSR1 (LAUNCH_STOP_SIGNAL) asks init to kill the code and send its output files first.
 *
 * Usage: ptc-sandbox-launch [options] -- CODE; status lines go to fd 3 (see docs/sandbox.md).
 */
#include "launch.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define KILL_ROUNDS 10000 /* x 1 ms at most, for a tree that keeps forking */

#define USAGE                                                                                      \
    "usage: ptc-sandbox-launch --python PATH [--prefix DIR]... [--mount SRC:DST:ro|rw]...\n"       \
    "       [--memory BYTES] [--tmp-size BYTES] [--pids N] [--cpu-seconds N] [--fsize BYTES]\n"    \
    "       [--cpu-millis N] [--nofile N] [--disable LAYER] [--ro-lib DIR] [--session]\n"          \
    "       [-- CODE]\n"                                                                           \
    "Without CODE, init reads \"CPU_SECONDS[ FILE_CAP CALL_CAP COUNT][ B]\\nCODE\" from stdin "    \
    "once\n"                                                                                       \
    "it is set up (the caps: send the output files back on stdin after the run; B: the\n"          \
    "bridge descriptor comes with the first bytes, SCM_RIGHTS). --session: cells come on stdin\n"  \
    "until EOF (launch_session.c).\n"                                                              \
    "Status lines go to fd 3. Started by ptc-mcp; see docs/sandbox.md.\n"

void launch_report(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    /* one line, one write: lines from the launcher and init never interleave mid-line */
    for (int i = 0; i < n; i++)
        if (line[i] == '\n') line[i] = ' ';
    line[n++] = '\n';
    ssize_t w;
    do {
        w = write(LAUNCH_REPORT_FD, line, (size_t)n);
    } while (w < 0 && errno == EINTR);
}

void launch_layer(exec_layer_id_t id, exec_layer_state_t state, const char *fmt, ...)
{
    char reason[EXEC_REASON_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    const char *st = state == EXEC_LAYER_ACTIVE        ? "active"
                     : state == EXEC_LAYER_DISABLED    ? "disabled"
                     : state == EXEC_LAYER_UNAVAILABLE ? "unavailable"
                                                       : "unknown";
    launch_report("layer %s %s %s", exec_layer_name(id), st, reason);
}

void launch_fatal(const char *stage, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    launch_report("error %s: %s", stage, msg);
    _exit(126);
}

bool launch_disabled(const struct launch_cfg *cfg, exec_layer_id_t id)
{
    return cfg->disabled == (int)id;
}

void launch_ro_lib_path(size_t i, char *buf, size_t len)
{
    if (i == 0)
        snprintf(buf, len, "%s", EXEC_RO_LIB_PATH);
    else
        snprintf(buf, len, "%s%zu", EXEC_RO_LIB_PATH, i);
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') return -1;
    *out = v;
    return 0;
}

static int parse_mount(char *spec, struct launch_mount *m)
{
    /* SRC:DST:ro|rw, both absolute; the pool has validated and canonicalised them already */
    char *a = strchr(spec, ':');
    if (!a) return -1;
    char *b = strchr(a + 1, ':');
    if (!b) return -1;
    *a = '\0';
    *b = '\0';
    m->src = spec;
    m->dst = a + 1;
    if (strcmp(b + 1, "rw") == 0)
        m->rw = true;
    else if (strcmp(b + 1, "ro") == 0)
        m->rw = false;
    else
        return -1;
    return (m->src[0] == '/' && m->dst[0] == '/' && strcmp(m->dst, "/") != 0) ? 0 : -1;
}

static int parse_args(int argc, char **argv, struct launch_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->memory_bytes = EXEC_DEFAULT_MEMORY_BYTES;
    cfg->tmp_bytes = EXEC_DEFAULT_TMP_BYTES;
    cfg->fsize_bytes = EXEC_DEFAULT_FSIZE_BYTES;
    cfg->pids = EXEC_DEFAULT_PIDS;
    cfg->cpu_millis = EXEC_DEFAULT_CPU_MILLIS;
    cfg->cpu_seconds = 60;
    cfg->nofile = EXEC_DEFAULT_NOFILE;
    cfg->disabled = -1;
    cfg->bridge_fd = -1;
    int i = 1;
    for (; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(o, "--session") == 0) {
            cfg->session = true;
            continue;
        }
        if (i + 1 >= argc) return -1;
        char *v = argv[++i];
        uint64_t n = 0;
        if (strcmp(o, "--python") == 0) {
            cfg->python = v;
        } else if (strcmp(o, "--prefix") == 0) {
            if (cfg->n_prefixes >= LAUNCH_MAX_PREFIXES || v[0] != '/') return -1;
            cfg->prefixes[cfg->n_prefixes++] = v;
        } else if (strcmp(o, "--mount") == 0) {
            if (cfg->n_mounts >= LAUNCH_MAX_MOUNTS) return -1;
            if (parse_mount(v, &cfg->mounts[cfg->n_mounts++]) < 0) return -1;
        } else if (strcmp(o, "--ro-lib") == 0) {
            if (v[0] != '/' || cfg->ro_lib) return -1;
            cfg->ro_lib = v; /* split in place below: from then on the first folder only */
            char *save = NULL;
            for (char *d = strtok_r(v, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                if (d[0] != '/' || cfg->n_ro_libs > EXEC_MAX_PATH_DIRS) return -1;
                cfg->ro_libs[cfg->n_ro_libs++] = d;
            }
            if (cfg->n_ro_libs == 0) return -1;
        } else if (strcmp(o, "--disable") == 0) {
            cfg->disabled = exec_layer_from_name(v);
            if (cfg->disabled < 0) return -1;
        } else if (parse_u64(v, &n) < 0) {
            return -1;
        } else if (strcmp(o, "--memory") == 0) {
            cfg->memory_bytes = n;
        } else if (strcmp(o, "--tmp-size") == 0) {
            cfg->tmp_bytes = n;
        } else if (strcmp(o, "--fsize") == 0) {
            cfg->fsize_bytes = n;
        } else if (strcmp(o, "--pids") == 0 && n > 0 && n < 100000) {
            cfg->pids = (unsigned)n;
        } else if (strcmp(o, "--cpu-millis") == 0 && n >= EXEC_MIN_CPU_MILLIS &&
                   n <= EXEC_MAX_CPU_MILLIS) {
            cfg->cpu_millis = (unsigned)n;
        } else if (strcmp(o, "--cpu-seconds") == 0 && n > 0 && n < 1000000) {
            cfg->cpu_seconds = (unsigned)n;
        } else if (strcmp(o, "--nofile") == 0 && n >= 16 && n < 1000000) {
            cfg->nofile = (unsigned)n;
        } else {
            return -1;
        }
    }
    if (!cfg->python || cfg->python[0] != '/') return -1;
    if (i == argc) return 0;     /* no CODE: it comes on stdin (a warm sandbox, a session) */
    if (cfg->session) return -1; /* a session's cells come on stdin only */
    if (i != argc - 1) return -1;
    cfg->code = argv[i];
    return 0;
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    int err = (w == (ssize_t)len) ? 0 : (w < 0 ? -errno : -EIO);
    close(fd);
    return err;
}

static int write_id_maps(pid_t pid, bool root)
{
    char path[64], map[128];
    int r;
    if (root) {
        /* inside 0 = outer 0 so that init can still bind root-owned paths (a Python prefix under
           /root) before it drops to 1000, which is the outer nobody */
        snprintf(map, sizeof map, "0 0 1\n%d %d 1\n", LAUNCH_INNER_UID, LAUNCH_NOBODY);
        snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
        if ((r = write_file(path, map)) < 0) return r;
        snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
        return write_file(path, map);
    }
    snprintf(path, sizeof path, "/proc/%d/setgroups", (int)pid);
    if ((r = write_file(path, "deny")) < 0) return r;
    snprintf(map, sizeof map, "%d %d 1\n", LAUNCH_INNER_UID, (int)geteuid());
    snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
    if ((r = write_file(path, map)) < 0) return r;
    snprintf(map, sizeof map, "%d %d 1\n", LAUNCH_INNER_UID, (int)getegid());
    snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
    return write_file(path, map);
}

static pid_t raw_clone(int flags)
{
    /* fork semantics with namespace flags; fine here because this program has one thread */
    return (pid_t)syscall(SYS_clone, (unsigned long)flags | SIGCHLD, NULL, NULL, NULL, NULL);
}

/* processes of our uid now: RLIMIT_NPROC counts them too when there is no user namespace */
static unsigned count_own_processes(void)
{
    DIR *d = opendir("/proc");
    unsigned n = 0;
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) == 0 && st.st_uid == getuid()) n++;
    }
    closedir(d);
    return n;
}

/* Without a PID namespace this program is a subreaper: orphans of the run become our children.
   Kill children until none is left (a killed child's own children are reparented to us). */
static void kill_descendants(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    for (int round = 0; round < KILL_ROUNDS; round++) {
        bool any = false;
        FILE *f = fopen(path, "re");
        int p;
        while (f && fscanf(f, "%d", &p) == 1) {
            kill(p, SIGKILL);
            any = true;
        }
        if (f) fclose(f);
        while (waitpid(-1, NULL, WNOHANG) > 0)
            any = true;
        if (!any) return;
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* the per-run directory of the Landlock-only mode; FTW_PHYS: never follow the run's links */
static void remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static const struct {
    int flag;
    exec_layer_id_t id;
} ns_layers[] = {
    {CLONE_NEWPID, EXEC_LAYER_PID_NS},  {CLONE_NEWNET, EXEC_LAYER_NET_NS},
    {CLONE_NEWNS, EXEC_LAYER_MOUNT_NS}, {CLONE_NEWIPC, EXEC_LAYER_IPC_NS},
    {CLONE_NEWUTS, EXEC_LAYER_UTS_NS},
};
#define N_NS_LAYERS (sizeof ns_layers / sizeof ns_layers[0])

/* A descriptor of init's net namespace, opened while init lives (-1 when it cannot be), for
   hand_netns at the run's end. */
static int open_netns(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* Hands the zygote the ended run's net namespace (fd, from open_netns; SCM_RIGHTS on its sink),
   so that the namespace outlives the run until the zygote closes a batch of them: the kernel
   tears a net namespace down in a worker, and a pass over a batch costs about half as much per
   namespace as a pass for each (docs/sandbox.md). Best effort: a namespace not handed goes now.
   Closes fd and sink. */
static void hand_netns(int sink, int fd)
{
    if (fd >= 0 && sink >= 0) {
        char byte = 'n';
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } u;
        memset(&u, 0, sizeof u);
        struct msghdr m = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
        (void)sendmsg(sink, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    if (fd >= 0) close(fd);
    if (sink >= 0) close(sink);
}

int launch_main(int argc, char **argv, jmp_buf *resume, int netns_sink)
{
    /* run by hand without fd 3: report on stderr, and keep fd 3 from being reused */
    if (fcntl(LAUNCH_REPORT_FD, F_GETFD) < 0 && dup2(STDERR_FILENO, LAUNCH_REPORT_FD) < 0) return 2;
    struct launch_cfg cfg;
    if (parse_args(argc, argv, &cfg) < 0) {
        fputs(USAGE, stderr);
        launch_report("error arguments: the launcher was started with invalid arguments");
        return 2;
    }
    cfg.resume = resume;
    cfg.netns_sink = netns_sink == LAUNCH_NETNS_FD ? LAUNCH_NETNS_FD : -1;
    /* anything the server leaked past fd 3 must not reach the sandbox (the bridge comes later,
       with the code, over stdin) */
    unsigned first = cfg.netns_sink >= 0 ? LAUNCH_NETNS_FD + 1 : LAUNCH_REPORT_FD + 1;
    if (syscall(SYS_close_range, first, ~0u, 0u) < 0) {
        for (int fd = (int)first; fd < 1024; fd++)
            close(fd);
    }
    fcntl(LAUNCH_REPORT_FD, F_SETFD, FD_CLOEXEC);
    /* server gone -> SIGTERM -> the normal tear-down path below */
    prctl(PR_SET_PDEATHSIG, SIGTERM);

    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, LAUNCH_STOP_SIGNAL);
    sigprocmask(SIG_BLOCK, &set, &old);

    bool root = geteuid() == 0;
    struct launch_plan plan = {0};
    /* orphans of the run come to us when there is no PID namespace to hold them */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    for (size_t i = 0; i < N_NS_LAYERS; i++)
        if (!launch_disabled(&cfg, ns_layers[i].id)) plan.ns_flags |= ns_layers[i].flag;

    launch_idmap_mounts(&cfg, root); /* before the clone: init inherits the trees */
    struct launch_cgroup *cg = NULL;
    cg = launch_cgroup_create(&cfg); /* reports the cgroup layers either way */
    plan.memory_cgroup = launch_cgroup_has_memory(cg);
    plan.run_cgroup = cg != NULL;

    int sync_p[2], life_p[2];
    if (pipe2(sync_p, O_CLOEXEC) < 0 || pipe2(life_p, O_CLOEXEC) < 0)
        launch_fatal("pipe", "%s", strerror(errno));

    pid_t pid = -1;
    int userns_err = 0;
    if (!launch_disabled(&cfg, EXEC_LAYER_USER_NS)) {
        pid = raw_clone(plan.ns_flags | CLONE_NEWUSER);
        if (pid < 0) userns_err = errno;
    }
    if (pid < 0 && root) {
        pid = raw_clone(plan.ns_flags);
    } else if (pid >= 0 && !launch_disabled(&cfg, EXEC_LAYER_USER_NS)) {
        plan.userns = true;
    } else if (pid < 0 && (userns_err == 0 || userns_err == EPERM || userns_err == ENOSPC ||
                           userns_err == EINVAL || userns_err == EACCES)) {
        /* an ordinary user without user namespaces (Ubuntu's AppArmor rule, Docker, a sysctl) */
        if (cfg.n_mounts)
            launch_fatal("namespaces", "--mount needs a user namespace, which this host refuses "
                                       "(docs/sandbox.md)");
        plan.landlock_only = true;
        plan.ns_flags = 0;
        snprintf(plan.run_dir, sizeof plan.run_dir, "/tmp/ptc-run-XXXXXX");
        if (!mkdtemp(plan.run_dir)) launch_fatal("tmp", "mkdtemp: %s", strerror(errno));
        plan.nproc = count_own_processes() + cfg.pids;
        pid = raw_clone(0);
    }
    if (pid < 0) {
        int e = errno;
        if (userns_err == ENOSPC || userns_err == EPERM)
            launch_fatal("namespaces",
                         "cannot create a user namespace (%s); enable unprivileged user "
                         "namespaces (docs/sandbox.md) or run ptc-mcp as root",
                         strerror(userns_err));
        launch_fatal("namespaces", "clone: %s", strerror(e));
    }
    plan.root_mapped = plan.userns && root;
    if (pid == 0) {
        close(sync_p[1]);
        close(life_p[1]);
        launch_child(&cfg, &plan, sync_p[0], life_p[0]);
    }
    close(sync_p[0]);
    close(life_p[0]);
    int netns = cfg.netns_sink >= 0 && (plan.ns_flags & CLONE_NEWNET) ? open_netns(pid) : -1;
    for (size_t i = 0; i < cfg.n_mounts; i++)
        if (cfg.mounts[i].tree_fd >= 0) close(cfg.mounts[i].tree_fd); /* init has them */

    if (launch_disabled(&cfg, EXEC_LAYER_USER_NS))
        launch_layer(EXEC_LAYER_USER_NS, EXEC_LAYER_DISABLED, "test switch");
    else if (plan.userns)
        launch_layer(EXEC_LAYER_USER_NS, EXEC_LAYER_ACTIVE, "sandbox uid %d", LAUNCH_INNER_UID);
    else
        launch_layer(EXEC_LAYER_USER_NS, EXEC_LAYER_UNAVAILABLE, "clone(CLONE_NEWUSER): %s; %s",
                     strerror(userns_err),
                     root ? "running as root without one" : "Landlock-only mode");
    for (size_t i = 0; i < N_NS_LAYERS; i++) {
        if (plan.ns_flags & ns_layers[i].flag)
            launch_layer(ns_layers[i].id, EXEC_LAYER_ACTIVE, "new namespace");
        else if (launch_disabled(&cfg, ns_layers[i].id))
            launch_layer(ns_layers[i].id, EXEC_LAYER_DISABLED, "test switch");
        else
            launch_layer(ns_layers[i].id, EXEC_LAYER_UNAVAILABLE, "needs a user namespace");
    }
    if (plan.ns_flags & CLONE_NEWPID)
        launch_layer(EXEC_LAYER_PROCESS_TREE, EXEC_LAYER_ACTIVE,
                     "PID namespace: init's exit kills every descendant");
    else
        launch_layer(EXEC_LAYER_PROCESS_TREE, EXEC_LAYER_ACTIVE,
                     "subreaper: the launcher kills every descendant at the end");

    int map_err = plan.userns ? write_id_maps(pid, root) : 0;
    if (map_err < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        launch_cgroup_destroy(cg);
        launch_fatal("namespaces", "writing the id maps: %s", strerror(-map_err));
    }
    /* go: the child builds its view while we move it into the cgroup (a v1 migration waits for
       an RCU grace period, ~15 ms here); it makes its cgroup namespace, drops its credentials
       and forks the interpreter only after the second byte */
    ssize_t w = write(sync_p[1], "g", 1);
    if (cg && launch_cgroup_attach(cg, pid) < 0) {
        int e = errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        launch_cgroup_destroy(cg);
        launch_fatal("cgroup", "cannot move the sandbox into its cgroup: %s", strerror(e));
    }
    w = write(sync_p[1], "c", 1);
    (void)w;
    close(sync_p[1]);

    /* wait for init; a stop request kills it (and with it its namespace) at once, the one
       that keeps the files (LAUNCH_STOP_SIGNAL) goes to init, which stops the code and sends
       them (the pool falls back to SIGTERM if that takes too long) */
    int status = 0;
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&set, &si);
        if (sig < 0) continue;
        if (sig == SIGCHLD) {
            pid_t r = waitpid(pid, &status, WNOHANG);
            if (r == pid) break;
        } else {
            kill(pid, sig == LAUNCH_STOP_SIGNAL ? LAUNCH_STOP_SIGNAL : SIGKILL);
        }
    }
    if (!(plan.ns_flags & CLONE_NEWPID)) kill_descendants();
    if (plan.landlock_only) remove_tree(plan.run_dir);
    if (cg) {
        if (launch_cgroup_oom(cg)) launch_report("oom");
        launch_cgroup_destroy(cg);
    }
    launch_report("done");
    hand_netns(cfg.netns_sink, netns);
    close(life_p[1]);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return 0;
}
