/*
 * Posture test (what gVisor's does): a live sandbox inspected FROM OUTSIDE, through the host's
 * /proc, instead of asking the code inside what it can do. Three cases: a one-shot run that
 * blocks (the code sleeps in two threads), a warm sandbox (the pool's prebuilt one, its
 * interpreter waiting for code) and a workspace session (a cell that sleeps). In each, both
 * processes of the sandbox are looked at: init (the launcher's child, PID 1 of the new PID
 * namespace) and the interpreter (init's child), and every thread of each.
 *
 * One line per property and process, "ok", "FAIL" or "skip ... skipped: layer X unavailable
 * (reason)" taken from the sandbox's own layer report, so that a regression names itself and a
 * missing layer is never a silent pass. `--control` runs the same checks against this process
 * (no sandbox, a host file open): the checks that must fail there are required to fail, so
 * each of them is seen able to fail.
 *
 * The sandbox's processes are found as the tree below this process: launcher (a child whose
 * executable is the launcher, or with the zygote on, the default, a child of the zygote: the
 * warm case's sandbox is forked from it), init (its child), interpreter (init's child, once it
 * has exec'd Python, or been forked from the zygote). Inside the PID namespace their own getpid()
 * says 1 and 2; the host's pids are these. The *_launcher entries run it with PTC_ZYGOTE=0.
 */
#include "executor.h"

#include "../../executor/launcher/launch.h"
#include "base.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define PYTHON       "/usr/bin/python3"
#define READY        "POSTURE-READY"
#define RUN_TIMEOUT  60000u /* ms: the run sleeps far longer; the test ends it */
#define FIND_WAIT_MS 30000
#define TEXT_MAX     (64u << 10)
#define MAX_FAILED   128

/* the code of the one-shot run and the session's cell: a second thread, so that "every thread"
   covers more than one, then the marker, then sleep until killed */
static const char sleeper[] =
    "import sys, threading, time\n"
    "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
    "sys.stdout.write('" READY "\\n')\n"
    "sys.stdout.flush()\n"
    "time.sleep(600)\n";

typedef enum { V_OK, V_FAIL, V_UNREADABLE } verdict_t;

typedef struct {
    const char *scase; /* "one-shot", "warm", "session", "control" */
    const exec_probe_t *probe;
    bool control;
    int passed, failed, skipped;
    /* --control: the properties that failed, to compare with those that must */
    char failed_props[MAX_FAILED][64];
    size_t n_failed_props;
} post_t;

/* Prints one property's verdict. layer >= 0: the layer that makes the property hold; when the
   sandbox reported it not active the property is skipped with the sandbox's reason. */
static void say(post_t *p, const char *role, const char *prop, int layer, verdict_t v,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void say(post_t *p, const char *role, const char *prop, int layer, verdict_t v,
                const char *fmt, ...)
{
    char detail[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (p->control) {
        /* an unreadable property has not been seen failing */
        if (v == V_FAIL && p->n_failed_props < MAX_FAILED)
            snprintf(p->failed_props[p->n_failed_props++], sizeof p->failed_props[0], "%s", prop);
        printf("     control %s: %s %s (%s)\n", role, prop,
               v == V_OK     ? "holds"
               : v == V_FAIL ? "fails"
                             : "unreadable",
               detail);
        return;
    }
    if (layer >= 0 && p->probe->state[layer] != EXEC_LAYER_ACTIVE) {
        p->skipped++;
        printf("skip %s %s: %s: skipped: layer %s %s (%s)\n", p->scase, role, prop,
               exec_layer_name((exec_layer_id_t)layer),
               p->probe->state[layer] == EXEC_LAYER_DISABLED ? "disabled" : "unavailable",
               p->probe->reason[layer]);
        return;
    }
    if (v == V_UNREADABLE && strcmp(role, "init") == 0 && geteuid() != 0) {
        /* init is not dumpable (PR_SET_DUMPABLE 0) and was not exec'd in its user namespace:
           only a host root may read its fds, root, cwd and namespaces; the root run of this
           test covers them. The interpreter (exec'd, dumpable) must always be readable. */
        p->skipped++;
        printf("skip %s %s: %s: skipped: not readable from outside as uid %d, init is not "
               "dumpable; the run as root checks it (%s)\n",
               p->scase, role, prop, (int)geteuid(), detail);
        return;
    }
    if (v == V_OK) {
        p->passed++;
        printf("ok   %s %s: %s (%s)\n", p->scase, role, prop, detail);
    } else {
        p->failed++;
        printf("FAIL %s %s: %s: %s\n", p->scase, role, prop, detail);
    }
    fflush(stdout);
}

/* The whole of a small file, NUL-terminated; -1 (errno set) when unreadable. */
static ssize_t slurp(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t n = 0;
    ssize_t r;
    while (n < len - 1 && (r = read(fd, buf + n, len - 1 - n)) > 0)
        n += (size_t)r;
    int e = errno;
    close(fd);
    buf[n] = '\0';
    errno = e;
    return (ssize_t)n;
}

/* The value of "Key:\t..." in a /proc status text (without the newline); false when absent. */
static bool status_field(const char *status, const char *key, char *out, size_t len)
{
    size_t kl = strlen(key);
    for (const char *l = status; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, key, kl) == 0 && l[kl] == ':') {
            const char *v = l + kl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t n = strcspn(v, "\n");
            snprintf(out, len, "%.*s", (int)n, v);
            return true;
        }
    }
    return false;
}

/* The next field of *s (blanks: spaces and tabs) into out, cut to len; false at the end. */
static bool field(const char **s, char *out, size_t len)
{
    const char *p = *s;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strcspn(p, " \t\n");
    if (n == 0) return false;
    snprintf(out, len, "%.*s", (int)n, p);
    *s = p + n;
    return true;
}

/* The next field of *s as a decimal number. */
static bool field_u64(const char **s, uint64_t *v)
{
    char f[32];
    return field(s, f, sizeof f) && ptc_parse_u64(f, NULL, v) == 0;
}

/* A capability set as /proc shows it (16 hex digits) that is all zero. */
static bool hex_zero(const char *v)
{
    char *end = NULL;
    unsigned long long c = strtoull(v, &end, 16);
    return end != v && *end == '\0' && c == 0;
}

/* ---- finding the sandbox ------------------------------------------------------------------ */

/* The pids whose parent is parent (at most max); -1 when /proc cannot be read. */
static int children_of(pid_t parent, pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        if (slurp(path, buf, sizeof buf) <= 0) continue;
        /* "pid (comm) S ppid ...": comm may hold spaces and parentheses */
        char *rp = strrchr(buf, ')');
        if (!rp || strlen(rp) < 5) continue;
        if ((pid_t)strtol(rp + 4, NULL, 10) == parent) out[n++] = (pid_t)strtol(buf, NULL, 10);
    }
    closedir(d);
    return n;
}

static bool comm_starts(pid_t pid, const char *prefix)
{
    char path[64], buf[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    return slurp(path, buf, sizeof buf) > 0 && strncmp(buf, prefix, strlen(prefix)) == 0;
}

/* the zygote (docs/sandbox.md, "A fork server (zygote)"): its command line holds its script,
   which names itself (executor/zygote.c) */
static bool is_zygote(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    ssize_t len = slurp(path, buf, sizeof buf);
    for (ssize_t i = 0; i < len; i++)
        if (buf[i] == '\0') buf[i] = ' ';
    return len > 0 && strstr(buf, "_ptc_zygote") != NULL;
}

/* A launcher of ours with its init and an interpreter that has exec'd Python. The launchers are
   our children whose executable is the launcher or, with the zygote on, the zygote's children
   (forked from the interpreter: their executable is Python's, and the interpreter of their
   sandbox is forked, not exec'd, from it). */
static bool find_sandbox(const char *launcher_real, pid_t *init, pid_t *py)
{
    pid_t kids[64], inits[8], pys[8];
    int n = children_of(getpid(), kids, 64), direct = n; /* past direct: the zygote's */
    for (int i = 0; i < direct; i++)
        if (is_zygote(kids[i])) {
            int nz = children_of(kids[i], kids + n, 64 - n);
            if (nz > 0) n += nz;
            break;
        }
    for (int i = 0; i < n; i++) {
        char path[64], exe[PATH_MAX];
        snprintf(path, sizeof path, "/proc/%d/exe", (int)kids[i]);
        ssize_t l = readlink(path, exe, sizeof exe - 1);
        if (l <= 0) continue;
        exe[l] = '\0';
        if (i < direct && strcmp(exe, launcher_real) != 0) continue;
        int ni = children_of(kids[i], inits, 8);
        for (int j = 0; j < ni; j++) {
            int np = children_of(inits[j], pys, 8);
            for (int k = 0; k < np; k++)
                if (comm_starts(pys[k], "python")) {
                    *init = inits[j];
                    *py = pys[k];
                    return true;
                }
        }
    }
    return false;
}

/* ---- the checks --------------------------------------------------------------------------- */

typedef struct {
    const char *name; /* the property */
    int layer;
    verdict_t v;
    char detail[200];
} prop_t;

static void prop_fail(prop_t *pr, verdict_t v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void prop_fail(prop_t *pr, verdict_t v, const char *fmt, ...)
{
    if (pr->v != V_OK) return; /* the first failure names it */
    pr->v = v;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pr->detail, sizeof pr->detail, fmt, ap);
    va_end(ap);
}

static const char *const cap_sets[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
#define N_CAPS 5
/* namespace link names, the props' names and the layers that make them */
static const struct {
    const char *link, *prop;
    int layer;
} ns_list[] = {
    {"user", "namespace user differs from the host's", EXEC_LAYER_USER_NS},
    {"pid", "namespace pid differs from the host's", EXEC_LAYER_PID_NS},
    {"net", "namespace net differs from the host's", EXEC_LAYER_NET_NS},
    {"mnt", "namespace mnt differs from the host's", EXEC_LAYER_MOUNT_NS},
    {"ipc", "namespace ipc differs from the host's", EXEC_LAYER_IPC_NS},
    {"uts", "namespace uts differs from the host's", EXEC_LAYER_UTS_NS},
    {"cgroup", "namespace cgroup differs from the host's", EXEC_LAYER_CGROUP_NS},
};
#define N_NS (sizeof ns_list / sizeof ns_list[0])

/* Credentials, capabilities, seccomp, no_new_privs and namespaces of every thread of pid. */
static void check_threads(post_t *p, const char *role, pid_t pid)
{
    enum { P_UID, P_GID, P_CAP0, P_SECCOMP = P_CAP0 + N_CAPS, P_FILTERS, P_NNP, P_NS0 };
    prop_t props[P_NS0 + N_NS];
    memset(props, 0, sizeof props);
    props[P_UID] = (prop_t){.name = "uids not root on the host", .layer = EXEC_LAYER_UID_DROP};
    props[P_GID] = (prop_t){.name = "gids not root on the host", .layer = EXEC_LAYER_UID_DROP};
    static char cap_names[N_CAPS][32];
    for (int c = 0; c < N_CAPS; c++) {
        snprintf(cap_names[c], sizeof cap_names[c], "%s all 0", cap_sets[c]);
        props[P_CAP0 + c] = (prop_t){.name = cap_names[c], .layer = EXEC_LAYER_CAPS_DROP};
    }
    /* the bounding set is emptied with the CAP_SETPCAP a user namespace gives (drop_credentials,
       launch_child.c): an ordinary user without one keeps the full set, which no_new_privs
       keeps from ever adding a capability */
    if (!p->control && geteuid() != 0 && p->probe->state[EXEC_LAYER_USER_NS] != EXEC_LAYER_ACTIVE)
        props[P_CAP0 + 3].layer = EXEC_LAYER_USER_NS;
    props[P_SECCOMP] = (prop_t){.name = "Seccomp 2 (filter mode)", .layer = EXEC_LAYER_SECCOMP};
    props[P_FILTERS] = (prop_t){.name = "Seccomp_filters >= 1", .layer = EXEC_LAYER_SECCOMP};
    props[P_NNP] = (prop_t){.name = "NoNewPrivs 1", .layer = EXEC_LAYER_NO_NEW_PRIVS};
    for (size_t i = 0; i < N_NS; i++)
        props[P_NS0 + i] = (prop_t){.name = ns_list[i].prop, .layer = ns_list[i].layer};
    size_t n_props = P_NS0 + N_NS;

    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    int threads = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        threads++;
        char path[300], status[8192], v[256];
        snprintf(path, sizeof path, "%s/%.32s/status", dir, e->d_name);
        if (slurp(path, status, sizeof status) <= 0) {
            for (size_t i = 0; i < P_NS0; i++)
                prop_fail(&props[i], V_FAIL, "thread %s: %s unreadable", e->d_name, path);
            continue;
        }
        const char *ids[2] = {"Uid", "Gid"};
        for (int k = 0; k < 2; k++) {
            /* real, effective, saved, filesystem: as the host sees them */
            uint64_t a[4] = {1, 1, 1, 1};
            const char *f = v;
            bool got = status_field(status, ids[k], v, sizeof v);
            for (int j = 0; got && j < 4; j++)
                got = field_u64(&f, &a[j]);
            if (!got)
                prop_fail(&props[P_UID + k], V_FAIL, "thread %s: no %s line", e->d_name, ids[k]);
            else if (!a[0] || !a[1] || !a[2] || !a[3])
                prop_fail(&props[P_UID + k], V_FAIL, "thread %s: %s %s", e->d_name, ids[k], v);
            else if (props[P_UID + k].v == V_OK)
                snprintf(props[P_UID + k].detail, sizeof props[0].detail, "%s %.100s", ids[k], v);
        }
        for (int c = 0; c < N_CAPS; c++) {
            prop_t *pr = &props[P_CAP0 + c];
            if (!status_field(status, cap_sets[c], v, sizeof v))
                prop_fail(pr, V_FAIL, "thread %s: no %s line", e->d_name, cap_sets[c]);
            else if (!hex_zero(v))
                prop_fail(pr, V_FAIL, "thread %s: %s %s", e->d_name, cap_sets[c], v);
            else if (pr->v == V_OK)
                snprintf(pr->detail, sizeof pr->detail, "%.100s", v);
        }
        if (!status_field(status, "Seccomp", v, sizeof v) || strcmp(v, "2") != 0)
            prop_fail(&props[P_SECCOMP], V_FAIL, "thread %s: Seccomp %s", e->d_name, v);
        else if (props[P_SECCOMP].v == V_OK)
            snprintf(props[P_SECCOMP].detail, sizeof props[0].detail, "Seccomp 2");
        uint64_t filters = 0;
        if (!status_field(status, "Seccomp_filters", v, sizeof v) ||
            ptc_parse_u64(v, NULL, &filters) < 0 || filters < 1)
            prop_fail(&props[P_FILTERS], V_FAIL, "thread %s: Seccomp_filters %s", e->d_name, v);
        else if (props[P_FILTERS].v == V_OK)
            snprintf(props[P_FILTERS].detail, sizeof props[0].detail, "%.100s filter(s)", v);
        if (!status_field(status, "NoNewPrivs", v, sizeof v) || strcmp(v, "1") != 0)
            prop_fail(&props[P_NNP], V_FAIL, "thread %s: NoNewPrivs %s", e->d_name, v);
        else if (props[P_NNP].v == V_OK)
            snprintf(props[P_NNP].detail, sizeof props[0].detail, "NoNewPrivs 1");
        for (size_t i = 0; i < N_NS; i++) {
            char mine[128], theirs[128];
            char self_link[64];
            snprintf(self_link, sizeof self_link, "/proc/self/ns/%s", ns_list[i].link);
            snprintf(path, sizeof path, "%s/%.32s/ns/%s", dir, e->d_name, ns_list[i].link);
            ssize_t a = readlink(self_link, mine, sizeof mine - 1);
            ssize_t b = readlink(path, theirs, sizeof theirs - 1);
            if (a < 0 || b < 0) {
                prop_fail(&props[P_NS0 + i], b < 0 && errno == EACCES ? V_UNREADABLE : V_FAIL,
                          "%s: %s", a < 0 ? self_link : path, strerror(errno));
                continue;
            }
            mine[a] = theirs[b] = '\0';
            if (strcmp(mine, theirs) == 0)
                prop_fail(&props[P_NS0 + i], V_FAIL, "thread %s: %s, the host's own", e->d_name,
                          theirs);
            else if (props[P_NS0 + i].v == V_OK)
                snprintf(props[P_NS0 + i].detail, sizeof props[0].detail, "%.90s, host %.90s",
                         theirs, mine);
        }
    }
    if (d) closedir(d);
    if (threads == 0)
        for (size_t i = 0; i < n_props; i++)
            prop_fail(&props[i], V_FAIL, "no thread readable in %s", dir);
    for (size_t i = 0; i < n_props; i++) {
        char detail[260];
        snprintf(detail, sizeof detail, "%d thread(s); %s", threads, props[i].detail);
        say(p, role, props[i].name, props[i].layer, props[i].v, "%s", detail);
    }
}

/* uid_map and gid_map: a map of the sandbox's own, not the host's identity, and no inner id
   that the process holds maps to the host's root. */
static void check_maps(post_t *p, const char *role, pid_t pid)
{
    const char *names[2] = {"uid_map", "gid_map"};
    for (int k = 0; k < 2; k++) {
        char path[64], prop[64], theirs[1024], mine[1024];
        snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, names[k]);
        snprintf(prop, sizeof prop, "%s not the host's identity", names[k]);
        snprintf(mine, sizeof mine, "/proc/self/%s", names[k]);
        if (slurp(path, theirs, sizeof theirs) < 0 || slurp(mine, mine, sizeof mine) < 0) {
            say(p, role, prop, EXEC_LAYER_USER_NS, V_FAIL, "%s: %s", path, strerror(errno));
            continue;
        }
        /* flattened for the line */
        for (char *c = theirs; *c; c++)
            if (*c == '\n' || *c == '\t') *c = ' ';
        for (char *c = mine; *c; c++)
            if (*c == '\n' || *c == '\t') *c = ' ';
        /* the identity map is "0 0 4294967295"; as root the launcher maps inside 0 to outside
           0 for one id (init binds root-owned paths before it drops to 1000 = outer nobody):
           what matters is that the map is not the host's and not the whole range */
        uint64_t in, out, count;
        const char *f = theirs;
        bool whole =
            field_u64(&f, &in) && field_u64(&f, &out) && field_u64(&f, &count) && count > 65536;
        bool ok = strcmp(theirs, mine) != 0 && !whole;
        say(p, role, prop, EXEC_LAYER_USER_NS, ok ? V_OK : V_FAIL, "%s(host: %s)", theirs, mine);
    }
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* root: not the host's "/"; cwd: reached from the process's root by walking ".." up from it
   (the walk goes through the process's own mount tree), so it lies inside the new root. */
static void check_root_cwd(post_t *p, const char *role, pid_t pid)
{
    char path[64];
    struct stat host_root, root, cwd;
    if (stat("/", &host_root) < 0) {
        say(p, role, "root is not the host's /", EXEC_LAYER_ROOTFS, V_FAIL, "stat /: %s",
            strerror(errno));
        return;
    }
    snprintf(path, sizeof path, "/proc/%d/root", (int)pid);
    int rootfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0 || fstat(rootfd, &root) < 0) {
        say(p, role, "root is not the host's /", EXEC_LAYER_ROOTFS,
            errno == EACCES ? V_UNREADABLE : V_FAIL, "%s: %s", path, strerror(errno));
        say(p, role, "cwd inside the new root", EXEC_LAYER_ROOTFS,
            errno == EACCES ? V_UNREADABLE : V_FAIL, "%s: %s", path, strerror(errno));
        if (rootfd >= 0) close(rootfd);
        return;
    }
    say(p, role, "root is not the host's /", EXEC_LAYER_ROOTFS,
        same_file(&root, &host_root) ? V_FAIL : V_OK,
        "root dev %lu ino %lu, host / dev %lu ino %lu", (unsigned long)root.st_dev,
        (unsigned long)root.st_ino, (unsigned long)host_root.st_dev,
        (unsigned long)host_root.st_ino);
    close(rootfd);

    snprintf(path, sizeof path, "/proc/%d/cwd", (int)pid);
    int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &cwd) < 0) {
        say(p, role, "cwd inside the new root", EXEC_LAYER_ROOTFS,
            errno == EACCES ? V_UNREADABLE : V_FAIL, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return;
    }
    char where[PATH_MAX] = "?";
    ssize_t l = readlink(path, where, sizeof where - 1);
    if (l >= 0) where[l] = '\0';
    bool inside = false, host_root_seen = false;
    struct stat cur = cwd;
    for (int depth = 0; depth < 64 && fd >= 0; depth++) {
        if (same_file(&cur, &root)) inside = true;
        if (same_file(&cur, &host_root)) host_root_seen = true;
        if (inside || host_root_seen) break;
        int up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        close(fd);
        fd = up;
        struct stat next;
        if (fd < 0 || fstat(fd, &next) < 0 || same_file(&next, &cur)) break;
        cur = next;
    }
    if (fd >= 0) close(fd);
    say(p, role, "cwd inside the new root", EXEC_LAYER_ROOTFS,
        inside && !same_file(&cwd, &host_root) ? V_OK : V_FAIL, "cwd %s%s", where,
        inside ? ", below the sandbox's root" : ", not below the sandbox's root");
}

/* Whether inode is an AF_UNIX socket listed in net_unix, a /proc/<pid or self>/net/unix
   ("Num RefCount Protocol Flags Type St Inode Path"). */
static bool unix_socket(const char *net_unix, uint64_t inode)
{
    FILE *fp = fopen(net_unix, "re");
    if (!fp) return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, fp)) {
        const char *f = line;
        char skip[64];
        bool got = true;
        for (int i = 0; got && i < 6; i++)
            got = field(&f, skip, sizeof skip);
        uint64_t ino;
        if (got && field_u64(&f, &ino) && ino == inode) found = true;
    }
    fclose(fp);
    return found;
}

/* Every descriptor on the allowlist (tests/sandbox/README.md says why each entry): numbered
   at most max_fd, and a pipe or an AF_UNIX socket (the pool's stdout/stderr and code channel,
   init's status report and its channel to the interpreter, the bridge), /dev/null (a
   session's stdin) or init's pidfd of the interpreter. Any file or directory of the host, any
   other socket family, any higher descriptor is a failure. */
static void check_fds(post_t *p, const char *role, pid_t pid, int max_fd)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d) {
        say(p, role, "every fd on the allowlist", -1, errno == EACCES ? V_UNREADABLE : V_FAIL,
            "%s: %s", dir, strerror(errno));
        return;
    }
    char seen[600] = "", bad[300] = "";
    char their_unix[64];
    snprintf(their_unix, sizeof their_unix, "/proc/%d/net/unix", (int)pid);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[300], to[PATH_MAX];
        snprintf(path, sizeof path, "%s/%.32s", dir, e->d_name);
        ssize_t l = readlink(path, to, sizeof to - 1);
        if (l < 0) continue; /* closed meanwhile */
        to[l] = '\0';
        n++;
        bool ok = false;
        uint64_t ino;
        const char *end = NULL;
        if (strncmp(to, "pipe:[", 6) == 0 || strcmp(to, "/dev/null") == 0 ||
            strcmp(to, "anon_inode:[pidfd]") == 0)
            ok = true;
        else if (strncmp(to, "socket:[", 8) == 0 && ptc_parse_u64(to + 8, &end, &ino) == 0 &&
                 *end == ']')
            /* made inside (the sandbox's network namespace) or by the pool (the host's) */
            ok = unix_socket(their_unix, ino) || unix_socket("/proc/self/net/unix", ino);
        size_t sl = strlen(seen);
        snprintf(seen + sl, sizeof seen - sl, "%s%.32s=%.200s", sl ? " " : "", e->d_name, to);
        int num = -1;
        if (ptc_parse_int(e->d_name, NULL, &num) < 0 || num > max_fd) ok = false;
        if (!ok && !bad[0]) snprintf(bad, sizeof bad, "fd %.32s -> %.200s", e->d_name, to);
    }
    closedir(d);
    if (bad[0])
        say(p, role, "every fd on the allowlist", -1, V_FAIL, "%s is not allowed (all: %s)", bad,
            seen);
    else
        say(p, role, "every fd on the allowlist", -1, V_OK, "%d fd(s): %s", n, seen);
}

typedef struct {
    char point[256], fstype[32], opts[128];
    bool devnull; /* a bind of the host's /dev/null (a /proc mask) */
} mnt_t;

static bool has_opt(const char *opts, const char *o)
{
    size_t ol = strlen(o);
    for (const char *s = opts; s && *s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
        if (strncmp(s, o, ol) == 0 && (s[ol] == ',' || s[ol] == '\0')) return true;
    return false;
}

static const mnt_t *find_mount(const mnt_t *m, size_t n, const char *point)
{
    const mnt_t *found = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].point, point) == 0) found = &m[i]; /* the last one covers the others */
    return found;
}

/* One mount point's verdict: there, of fstype, with every option of the comma list opts. */
static void mount_is(post_t *p, const char *role, const char *prop, int layer, const mnt_t *m,
                     size_t n, const char *point, const char *fstype, const char *opts)
{
    const mnt_t *mm = find_mount(m, n, point);
    bool ok = mm && strcmp(mm->fstype, fstype) == 0;
    char want[128];
    snprintf(want, sizeof want, "%s", opts);
    for (char *save = NULL, *o = strtok_r(want, ",", &save); ok && o;
         o = strtok_r(NULL, ",", &save))
        ok = has_opt(mm->opts, o);
    say(p, role, prop, layer, ok ? V_OK : V_FAIL, "%s %s %s", point, mm ? mm->fstype : "missing",
        mm ? mm->opts : "");
}

/* the paths the launcher masks (/dev/null or an empty tmpfs over them) and makes read-only
   (launch_child.c, Docker's list); only those the host's /proc has */
static const char *const proc_masked[] = {"acpi",       "asound",        "interrupts",  "kcore",
                                          "keys",       "latency_stats", "sched_debug", "scsi",
                                          "timer_list", "timer_stats"};
static const char *const proc_readonly[] = {"bus", "fs", "irq", "sys", "sysrq-trigger"};

static void check_mounts(post_t *p, const char *role, pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mountinfo", (int)pid);
    FILE *fp = fopen(path, "re");
    size_t n = 0, cap = 256;
    mnt_t *m = calloc(cap, sizeof *m);
    char line[2048];
    /* the masks bind the host's /dev/null: its filesystem and its name there */
    struct stat null_st;
    bool have_null = stat("/dev/null", &null_st) == 0 && S_ISCHR(null_st.st_mode);
    while (fp && m && n < cap && fgets(line, sizeof line, fp)) {
        /* id parent maj:min root POINT OPTS [optional...] - FSTYPE SOURCE SUPER */
        char id[32], majmin[32], mroot[256];
        const char *f = line, *dash = strstr(line, " - "), *e = NULL;
        uint64_t maj = 0, min = 0;
        if (!dash || !field(&f, id, sizeof id) || !field(&f, id, sizeof id) ||
            !field(&f, majmin, sizeof majmin) || ptc_parse_u64(majmin, &e, &maj) < 0 || *e != ':' ||
            ptc_parse_u64(e + 1, NULL, &min) < 0 || !field(&f, mroot, sizeof mroot) ||
            !field(&f, m[n].point, sizeof m[n].point) || !field(&f, m[n].opts, sizeof m[n].opts))
            continue;
        f = dash + 3;
        if (!field(&f, m[n].fstype, sizeof m[n].fstype)) continue;
        size_t rl = strlen(mroot);
        m[n].devnull = have_null && major(null_st.st_dev) == maj && minor(null_st.st_dev) == min &&
                       rl >= 5 && strcmp(mroot + rl - 5, "/null") == 0;
        n++;
    }
    if (fp) fclose(fp);
    if (!fp || !m || n == 0) {
        say(p, role, "mounts readable", EXEC_LAYER_MOUNT_NS, V_FAIL, "%s: %s", path,
            strerror(errno));
        free(m);
        return;
    }
    mount_is(p, role, "root mount: tmpfs ro,nosuid,nodev", EXEC_LAYER_ROOTFS, m, n, "/", "tmpfs",
             "ro,nosuid,nodev");
    /* system folders: every bind that is not one of the launcher's own (/, /tmp, /proc, /dev)
       is a host folder shown read-only */
    char bad[400] = "";
    int sys = 0;
    for (size_t i = 0; i < n; i++) {
        const char *pt = m[i].point;
        if (strcmp(pt, "/") == 0 || strcmp(pt, "/tmp") == 0 || strncmp(pt, "/proc", 5) == 0 ||
            strncmp(pt, "/dev", 4) == 0)
            continue;
        sys++;
        if ((!has_opt(m[i].opts, "ro") || !has_opt(m[i].opts, "nosuid") ||
             !has_opt(m[i].opts, "nodev")) &&
            !bad[0])
            snprintf(bad, sizeof bad, "%s %s", pt, m[i].opts);
    }
    say(p, role, "system folders ro,nosuid,nodev", EXEC_LAYER_ROOTFS,
        bad[0] || sys == 0 ? V_FAIL : V_OK, "%d mount(s)%s%s", sys, bad[0] ? "; " : "", bad);

    mount_is(p, role, "/tmp: tmpfs nosuid,nodev,noexec", EXEC_LAYER_PRIVATE_TMP, m, n, "/tmp",
             "tmpfs", "nosuid,nodev,noexec");
    mount_is(p, role, "/proc: a proc of its own, nosuid,nodev,noexec", EXEC_LAYER_PID_NS, m, n,
             "/proc", "proc", "nosuid,nodev,noexec");

    bad[0] = '\0';
    int masks = 0;
    for (size_t k = 0; k < 2; k++) {
        const char *const *list = k == 0 ? proc_masked : proc_readonly;
        size_t len = k == 0 ? sizeof proc_masked / sizeof proc_masked[0]
                            : sizeof proc_readonly / sizeof proc_readonly[0];
        for (size_t i = 0; i < len; i++) {
            char host[64], inside[64];
            snprintf(host, sizeof host, "/proc/%s", list[i]);
            snprintf(inside, sizeof inside, "/proc/%s", list[i]);
            struct stat st;
            if (lstat(host, &st) < 0) continue; /* the host has none: nothing to mask */
            const mnt_t *mm = find_mount(m, n, inside);
            masks++;
            if ((!mm || !has_opt(mm->opts, "ro")) && !bad[0])
                snprintf(bad, sizeof bad, "%s %s", inside, mm ? mm->opts : "not masked");
        }
    }
    say(p, role, "/proc masks present, read-only", EXEC_LAYER_PROC_MASK, bad[0] ? V_FAIL : V_OK,
        "%d path(s)%s%s", masks, bad[0] ? "; " : "", bad);

    /* the /dev/null masks over /proc files are exempt from nosuid and nodev: what they show
       is the null device itself (reads empty, writes vanish), as Docker's masks; nodev there
       would make the masked file unopenable instead of empty, and nosuid means nothing for a
       node that cannot be executed (the mount is read-only besides) */
    bad[0] = '\0';
    int null_masks = 0;
    for (size_t i = 0; i < n; i++) {
        bool mask = m[i].devnull && strncmp(m[i].point, "/proc/", 6) == 0;
        null_masks += mask;
        if (!mask && !has_opt(m[i].opts, "nosuid") && !bad[0])
            snprintf(bad, sizeof bad, "%s %s", m[i].point, m[i].opts);
    }
    say(p, role, "every mount nosuid", EXEC_LAYER_ROOTFS, bad[0] ? V_FAIL : V_OK,
        "%zu mount(s), %d /dev/null mask(s) exempt%s%s", n, null_masks, bad[0] ? "; " : "", bad);
    /* /dev holds the device nodes the launcher binds (null, zero, urandom...): nodev
       everywhere else */
    bad[0] = '\0';
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].point, "/dev") != 0 && strncmp(m[i].point, "/dev/", 5) != 0 &&
            !(m[i].devnull && strncmp(m[i].point, "/proc/", 6) == 0) &&
            !has_opt(m[i].opts, "nodev") && !bad[0])
            snprintf(bad, sizeof bad, "%s %s", m[i].point, m[i].opts);
    say(p, role, "nodev outside /dev", EXEC_LAYER_ROOTFS, bad[0] ? V_FAIL : V_OK, "%s",
        bad[0] ? bad : "all");
    free(m);
}

/* One line of /proc/PID/limits: soft and hard (ULLONG_MAX for unlimited). */
static bool limit_of(const char *limits, const char *name, unsigned long long *soft,
                     unsigned long long *hard)
{
    const char *l = strstr(limits, name);
    if (!l) return false;
    l += strlen(name);
    char s[32], h[32];
    if (!field(&l, s, sizeof s) || !field(&l, h, sizeof h)) return false;
    uint64_t sv = ULLONG_MAX, hv = ULLONG_MAX;
    if ((strcmp(s, "unlimited") != 0 && ptc_parse_u64(s, NULL, &sv) < 0) ||
        (strcmp(h, "unlimited") != 0 && ptc_parse_u64(h, NULL, &hv) < 0))
        return false;
    *soft = sv;
    *hard = hv;
    return true;
}

typedef struct {
    unsigned long long memory, pids, cpu_quota; /* cgroup limits */
    unsigned long long cpu_lo, cpu_hi;          /* RLIMIT_CPU seconds expected */
    unsigned long long nproc_lo, nproc_hi;      /* RLIMIT_NPROC */
} expect_t;

/* the interpreter's rlimits as apply_rlimits (launch_child.c) sets them */
static void check_rlimits(post_t *p, const char *role, pid_t pid, const expect_t *x)
{
    char path[64], limits[4096];
    snprintf(path, sizeof path, "/proc/%d/limits", (int)pid);
    if (slurp(path, limits, sizeof limits) <= 0) {
        say(p, role, "rlimits readable", EXEC_LAYER_RLIMITS, V_FAIL, "%s: %s", path,
            strerror(errno));
        return;
    }
    bool memcg = p->probe->state[EXEC_LAYER_CGROUP_MEMORY] == EXEC_LAYER_ACTIVE;
    unsigned long long as = EXEC_DEFAULT_MEMORY_BYTES * 4;
    if (as < (1ull << 30)) as = 1ull << 30;
    const struct {
        const char *prop, *line;
        unsigned long long lo, hi;
    } want[] = {
        {"RLIMIT_NPROC", "Max processes", x->nproc_lo, x->nproc_hi},
        {"RLIMIT_NOFILE", "Max open files", EXEC_DEFAULT_NOFILE, EXEC_DEFAULT_NOFILE},
        {"RLIMIT_FSIZE", "Max file size", EXEC_DEFAULT_FSIZE_BYTES, EXEC_DEFAULT_FSIZE_BYTES},
        {"RLIMIT_CORE", "Max core file size", 0, 0},
        {"RLIMIT_CPU", "Max cpu time", x->cpu_lo, x->cpu_hi},
        /* with a memory cgroup that is the cap and the address space stays free (RLIMIT_AS
           counts reservations); without one RLIMIT_AS is 4 x memory, at least 1 GiB */
        {"RLIMIT_AS", "Max address space", memcg ? ULLONG_MAX : as, memcg ? ULLONG_MAX : as},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        unsigned long long s, h;
        bool ok = limit_of(limits, want[i].line, &s, &h);
        bool in = ok && s == h && s >= want[i].lo && s <= want[i].hi;
        char prop[64];
        snprintf(prop, sizeof prop, "%s as the launcher sets", want[i].prop);
        if (want[i].lo == want[i].hi)
            say(p, role, prop, EXEC_LAYER_RLIMITS, in ? V_OK : V_FAIL,
                "soft %llu hard %llu, want %llu", ok ? s : 0, ok ? h : 0, want[i].lo);
        else
            say(p, role, prop, EXEC_LAYER_RLIMITS, in ? V_OK : V_FAIL,
                "soft %llu hard %llu, want %llu..%llu", ok ? s : 0, ok ? h : 0, want[i].lo,
                want[i].hi);
    }
}

/* The cgroup path of pid for a v1 controller ("memory"), or v2 (ctrl NULL). */
static bool cgroup_path(pid_t pid, const char *ctrl, char *out, size_t len)
{
    char path[64], text[4096];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    if (slurp(path, text, sizeof text) <= 0) return false;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char *a = strchr(l, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b) continue;
        *a = *b = '\0';
        bool match = false;
        if (!ctrl)
            match = strcmp(l, "0") == 0 && a[1] == '\0';
        else
            for (char *s = a + 1; s && *s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
                if (strncmp(s, ctrl, strlen(ctrl)) == 0 &&
                    (s[strlen(ctrl)] == ',' || s[strlen(ctrl)] == '\0'))
                    match = true;
        if (match) {
            snprintf(out, len, "%s", b + 1);
            return true;
        }
    }
    return false;
}

/* The limit file of the run's cgroup for one controller: v1 when the process sits in a v1
   cgroup of its own for it, else v2 (at either of the usual mounts). false: it shares ours. */
static bool limit_file(pid_t pid, const char *ctrl, const char *v1_file, const char *v2_file,
                       char *out, size_t len)
{
    char theirs[1024], mine[1024];
    if (cgroup_path(pid, ctrl, theirs, sizeof theirs) &&
        cgroup_path(getpid(), ctrl, mine, sizeof mine) && strcmp(theirs, mine) != 0) {
        snprintf(out, len, "/sys/fs/cgroup/%s%s/%s", ctrl, theirs, v1_file);
        if (access(out, R_OK) == 0) return true;
    }
    if (cgroup_path(pid, NULL, theirs, sizeof theirs) &&
        cgroup_path(getpid(), NULL, mine, sizeof mine) && strcmp(theirs, mine) != 0) {
        const char *mounts[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
        for (int i = 0; i < 2; i++) {
            snprintf(out, len, "%s%s/%s", mounts[i], theirs, v2_file);
            if (access(out, R_OK) == 0) return true;
        }
    }
    return false;
}

static void check_cgroups(post_t *p, const char *role, pid_t pid, const expect_t *x)
{
    const struct {
        const char *prop, *ctrl, *v1, *v2;
        int layer;
        unsigned long long want;
    } cg[] = {
        {"cgroup memory limit", "memory", "memory.limit_in_bytes", "memory.max",
         EXEC_LAYER_CGROUP_MEMORY, x->memory},
        {"cgroup pids limit", "pids", "pids.max", "pids.max", EXEC_LAYER_CGROUP_PIDS, x->pids},
        {"cgroup cpu quota", "cpu", "cpu.cfs_quota_us", "cpu.max", EXEC_LAYER_CGROUP_CPU,
         x->cpu_quota},
    };
    for (size_t i = 0; i < sizeof cg / sizeof cg[0]; i++) {
        char file[2200], text[128];
        if (!limit_file(pid, cg[i].ctrl, cg[i].v1, cg[i].v2, file, sizeof file)) {
            say(p, role, cg[i].prop, cg[i].layer, V_FAIL,
                "the process is in the server's own %s cgroup", cg[i].ctrl);
            continue;
        }
        if (slurp(file, text, sizeof text) <= 0) {
            say(p, role, cg[i].prop, cg[i].layer, V_FAIL, "%s: %s", file, strerror(errno));
            continue;
        }
        /* "max" is unlimited; cpu.max is "QUOTA PERIOD" */
        uint64_t v = ULLONG_MAX;
        const char *end = NULL;
        bool parsed = strncmp(text, "max", 3) == 0 ||
                      (ptc_parse_u64(text, &end, &v) == 0 && (*end == '\n' || *end == ' '));
        text[strcspn(text, "\n")] = '\0';
        say(p, role, cg[i].prop, cg[i].layer, parsed && v == cg[i].want ? V_OK : V_FAIL,
            "%s = %s, want %llu", file, text, cg[i].want);
    }
}

static void inspect(post_t *p, const char *role, pid_t pid, const expect_t *x, bool interpreter)
{
    printf("---- %s %s: host pid %d\n", p->scase, role, (int)pid);
    check_maps(p, role, pid);
    check_threads(p, role, pid);
    check_root_cwd(p, role, pid);
    /* init: 0-2 the pool's streams, 3 the status report, 4 its end of the code channel, 5 the
       interpreter's pidfd; the interpreter: 0-3 (close_range from 5 before its exec, 4 the
       status pipe closed by the exec), 4 a session driver's channel; the code opens none */
    check_fds(p, role, pid, interpreter ? 4 : 5);
    check_mounts(p, role, pid);
    if (interpreter) {
        check_rlimits(p, role, pid, x);
    } else if (!p->control) {
        /* apply_rlimits runs in the interpreter's child branch only: init runs nothing but
           the launcher's own code and needs its descriptors and CPU to hand results back */
        printf("note %s %s: rlimits are the interpreter's (init runs only launcher code)\n",
               p->scase, role);
    }
    check_cgroups(p, role, pid, x);
    fflush(stdout);
}

/* ---- the three cases ---------------------------------------------------------------------- */

typedef struct {
    exec_run_t *run;
    exec_session_t *session;
    bool done;
    char message[300];
} live_t;

static void on_run_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    (void)run;
    live_t *l = user;
    l->done = true;
    l->run = NULL;
    snprintf(l->message, sizeof l->message, "ended early: %s %s", exec_status_name(r->status),
             r->message ? r->message : "");
}

static void on_cell_done(exec_session_t *s, const exec_result_t *r, void *user)
{
    (void)s;
    on_run_done(NULL, r, user);
}

static bool ready(const live_t *l)
{
    exec_output_t out, err;
    int r = l->run       ? exec_run_output(l->run, &out, &err)
            : l->session ? exec_session_output(l->session, &out, &err)
                         : -1;
    return r == 0 && out.len >= strlen(READY) && memmem(out.data, out.len, READY, strlen(READY));
}

/* Turns the loop until the sandbox is there (and, with code, has printed the marker). */
static bool wait_live(uv_loop_t *loop, const live_t *l, bool with_code, const char *launcher,
                      pid_t *init, pid_t *py)
{
    for (int waited = 0; waited < FIND_WAIT_MS; waited += 20) {
        uv_run(loop, UV_RUN_NOWAIT);
        if (l->done) return false;
        if ((!with_code || ready(l)) && find_sandbox(launcher, init, py)) {
            if (!with_code) {
                /* the interpreter has exec'd: give its bootstrap the moment to block on fd 3 */
                struct timespec ts = {0, 300 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            return true;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* Processes of our uid now: without a user namespace RLIMIT_NPROC counts them as well, so the
   launcher sets it to their number plus the run's (launch_main.c). */
static unsigned count_own_processes(void)
{
    DIR *d = opendir("/proc");
    unsigned n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[300], status[4096], v[128];
        snprintf(path, sizeof path, "/proc/%.32s/status", e->d_name);
        const char *f = v;
        uint64_t uid;
        if (slurp(path, status, sizeof status) > 0 && status_field(status, "Uid", v, sizeof v) &&
            field_u64(&f, &uid) && uid == (uint64_t)getuid())
            n++;
    }
    if (d) closedir(d);
    return n;
}

/* One case into *p (whose scase and control the caller set). disable: the layer turned off
   by the test switch, or NULL. */
static void run_case(post_t *p, const char *launcher, const char *disable)
{
    const char *scase = p->scase;
    bool no_userns = disable && strcmp(disable, "user-ns") == 0 && geteuid() != 0;
    uv_loop_t loop;
    if (uv_loop_init(&loop) < 0) {
        printf("FAIL %s: uv_loop_init\n", scase);
        p->failed++;
        return;
    }
    exec_options_t o;
    exec_options_init(&o);
    o.python = PYTHON;
    o.launcher = TEST_LAUNCHER;
    /* the one-shot and the session cases want their own sandbox alone below us */
    o.keep_warm = strcmp(scase, "warm") == 0;
    /* user-ns as an ordinary user: the Landlock-only mode of a host that refuses user
       namespaces; any other, a negative control */
    o.test_disable_layer = disable;
    exec_pool_t *pool = NULL;
    int r = exec_pool_new(&loop, &o, &pool);
    if (r < 0) {
        printf("FAIL %s: pool: %s\n", scase, exec_strerror(r));
        uv_loop_close(&loop);
        p->failed++;
        return;
    }
    p->probe = exec_pool_probe(pool);
    live_t l = {0};
    expect_t x = {.memory = o.memory_bytes,
                  .pids = o.pids_max,
                  .cpu_quota = (unsigned long long)o.cpu_millis * 100,
                  .nproc_lo = o.pids_max,
                  .nproc_hi = o.pids_max};
    if (no_userns) {
        /* counted at the launcher's start: the uid's processes then, which other tests run
           as the same user make come and go (hence the slack); still finite and above pids */
        unsigned own = count_own_processes();
        x.nproc_lo = o.pids_max + 1;
        x.nproc_hi = o.pids_max + own + 256;
    }
    bool started = true;
    if (exec_pool_refusing(pool)) {
        printf("FAIL %s: the pool refuses runs: %s\n", scase, p->probe->message);
        p->failed++;
        started = false;
    } else if (strcmp(scase, "one-shot") == 0) {
        exec_callbacks_t cb = {.on_done = on_run_done, .user = &l};
        r = exec_run_start(pool, sleeper, RUN_TIMEOUT, &cb, &l.run);
        /* cpu seconds: the timeout's plus 2 (pool.c), plus the start-up's own use */
        x.cpu_lo = RUN_TIMEOUT / 1000 + 2;
        x.cpu_hi = x.cpu_lo + 10;
        started = r == 0;
    } else if (strcmp(scase, "session") == 0) {
        r = exec_session_new(pool, NULL, &l.session);
        exec_session_callbacks_t cb = {.on_done = on_cell_done, .user = &l};
        if (r == 0) r = exec_session_run(l.session, sleeper, RUN_TIMEOUT, &cb);
        /* the session's interpreter keeps the ceiling of an interpreter waiting for code, its
           whole life's (init lowers it only for a one-shot run's code); the wall clock bounds
           each cell (executor.h) */
        x.cpu_lo = x.cpu_hi = LAUNCH_WARM_CPU_SECONDS;
        started = r == 0;
    } else {
        /* warm: a waiting interpreter's ceiling, lowered only when code comes */
        x.cpu_lo = x.cpu_hi = LAUNCH_WARM_CPU_SECONDS;
        if (!p->probe->warm_start) {
            printf("skip warm: skipped: no warm sandboxes (%s)\n", p->probe->warm_reason);
            p->skipped++;
            started = false;
        }
    }
    if (started && r < 0) printf("FAIL %s: start: %s\n", scase, exec_strerror(r));
    pid_t init = 0, py = 0;
    if (started && r == 0) {
        if (!wait_live(&loop, &l, strcmp(scase, "warm") != 0, launcher, &init, &py)) {
            printf("FAIL %s: no live sandbox found below pid %d within %d ms %s\n", scase,
                   (int)getpid(), FIND_WAIT_MS, l.message);
            p->failed++;
        } else {
            inspect(p, "init", init, &x, false);
            inspect(p, "interpreter", py, &x, true);
        }
    } else if (started || r < 0) {
        p->failed++;
    }
    if (l.run) exec_run_cancel(l.run);
    exec_session_close(l.session);
    exec_pool_free(pool);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    if (!p->control)
        printf("== %s: %d ok, %d failed, %d skipped\n", scase, p->passed, p->failed, p->skipped);
}

/* Each property of list must have failed in *p (a control); returns how many held. */
static int require_failed(const post_t *p, const char *const *list, size_t n, const char *what)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        bool failed = false;
        for (size_t j = 0; j < p->n_failed_props; j++)
            if (strcmp(p->failed_props[j], list[i]) == 0) failed = true;
        if (failed) {
            printf("ok   control: \"%s\" fails %s\n", list[i], what);
        } else {
            printf("FAIL control: \"%s\" holds %s: the check cannot fail\n", list[i], what);
            bad++;
        }
    }
    return bad;
}

/* The negative control: this process, outside any sandbox and with a host file open, must fail
   every check below (as an ordinary user its capability sets are empty anyway, and its uid is
   not 0: those are left out). */
static int run_control(void)
{
    static const char *const must_fail[] = {
        "namespace user differs from the host's",
        "namespace pid differs from the host's",
        "namespace net differs from the host's",
        "namespace mnt differs from the host's",
        "namespace ipc differs from the host's",
        "namespace uts differs from the host's",
        "namespace cgroup differs from the host's",
        "uid_map not the host's identity",
        "Seccomp 2 (filter mode)",
        "Seccomp_filters >= 1",
        "NoNewPrivs 1",
        "root is not the host's /",
        "every fd on the allowlist",
        "root mount: tmpfs ro,nosuid,nodev",
        "RLIMIT_NPROC as the launcher sets",
        "RLIMIT_FSIZE as the launcher sets",
        /* the host's own root file system carries neither nosuid nor nodev, nor is it ro */
        "system folders ro,nosuid,nodev",
        "every mount nosuid",
        "nodev outside /dev",
        "/tmp: tmpfs nosuid,nodev,noexec",
        "/proc masks present, read-only",
        /* the server's own cgroup is no run's */
        "cgroup memory limit",
        "cgroup pids limit",
    };
    static const char *const must_fail_root[] = {"uids not root on the host", "CapEff all 0",
                                                 "CapBnd all 0"};
    exec_probe_t probe;
    memset(&probe, 0, sizeof probe);
    post_t p = {.scase = "control", .probe = &probe, .control = true};
    int leak = open("/etc/hostname", O_RDONLY); /* a host file, as a careless server leaks it */
    expect_t x = {.memory = EXEC_DEFAULT_MEMORY_BYTES,
                  .pids = EXEC_DEFAULT_PIDS,
                  .cpu_quota = EXEC_DEFAULT_CPU_MILLIS * 100,
                  .cpu_lo = 1,
                  .cpu_hi = LAUNCH_WARM_CPU_SECONDS,
                  .nproc_lo = EXEC_DEFAULT_PIDS,
                  .nproc_hi = EXEC_DEFAULT_PIDS};
    inspect(&p, "self", getpid(), &x, true);
    if (leak >= 0) close(leak);
    int bad = require_failed(&p, must_fail, sizeof must_fail / sizeof must_fail[0],
                             "on the unsandboxed test process");
    if (geteuid() == 0)
        bad += require_failed(&p, must_fail_root, sizeof must_fail_root / sizeof must_fail_root[0],
                              "on the unsandboxed test process");
    printf("== control: %d check(s) could not fail\n", bad);
    return bad;
}

/* The layer controls: a one-shot sandbox with exactly one layer off (the test switch) must fail
   the property that layer makes, seen from outside like the rest. */
static int run_layer_controls(const char *launcher)
{
    static const struct {
        const char *layer;
        bool root_only; /* as an ordinary user the property holds without the layer */
        const char *props[2];
    } ctl[] = {
        {"seccomp", false, {"Seccomp 2 (filter mode)", "Seccomp_filters >= 1"}},
        {"caps-drop", false, {"CapBnd all 0", NULL}},
        /* as an ordinary user inner 0 is unmapped: the outer uid is the user's, not root */
        {"uid-drop", true, {"uids not root on the host", NULL}},
        /* as root without a user namespace the host's ids are the sandbox's (an ordinary user
           without one is the Landlock-only mode, tested on its own) */
        {"user-ns",
         true,
         {"uid_map not the host's identity", "namespace user differs from the host's"}},
        {"pid-ns", false, {"namespace pid differs from the host's", NULL}},
        {"net-ns", false, {"namespace net differs from the host's", NULL}},
        {"ipc-ns", false, {"namespace ipc differs from the host's", NULL}},
        {"uts-ns", false, {"namespace uts differs from the host's", NULL}},
        {"cgroup-ns", false, {"namespace cgroup differs from the host's", NULL}},
        {"proc-mask", false, {"/proc masks present, read-only", NULL}},
        {"private-tmp", false, {"/tmp: tmpfs nosuid,nodev,noexec", NULL}},
        {"rlimits",
         false,
         {"RLIMIT_NOFILE as the launcher sets", "RLIMIT_FSIZE as the launcher sets"}},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof ctl / sizeof ctl[0]; i++) {
        if (ctl[i].root_only && geteuid() != 0) continue;
        post_t p = {.scase = "one-shot", .control = true};
        printf("---- control: one-shot without %s\n", ctl[i].layer);
        run_case(&p, launcher, ctl[i].layer);
        char what[96];
        snprintf(what, sizeof what, "in a sandbox without %s", ctl[i].layer);
        bad += require_failed(&p, ctl[i].props, ctl[i].props[1] ? 2 : 1, what);
        /* a run that did not start is a failure of the control, not a pass */
        if (p.failed) {
            printf("FAIL control: the sandbox without %s could not be inspected\n", ctl[i].layer);
            bad++;
        }
    }
    printf("== layer controls: %d check(s) could not fail\n", bad);
    return bad;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    bool control = argc > 1 && strcmp(argv[1], "--control") == 0;
    bool no_userns = argc > 1 && strcmp(argv[1], "--no-userns") == 0;
    if (argc > 1 && !control && !no_userns) {
        fprintf(stderr, "usage: posture [--control | --no-userns]\n");
        return 2;
    }
    if (no_userns && geteuid() == 0) {
        /* root without a user namespace keeps the other namespaces: not the mode tested here */
        printf("SKIP: the Landlock-only mode is for ordinary users; run it as one\n");
        return 77;
    }
    char launcher[PATH_MAX];
    if (!realpath(TEST_LAUNCHER, launcher)) {
        fprintf(stderr, "%s: %s\n", TEST_LAUNCHER, strerror(errno));
        return 2;
    }
    if (control) {
        int bad = run_control();
        bad += run_layer_controls(launcher);
        return bad ? 1 : 0;
    }
    printf("posture test as uid %d, pid %d%s\n", (int)geteuid(), (int)getpid(),
           no_userns ? ", Landlock-only mode (user namespaces off)" : "");
    int failed = 0, skipped = 0;
    const char *cases[] = {"one-shot", "warm", "session"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        post_t p = {.scase = cases[i]};
        run_case(&p, launcher, no_userns ? "user-ns" : NULL);
        failed += p.failed;
        skipped += p.skipped;
    }
    printf("posture: %d failed, %d skipped\n", failed, skipped);
    return failed ? 1 : 0;
}
