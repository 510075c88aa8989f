/*
 * rootfs.c - the sandbox's filesystem view, built by its init (launch_child.c) in the new mount
 * namespace before anything else: a read-only tmpfs root with binds of /usr, the interpreter's
 * prefix, the --mount folders and the /etc files libc reads, a minimal /dev, a private /tmp,
 * /proc with Docker's masks, vm.memfd_noexec, then pivot_root. Also the two helpers the child's
 * later steps fail through (launch_die_errno, launch_fmt_path).
 */
#include "launch.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NEWROOT "/newroot"
#define OLDROOT "/oldroot"

/* /etc entries the interpreter and libc read; copied as binds when the host has them */
static const char *const etc_binds[] = {
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "localtime",
    "ssl",         "mime.types", "protocols",    "services",      "alternatives",
};
static const char *const top_dirs[] = {"bin", "sbin", "lib", "lib64", "lib32", "libx32"};
static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom"};

_Noreturn void launch_die_errno(const char *stage, const char *what)
{
    int e = errno;
    /* Ubuntu 24.04 lets an ordinary user create the namespaces, then AppArmor denies mounts */
    bool hint = (e == EACCES || e == EPERM) && geteuid() != 0 && strcmp(stage, "rootfs") == 0;
    launch_fatal(stage, "%s: %s%s", what, strerror(e),
                 hint ? " (user namespaces restricted, e.g. by AppArmor's "
                        "restrict_unprivileged_userns: see docs/sandbox.md)"
                      : "");
}

void launch_fmt_path(char *buf, size_t len, const char *a, const char *b)
{
    int n = snprintf(buf, len, "%s%s", a, b);
    if (n < 0 || (size_t)n >= len) launch_fatal("rootfs", "path too long: %s%s", a, b);
}

/* mkdir -p inside the new root (the tmpfs is ours, modes stay 0755) */
static void mkdirs(const char *path)
{
    char buf[LAUNCH_PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof buf) launch_fatal("rootfs", "path too long: %s", path);
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST) launch_die_errno("rootfs", buf);
        *p = '/';
    }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST) launch_die_errno("rootfs", buf);
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) launch_die_errno("rootfs", path);
    close(fd);
}

static void write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) launch_die_errno("rootfs", path);
    size_t len = strlen(text);
    if (write(fd, text, len) != (ssize_t)len) launch_die_errno("rootfs", path);
    close(fd);
}

/* Flags a read-only remount of a bind must keep: in a user namespace the kernel refuses to
   clear flags that were locked on the source mount. */
static unsigned long locked_flags(const char *path)
{
    struct statvfs sv;
    unsigned long f = 0;
    if (statvfs(path, &sv) < 0) return 0;
    if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
    if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
    if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME) f |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME) f |= MS_RELATIME;
    return f;
}

/* Binds host path src (seen under OLDROOT) at dst in the new root; read-only unless rw. Not
   recursive: submounts of the source stay invisible. Returns -errno when src is missing. */
static int bind_path_dev(const char *src, const char *dst, bool rw, bool required, bool dev)
{
    char from[LAUNCH_PATH_MAX], to[LAUNCH_PATH_MAX];
    launch_fmt_path(from, sizeof from, OLDROOT, src);
    launch_fmt_path(to, sizeof to, NEWROOT, dst);
    struct stat st;
    if (stat(from, &st) < 0) {
        if (!required) return -errno;
        launch_fatal("rootfs", "cannot bind %s: %s", src, strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) {
        mkdirs(to);
    } else {
        char parent[LAUNCH_PATH_MAX];
        snprintf(parent, sizeof parent, "%s", to);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) {
            *slash = '\0';
            mkdirs(parent);
        }
        touch(to);
    }
    if (mount(from, to, NULL, MS_BIND, NULL) < 0) {
        if (!required) return -errno;
        launch_fatal("rootfs", "cannot bind %s: %s", src, strerror(errno));
    }
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | locked_flags(to);
    if (!dev) flags |= MS_NODEV;
    if (!rw) flags |= MS_RDONLY;
    if (mount(NULL, to, NULL, flags, NULL) < 0)
        launch_fatal("rootfs", "cannot remount %s: %s", dst, strerror(errno));
    return 0;
}

static int bind_path(const char *src, const char *dst, bool rw, bool required)
{
    return bind_path_dev(src, dst, rw, required, false);
}

/* Attaches the idmapped tree the launcher made for m (idmap.c) at its place in the new root. */
static void attach_tree(const struct launch_mount *m)
{
    char to[LAUNCH_PATH_MAX];
    launch_fmt_path(to, sizeof to, NEWROOT, m->dst);
    mkdirs(to);
    if (syscall(SYS_move_mount, m->tree_fd, "", AT_FDCWD, to, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        launch_fatal("rootfs", "cannot attach the idmapped %s: %s", m->src, strerror(errno));
    close(m->tree_fd);
}

/* /bin, /lib64 ...: merged-/usr hosts have symlinks, older ones directories */
static void mirror_top(const char *name)
{
    char host[LAUNCH_PATH_MAX], mine[LAUNCH_PATH_MAX], target[LAUNCH_PATH_MAX];
    snprintf(host, sizeof host, OLDROOT "/%s", name);
    snprintf(mine, sizeof mine, NEWROOT "/%s", name);
    ssize_t n = readlink(host, target, sizeof target - 1);
    if (n >= 0) {
        target[n] = '\0';
        if (symlink(target, mine) < 0) launch_die_errno("rootfs", mine);
        return;
    }
    struct stat st;
    if (stat(host, &st) == 0 && S_ISDIR(st.st_mode)) {
        char abs[LAUNCH_PATH_MAX];
        snprintf(abs, sizeof abs, "/%s", name);
        bind_path(abs, abs, false, true);
    }
}

static void setup_etc(void)
{
    mkdirs(NEWROOT "/etc");
    for (size_t i = 0; i < sizeof etc_binds / sizeof etc_binds[0]; i++) {
        char host[LAUNCH_PATH_MAX], mine[LAUNCH_PATH_MAX], target[LAUNCH_PATH_MAX];
        snprintf(host, sizeof host, OLDROOT "/etc/%s", etc_binds[i]);
        snprintf(mine, sizeof mine, NEWROOT "/etc/%s", etc_binds[i]);
        ssize_t n = readlink(host, target, sizeof target - 1);
        if (n >= 0) { /* /etc/localtime -> /usr/share/zoneinfo/...: keep the link */
            target[n] = '\0';
            if (symlink(target, mine) < 0) launch_die_errno("rootfs", mine);
            continue;
        }
        char abs[LAUNCH_PATH_MAX];
        snprintf(abs, sizeof abs, "/etc/%s", etc_binds[i]);
        bind_path(abs, abs, false, false);
    }
    /* our own account files: no host users leak in, and getpass/pwd still work */
    char passwd[256], group[256];
    snprintf(passwd, sizeof passwd,
             "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
             "sandbox:x:%d:%d:sandbox:/tmp:/usr/sbin/nologin\n"
             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
             LAUNCH_INNER_UID, LAUNCH_INNER_UID);
    snprintf(group, sizeof group, "root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n", LAUNCH_INNER_UID);
    write_text(NEWROOT "/etc/passwd", passwd);
    write_text(NEWROOT "/etc/group", group);
    write_text(NEWROOT "/etc/hostname", "sandbox\n");
    write_text(NEWROOT "/etc/hosts", "127.0.0.1 localhost sandbox\n::1 localhost\n");
}

static void setup_dev(void)
{
    mkdirs(NEWROOT "/dev");
    if (mount("tmpfs", NEWROOT "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, LAUNCH_DEV_TMPFS) < 0)
        launch_die_errno("rootfs", "tmpfs /dev");
    for (size_t i = 0; i < sizeof dev_nodes / sizeof dev_nodes[0]; i++) {
        char abs[64];
        snprintf(abs, sizeof abs, "/dev/%s", dev_nodes[i]);
        /* mknod is EPERM in a user namespace: bind the host's nodes (rw, they are devices) */
        bind_path_dev(abs, abs, true, true, true);
    }
    static const char *const links[][2] = {{"/proc/self/fd", "fd"},
                                           {"/proc/self/fd/0", "stdin"},
                                           {"/proc/self/fd/1", "stdout"},
                                           {"/proc/self/fd/2", "stderr"},
                                           {"/tmp", "shm"}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        char p[64];
        snprintf(p, sizeof p, NEWROOT "/dev/%s", links[i][1]);
        if (symlink(links[i][0], p) < 0) launch_die_errno("rootfs", p);
    }
    if (mount(NULL, NEWROOT "/dev", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
              LAUNCH_DEV_TMPFS) < 0)
        launch_die_errno("rootfs", "remount /dev read-only");
}

static bool memfd_noexec(const struct launch_cfg *cfg)
{
    if (launch_disabled(cfg, EXEC_LAYER_MEMFD_NOEXEC)) {
        launch_layer(EXEC_LAYER_MEMFD_NOEXEC, EXEC_LAYER_DISABLED, "test switch");
        return false;
    }
    /* per PID namespace since Linux 6.3: 2 = memfds can never be executable, which closes the
       memfd_create + execveat way round a noexec /tmp */
    int fd = open(NEWROOT "/proc/sys/vm/memfd_noexec", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "2", 1) != 1) {
        launch_layer(EXEC_LAYER_MEMFD_NOEXEC, EXEC_LAYER_UNAVAILABLE,
                     "vm.memfd_noexec: %s; seccomp denies memfd_create instead", strerror(errno));
        if (fd >= 0) close(fd);
        return false;
    }
    close(fd);
    launch_layer(EXEC_LAYER_MEMFD_NOEXEC, EXEC_LAYER_ACTIVE, "vm.memfd_noexec=2");
    return true;
}

/* Docker's default profile for /proc: what it masks (host-wide facts no run needs: keyrings of
   the server's user, interrupt counts by CPU and device, timers with kernel addresses, kernel
   memory) gets /dev/null over a file or an empty tmpfs over a folder; what it keeps readable
   but not writable (sysctls, the sysrq trigger, IRQ affinity) a read-only bind of itself. Its
   /sys/firmware needs nothing: the root here has no /sys. */
static const struct {
    const char *path;
    bool mask;
} proc_walls[] = {
    {"/proc/acpi", true},        {"/proc/asound", true}, {"/proc/interrupts", true},
    {"/proc/kcore", true},       {"/proc/keys", true},   {"/proc/latency_stats", true},
    {"/proc/sched_debug", true}, {"/proc/scsi", true},   {"/proc/timer_list", true},
    {"/proc/timer_stats", true}, {"/proc/bus", false},   {"/proc/fs", false},
    {"/proc/irq", false},        {"/proc/sys", false},   {"/proc/sysrq-trigger", false},
};

/* After memfd_noexec, which writes a sysctl. A path this kernel does not have is skipped and
   counted in the layer's reason (timer_stats went in 4.11, sched_debug moved to debugfs). A
   bind is remounted read-only keeping the flags locked in a user namespace. */
static void mask_proc(const struct launch_cfg *cfg)
{
    if (launch_disabled(cfg, EXEC_LAYER_PROC_MASK)) {
        launch_layer(EXEC_LAYER_PROC_MASK, EXEC_LAYER_DISABLED, "test switch");
        return;
    }
    unsigned masked = 0, ro = 0, absent = 0;
    for (size_t i = 0; i < sizeof proc_walls / sizeof proc_walls[0]; i++) {
        char to[LAUNCH_PATH_MAX];
        struct stat st;
        launch_fmt_path(to, sizeof to, NEWROOT, proc_walls[i].path);
        if (lstat(to, &st) < 0) {
            if (errno != ENOENT) launch_die_errno("proc-mask", to);
            absent++;
            continue;
        }
        if (proc_walls[i].mask && S_ISDIR(st.st_mode)) {
            if (mount("tmpfs", to, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      "mode=0555,size=4k") < 0)
                launch_die_errno("proc-mask", to);
            masked++;
            continue;
        }
        if (mount(proc_walls[i].mask ? OLDROOT "/dev/null" : to, to, NULL, MS_BIND, NULL) < 0 ||
            mount(NULL, to, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | locked_flags(to), NULL) < 0)
            launch_die_errno("proc-mask", to);
        if (proc_walls[i].mask)
            masked++;
        else
            ro++;
    }
    launch_layer(EXEC_LAYER_PROC_MASK, EXEC_LAYER_ACTIVE,
                 "%u /proc paths masked, %u read-only, %u absent on this kernel", masked, ro,
                 absent);
}

bool launch_setup_rootfs(const struct launch_cfg *cfg, const struct launch_plan *plan,
                         bool *memfd_ok)
{
    *memfd_ok = false;
    if (!(plan->ns_flags & CLONE_NEWNS)) {
        launch_layer(EXEC_LAYER_ROOTFS, EXEC_LAYER_UNAVAILABLE, "no mount namespace%s",
                     plan->landlock_only ? ": Landlock confines the files" : "");
        if (plan->landlock_only)
            launch_layer(EXEC_LAYER_PRIVATE_TMP, EXEC_LAYER_UNAVAILABLE,
                         "a per-run directory %s instead, without a size cap", plan->run_dir);
        else
            launch_layer(EXEC_LAYER_PRIVATE_TMP, EXEC_LAYER_UNAVAILABLE, "no mount namespace");
        launch_layer(EXEC_LAYER_MEMFD_NOEXEC, EXEC_LAYER_UNAVAILABLE,
                     "no PID namespace of our own; seccomp denies memfd_create instead");
        launch_layer(EXEC_LAYER_PROC_MASK, EXEC_LAYER_UNAVAILABLE, "no mount namespace");
        return false;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        launch_die_errno("rootfs", "make / private");
    /* a scratch tmpfs over /tmp (only in our mount namespace) to pivot into; after that the
       host's / is at OLDROOT with its own /tmp uncovered again, so binds from the host's /tmp
       work */
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
        launch_die_errno("rootfs", "scratch tmpfs");
    if (chdir("/tmp") < 0) launch_die_errno("rootfs", "chdir scratch");
    if (mkdir("newroot", 0755) < 0 || mkdir("oldroot", 0755) < 0)
        launch_die_errno("rootfs", "scratch dirs");
    if (syscall(SYS_pivot_root, ".", "oldroot") < 0)
        launch_die_errno("rootfs", "pivot_root scratch");
    if (chdir("/") < 0) launch_die_errno("rootfs", "chdir /");
    if (mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, LAUNCH_ROOT_TMPFS) < 0)
        launch_die_errno("rootfs", "root tmpfs");

    bind_path("/usr", "/usr", false, true);
    for (size_t i = 0; i < sizeof top_dirs / sizeof top_dirs[0]; i++)
        mirror_top(top_dirs[i]);
    setup_etc();

    mkdirs(NEWROOT "/proc");
    if (!(plan->ns_flags & CLONE_NEWPID)) {
        /* test switch only: without a PID namespace a new proc cannot be mounted from a user
           namespace; show the host's (which is what the negative-control test wants to see),
           and leave its sysctls alone */
        if (mount(OLDROOT "/proc", NEWROOT "/proc", NULL, MS_BIND | MS_REC, NULL) < 0)
            launch_die_errno("rootfs", "bind /proc");
        launch_layer(EXEC_LAYER_MEMFD_NOEXEC, EXEC_LAYER_UNAVAILABLE, "no PID namespace");
    } else {
        if (mount("proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
            launch_die_errno("rootfs", "mount /proc");
        *memfd_ok = memfd_noexec(cfg);
    }
    mask_proc(cfg);
    setup_dev();

    mkdirs(NEWROOT "/tmp");
    if (launch_disabled(cfg, EXEC_LAYER_PRIVATE_TMP)) {
        launch_layer(EXEC_LAYER_PRIVATE_TMP, EXEC_LAYER_DISABLED, "test switch");
    } else {
        char opts[64];
        snprintf(opts, sizeof opts, "mode=1777,size=%llu", (unsigned long long)cfg->tmp_bytes);
        if (mount("tmpfs", NEWROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
            launch_die_errno("rootfs", "tmpfs /tmp");
        launch_layer(EXEC_LAYER_PRIVATE_TMP, EXEC_LAYER_ACTIVE,
                     "tmpfs %llu MiB nosuid,nodev,noexec",
                     (unsigned long long)(cfg->tmp_bytes >> 20));
    }
    /* after /tmp's tmpfs, so that a prefix or mount below /tmp is not hidden by it */
    for (size_t i = 0; i < cfg->n_prefixes; i++)
        bind_path(cfg->prefixes[i], cfg->prefixes[i], false, true);
    char owners[160] = "";
    for (size_t i = 0; i < cfg->n_mounts; i++) {
        const struct launch_mount *m = &cfg->mounts[i];
        if (m->tree_fd >= 0)
            attach_tree(m);
        else
            bind_path(m->src, m->dst, m->rw, true);
        size_t ol = strlen(owners);
        if (m->rw && ol < sizeof owners - 1)
            snprintf(owners + ol, sizeof owners - ol, "; %s written as uid %u%s%s%s", m->dst,
                     (unsigned)m->owner, m->why[0] ? " (" : "", m->why, m->why[0] ? ")" : "");
    }
    for (size_t i = 0; i < cfg->n_ro_libs; i++) {
        char dst[64];
        launch_ro_lib_path(i, dst, sizeof dst);
        bind_path(cfg->ro_libs[i], dst, false, true);
    }

    if (chdir(NEWROOT) < 0) launch_die_errno("rootfs", "chdir new root");
    if (syscall(SYS_pivot_root, ".", ".") < 0) launch_die_errno("rootfs", "pivot_root");
    if (umount2(".", MNT_DETACH) < 0) launch_die_errno("rootfs", "detach old root");
    if (chdir("/") < 0) launch_die_errno("rootfs", "chdir /");
    if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
        launch_die_errno("rootfs", "remount / read-only");
    launch_layer(EXEC_LAYER_ROOTFS, EXEC_LAYER_ACTIVE,
                 "read-only tmpfs root, /usr%s and %zu mount(s), pivot_root%s",
                 cfg->n_prefixes ? " + python prefix" : "", cfg->n_mounts, owners);
    return true;
}
