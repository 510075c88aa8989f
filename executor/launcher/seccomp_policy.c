/*
 * The seccomp policy: a denylist (default ALLOW) plus a small hand-written filter.
 *
 * Why a denylist: CPython and the C extensions people import (numpy, pandas, ...) use a wide and
 * version-dependent set of syscalls; an allowlist that is wrong kills ordinary code with SIGSYS.
 * The namespaces, the dropped capabilities and the read-only view already take away most of the
 * kernel's privileged surface; the list below removes what stays reachable from an unprivileged
 * process in a fresh user namespace and has a record of kernel bugs or escapes. It covers every
 * call the issue names and what Docker's default profile refuses to a process without
 * capabilities. docs/sandbox.md lists the reasoning per group.
 *
 * Two filters because libseccomp cannot express "personality(x) only for x == 0 or x ==
 * 0xffffffff" (one comparison per argument per rule); the raw filter also kills x32 syscall
 * numbers and foreign architectures explicitly, whatever libseccomp does by default.
 */
#include "launch.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#define X32_SYSCALL_BIT 0x40000000u

/* refused outright with EPERM */
static const char *const denied[] = {
    /* namespaces and mounts: a new user namespace brings back every capability inside it */
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    /* debugging other processes */
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    /* kernel attack surface with a history: BPF, io_uring, userfaultfd, keys, perf */
    "bpf",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "perf_event_open",
    "fanotify_init",
    "lookup_dcookie",
    /* the machine itself */
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "syslog",
    "quotactl",
    "quotactl_fd",
    "nfsservctl",
    "vhangup",
    "iopl",
    "ioperm",
    "sethostname",
    "setdomainname",
    "uselib",
    "ustat",
    "sysfs",
    "_sysctl",
    "get_kernel_syms",
    "query_module",
    "modify_ldt",
    /* file handles bypass path checks (the "shocker" escape) */
    "name_to_handle_at",
    "open_by_handle_at",
    /* NUMA policy calls Docker keeps for CAP_SYS_NICE */
    "mbind",
    "migrate_pages",
    "move_pages",
    "set_mempolicy",
};

static const unsigned long ns_flags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,   CLONE_NEWNET,
                                         CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP};

static int deny(scmp_filter_ctx ctx, const char *name, char *err, size_t errlen)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return 0; /* not on this architecture */
    int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    if (r < 0) snprintf(err, errlen, "rule for %s: %s", name, strerror(-r));
    return r;
}

static int build_main(scmp_filter_ctx ctx, bool memfd_denied, char *err, size_t errlen)
{
    int r;
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
        if ((r = deny(ctx, denied[i], err, errlen)) < 0) return r;
    if (memfd_denied && (r = deny(ctx, "memfd_create", err, errlen)) < 0) return r;
    /* sockets: AF_UNIX only (an empty network namespace still lets AF_VSOCK out) */
    if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_NE, AF_UNIX))) < 0 ||
        (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socketpair), 1,
                              SCMP_A0(SCMP_CMP_NE, AF_UNIX))) < 0) {
        snprintf(err, errlen, "socket rules: %s", strerror(-r));
        return r;
    }
    /* clone with namespace flags; clone3 hides its flags in memory, so it reports ENOSYS and
       glibc falls back to clone, whose flags this filter can see */
    for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
        if (r < 0) {
            snprintf(err, errlen, "clone rule: %s", strerror(-r));
            return r;
        }
    }
    if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0) {
        snprintf(err, errlen, "clone3 rule: %s", strerror(-r));
        return r;
    }
    /* pushing bytes into a terminal's input queue (TIOCSTI) or console tricks (TIOCLINUX); the
       ioctl number is an int, so compare the low 32 bits only */
    static const unsigned long bad_ioctls[] = {TIOCSTI, TIOCLINUX};
    for (size_t i = 0; i < 2; i++) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, bad_ioctls[i]));
        if (r < 0) {
            snprintf(err, errlen, "ioctl rule: %s", strerror(-r));
            return r;
        }
    }
    return 0;
}

/* personality(x) only for PER_LINUX and the query; x32 numbers and other ABIs die */
static int load_raw_filter(char *err, size_t errlen)
{
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_personality, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog fprog = {.len = (unsigned short)(sizeof prog / sizeof prog[0]),
                               .filter = prog};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) < 0) {
        snprintf(err, errlen, "loading the raw filter: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int launch_seccomp_apply(char *err, size_t errlen)
{
#if !defined(__x86_64__)
    snprintf(err, errlen, "only x86_64 is supported by this policy");
    return -1;
#else
    bool memfd_denied = true;
    {
        /* vm.memfd_noexec=2 makes memfds unexecutable; without it memfd_create itself goes */
        FILE *f = fopen("/proc/sys/vm/memfd_noexec", "re");
        int v = -1;
        if (f) {
            if (fscanf(f, "%d", &v) != 1) v = -1;
            fclose(f);
        }
        memfd_denied = v != 2;
    }
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        snprintf(err, errlen, "seccomp_init failed");
        return -1;
    }
    int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r == 0) r = build_main(ctx, memfd_denied, err, errlen);
    if (r == 0) {
        r = seccomp_load(ctx);
        if (r < 0) snprintf(err, errlen, "seccomp_load: %s", strerror(-r));
    }
    seccomp_release(ctx);
    if (r < 0) return -1;
    if (load_raw_filter(err, errlen) < 0) return -1;
    snprintf(err, errlen,
             "denylist of %zu calls, AF_UNIX-only sockets, no namespace clone, "
             "x32/ia32 killed",
             sizeof denied / sizeof denied[0]);
    return 0;
#endif
}
