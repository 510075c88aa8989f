/*
 * Who owns what a run writes into a --mount ...:rw folder, on the host.
 *
 * An ordinary user's sandbox maps its uid to the server's (launch_main.c's id maps), so its
 * files are the server user's already. Root's sandbox runs as the outer nobody (65534): mapping
 * it to root instead would hand the code root's access to every root-owned file in its view,
 * and an rw folder would let it leave setuid-root programs on the host. So, as root, each rw
 * folder owned by an ordinary user becomes an idmapped mount (the kernel's MOUNT_ATTR_IDMAP):
 * through it, the folder's owner is seen as the sandbox user and what the sandbox user creates
 * is stored as the folder's owner. The code stays nobody everywhere else; it can do in that
 * folder what its owner could, and no more (a setuid file it leaves there runs as that owner,
 * as one the owner made would). A folder owned by root keeps the plain bind: its files are
 * 65534's, and the folder has to be writable by 65534 (docs/sandbox.md).
 *
 * The idmapped mount is made here, in the host's namespaces (the kernel wants CAP_SYS_ADMIN
 * in the folder's file system's user namespace), as a detached tree that init later moves
 * into its new root (launch_child.c).
 */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_map(pid_t pid, const char *which, unsigned inside, unsigned outside)
{
    char path[64], line[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, which);
    int n = snprintf(line, sizeof line, "%u %u 1\n", inside, outside);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t w = write(fd, line, (size_t)n);
    int e = errno;
    close(fd);
    return w == n ? 0 : -(w < 0 ? e : EIO);
}

/* A user namespace whose only ids are uid/gid on disk = LAUNCH_NOBODY seen; its fd, or -errno.
   A child holds it open while the maps are written and the namespace is opened. */
static int idmap_userns(uid_t uid, gid_t gid)
{
    int hold[2];
    if (pipe2(hold, O_CLOEXEC) < 0) return -errno;
    pid_t pid =
        (pid_t)syscall(SYS_clone, (unsigned long)CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
    if (pid < 0) {
        int e = errno;
        close(hold[0]);
        close(hold[1]);
        return -e;
    }
    if (pid == 0) {
        char c;
        close(hold[1]);
        while (read(hold[0], &c, 1) < 0 && errno == EINTR) {
        }
        _exit(0);
    }
    close(hold[0]);
    int r = write_map(pid, "uid_map", (unsigned)uid, LAUNCH_NOBODY);
    if (r == 0) r = write_map(pid, "gid_map", (unsigned)gid, LAUNCH_NOBODY);
    if (r == 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
        r = open(path, O_RDONLY | O_CLOEXEC);
        if (r < 0) r = -errno;
    }
    close(hold[1]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    return r;
}

/* The detached, idmapped copy of src (nosuid, nodev, writable), or -errno. */
static int idmapped_tree(const char *src, uid_t uid, gid_t gid)
{
    int ns = idmap_userns(uid, gid);
    if (ns < 0) return ns;
    int fd = (int)syscall(SYS_open_tree, AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        close(ns);
        return -e;
    }
    struct mount_attr attr = {
        .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        .userns_fd = (unsigned)ns,
    };
    int r = (int)syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof attr);
    int e = errno;
    close(ns);
    if (r < 0) {
        close(fd);
        return -e;
    }
    return fd;
}

void launch_idmap_mounts(struct launch_cfg *cfg, bool root)
{
    for (size_t i = 0; i < cfg->n_mounts; i++) {
        struct launch_mount *m = &cfg->mounts[i];
        m->tree_fd = -1;
        m->owner = root ? LAUNCH_NOBODY : geteuid(); /* an ordinary user's map: 1000 = us */
        m->why[0] = '\0';
        if (!m->rw || !root) continue;
        if (launch_disabled(cfg, EXEC_LAYER_UID_DROP)) {
            snprintf(m->why, sizeof m->why, "the uid drop is off");
            continue;
        }
        struct stat st;
        if (stat(m->src, &st) < 0) continue; /* init says it is missing */
        if (st.st_uid == 0) {
            snprintf(m->why, sizeof m->why, "owned by root");
            continue;
        }
        /* a root group would let the code leave setgid-root files: the group stays nobody's */
        gid_t gid = st.st_gid ? st.st_gid : LAUNCH_NOBODY;
        int fd = idmapped_tree(m->src, st.st_uid, gid);
        if (fd < 0) {
            snprintf(m->why, sizeof m->why, "no idmapped mount: %s", strerror(-fd));
            continue;
        }
        m->tree_fd = fd;
        m->owner = st.st_uid;
    }
}
