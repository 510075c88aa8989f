/*
 * Landlock: a second fence that does not depend on the mount namespace. Rules mirror the view
 * the mount namespace built: read+exec on /usr and the Python prefix, read on /etc, /proc and
 * /dev, read-write without exec on /tmp and rw mounts. From ABI 4 TCP bind/connect are handled
 * with no rule (so refused); from ABI 6 signals and abstract unix sockets are scoped to the
 * sandbox. Debian 12's header knows ABI 2, so later constants are spelled out here.
 */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#define LL_NET_BIND_TCP        (1ULL << 0)
#define LL_NET_CONNECT_TCP     (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define LL_SCOPE_SIGNAL        (1ULL << 1)

/* the ABI 6 layout; older kernels get a prefix of it (the size tells them which) */
struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

#define R_FILE (LANDLOCK_ACCESS_FS_READ_FILE)
#define R_DIR  (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define X      (LANDLOCK_ACCESS_FS_EXECUTE)
#define W_FILE (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE)
#define W_DIR                                                                                      \
    (W_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |                     \
     LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |    \
     LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER)

static int add_rule(int rfd, const char *path, uint64_t access, uint64_t handled, char *err,
                    size_t errlen)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return 0; /* nothing there: nothing to allow */
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
        access &= X | W_FILE | R_FILE; /* file rules take file rights only */
    struct landlock_path_beneath_attr pb = {.allowed_access = access & handled, .parent_fd = fd};
    long r = syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
    int e = errno;
    close(fd);
    if (r < 0) {
        snprintf(err, errlen, "rule for %s: %s", path, strerror(e));
        return -1;
    }
    return 0;
}

/* Landlock-only mode: the host's tree is visible, so the rules name exactly what the
   interpreter needs; nothing else (no /proc, no /tmp, no listing of /) */
static const char *const host_read_exec[] = {"/usr",   "/bin",   "/sbin",  "/lib",
                                             "/lib64", "/lib32", "/libx32"};
static const char *const host_read[] = {
    "/etc/ld.so.cache", "/etc/ld.so.conf",   "/etc/ld.so.conf.d", "/etc/nsswitch.conf",
    "/etc/localtime",   "/etc/ssl",          "/etc/mime.types",   "/etc/protocols",
    "/etc/services",    "/etc/alternatives", "/dev/urandom",      "/dev/random"};

int launch_landlock_apply(const struct launch_cfg *cfg, const struct launch_plan *plan, char *err,
                          size_t errlen)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 1) {
        snprintf(err, errlen, "kernel without Landlock (%s)", strerror(errno));
        return 0;
    }
    if (plan->landlock_only && abi < 6) {
        /* without namespaces only Landlock's scoping keeps the run from signalling the
           server, which has the same uid */
        snprintf(err, errlen,
                 "Landlock ABI %ld; ABI 6 (Linux 6.12) is needed without user "
                 "namespaces",
                 abi);
        return -1;
    }
    uint64_t handled = (1ULL << 13) - 1; /* ABI 1: bits 0..12 */
    if (abi >= 2) handled |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
    struct ll_ruleset_attr attr = {.handled_access_fs = handled};
    size_t size = sizeof(uint64_t);
    if (abi >= 4) {
        attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
        size = 2 * sizeof(uint64_t);
    }
    if (abi >= 6) {
        attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
        size = sizeof attr;
    }
    int rfd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (rfd < 0) {
        snprintf(err, errlen, "landlock_create_ruleset: %s", strerror(errno));
        return -1;
    }
    int r = 0;
    if (plan->landlock_only) {
        for (size_t i = 0; i < sizeof host_read_exec / sizeof host_read_exec[0]; i++)
            r |= add_rule(rfd, host_read_exec[i], R_DIR | X, handled, err, errlen);
        for (size_t i = 0; i < cfg->n_prefixes; i++)
            r |= add_rule(rfd, cfg->prefixes[i], R_DIR | X, handled, err, errlen);
        for (size_t i = 0; i < sizeof host_read / sizeof host_read[0]; i++)
            r |= add_rule(rfd, host_read[i], R_DIR, handled, err, errlen);
        r |= add_rule(rfd, "/dev/null", R_FILE | W_FILE, handled, err, errlen);
        r |= add_rule(rfd, "/dev/zero", R_FILE | W_FILE, handled, err, errlen);
        r |= add_rule(rfd, "/dev/full", R_FILE | W_FILE, handled, err, errlen);
        r |= add_rule(rfd, plan->run_dir, R_DIR | W_DIR, handled, err, errlen);
        for (size_t i = 0; i < cfg->n_ro_libs; i++)
            r |= add_rule(rfd, cfg->ro_libs[i], R_DIR, handled, err, errlen);
        goto apply;
    }
    r |= add_rule(rfd, "/", LANDLOCK_ACCESS_FS_READ_DIR, handled, err, errlen);
    r |= add_rule(rfd, "/usr", R_DIR | X, handled, err, errlen);
    for (size_t i = 0; i < cfg->n_prefixes; i++)
        r |= add_rule(rfd, cfg->prefixes[i], R_DIR | X, handled, err, errlen);
    r |= add_rule(rfd, "/etc", R_DIR, handled, err, errlen);
    r |= add_rule(rfd, "/proc", R_DIR, handled, err, errlen);
    r |= add_rule(rfd, "/dev", R_DIR, handled, err, errlen);
    r |= add_rule(rfd, "/dev/null", R_FILE | W_FILE, handled, err, errlen);
    r |= add_rule(rfd, "/dev/zero", R_FILE | W_FILE, handled, err, errlen);
    r |= add_rule(rfd, "/dev/full", R_FILE | W_FILE, handled, err, errlen);
    r |= add_rule(rfd, "/tmp", R_DIR | W_DIR, handled, err, errlen);
    for (size_t i = 0; i < cfg->n_mounts; i++)
        r |= add_rule(rfd, cfg->mounts[i].dst, R_DIR | (cfg->mounts[i].rw ? W_DIR : 0), handled,
                      err, errlen);
    for (size_t i = 0; i < cfg->n_ro_libs; i++) {
        char dst[64];
        launch_ro_lib_path(i, dst, sizeof dst);
        r |= add_rule(rfd, dst, R_DIR, handled, err, errlen);
    }
apply:
    if (r == 0 && syscall(SYS_landlock_restrict_self, rfd, 0) < 0) {
        snprintf(err, errlen, "landlock_restrict_self: %s", strerror(errno));
        r = -1;
    }
    close(rfd);
    if (r) return -1;
    snprintf(err, errlen, "ABI %ld: filesystem%s%s", abi, abi >= 4 ? ", TCP" : "",
             abi >= 6 ? ", signal and abstract-socket scoping" : "");
    return 1;
}
